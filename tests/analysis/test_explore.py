"""The explore notebook's helpers (finbench.analysis.explore): arms and probe modes by name, filters, counts, re-grading."""
from pathlib import Path

import pandas as pd
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.agents.loading import AgentLoadError, is_agent_spec, load_agent, policy_ref
from finbench.analysis.explore import (ROW_COLUMNS, VERDICTS, checks, counts, explore_run, explored_policy, pick_row,
                                       probe_named, profile_named, read_rows, rows_replay, select)


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


# --- any policy reference; rows made elsewhere ----------------------------------------------------------------

class Closer:
    """A user's policy: close the case at once."""

    name = "closer"

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, observation):
        return "close", {"order_id": self.order}


def test_explore_run_takes_any_policy_reference(tmp_path, monkeypatch):
    (tmp_path / "closer_mod.py").write_text("class Closer:\n    name = 'module_closer'\n\n    def begin(self, brief):\n"
                                            "        self.order = brief['order_id']\n\n    def act(self, obs):\n"
                                            "        return 'close', {'order_id': self.order}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for policy, label in ((Closer, "closer"), (Closer(), "closer"), (lambda: Closer(), "closer"),
                          (f"{tmp_path / 'closer_mod.py'}:Closer", "module_closer"), ("closer_mod:Closer", "module_closer"),
                          (("sop", {"patience": 60}), "sop[patience=60]")):
        run = explore_run(n_tasks=9, seeds=range(1), policy=policy, cache=False)
        assert run.labels == [*fb.POLICIES, label]
    for nine in ("sop", ("sop", {}), fb.POLICIES["sop"], fb.PolicyRef.named("sop")):  # the nine's own: nothing added
        assert explored_policy(nine) == (None, "sop")
    assert explored_policy("") == (None, "")

    class Sop(Closer):
        name = "sop"

    with pytest.raises(fb.PolicyError, match="explore_run: policy must be labelled apart from SPEC's nine"):
        explore_run(n_tasks=9, policy=Sop)


def test_the_loader_reads_a_file_and_a_module_as_the_eval_command_does(tmp_path):
    path = tmp_path / "agents.py"
    path.write_text("from dataclasses import dataclass\n\n@dataclass\nclass Waiter:\n    ticks: int = 30\n\n"
                    "    def begin(self, brief):\n        self.order = brief['order_id']\n\n"
                    "    def act(self, obs):\n        return 'close', {'order_id': self.order}\n\n"
                    "NOT_A_POLICY = 3\n", encoding="utf-8")
    agent = load_agent(f"{path}:Waiter")
    assert agent.obj.__name__ == "Waiter" and agent.what == f"{path}:Waiter" and str(path.resolve()) in agent.files
    assert policy_ref(f"{path}:Waiter").label == "Waiter"
    assert is_agent_spec("a.py:B") and is_agent_spec("pkg.mod:Make") and not is_agent_spec("sop[patience=60]")
    assert not is_agent_spec("plan[steps=a:b]") and not is_agent_spec(Closer)
    for spec, kind, text in ((f"{path}:NOT_A_POLICY", "bad", "is 3, not a policy"),
                             (f"{path}:Nope", "bad", "policies it defines: Waiter"),
                             (f"{tmp_path / 'none.py'}:X", "missing", "no such file"),
                             ("no_such_module_here:X", "missing", "no module named"),
                             ("a/b:X", "usage", "a file's name ends in .py"), ("sop", "usage", "AGENT must be")):
        with pytest.raises(AgentLoadError, match="load_agent: policy must be PATH.py:NAME") as caught:
            load_agent(spec)
        assert caught.value.kind == kind and text in caught.value.reason and isinstance(caught.value, fb.PolicyError)


@pytest.fixture(scope="module")
def closer_rows():
    return fb.evaluate(fb.make_corpus(n_tasks=30), [Closer, "sop"], (0, 1), fb.FaultProfile.only("loss"),
                       fb.Costs(dispute_fee=15), cache=False, probe=fb.ProbeMode.delayed(60))


def _stamped_csv(path, rows, **stamp):
    stamp = {"corpus": fb.make_corpus(n_tasks=30).fingerprint, "master_seed": fb.PUBLIC_SEED, "tasks": 30,
             "engine": C.ENGINE_VERSION, "seeds": "0,1", "profile": "only:loss", "costs": "dispute_fee=15",
             "probe": "delayed[D=60]", **stamp}
    path.write_text("".join(f"# {k}: {v}\n" for k, v in stamp.items()) + rows.to_csv(index=False), encoding="utf-8")
    return path


