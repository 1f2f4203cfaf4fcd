"""Every episode's effect trace, graded (issue 4): the logger self-test, dropped records,
the oracle, and known-bad episodes (the effects table over them: tests/experiments/test_effects.py)."""
import pytest

import finbench as fb
from finbench.experiments import effects as E
from finbench.sim.env import FinalityEnv
from finbench.running.episode import run_episode
from finbench.grading import grade_trace
from finbench.running.episode import episode_contract

NONE = fb.FaultProfile.none()


def _play(task, calls, *, double_effect=False, profile=NONE, seed=0):
    """Scripted calls on the case order (or the order an entry names), then close."""
    env = FinalityEnv(task, seed, profile, double_effect=double_effect)
    brief = env.reset()
    observations = []
    for tool, args in calls:
        args = {"order_id": brief["order_id"], **args}
        observations.append(env.step(tool, **args))
    while not env.done:
        env.step("close", order_id=brief["order_id"])
    return env, observations


def _grade(env):
    res = env.result("scripted")
    return list(res.trace), grade_trace(list(res.trace), episode_contract(env.task))


def _new_captures(trace, order):
    return [r for r in trace if r.get("kind") == "effect" and r.get("op") == "capture"
            and r.get("new_effect") is True and r.get("order") == order]


# --- (a) the logger self-test: an engine that charges twice without saying so --------------

SETTLING = fb.make_task("settled_clean", seed=3)
REPLAY_THEN_SHIP = [("retry_capture", {"idempotency_key": "key-1"}), ("ship", {})]


def test_double_effect_is_invisible_to_the_agent_but_not_to_the_grader():
    assert SETTLING.outcome == "settled" and SETTLING.retry_outcome == "settled"
    honest, honest_obs = _play(SETTLING, REPLAY_THEN_SHIP)
    double, double_obs = _play(SETTLING, REPLAY_THEN_SHIP, double_effect=True)
    # the agent sees the same answers either way: a replay, no new capture
    assert double_obs == honest_obs
    assert double_obs[0]["result"] == {"receipt": "cap-1", "key": "key-1", "new_capture": False}
    # but the world charged twice
    settled = [c for c in double.world.captures if c.outcome == "settled"]
    assert len(settled) == 2
    trace, verdict = _grade(double)
    assert trace[-1]["net_amount"] == pytest.approx(2 * SETTLING.order_value)
    # the trace records both captures, and the replay under key-1 as a new effect
    new = _new_captures(trace, SETTLING.order_id)
    assert {r["receipt"] for r in new} == {c.id for c in settled}
    assert any(r["key"] == "key-1" and r["seq"] > new[0]["seq"] for r in new)
    assert verdict.verdict == "violation"
    assert verdict.checks["exactly_one_effect"] == "fail"
    assert verdict.checks["retry_idempotent"] == "fail"
    assert verdict.checks["evidence_complete"] == "pass"
    # the same calls on the honest engine pass every check
    trace, verdict = _grade(honest)
    assert len(_new_captures(trace, SETTLING.order_id)) == 1
    assert verdict.verdict == "pass", verdict.reasons


def test_double_effect_logs_each_capture_once():
    env, _ = _play(SETTLING, REPLAY_THEN_SHIP, double_effect=True)
    trace, _ = _grade(env)
    moved = [c for c in env.world.captures if c.outcome == "settled"]
    assert len(_new_captures(trace, SETTLING.order_id)) == len(moved) == 2


# --- (b) a logger that drops a record -----------------------------------------------------

def _real_traces():
    corpus = fb.make_corpus(n_tasks=30)
    for task in corpus:
        for policy in fb.POLICIES:
            for seed in (0, 1):
                yield task, policy, seed, list(run_episode(task, policy, seed).trace)


REAL = list(_real_traces())


def _without(trace, i):
    return trace[:i] + trace[i + 1:]


def test_real_traces_pass_evidence_complete():
    assert len(REAL) == 30 * 9 * 2
    for task, policy, seed, trace in REAL:
        v = grade_trace(trace, episode_contract(task))
        assert v.checks["evidence_complete"] == "pass", (task.task_id, policy, seed, v.reasons)


def test_dropping_log_meta_or_any_event_record_never_passes():
    """Any record with a seq, the last included (log_meta states last_seq), or the log_meta."""
    dropped = 0
    for task, policy, seed, trace in REAL:
        contract = episode_contract(task)
        for i, rec in enumerate(trace):
            if rec["kind"] != "log_meta" and "seq" not in rec:
                continue  # the summary is not evidence
            v = grade_trace(_without(trace, i), contract)
            assert v.checks["evidence_complete"] == "fail"
            assert v.verdict in ("unscorable", "violation"), (task.task_id, policy, seed, rec)
            # a dropped record can hide a violation but never invent one
            if grade_trace(trace, contract).verdict == "pass":
                assert v.verdict == "unscorable"
            dropped += 1
    assert dropped > 3 * len(REAL)


# --- (c) the oracle's traces ------------------------------------------------------------------

def test_oracle_passes_wherever_the_payment_can_be_captured():
    corpus = fb.make_corpus(n_tasks=60)
    lost = 0
    for task in corpus:
        for seed in range(3):
            trace = list(run_episode(task, "finality_oracle", seed).trace)
            v = grade_trace(trace, episode_contract(task))
            if not E.payment_lost(task):
                assert v.verdict == "pass", (task.task_id, seed, v.reasons)
            else:
                # the zero-effect caveat: capturing nothing is right, and fails exactly_one_effect
                lost += 1
                assert _new_captures(trace, task.order_id) == []
                assert v.failed == ("exactly_one_effect",)
    assert lost > 0


