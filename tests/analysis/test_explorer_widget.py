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

# tests marked slow evaluate in worker processes or execute a notebook (make test-fast leaves them out)

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_redraws_leave_no_figure_open(ex):
    _set(ex)
    open_before = set(plt.get_fignums())
    for pick in (0, 1, 0):
        ex.controls["episode"].value = pick
    assert set(plt.get_fignums()) == open_before


@pytest.mark.slow
def test_static_displays_what_the_output_holds(ex, capsys):
    ex.static()  # no IPython shell here: IPython's display prints each bundle
    printed = capsys.readouterr().out
    assert ex.message.splitlines()[0] in printed and "image/png" in printed


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- any agent: every form a policy reference takes, and rows of a report card -------------------------------

class EarlyEscalator:
    """A user's policy as a notebook defines it: probe `probes` times, then hand the case to a human."""

    name = "early_escalator"

    def __init__(self, probes: int = 1):
        self.probes = probes

    def begin(self, brief):
        self.order, self.done = brief["order_id"], 0

    def act(self, observation):
        if self.done < self.probes:
            self.done += 1
            return "probe_processor", {"order_id": self.order}
        return "escalate", {"order_id": self.order}


_AGENT_FILE = '''
class Escalator:
    name = "file_escalator"

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, observation):
        return "escalate", {"order_id": self.order}


def make():
    return Escalator()
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One episode cache for the module: the nine are simulated once, a user's agent every time."""
    return tmp_path_factory.mktemp("explorer-cache")


@pytest.fixture(scope="module")
def agent_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("agent") / "my_agent.py"
    path.write_text(_AGENT_FILE, encoding="utf-8")
    return path


def _reference(form: str, agent_file):
    """(the policy reference of `form`, the label its rows carry)."""
    if form.startswith("registered"):
        fb.register_policy("escalator_registered", lambda probes=1: EarlyEscalator(probes), replace=True)
        return ("escalator_registered", "escalator_registered") if form == "registered" else \
            ("escalator_registered[probes=2]", "escalator_registered[probes=2]")
    if form.startswith("file"):
        return f"{agent_file}:{'Escalator' if form == 'file' else 'make'}", "file_escalator"
    return {"class": EarlyEscalator, "instance": EarlyEscalator(probes=2),
            "factory": lambda: EarlyEscalator(probes=3)}[form], "early_escalator"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["class", "instance", "factory", "registered", "registered with knobs", "file",
                                  "file factory"])
def test_any_policy_reference_is_explored_beside_the_nine(form, agent_file, cache):
    policy, label = _reference(form, agent_file)
    ex = explorer(n_tasks=N_TASKS, seeds=SEEDS, policy=policy, cache=cache)
    assert ex.run.labels == [*fb.POLICIES, label]  # beside the built-in policies it is compared with
    assert ex.controls["policy"].value == label and ("finality_gate", "finality_gate") in ex.controls["policy"].options
    assert len(ex.rows) == N_TASKS_EPISODES and (ex.rows.policy == label).all()
    assert ex.row["policy"] == label and f" · {label} · " in ex.title
    assert ex.checks.loc["verdict", "re-graded"] == ex.row["verdict"]
    before, message = ex.draws, ex.message
    ex.controls["episode"].value = 1  # the redraw path: the next of its episodes, replayed and drawn
    assert ex.draws == before + 1 and ex.message != message and ex.row.equals(ex.rows.iloc[1])
    assert f" · {label} · " in ex.title and label in ex.message
    ex.controls["policy"].value = "finality_gate"  # and the nine it is compared with are a click away
    assert ex.row["policy"] == "finality_gate" and " · finality_gate · " in ex.title


N_TASKS_EPISODES = len(fb.make_corpus(n_tasks=N_TASKS)) * len(SEEDS)


@pytest.mark.slow
def test_a_users_agent_rows_are_its_own_evaluation(cache):
    ex = explorer(n_tasks=N_TASKS, seeds=SEEDS, policy=EarlyEscalator, cache=cache)
    own = fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [EarlyEscalator], SEEDS, cache=False)
    assert list(ex.rows.task_id) == list(own.task_id) and list(ex.rows.gap) == pytest.approx(list(own.gap))


@pytest.mark.slow
def test_a_registered_name_plays_in_worker_processes(cache):
    fb.register_policy("escalator_registered", lambda probes=1: EarlyEscalator(probes), replace=True)
    ex = explorer(n_tasks=N_TASKS, seeds=SEEDS, policy="escalator_registered", n_jobs=2, cache=cache)
    assert ex.row["policy"] == "escalator_registered" and " · escalator_registered · " in ex.title


@pytest.mark.slow
def test_the_counts_shown_follow_the_selection(ex):
    _set(ex)
    everything = _rows()

    def shown(**filters):
        rows = everything
        for col, value in filters.items():
            rows = rows[rows[col] == value]
        per = " · ".join(f"{v} {(rows.verdict == v).sum():,}" for v in ("pass", "violation", "unscorable"))
        return f"{len(rows):,} of {len(everything):,} episodes match", per

    head, per = shown(policy="optimistic", archetype="pending_fail")
    assert head in ex.status.value and per in ex.status.value
    ex.controls["archetype"].value = ""  # set programmatically, as a click would
    new_head, new_per = shown(policy="optimistic")
    assert (new_head, new_per) != (head, per)
    assert new_head in ex.status.value and new_per in ex.status.value and new_head in ex.message
    for name, value in (("verdict", "pass"), ("policy", "finality_gate"), ("verdict", "")):
        ex.controls[name].value = value
        head, per = shown(**{k: ex.controls[k].value for k in ("policy", "archetype", "verdict")
                             if ex.controls[k].value})
        assert head in ex.status.value and per in ex.status.value


@pytest.fixture(scope="module")
def agent_rows():
    """The episode rows of a user's agent alone, as `evaluate` returns them."""
    return fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [EarlyEscalator], SEEDS, cache=False)


@pytest.mark.slow
def test_rows_from_a_dataframe_are_explored_and_replayed_with_their_policy(agent_rows):
    ex = explorer(rows=agent_rows, policy=EarlyEscalator)
    assert len(ex.rows) == len(agent_rows) and list(ex.rows.gap) == pytest.approx(list(agent_rows.gap))
    assert ex.controls["policy"].value == "early_escalator" and ex.controls["arm"].disabled
    assert ex.controls["arm"].options == ("all",) and ex.controls["probe"].options == ("full",)
    assert ex.row.equals(ex.rows.iloc[0]) and " · early_escalator · " in ex.title
    assert ex.checks.loc["verdict", "re-graded"] == ex.row["verdict"]
    assert f"{len(agent_rows):,} of {len(agent_rows):,} episodes match" in ex.status.value
    before = ex.draws
    ex.controls["episode"].value = 3
    assert ex.draws == before + 1 and ex.row.equals(ex.rows.iloc[3]) and ex.row["task_id"] in ex.title
    ex.controls["verdict"].value = ex.rows.verdict.iloc[0]
    assert (ex.rows.verdict == ex.rows.verdict.iloc[0]).all()


def test_rows_whose_policy_cannot_be_rebuilt_are_listed_and_say_what_cannot_be_drawn(agent_rows):
    ex = explorer(rows=agent_rows)  # 'early_escalator' names no registered policy: its episodes cannot be replayed
    assert len(ex.rows) == len(agent_rows) and ex.row.equals(ex.rows.iloc[0])
    assert ex.title is None and ex.result is None and "image/png" not in _drawn(ex)
    assert "cannot draw" in ex.message and "'early_escalator'" in ex.message and "policy=" in ex.message
    assert list(ex.checks["row"]) == [*(ex.row[f"check_{c}"] for c in fb.CHECKS), ex.row["verdict"]]
    before = ex.draws
    ex.controls["episode"].value = 1  # still steps through them, and says so again
    assert ex.draws == before + 1 and ex.row.equals(ex.rows.iloc[1]) and "cannot draw" in ex.message


@pytest.mark.slow
def test_rows_of_the_nine_replay_without_being_told_the_policy():
    rows = _rows(policy="sop")
    ex = explorer(rows=rows)
    assert ex.controls["policy"].value == "sop" and " · sop · " in ex.title


@pytest.fixture(scope="module")
def card_dir(tmp_path_factory, agent_file):
    """A report card of the file's agent, written as `finbench eval` writes it (profile only:loss, a
    dispute fee not SPEC's, so that the replay is right only if rows.csv's stamp is read)."""
    from finbench.agents.loading import load_agent
    from finbench.card import card_of

    agent = load_agent(f"{agent_file}:Escalator").obj
    run = fb.Run.make(n_tasks=N_TASKS, seeds=SEEDS, profile=fb.FaultProfile.only("loss"),
                      costs=fb.Costs(dispute_fee=15), policies=[*fb.POLICIES, agent], n_boot=50, cache=False)
    out = tmp_path_factory.mktemp("card")
    card_of(run, "file_escalator").write(out)
    return out


@pytest.mark.slow
def test_rows_of_a_report_card_by_path_are_replayed_under_its_stamp(card_dir, agent_file):
    ex = explorer(rows=card_dir / "rows.csv", policy=f"{agent_file}:Escalator")
    assert ex.controls["arm"].value == "only:loss" and "profile only:loss" in ex.message
    assert len(ex.rows) == N_TASKS_EPISODES and (ex.rows.policy == "file_escalator").all()
    assert " · file_escalator · " in ex.title and ex.checks.loc["verdict", "re-graded"] == ex.row["verdict"]
    before = ex.draws
    ex.controls["episode"].value = len(ex.rows) - 1
    assert ex.draws == before + 1 and ex.row["task_id"] in ex.title
    as_text = explorer(rows=str(card_dir / "rows.csv"))  # a path as a string; no policy: listed, not drawn
    assert len(as_text.rows) == N_TASKS_EPISODES and "cannot draw" in as_text.message


def _frame(**drop):
    return _rows(policy="sop").drop(columns=list(drop))


@pytest.mark.parametrize("kw, error", [
    ({"policy": 42}, "policy must be a policy name or label"),
    ({"policy": "no_such_policy"}, r"unknown policy .* \(or PATH.py:NAME or module:NAME"),
    ({"policy": "RAISES:Agent"}, r"RuntimeError: no key \(line 3, in __init__\) while being made"),
    ({"policy": "no_such_file.py:Agent"}, "no such file"),
    ({"policy": "agent.py"}, "PATH.py:NAME"),
    ({"policy": "FILE:Missing"}, "has no 'Missing'"),
    ({"policy": "FILE:Escalator.nope"}, "has no"),
    ({"policy": "BROKEN:Agent"}, "does not import"),
    ({"policy": "TAKES:make"}, "takes arguments"),
    ({"policy": "sop_copy"}, "apart from SPEC's nine"),
    ({"rows": 42}, "rows must be a DataFrame or the path of"),
    ({"rows": "no/such/rows.csv"}, "no such file"),
    ({"rows": "FRAME-LACKING"}, "lacking gap, verdict"),
    ({"rows": "EMPTY"}, "no episode"),
    ({"rows": "FRAME", "policy": "optimistic"}, "one of the rows' policies"),
    ({"rows": "CARD", "arm": "none"}, "arm must be the rows' own, 'only:loss'"),
    ({"rows": "CARD", "probe": "none"}, "probe must be the rows' own, 'full'"),
])
def test_bad_agents_paths_and_rows_are_refused_clearly(kw, error, agent_file, tmp_path, request):
    broken = tmp_path / "broken.py"
    broken.write_text("import math\nmath.sqrt(-1)\n", encoding="utf-8")
    takes = tmp_path / "takes.py"
    takes.write_text("def make(x):\n    return x\n", encoding="utf-8")

    class Sop(EarlyEscalator):
        name = "sop"

    raises = tmp_path / "raises.py"
    raises.write_text("class Agent:\n    def __init__(self):\n        raise RuntimeError('no key')\n\n"
                      "    def begin(self, brief):\n        pass\n\n    def act(self, observation):\n        pass\n",
                      encoding="utf-8")
    swap = {"FILE": str(agent_file), "BROKEN": str(broken), "TAKES": str(takes), "RAISES": str(raises)}
    value = {"sop_copy": lambda: Sop, "FRAME-LACKING": lambda: _frame(gap=1, verdict=1),
             "EMPTY": lambda: _frame().iloc[:0], "FRAME": _frame, "CARD": lambda: request.getfixturevalue("card_dir") / "rows.csv"}  # a card costs seconds
    kw = {k: value[v]() if isinstance(v, str) and v in value else v for k, v in kw.items()}
    kw = {k: swap[v.split(":")[0]] + ":" + v.split(":")[1] if isinstance(v, str) and v.split(":")[0] in swap else v
          for k, v in kw.items()}
    with pytest.raises(fb.FinbenchError, match=error) as caught:
        explorer(n_tasks=N_TASKS, seeds=SEEDS, cache=False, **kw)
    assert str(caught.value).startswith("explorer: ")  # the one message shape: where, what, what is allowed
    assert isinstance(caught.value, fb.PolicyError) == ("rows" not in kw)  # a bad agent is a PolicyError
