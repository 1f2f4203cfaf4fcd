"""Probe modes (issue 12): each mode's contract, every policy in every mode, and that the default mode
changes nothing (the reconciler built for them: tests/agents/test_reconciler.py)."""
import pytest

import finbench as fb
from finbench.running import cache as K
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.play import play
from finbench.errors import FinbenchError
from finbench.sim.probe import DEFAULT_DELAY, DEFAULT_LIMIT, ProbeMode

CORPUS = fb.make_corpus()
SMALL = fb.make_corpus(n_tasks=30)
MODES = list(ProbeMode.all())
EVERY = [*fb.POLICIES, "reconciler"]


class ProbeEveryTick(fb.Policy):
    """Probes every few ticks until the horizon nearly runs out (an outside policy: `step`)."""

    name = "prober"

    def __init__(self, gap=10):
        self.gap, self.i = gap, 0

    def act(self, obs):
        self.i += 1
        if self.i % 2:
            return self.call("probe_processor")
        return self.call("wait", ticks=self.gap)


def _probes(task, mode, seed=0, gap=10):
    env = play(FinalityEnv(task, seed, probe=mode), ProbeEveryTick(gap))
    return [(obs["t"], obs["result"]) for _, tool, _, obs in env.actions if tool == "probe_processor"]


def test_full_is_the_default_probe():
    for task in SMALL.tasks[:10]:
        assert _probes(task, None) == _probes(task, ProbeMode.full())
    assert FinalityEnv(SMALL.tasks[0]).probe == ProbeMode.full()


def test_none_never_answers_and_costs_the_call():
    for task in SMALL:
        env = play(FinalityEnv(task, 0, probe=ProbeMode.none()), ProbeEveryTick())
        probes = [(i, obs) for i, (_, tool, _, obs) in enumerate(env.actions) if tool == "probe_processor"]
        assert probes
        for i, obs in probes:
            assert obs["result"]["captures"] == [] and "unavailable" in obs["result"]
            issued = env.actions[i][0]
            assert obs["t"] == min(issued + 5, C.HORIZON)


def test_identity_only_never_reveals_an_outcome():
    for task in SMALL:
        for t, res in _probes(task, ProbeMode.identity_only()):
            assert res["captures"], task.task_id
            for c in res["captures"]:
                assert set(c) == {"id", "key", "amount"}
                assert "status" not in str(res)


def test_delayed_never_reveals_an_outcome_earlier_than_d_after_it_exists():
    for d in (DEFAULT_DELAY, 30):
        for task in CORPUS.tasks[::4]:
            for t, res in _probes(task, ProbeMode.delayed(d)):
                assert res["as_of"] == max(0, t - d)
                for c in res["captures"]:
                    if c["status"] != "unknown":
                        assert c["id"] == C.ORIGINAL_CAPTURE and t >= task.determined_at + d, (task.task_id, t)


def test_delayed_reveals_it_once_d_has_passed():
    task = next(t for t in CORPUS if t.archetype == "settled_clean")
    seen = [t for t, res in _probes(task, ProbeMode.delayed(60), gap=5)
            if any(c["status"] == "settled" for c in res["captures"])]
    assert seen and seen[0] - (task.determined_at + 60) <= 10


def test_rate_limited_answers_at_most_n_times():
    for n in (DEFAULT_LIMIT, 1, 0):
        for task in SMALL:
            answers = _probes(task, ProbeMode.rate_limited(n))
            real = [r for _, r in answers if "unavailable" not in r]
            assert len(answers) > n  # so that some probes are refused
            assert len(real) == n
            assert all("unavailable" in r for _, r in answers[n:])
            full = _probes(task, ProbeMode.full())
            assert [r for _, r in full[:n]] == real


def test_probe_mode_is_checked_and_named():
    assert [m.name for m in MODES] == ["full", "none", "delayed[D=120]", "rate_limited[N=3]", "identity_only"]
    for bad in (dict(kind="partial"), dict(kind="delayed", delay=0), dict(kind="full", limit=2)):
        with pytest.raises(FinbenchError):
            ProbeMode(**bad)
    with pytest.raises(FinbenchError):
        FinalityEnv(SMALL.tasks[0], probe="none")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_every_policy_runs_in_every_mode(mode):
    for policy in EVERY:
        for task in CORPUS.tasks[::9]:
            res = fb.run_episode(task, policy, 1, probe=mode)
            assert res.n_calls <= 40 and res.end_t <= C.HORIZON
            if policy not in ("random", "optimistic"):
                assert res.disposition != "close", (policy, mode.name, task.task_id)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_fast_path_and_step_agree_in_every_mode(mode):
    """A built-in policy through `_call` and the same policy through the public `step`."""
    from finbench.agents.policies import FinalityGate

    class Outside(FinalityGate):  # a subclass is never trusted: it goes through `step`
        pass

    for task in CORPUS.tasks[::13]:
        fast = fb.run_episode(task, fb.get_policy("finality_gate"), 2, probe=mode)
        slow = fb.run_episode(task, Outside(), 2, probe=mode)
        assert [(a[0], a[1], a[3]) for a in fast.actions] == [(a[0], a[1], a[3]) for a in slow.actions]
        assert fast.position == slow.position


def test_gate_escalates_at_the_deadline_without_a_probe():
    for task in SMALL:
        res = fb.run_episode(task, "finality_gate", 0, probe=ProbeMode.none())
        assert res.disposition == "escalate" and res.end_t <= C.SHIP_BY and res.n_calls <= 4


def test_default_mode_changes_nothing(tmp_path):
    base = fb.evaluate(SMALL, ["sop", "finality_gate", "reconciler"], range(2), cache=False)
    full = fb.evaluate(SMALL, ["sop", "finality_gate", "reconciler"], range(2), cache=False, probe=ProbeMode.full())
    assert base.equals(full)
    prof, costs = fb.FaultProfile.default(), fb.Costs()
    key = K.chunk_key("f", ["a"], "sop", [0], prof, costs)
    assert key == K.chunk_key("f", ["a"], "sop", [0], prof, costs, ProbeMode.full())
    assert key != K.chunk_key("f", ["a"], "sop", [0], prof, costs, ProbeMode.none())
    run = fb.Run(SMALL, seeds=range(2))
    assert run.key() == run.replace(probe=ProbeMode.full()).key() != run.replace(probe=ProbeMode.none()).key()
    assert "probe" not in run.stamp() and run.replace(probe=ProbeMode.none()).stamp()["probe"] == "none"


def test_sweep_over_probe_modes(tmp_path):
    run = fb.Run(SMALL, seeds=range(2), policies=["finality_gate", "reconciler"], cache=tmp_path)
    df = fb.sweep(run, {"probe": [ProbeMode.full(), ProbeMode.none()]})
    assert list(dict.fromkeys(df["probe"])) == ["full", "none"]
    gate = df[df["policy"] == "finality_gate"]
    blind = gate[gate["probe"] == "none"]
    assert len(blind) == len(SMALL) * 2
    assert (blind["disposition"] == "escalate").all()
    again = fb.sweep(run, {"probe": [ProbeMode.full(), ProbeMode.none()]})  # from the run memo
    assert df.drop(columns="origin").equals(again.drop(columns="origin")) and set(again["origin"]) == {"memo"}
