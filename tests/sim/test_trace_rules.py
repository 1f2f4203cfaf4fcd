"""The effect trace's rules at their edges (finbench.sim.trace; the schema of docs/grading.md), on hand-made
inputs: which moves of goods and money a disposition makes (`dispositions`), the order of records that
share a tick (captures and replays, then dispositions and effects on the other order, then reverses), and
the HORIZON, rounding and positive-amount edges of `build_trace`. Expected records are written from the
module's docstring, not from the code (mutation testing, issue 32; every field of every kind of record:
tests/sim/test_trace_records.py)."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.trace import build_trace, dispositions
from finbench.sim.world import Capture, agent_capture, original_capture

V, OTHER = 80.0, 30.0


def _task(**changes):
    task = fb.make_task("late_chargeback", seed=1, determined_at=200, order_value=V)
    return dataclasses.replace(task, **{"chargeback_at": 500, "retry_outcome": "settled", "retry_delay": 100,
                                        "other_order_value": OTHER, **changes})


def _outcome(refunded=0.0, chargeback=0.0, human_action=None, human_t=None, human_refund_t=None):
    return SimpleNamespace(refunded=refunded, chargeback=chargeback, human_action=human_action, human_t=human_t,
                           human_refund_t=human_refund_t)


def _body(trace):
    """(t, kind, op or by, receipt) of each record between the log_meta and the summary."""
    return [(r["t"], r["kind"], r.get("op", r.get("by")), r.get("receipt")) for r in trace[1:-1]]


# --- dispositions: who moves goods or money on the case order --------------------------------------------

def test_the_agent_ships_the_order_value():
    assert dispositions(_task(), "ship", 250, _outcome()) == [(250, "ship", V, "agent")]


def test_the_agent_refunds_what_the_outcome_refunded():
    assert dispositions(_task(), "refund", 250, _outcome(refunded=2 * V)) == [(250, "refund", 2 * V, "agent")]


def test_after_an_escalation_the_clerk_ships_and_returns_no_refund_when_there_is_no_excess():
    out = _outcome(human_action="ship", human_t=310, human_refund_t=400)
    assert dispositions(_task(), "escalate", 250, out) == [(310, "ship", V, "human")]


def test_after_an_escalation_the_clerk_ships_and_refunds_any_excess_however_small():
    # any amount above zero is returned, even under a dollar
    out = _outcome(refunded=0.5, human_action="ship", human_t=310, human_refund_t=400)
    assert dispositions(_task(), "escalate", 250, out) == [(310, "ship", V, "human"), (400, "refund", 0.5, "human")]


def test_after_an_escalation_the_clerk_may_refund_without_shipping():
    out = _outcome(refunded=V, human_action="refund", human_t=320, human_refund_t=320)
    assert dispositions(_task(), "escalate", 250, out) == [(320, "refund", V, "human")]


def test_a_write_off_a_close_or_the_clerk_writing_off_move_nothing():
    assert dispositions(_task(), "write_off", 250, _outcome()) == []
    assert dispositions(_task(), "close", 250, _outcome()) == []
    assert dispositions(_task(), "escalate", 250, _outcome(human_action="write_off", human_t=330)) == []


# --- records that share a tick ----------------------------------------------------------------------------

def test_at_one_tick_a_capture_comes_before_a_replay_of_its_key():
    task = _task()
    cap2 = agent_capture(task, 2, "key-2", 150)
    trace = build_trace(task, [original_capture(task), cap2], [(150, "key-2", "cap-2", False)], [], _outcome(), [])
    assert _body(trace)[2:] == [(150, "effect", "capture", "cap-2"), (150, "effect", "capture", "cap-2")]
    assert [r.get("new_effect") for r in trace[3:5]] == [True, False]  # the capture, then its replay


def test_at_the_chargeback_tick_an_effect_on_the_other_order_comes_before_the_reverse():
    task = _task()
    trace = build_trace(task, [original_capture(task)], [], [], _outcome(chargeback=V), [(500, "ship")])
    assert _body(trace) == [(C.AUTH_AT, "authorize", None, None), (C.CAPTURE_AT, "effect", "capture", "cap-1"),
                            (500, "effect", "ship", "other-ship-1"), (500, "reverse", "chargeback", "cap-1")]


def test_at_the_chargeback_tick_the_clerks_refund_comes_before_the_reverse():
    task = _task()
    trace = build_trace(task, [original_capture(task)], [], [(500, "refund", V, "human")],
                        _outcome(refunded=V, chargeback=V), [])
    assert _body(trace)[2:] == [(500, "effect", "refund", "refund-1"), (500, "reverse", "chargeback", "cap-1")]


# --- edges ----------------------------------------------------------------------------------------------

def test_a_capture_settling_exactly_at_the_horizon_moved_money():
    task = _task(chargeback_at=C.HORIZON)
    last = Capture("cap-2", "key-2", V, C.HORIZON - 100, C.HORIZON, "settled")  # settles at HORIZON itself
    trace = build_trace(task, [original_capture(task), last], [], [], _outcome(chargeback=V), [])
    assert [(r["receipt"], r["new_effect"]) for r in trace if r.get("op") == "capture"] == [
        ("cap-1", True), ("cap-2", True)]
    # the dispute reverses it too, at the horizon
    assert [(r["t"], r["receipt"]) for r in trace if r["kind"] == "reverse"] == [(C.HORIZON, "cap-1"),
                                                                              (C.HORIZON, "cap-2")]
    assert trace[-1] == {"kind": "summary", "net_amount": 2 * V - V}


def test_a_chargeback_under_a_dollar_still_reverses_the_receipts():
    task = _task()
    trace = build_trace(task, [original_capture(task)], [], [], _outcome(chargeback=0.5), [])
    assert [(r["t"], r["receipt"]) for r in trace if r["kind"] == "reverse"] == [(500, "cap-1")]
    assert trace[-1] == {"kind": "summary", "net_amount": 79.5}


def test_no_chargeback_no_reverse():
    task = _task()
    trace = build_trace(task, [original_capture(task)], [], [], _outcome(), [])
    assert [r["kind"] for r in trace] == ["log_meta", "authorize", "effect", "summary"]
    assert trace[0] == {"kind": "log_meta", "complete": True, "last_seq": 2}


def test_a_disposition_amount_and_the_net_amount_are_rounded_to_cents():
    task = _task()
    # a refund of a third of the order: 26.666..., in cents 26.67; what is left, 53.333..., is 53.33
    third = V / 3
    trace = build_trace(task, [original_capture(task)], [], [(250, "refund", third, "agent")],
                        _outcome(refunded=third), [])
    refund = next(r for r in trace if r.get("op") == "refund")
    assert refund["amount"] == 26.67 and isinstance(refund["amount"], float)
    assert trace[-1] == {"kind": "summary", "net_amount": 53.33}


def test_each_disposition_and_each_effect_on_the_other_order_is_numbered_from_one():
    task = _task()
    moves = [(310, "ship", V, "human"), (400, "refund", 5.0, "human")]
    trace = build_trace(task, [original_capture(task)], [], moves, _outcome(refunded=5.0),
                        [(130, "refund"), (140, "capture")])
    assert [r["receipt"] for r in trace if r["kind"] == "effect"] == [
        "cap-1", "other-refund-1", "other-capture-2", "ship-1", "refund-2"]
    assert [r["seq"] for r in trace[1:-1]] == [1, 2, 3, 4, 5, 6]


def test_a_chargeback_reverses_only_the_captures_that_moved_money():
    task = _task(retry_outcome="failed")
    failed = agent_capture(task, 2, "key-2", 150)  # fails at 250
    late = Capture("cap-3", "key-3", V, C.HORIZON - 10, C.HORIZON + 1, "settled")  # settles after the horizon
    trace = build_trace(task, [original_capture(task), failed, late], [], [], _outcome(chargeback=V), [])
    assert [(r["t"], r["receipt"]) for r in trace if r["kind"] == "reverse"] == [(500, "cap-1")]
    assert trace[-1] == {"kind": "summary", "net_amount": 0.0}


def test_episode_inputs_carry_the_agent_s_own_ship_as_a_disposition():
    """An episode that ends with the agent's ship hands build_trace that ship, at its tick, by the agent."""
    from finbench.sim.env import FinalityEnv
    from finbench.sim.trace import episode_inputs

    task = fb.make_corpus(n_tasks=30).tasks[0]
    env = FinalityEnv(task, 0)
    order = env.reset()["order_id"]
    env.step("wait", order_id=order, ticks=10)
    env.step("ship", order_id=order)
    moves = episode_inputs(env, env.outcome())[3]
    assert moves == [(env.disposition_t, "ship", task.order_value, "agent")] and env.disposition_t >= 10