def test_rows_read_from_a_stamped_file_replay_under_their_stamp(closer_rows, tmp_path):
    rows = read_rows(_stamped_csv(tmp_path / "rows.csv", closer_rows), "t")
    assert list(rows.columns) == list(closer_rows.columns) and rows.attrs["stamp"]["profile"] == "only:loss"
    assert list(rows.gap) == pytest.approx(list(closer_rows.gap)) and list(rows.seed) == list(closer_rows.seed)
    replay = rows_replay(rows, policy=Closer)
    run = replay.run
    assert (run.profile, run.costs, run.probe) == (fb.FaultProfile.only("loss"), fb.Costs(dispute_fee=15),
                                                   fb.ProbeMode.delayed(60))
    assert run.labels == ["sop", "closer"] and replay.cannot == {} and replay.label == "closer"
    assert "profile only:loss" in replay.caption and "probe delayed[D=60]" in replay.caption
    alone = rows_replay(rows)  # no policy: the package's are rebuilt by label, the user's said to be missing
    assert alone.run.labels == ["sop"] and "policy=" in alone.cannot["closer"]
    named = closer_rows.assign(policy=closer_rows.policy.replace({"closer": "NA"}))
    assert set(read_rows(_stamped_csv(tmp_path / "na.csv", named)).policy) == {"sop", "NA"}  # a label, not NaN


def test_rows_that_cannot_be_rebuilt_say_why(closer_rows, tmp_path):
    old = rows_replay(read_rows(_stamped_csv(tmp_path / "old.csv", closer_rows, engine="1")))
    assert old.run is None and "engine 1" in old.cannot["sop"]
    other = rows_replay(read_rows(_stamped_csv(tmp_path / "other.csv", closer_rows, tasks=20)))
    assert other.run is None and "is not make_corpus" in other.cannot["closer"]
    bare = rows_replay(read_rows(closer_rows), n_tasks=9)  # without a stamp: the corpus named by the arguments
    assert bare.run is None and "is not in make_corpus" in bare.cannot["sop"]
    guessed = rows_replay(read_rows(closer_rows), arm="only:loss", probe="delayed[D=60]")  # 30 tasks named
    assert guessed.run.labels == ["sop"] and len(guessed.run.corpus) == 30


@pytest.mark.parametrize("rows, error", [
    (3, "rows must be a DataFrame or the path of a rows.csv file"),
    ("missing.csv", "no such file"),
    (pd.DataFrame({"task_id": ["x"]}), "lacking archetype, policy, seed"),
    ("NOT-CSV", "not UTF-8 text|not a CSV table"),
    ("FRACTION", "integer seeds"),
])
def test_bad_rows_are_refused(rows, error, closer_rows, tmp_path):
    if isinstance(rows, str):  # a name for what needs a fixture
        rows = {"NOT-CSV": tmp_path / "bin.csv", "FRACTION": closer_rows.assign(seed=0.5),
                "missing.csv": tmp_path / "missing.csv"}[rows]
        if isinstance(rows, Path) and rows.name == "bin.csv":
            rows.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(fb.FinbenchError, match=error):
        read_rows(rows, "t")
    assert set(ROW_COLUMNS) <= set(closer_rows.columns)


def test_an_agent_that_fails_to_import_is_named_with_its_error_and_its_own_line(tmp_path, monkeypatch):
    (tmp_path / "agent_mod_that_raises_7f3a.py").write_text("x = 1\nraise RuntimeError('no   config\\nhere')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentLoadError) as caught:
        load_agent("agent_mod_that_raises_7f3a:A")
    assert caught.value.reason == "module agent_mod_that_raises_7f3a does not import: RuntimeError: no config here"
    path = tmp_path / "raising.py"
    path.write_text("x = 1\nraise RuntimeError('boom')\n")
    with pytest.raises(AgentLoadError) as caught:
        load_agent(f"{path}:A")
    assert caught.value.reason == f"{path.resolve()} does not import: RuntimeError: boom (line 2, in <module>)"
    with pytest.raises(fb.PolicyError, match=r"^policy_ref: policy must be a policy name or label .*, got 3$"):
        policy_ref(3)
    unread = tmp_path / "unread.py"
    unread.write_text("import operator\nGETTER = operator.itemgetter(1)\n")  # a callable signature() cannot read
    with pytest.raises(AgentLoadError) as caught:
        load_agent(f"{unread}:GETTER")
    assert caught.value.kind == "bad" and "whose arguments cannot be read" in caught.value.reason
