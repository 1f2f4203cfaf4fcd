"""The live explorer (finbench.analysis.explorer_widget): set its controls as a user would and check
what it draws against episodes evaluated and replayed independently, here."""
import json

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.running.episode import episode_contract
from finbench.analysis.explorer_widget import ARMS, explorer

N_TASKS, SEEDS = 30, (0, 1)


def _rows(profile=None, probe=None, **filters):
    """The run's rows matching `filters`, in evaluate's order (as the explorer should list them)."""
    df = fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), list(fb.POLICIES), SEEDS, profile, cache=False,
                     probe=probe)
    for col, value in filters.items():
        df = df[df[col] == value]
    return df.reset_index(drop=True)


def _regraded(row, profile=None, probe=None) -> str:
    """The verdict of the row's episode, played again and graded here."""
    task = fb.make_corpus(n_tasks=N_TASKS)[row["task_id"]]
    res = fb.run_episode(task, row["policy"], int(row["seed"]), profile, probe=probe)
    return fb.grade_trace(list(res.trace), episode_contract(task)).verdict


def _drawn(ex) -> dict:
    """mime type -> the outputs of that type in the explorer's Output, in order."""
    out: dict = {}
    for o in ex.output.outputs:
        for mime, data in o["data"].items():
            out.setdefault(mime, []).append(data)
    return out


@pytest.fixture(scope="module")
def ex():
    return explorer(n_tasks=N_TASKS, seeds=SEEDS, policy="optimistic", archetype="pending_fail", cache=False)


def test_a_widget_drawn_at_its_first_selection(ex):
    assert isinstance(ex, widgets.Widget) and isinstance(ex.output, widgets.Output)
    assert set(ex.controls) == {"arm", "probe", "policy", "archetype", "verdict", "episode"}
    assert all(c in ex.children[0].children or c in ex.children[1].children for c in ex.controls.values())
    assert ex.output in ex.children
    expected = _rows(policy="optimistic", archetype="pending_fail")
    assert len(ex.rows) == len(expected) > 1 and ex.controls["episode"].max == len(expected) - 1
    first = expected.iloc[0]
    assert (ex.row["task_id"], ex.row["policy"], ex.row["seed"]) == (first.task_id, "optimistic", first.seed)
    assert ex.title.startswith(f"{first.task_id} (pending_fail) · optimistic · seed {first.seed}")
    drawn = _drawn(ex)
    assert len(drawn["image/png"]) == 1 and len(drawn["image/png"][0]) > 10_000
    assert ex.checks.loc["verdict", "re-graded"] == _regraded(first)
    assert f">{_regraded(first)}<" in drawn["text/html"][0]  # the table shown lists the re-graded verdict
    assert [*fb.CHECKS, "verdict"] == list(ex.checks.index)
    assert json.dumps(ex.output.outputs)  # what the frontend is sent: plain JSON


def test_changing_a_dropdown_redraws_once_with_the_new_rows(ex):
    before = ex.draws
    ex.controls["policy"].value = "sop"
    assert ex.draws == before + 1
    expected = _rows(policy="sop", archetype="pending_fail")
    assert list(ex.rows.task_id) == list(expected.task_id) and list(ex.rows.seed) == list(expected.seed)
    assert ex.row["policy"] == "sop" and " · sop · " in ex.title and ex.row["task_id"] in ex.title
    ex.controls["archetype"].value = ""
    ex.controls["verdict"].value = "pass"
    expected = _rows(policy="sop", verdict="pass")
    assert len(ex.rows) == len(expected) > 0 and (ex.rows.verdict == "pass").all()
    assert ex.checks.loc["verdict", "re-graded"] == "pass" == _regraded(ex.row)


def _set(ex, **values):
    """The explorer's first selection, then `values`, control by control (as a user would click)."""
    for name, value in {"arm": "all", "probe": "full", "policy": "optimistic", "archetype": "pending_fail",
                        "verdict": "", **values}.items():
        ex.controls[name].value = value


def test_the_slider_steps_through_the_matching_episodes(ex):
    _set(ex)
    expected = _rows(policy="optimistic", archetype="pending_fail")
    last = len(expected) - 1
    before = ex.draws
    ex.controls["episode"].value = last
    assert ex.draws == before + 1
    row = expected.iloc[last]
    assert (ex.row["task_id"], ex.row["seed"]) == (row.task_id, row.seed)
    assert ex.title.startswith(f"{row.task_id} (pending_fail) · optimistic · seed {row.seed}")
    assert ex.checks.loc["verdict", "re-graded"] == _regraded(row) == row.verdict
    before = ex.draws
    ex.controls["archetype"].value = "settled_clean"  # new rows: back to the first of them, drawn once
    assert ex.draws == before + 1
    assert ex.controls["episode"].value == 0 and ex.row["task_id"] == _rows(policy="optimistic",
                                                                             archetype="settled_clean").task_id[0]


