"""The endings memo of the runner (`finbench.running.endings.ended`): a row's position, reference, gap,
exact and premature flags, money and grade are reused between episodes that ended alike. Every memoised row
must equal what the public path computes afresh for that episode (`run_episode`: the outcome, the reference,
the trace and its grade), whatever was played before it."""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.agents.registry import as_ref
from finbench.running import endings, evaluation as E
from finbench.running.episode import grade_episode
from finbench.sim import constants as C

TASKS = fb.make_corpus(n_tasks=48).tasks
COLS = E.COLUMNS
MONEY = ("cash", "cogs", "liability", "dispute_fee", "escalation", "unrelated")


class Retrier:
    """A user's policy (the checked path) that retries under a fresh key, replays it, then touches the other order."""
    name = "retrier"

    def begin(self, brief):
        self.o, self.other, self.n = brief["order_id"], brief["customer_orders"][0], 0

    def act(self, obs):
        self.n += 1
        if self.n <= 2:
            return "retry_capture", {"order_id": self.o, "idempotency_key": "mine-1"}
        if self.n == 3:
            return "refund", {"order_id": self.other}
        return "ship", {"order_id": self.o}


def _expected(task, ref, seed, profile) -> dict:
    res = fb.run_episode(task, ref.make(), seed, profile)
    graded = grade_episode(task, res.trace)
    out = {"position": res.position, "reference_position": res.reference_position, "gap": res.gap,
           "exact": res.exact, "premature_irreversible": res.premature_irreversible,
           **{m: res.loss_breakdown[m] for m in MONEY}, **graded}
    return out


@pytest.mark.parametrize("profile", [fb.FaultProfile.default(), fb.FaultProfile.none()], ids=lambda p: p.name)
def test_every_memoised_ending_equals_one_computed_afresh(profile):
    refs = [as_ref(n) for n in (*fb.POLICIES, "reconciler")] + [as_ref(Retrier)]
    fb.clear_caches()
    parts = E.run_chunk(TASKS, refs, [0, 1], profile, fb.Costs())
    n = len(TASKS) * 2 * len(refs)
    assert 0 < len(endings._ENDS) < n * 0.75  # many episodes end as an earlier one did: the memo is used
    checked = 0
    for ref, cols in zip(refs, parts):
        for i in range(len(cols["task_id"])):
            task = next(t for t in TASKS if t.task_id == cols["task_id"][i])
            want = _expected(task, ref, cols["seed"][i], profile)
            got = {c: cols[c][i] for c in want}
            assert got == want, (ref.label, task.task_id, cols["seed"][i])
            checked += 1
    assert checked == n
    fb.clear_caches()


def test_the_user_policy_s_replay_and_other_order_effect_are_in_its_ending():
    """Two episodes alike but for the replay or the other-order effect end differently: neither reuses the other's."""
    fb.clear_caches()
    task = TASKS[0]

    class Shipper(Retrier):
        def act(self, obs):
            return "ship", {"order_id": self.o}

    class OneRetry(Retrier):
        def act(self, obs):
            self.n += 1
            if self.n == 1:
                return "retry_capture", {"order_id": self.o, "idempotency_key": "mine-1"}
            return "ship", {"order_id": self.o}

    refs = [as_ref(Shipper), as_ref(OneRetry), as_ref(Retrier)]
    parts = E.run_chunk([task], refs, [0], fb.FaultProfile.none(), fb.Costs())
    for ref, cols in zip(refs, parts):
        want = _expected(task, ref, 0, fb.FaultProfile.none())
        assert {c: cols[c][0] for c in want} == want, ref.label
    assert len(endings._ENDS) == 3
    unrelated = [cols["check_unrelated_unchanged"][0] for cols in parts]
    assert unrelated[:2] == ["pass", "pass"] and unrelated[2] != "pass"
    fb.clear_caches()


def test_the_memo_is_cleared_when_full(monkeypatch):
    fb.clear_caches()
    monkeypatch.setattr(endings, "_ENDS_SIZE", 2)
    E.run_chunk(TASKS[:3], [as_ref("finality_oracle")], [0], fb.FaultProfile.none(), fb.Costs())
    assert len(endings._ENDS) == 1 and next(iter(endings._ENDS))[0] is TASKS[2]
    fb.clear_caches()


class _Scripted:
    """A user's policy that plays a fixed list of (tool, extra arguments) on the case order, `None` naming the
    other order's refund."""
    script: list = []

    def begin(self, brief):
        self.o, self.other, self.i = brief["order_id"], brief["customer_orders"][0], 0

    def act(self, obs):
        tool, extra = self.script[self.i]
        self.i += 1
        if extra is None:
            return tool, {"order_id": self.other}
        return tool, {"order_id": self.o, **extra}


