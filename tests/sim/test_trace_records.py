"""An episode's effect trace record by record (finbench.sim.trace.build_trace; the schema of docs/grading.md):
every field of every record, and the records' order, for hand-made inputs holding each kind of record. The
grader ignores `t` and extra fields, so only a test of the records themselves holds them (mutation testing,
issue 32). Expected records are written from the schema and the module's rules: a capture at its submission
(`new_effect` when it settled by HORIZON), a replay as an effect with `new_effect: false`, each disposition
an effect named `<op>-<n>`, a chargeback a `reverse` of each settled capture at the later of the chargeback
and its settlement, effects on the other order last among equals; ordered by (tick, rank), numbered from 1."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.trace import build_trace
from finbench.sim.world import agent_capture, original_capture

V, OTHER = 80.0, 30.0


def _task():
    task = fb.make_task("late_chargeback", seed=1, determined_at=200, order_value=V)
    return dataclasses.replace(task, chargeback_at=500, retry_outcome="settled", retry_delay=100,
                               other_order_value=OTHER)


def test_every_record_of_a_trace_with_every_kind():
    task = _task()
    o, x = task.order_id, task.other_order_id
    captures = [original_capture(task), agent_capture(task, 2, "key-2", 150)]  # settle at 200 and 250
    replays = [(160, "key-1", "cap-1", False)]
    moves = [(300, "ship", V, "agent")]
    outcome = SimpleNamespace(refunded=0.0, chargeback=2 * V)
    other = [(300, "refund")]  # the same tick as the ship: the case order's effect first (built first)
    assert build_trace(task, captures, replays, moves, outcome, other) == [
        {"kind": "log_meta", "complete": True, "last_seq": 8},
        {"seq": 1, "t": C.AUTH_AT, "kind": "authorize", "order": o, "amount": V},
        {"seq": 2, "t": C.CAPTURE_AT, "kind": "effect", "op": "capture", "order": o, "amount": V, "key": "key-1",
         "receipt": "cap-1", "new_effect": True, "outcome": "settled"},
        {"seq": 3, "t": 150, "kind": "effect", "op": "capture", "order": o, "amount": V, "key": "key-2",
         "receipt": "cap-2", "new_effect": True, "outcome": "settled"},
        {"seq": 4, "t": 160, "kind": "effect", "op": "capture", "order": o, "amount": V, "key": "key-1",
         "receipt": "cap-1", "new_effect": False},
        {"seq": 5, "t": 300, "kind": "effect", "op": "ship", "order": o, "amount": V, "key": None,
         "receipt": "ship-1", "new_effect": True, "actor": "agent"},
        {"seq": 6, "t": 300, "kind": "effect", "op": "refund", "order": x, "amount": OTHER, "key": None,
         "receipt": "other-refund-1", "new_effect": True, "actor": "agent"},
        {"seq": 7, "t": 500, "kind": "reverse", "receipt": "cap-1", "by": "chargeback"},
        {"seq": 8, "t": 500, "kind": "reverse", "receipt": "cap-2", "by": "chargeback"},
        {"kind": "summary", "net_amount": 0.0},
    ]


def test_each_record_lists_its_fields_in_the_schema_order_seq_first():
    task = _task()
    trace = build_trace(task, [original_capture(task)], [], [(300, "ship", V, "agent")],
                        SimpleNamespace(refunded=0.0, chargeback=0.0), [])
    assert [list(r) for r in trace] == [
        ["kind", "complete", "last_seq"],
        ["seq", "t", "kind", "order", "amount"],
        ["seq", "t", "kind", "op", "order", "amount", "key", "receipt", "new_effect", "outcome"],
        ["seq", "t", "kind", "op", "order", "amount", "key", "receipt", "new_effect", "actor"],
        ["kind", "net_amount"],
    ]


def test_a_capture_that_fails_or_settles_after_the_horizon_moved_no_money():
    task = dataclasses.replace(_task(), retry_outcome="failed")
    late = dataclasses.replace(agent_capture(task, 3, "key-3", C.HORIZON - 10), outcome="settled")  # at HORIZON + 90
    trace = build_trace(task, [original_capture(task), agent_capture(task, 2, "key-2", 150), late], [], [],
                        SimpleNamespace(refunded=0.0, chargeback=0.0), [])
    assert [(r["receipt"], r["new_effect"]) for r in trace if r.get("op") == "capture"] == [
        ("cap-1", True), ("cap-2", False), ("cap-3", False)]
    assert trace[-1] == {"kind": "summary", "net_amount": V}


def test_a_reverse_comes_when_the_capture_settles_if_that_is_after_the_chargeback():
    task = _task()
    captures = [original_capture(task), agent_capture(task, 2, "key-2", 450)]  # the second settles at 550
    trace = build_trace(task, captures, [], [], SimpleNamespace(refunded=0.0, chargeback=2 * V), [])
    assert [(r["t"], r["receipt"]) for r in trace if r.get("kind") == "reverse"] == [(500, "cap-1"), (550, "cap-2")]