def test_an_arm_and_a_probe_mode_make_their_own_run(ex):
    _set(ex)
    loss = fb.FaultProfile.only("loss")
    ex.controls["arm"].value = "only:loss"
    assert ex.run.profile == loss and "profile only:loss" in ex.title
    expected = _rows(loss, policy="optimistic", archetype="pending_fail")
    assert list(ex.rows.gap) == pytest.approx(list(expected.gap))
    assert ex.checks.loc["verdict", "re-graded"] == _regraded(ex.row, loss)
    ex.controls["probe"].value = "none"
    assert ex.run.probe == fb.ProbeMode.none() and "probe none" in ex.title
    ex.controls["arm"].value, ex.controls["probe"].value = "all", "full"
    assert ex.run.profile == fb.FaultProfile.default() and ex.run.probe == fb.ProbeMode.full()
    assert "profile" not in ex.title and "probe" not in ex.title
    assert {"all", "none", "only:loss", "without:stale_read"} <= set(ARMS) == set(ex.controls["arm"].options)
    assert set(ex.controls["probe"].options) == {m.name for m in fb.ProbeMode.all()}
    assert [v for _, v in ex.controls["policy"].options] == ["", *fb.POLICIES]


def test_no_match_says_so_and_draws_nothing(ex):
    _set(ex)
    df = _rows()
    present = set(zip(df.policy, df.archetype, df.verdict))
    empty = next((p, a, v) for p in fb.POLICIES for a in C.ARCHETYPES for v in ("pass", "violation", "unscorable")
                 if (p, a, v) not in present)
    for name, value in zip(("policy", "archetype", "verdict"), empty):
        ex.controls[name].value = value
    assert len(ex.rows) == 0 and ex.row is None and ex.checks is None and ex.title is None
    assert "no episode to draw" in ex.message and ex.controls["episode"].disabled
    assert list(_drawn(ex)) == ["text/plain"]
    ex.controls["verdict"].value = ""  # and widening draws again
    assert ex.row is not None and ex.row["policy"] == empty[0]


def test_redraws_leave_no_figure_open(ex):
    _set(ex)
    open_before = set(plt.get_fignums())
    for pick in (0, 1, 0):
        ex.controls["episode"].value = pick
    assert set(plt.get_fignums()) == open_before


def test_static_displays_what_the_output_holds(ex, capsys):
    ex.static()  # no IPython shell here: IPython's display prints each bundle
    printed = capsys.readouterr().out
    assert ex.message.splitlines()[0] in printed and "image/png" in printed


def test_a_label_outside_the_nine_joins_the_run_and_a_pick_is_honoured():
    ex = explorer(n_tasks=N_TASKS, seeds=SEEDS, policy="sop[patience=60]", pick=2, cache=False)
    assert ex.run.labels[-1] == "sop[patience=60]" and ("sop[patience=60]", "sop[patience=60]") in ex.controls["policy"].options
    assert ex.controls["episode"].value == 2 and " · sop[patience=60] · " in ex.title
    assert (ex.rows.policy == "sop[patience=60]").all() and ex.row.equals(ex.rows.iloc[2])


@pytest.mark.parametrize("kw, error", [
    ({"arm": "some"}, "fault profile's name"), ({"probe": "fast"}, "probe must be"),
    ({"archetype": "pending"}, "archetype must be"), ({"verdict": "fail"}, "verdict must be"),
    ({"policy": "no_such_policy"}, "unknown policy"), ({"pick": 10_000}, "pick must be an integer"),
    ({"pick": 1.0}, "pick must be an integer")])
def test_bad_first_selection_is_refused(kw, error):
    with pytest.raises(fb.FinbenchError, match=error):
        explorer(n_tasks=N_TASKS, seeds=SEEDS, cache=False, **kw)


@pytest.mark.xdist_group("notebook-explore")
def test_the_executed_notebook_shows_the_widget_and_the_figure(executed):
    """Headless (papermill), the notebook holds the widget's view and, as plain outputs, the first
    selection's timeline and checks (the parameters of tests/test_notebooks.py: n_tasks 30, 2 seeds)."""
    nb = json.loads((executed("explore") / "nb" / "explore.ipynb").read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    mimes = [m for o in outputs for m in o.get("data", {})]
    assert "application/vnd.jupyter.widget-view+json" in mimes and mimes.count("image/png") == 1
    first = _rows(policy="optimistic", archetype="pending_fail").iloc[0]
    shown = "".join(t for o in outputs for t in o.get("data", {}).get("text/plain", []))
    assert f"{first.task_id} · optimistic · seed {first.seed} · verdict {first.verdict}" in shown