def _scripted(name: str, script: list) -> type:
    return type(name, (_Scripted,), {"name": name, "script": script})


KEY = {"idempotency_key": "k-x"}
PAIRS = {
    # the same disposition at the same tick, the same captures: only the replay differs
    "a replayed key": (_scripted("replayed", [("retry_capture", KEY), ("retry_capture", KEY), ("ship", {})]),
                       _scripted("waited", [("retry_capture", KEY), ("wait", {"ticks": 1}), ("ship", {})])),
    # ... only the effect on the other order differs
    "an effect on the other order": (_scripted("touched", [("refund", None), ("ship", {})]),
                                     _scripted("untouched", [("wait", {"ticks": 1}), ("ship", {})])),
}


@pytest.mark.parametrize("what", PAIRS)
def test_episodes_that_differ_only_in_one_part_of_the_key_do_not_share_an_ending(what):
    fb.clear_caches()
    task = TASKS[1]
    refs = [as_ref(c) for c in PAIRS[what]]
    parts = E.run_chunk([task], refs, [0], fb.FaultProfile.none(), fb.Costs())
    assert parts[0]["end_t"] == parts[1]["end_t"] and parts[0]["retry_at"] == parts[1]["retry_at"]
    for ref, cols in zip(refs, parts):
        want = _expected(task, ref, 0, fb.FaultProfile.none())
        assert {c: cols[c][0] for c in want} == want, ref.label
    assert len(endings._ENDS) == 2
    fb.clear_caches()


def test_other_costs_do_not_share_an_ending():
    fb.clear_caches()
    refs = [as_ref("sop"), as_ref("finality_gate")]
    dear = fb.Costs(dispute_fee=90.0, escalation_cost=40.0)
    E.run_chunk(TASKS[:12], refs, [0], fb.FaultProfile.none(), fb.Costs())
    parts = E.run_chunk(TASKS[:12], refs, [0], fb.FaultProfile.none(), dear)
    for ref, cols in zip(refs, parts):
        for i, task in enumerate(TASKS[:12]):
            res = fb.run_episode(task, ref.make(), 0, fb.FaultProfile.none(), dear)
            assert (cols["position"][i], cols["dispute_fee"][i]) == (res.position, res.loss_breakdown["dispute_fee"])
    fb.clear_caches()


def test_the_grade_comes_in_the_runner_s_column_order():
    assert E.COLUMNS[-len(endings.GRADED):] == endings.GRADED
    assert endings.GRADED[:2] == ("verdict", "capture_effects") and len(endings.GRADED) == 8


def test_a_chunk_played_again_settles_nothing_again(monkeypatch):
    """The second time a chunk is played, every ending is the memo's: no outcome is settled afresh."""
    fb.clear_caches()
    refs = [as_ref(n) for n in ("sop", "react", "eager")]
    first = E.run_chunk(TASKS[:10], refs, [0], fb.FaultProfile.default(), fb.Costs())
    settled = []
    real = E.FinalityEnv.outcome
    monkeypatch.setattr(E.FinalityEnv, "outcome", lambda self: settled.append(1) or real(self))
    again = E.run_chunk(TASKS[:10], refs, [0], fb.FaultProfile.default(), fb.Costs())
    assert again == first and settled == []
    fb.clear_caches()


def test_a_capture_the_agent_made_keys_its_ending_under_the_loggers_self_test():
    """Under `double_effect` (the logger's self-test) a retry under the original key charges again with no replay
    and no irreversible tick: only the new capture tells that episode from one that waited a tick instead, and
    the memo must not answer either with the other's row."""
    checked = 0
    for task in TASKS[:6]:
        envs = []
        for tool, args in (("retry_capture", {"idempotency_key": C.ORIGINAL_KEY}), ("wait", {"ticks": 1})):
            env = fb.FinalityEnv(task, 0, double_effect=True)
            order = env.reset()["order_id"]
            env.step(tool, order_id=order, **args)
            env.step("escalate", order_id=order)
            envs.append(env)
        charged, waited = envs
        assert len(charged.world.captures) == 2 and charged.disposition_t == waited.disposition_t
        fresh = []
        for env in envs:
            fb.clear_caches()
            fresh.append(endings.ended(env))
        if fresh[0] == fresh[1]:
            continue
        fb.clear_caches()
        assert [endings.ended(charged), endings.ended(waited)] == fresh
        checked += 1
    assert checked
    fb.clear_caches()
