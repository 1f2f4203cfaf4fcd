"""The explore notebook's helpers (finbench.analysis.explore): arms and probe modes by name, filters, counts, re-grading."""
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.analysis.explore import (VERDICTS, checks, counts, explore_run, pick_row, probe_named, profile_named,
                              select)


def _profiles():
    ps = [fb.FaultProfile.default(), fb.FaultProfile.none(), fb.FaultProfile.default(0.5),
          fb.FaultProfile.only("loss", "delay"), fb.FaultProfile.only("stale_read", intensity=0.1)]
    ps += [fb.FaultProfile.only(f) for f in C.FAMILIES] + [fb.FaultProfile.without(f) for f in C.FAMILIES]
    return ps


@pytest.mark.parametrize("profile", _profiles(), ids=lambda p: p.name)
def test_an_arm_is_named_as_the_profile_names_itself(profile):
    assert profile_named(profile.name) == profile


@pytest.mark.parametrize("mode", [*fb.ProbeMode.all(), fb.ProbeMode.delayed(60), fb.ProbeMode.rate_limited(7)],
                         ids=lambda m: m.name)
def test_a_probe_mode_is_named_as_it_names_itself(mode):
    assert probe_named(mode.name) == mode
    assert probe_named(mode.kind) == fb.ProbeMode.all()[[m.kind for m in fb.ProbeMode.all()].index(mode.kind)]


@pytest.mark.parametrize("name", ["", "some", "only:", "only:lost", "without:delay+x", "all@x", "none@0.5", 3])
def test_a_bad_arm_is_refused_naming_what_is_allowed(name):
    with pytest.raises(fb.FinbenchError, match="fault profile's name|unknown fault family"):
        profile_named(name)


@pytest.mark.parametrize("name", ["", "fast", "full[D=3]", "delayed[N=3]", "delayed[D=0]", None])
def test_a_bad_probe_is_refused(name):
    with pytest.raises(fb.FinbenchError, match="probe"):
        probe_named(name)


@pytest.fixture(scope="module")
def run_rows():
    run = explore_run(n_tasks=30, seeds=range(2), policy="sop[patience=60]", cache=False)
    return run, run.evaluate()


def test_the_run_is_the_nine_plus_the_chosen_policy(run_rows):
    run, df = run_rows
    assert run.labels == [*fb.POLICIES, "sop[patience=60]"] and run.profile == fb.FaultProfile.default()
    assert len(df) == 30 * 2 * 10
    other = explore_run(n_tasks=30, seeds=range(2), arm="only:loss", probe="none", policy="reconciler", cache=False)
    assert other.profile == fb.FaultProfile.only("loss") and other.probe == fb.ProbeMode.none()
    assert other.labels[-1] == "reconciler"
    with pytest.raises(fb.PolicyError, match="unknown policy"):
        explore_run(n_tasks=30, policy="no_such_policy")


def test_select_counts_and_pick(run_rows):
    run, df = run_rows
    rows = select(df, policy="optimistic", archetype="pending_fail")
    assert len(rows) and (rows.policy == "optimistic").all() and (rows.archetype == "pending_fail").all()
    assert list(rows.index) == list(range(len(rows)))
    assert len(select(df)) == len(df)
    table = counts(select(df, archetype="pending_fail"))
    assert list(table.columns) == [*VERDICTS, "episodes"] and table.index[-1] == "all"
    assert table.loc["all", "episodes"] == (df.archetype == "pending_fail").sum()
    assert pick_row(rows, 0).equals(rows.iloc[0]) and pick_row(rows, -1).equals(rows.iloc[-1])
    for bad in (len(rows), 1.0, True):
        with pytest.raises(fb.FinbenchError, match="pick must be an integer"):
            pick_row(rows, bad)
    with pytest.raises(fb.FinbenchError, match="no episode matches"):
        pick_row(rows.iloc[:0], 0)
    with pytest.raises(fb.FinbenchError, match="verdict must be"):
        select(df, verdict="fail")
    with pytest.raises(fb.FinbenchError, match="archetype must be"):
        select(df, archetype="pending")
    with pytest.raises(fb.FinbenchError, match="policy must be"):
        select(df, policy="gate")


def test_checks_regrade_the_replayed_trace(run_rows):
    import matplotlib.pyplot as plt

    from finbench.analysis.timeline_plot import draw_row

    run, df = run_rows
    for verdict in ("pass", "violation"):
        row = pick_row(select(df, verdict=verdict), 0)
        drawn = draw_row(row, run)
        table = checks(row, drawn.result, run.corpus[row.task_id])
        assert list(table.index) == [*fb.CHECKS, "verdict"]
        assert table.loc["verdict", "re-graded"] == verdict and (table["row"] == table["re-graded"]).all()
    forged = row.copy()
    forged["verdict"] = "pass"
    with pytest.raises(RuntimeError, match="re-grading"):
        checks(forged, drawn.result, run.corpus[row.task_id])
    plt.close("all")
