"""The nine policies (issue 3: acceptance 1 and 2, and the interface)."""
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.play import play

CORPUS = fb.make_corpus()
UNPRIVILEGED = [p for p in fb.POLICIES if p != "finality_oracle"]


def calls_before(task, policy, seed, until, probe=None):
    """The calls a policy (a name, or a fresh object) makes before tick `until` (shared by test_reconciler)."""
    policy = fb.get_policy(policy) if isinstance(policy, str) else policy
    env = play(FinalityEnv(task, seed, probe=probe), policy)
    return [(tool, args) for t, tool, args, _ in env.actions if t < until]


@pytest.mark.parametrize("policy", UNPRIVILEGED)
def test_unprivileged_policies_cannot_tell_twins_apart(policy):
    for settle, fail in CORPUS.twin_pairs:
        for seed in range(5):
            d = settle.determined_at
            assert calls_before(settle, policy, seed, d) == calls_before(fail, policy, seed, d), (settle.task_id, seed)


def test_only_the_oracle_is_privileged():
    assert [p for p in fb.POLICIES if getattr(fb.get_policy(p), "privileged", False)] == ["finality_oracle"]
    differ = sum(calls_before(s, "finality_oracle", 0, s.determined_at)
                 != calls_before(f, "finality_oracle", 0, f.determined_at) for s, f in CORPUS.twin_pairs)
    assert differ > 0


@pytest.mark.slow  # the full-size corpus, five seeds, eight profiles: some 13,000 episodes
def test_finality_gate_is_fault_invariant():
    profiles = [fb.FaultProfile.none(), fb.FaultProfile.default()] + [fb.FaultProfile.only(f) for f in C.FAMILIES]
    for task in CORPUS:
        for seed in range(5):
            results = [fb.run_episode(task, "finality_gate", seed, p) for p in profiles]
            assert len({r.position for r in results}) == 1, task.task_id
            assert not any(r.premature_irreversible for r in results), task.task_id


def test_gate_never_acts_irreversibly_before_a_terminal_probe():
    for task in CORPUS.tasks[::7]:
        res = fb.run_episode(task, "finality_gate", 1)
        assert not res.premature_irreversible
        keys = [a["idempotency_key"] for _, tool, a, _ in res.actions if tool == "retry_capture"]
        assert len(keys) <= 1 and (not keys or task.outcome == "failed")


def test_oracle_acts_as_spec_section_7_says():
    """Not circular: the reference is the oracle's own play, so check its actions directly."""
    for task in CORPUS:
        res = fb.run_episode(task, "finality_oracle", 0)
        calls = [(tool, a.get("idempotency_key")) for _, tool, a, _ in res.actions]
        if task.outcome == "settled":
            assert calls == [("ship", None)]
        elif task.retry_outcome == "settled":
            assert calls == [("retry_capture", "key-2"), ("ship", None)]
        else:
            assert calls == [("write_off", None)] and res.position == 0.0
        assert res.end_t <= C.HANDOVER + 2 and res.gap == 0.0


def test_knobs_and_names():
    sop = fb.get_policy("sop", poll_interval=15, patience=120)
    assert (sop.poll_interval, sop.patience) == (15, 120)
    default = fb.get_policy("sop")
    assert (default.poll_interval, default.patience) == (60, 180)
    with pytest.raises(ValueError, match="does not take"):
        fb.get_policy("sop", speed=3)
    with pytest.raises(ValueError, match="valid:"):
        fb.get_policy("gpt")
    assert len(fb.POLICIES) == 9


@pytest.mark.parametrize("policy", list(fb.POLICIES))
def test_every_policy_ends_every_case_within_budget(policy):
    for task in CORPUS.tasks[::11]:
        res = fb.run_episode(task, policy, 2)
        assert res.n_calls <= 40 and res.end_t <= C.HORIZON
        assert all("error" not in obs for _, _, _, obs in res.actions) or policy == "random"


def test_policy_by_object_and_by_name_agree():
    task = CORPUS.tasks[3]
    assert fb.run_episode(task, "react", 1).position == fb.run_episode(task, fb.get_policy("react"), 1).position


def test_polling_policies_act_by_themselves_within_the_budget():
    """No forced close: every policy but random ends the case with its own decision."""
    for task in CORPUS:
        for policy in ("majority_vote", "sop", "react", "reflection", "finality_gate"):
            res = fb.run_episode(task, policy, 0)
            assert res.disposition != "close" and res.n_calls <= 40, (policy, task.task_id)
        res = fb.run_episode(task, "optimistic", 0)  # closes by design, at the deadline
        assert res.disposition == "ship" or res.end_t <= C.SHIP_BY
    for knobs in ({"wait": 5}, {"wait": 10, "pause": 10}):
        for task in CORPUS.tasks[::5]:
            res = fb.run_episode(task, fb.get_policy("reflection", **knobs), 0)
            assert res.disposition != "close", (knobs, task.task_id)


def test_majority_vote_watches_until_the_deadline():
    ends = [fb.run_episode(t, "majority_vote", 0).end_t for t in CORPUS if t.archetype == "unresolvable"]
    assert max(ends) > 590 and max(ends) <= C.SHIP_BY


def test_reflection_looks_twice_before_the_deadline_refund():
    for task in CORPUS:
        res = fb.run_episode(task, "reflection", 0)
        if res.disposition == "refund":
            tools = [tool for _, tool, _, _ in res.actions]
            assert tools[-3:] == ["wait", "read_processor", "refund"], (task.task_id, tools[-4:])