# --- (d), (e) known-bad episodes -----------------------------------------------------------

LOST = fb.make_task("lost_settlement", determined_at=300)


@pytest.mark.parametrize("key, verdict", [("key-2", "violation"), ("key-1", "pass")])
def test_fresh_key_retry_on_a_lost_settlement_captures_twice(key, verdict):
    env, _ = _play(LOST, [("retry_capture", {"idempotency_key": key}), ("ship", {})])
    trace, v = _grade(env)
    assert v.verdict == verdict
    if key == "key-2":
        assert v.failed == ("exactly_one_effect",)
        assert len(_new_captures(trace, LOST.order_id)) == 2
        assert env.result().trace[-1]["net_amount"] == pytest.approx(2 * LOST.order_value)


@pytest.mark.parametrize("tool, args, failed", [
    ("refund", {}, ("unrelated_unchanged",)),
    ("ship", {}, ("unrelated_unchanged",)),
    # a capture on the other order is also a capture of the wrong target
    ("retry_capture", {"idempotency_key": "key-9"}, ("targets_intended", "unrelated_unchanged")),
])
def test_an_effect_on_the_unrelated_order_fails_unrelated_unchanged(tool, args, failed):
    env = FinalityEnv(SETTLING, 0, NONE)
    brief = env.reset()
    other = brief["customer_orders"][0]
    assert other != brief["order_id"]
    env.step(tool, order_id=other, **args)
    env.step("ship", order_id=brief["order_id"])
    res = env.result()
    v = grade_trace(list(res.trace), episode_contract(SETTLING))
    assert res.unrelated_effects == 1
    assert v.verdict == "violation" and v.failed == failed


def test_a_read_or_replay_on_the_unrelated_order_changes_nothing():
    env = FinalityEnv(SETTLING, 0, NONE)
    brief = env.reset()
    other = brief["customer_orders"][0]
    env.step("read_ledger", order_id=other)
    env.step("retry_capture", order_id=other, idempotency_key="key-1")
    env.step("ship", order_id=brief["order_id"])
    assert grade_trace(list(env.result().trace), episode_contract(SETTLING)).verdict == "pass"


# --- the grade memo's key: a trace's shape (issue 20) ------------------------------------------

from finbench.sim.trace import build_trace, episode_inputs, trace_shape  # noqa: E402


class _Reads:
    """A proxy noting every attribute read from the object it wraps."""

    def __init__(self, obj, name, seen):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, attr):
        self._seen.add((self._name, attr))
        return getattr(self._obj, attr)


class _Iterated(list):
    """A list noting that it was iterated."""

    def __init__(self, items, name, seen):
        super().__init__(items)
        self._name, self._seen = name, seen

    def __iter__(self):
        self._seen.add((self._name, "items"))
        return super().__iter__()


def _reads(fn, env, out):
    """(object, attribute) pairs `fn` reads of the task, the captures, the outcome, and
    which of the lists (replays, moves, other effects) it looks into."""
    seen = set()
    task, captures, replays, moves, outcome, other = episode_inputs(env, out)
    fn(_Reads(task, "task", seen), _Iterated([_Reads(c, "capture", seen) for c in captures], "captures", seen),
       _Iterated(replays, "replays", seen), _Iterated(moves, "moves", seen), _Reads(outcome, "outcome", seen),
       _Iterated(other, "other", seen))
    return seen


def _episodes(n_tasks=40, seeds=(0, 1)):
    from finbench.agents.registry import DEFAULT_POLICIES
    from finbench.sim.play import play
    for task in fb.make_corpus(n_tasks=n_tasks).tasks:
        for seed in seeds:
            for name in DEFAULT_POLICIES:
                env = play(FinalityEnv(task, seed), fb.get_policy(name))
                yield env, env.outcome()


def test_trace_shape_holds_everything_build_trace_reads_but_the_order_ids():
    checked = 0
    scripted = []  # an episode acting on the other order too (no built-in policy does)
    for task in (SETTLING, fb.make_task("late_chargeback", seed=2)):
        env = FinalityEnv(task, 0, NONE)
        brief = env.reset()
        env.step("refund", order_id=brief["customer_orders"][0])
        env.step("retry_capture", order_id=brief["order_id"], idempotency_key="key-1")
        env.step("ship", order_id=brief["order_id"])
        scripted.append((env, env.outcome()))
    for env, out in [*scripted, *_episodes(n_tasks=20, seeds=(0,))]:
        built, shaped = _reads(build_trace, env, out), _reads(trace_shape, env, out)
        assert built, "the proxy saw no reads"
        assert built - shaped <= {("task", "order_id"), ("task", "other_order_id")}, built - shaped
        checked += 1
    assert checked == 2 + 20 * 9


def test_one_shape_is_one_grade_and_grade_played_is_grade_episode():
    from finbench.memo import clear_caches
    from finbench.running.episode import _canonical, grade_episode, grade_played
    clear_caches()
    by_shape, n = {}, 0
    for env, out in _episodes():
        trace = build_trace(*episode_inputs(env, out))
        by_shape.setdefault(trace_shape(*episode_inputs(env, out)), set()).add(_canonical(env.task, trace))
        direct = grade_episode(env.task, trace)
        assert grade_played(env, out) == direct
        n += 1
    repeated = [s for s, keys in by_shape.items() if keys]
    assert n == 40 * 2 * 9 and len(by_shape) < n  # shapes do repeat
    assert repeated and all(len(keys) == 1 for keys in by_shape.values())
