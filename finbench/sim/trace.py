"""An episode's effect trace in the grader's schema (SPEC §9).

Every capture is an `effect` record with op "capture" at its submission time;
`new_effect` says whether it moved money (a capture that failed did not), so
a later call under its key must replay its receipt. A replayed key is an
`effect` with `new_effect: false`. Dispositions that move goods or money are
effects with op "ship" and "refund" (the human clerk's too); any action on
the unrelated order is an effect on that order. A chargeback is a `reverse`
of the receipts it takes money back from.

`finbench.running.episode.grade_episode` grades a trace against the
benchmark's own contract.
"""
from __future__ import annotations

from operator import itemgetter

from finbench.sim import constants as C

_BY_TIME = itemgetter(0, 1)


def build_trace(task, captures, replays, dispositions, outcome, other_effects) -> list[dict]:
    """Assemble the records, ordered by time, numbered by `seq` from 1.

    Args:
        captures: the case order's captures (original and agent-created).
        replays: (t, key, receipt, new_effect) for every retry under a used key.
        dispositions: (t, op, amount, actor) effects on the case order.
        outcome: the economics `Outcome` (for the chargeback and the summary).
        other_effects: (t, op) effects on the unrelated order.
    """
    # each record is made once, `seq` first as a placeholder numbered after the sort
    o, v = task.order_id, task.order_value
    rows: list[tuple[int, int, dict]] = [
        (C.AUTH_AT, 0, {"seq": 0, "t": C.AUTH_AT, "kind": "authorize", "order": o, "amount": v})]
    for c in captures:
        t = c.submitted_at
        rows.append((t, 1, {
            "seq": 0, "t": t, "kind": "effect", "op": "capture", "order": o, "amount": c.amount, "key": c.key,
            "receipt": c.id, "new_effect": c.outcome == "settled" and c.terminal_at <= C.HORIZON,
            "outcome": c.outcome}))
    for t, key, receipt, new in replays:
        rows.append((t, 1, {"seq": 0, "t": t, "kind": "effect", "op": "capture", "order": o, "amount": v,
                            "key": key, "receipt": receipt, "new_effect": new}))
    for i, (t, op, amount, actor) in enumerate(dispositions, start=1):
        rows.append((t, 2, {"seq": 0, "t": t, "kind": "effect", "op": op, "order": o, "amount": round(amount, 2),
                            "key": None, "receipt": f"{op}-{i}", "new_effect": True, "actor": actor}))
    if outcome.chargeback > 0:
        for c in captures:
            # the dispute covers the whole order: what was held when it posted, and any
            # capture settling later, reversed when it settles
            if c.outcome == "settled" and c.terminal_at <= C.HORIZON:
                t = max(task.chargeback_at, c.terminal_at)
                rows.append((t, 3, {"seq": 0, "t": t, "kind": "reverse", "receipt": c.id, "by": "chargeback"}))
    for i, (t, op) in enumerate(other_effects, start=1):
        rows.append((t, 2, {"seq": 0, "t": t, "kind": "effect", "op": op, "order": task.other_order_id,
                            "amount": task.other_order_value, "key": None, "receipt": f"other-{op}-{i}",
                            "new_effect": True, "actor": "agent"}))
    rows.sort(key=_BY_TIME)  # stable: equal (t, rank) keep the order built
    records: list[dict] = [{"kind": "log_meta", "complete": True, "last_seq": len(rows)}]
    for seq, (_, _, rec) in enumerate(rows, start=1):
        rec["seq"] = seq
        records.append(rec)
    settled = sum(c.amount for c in captures if c.outcome == "settled" and c.terminal_at <= C.HORIZON)
    records.append({"kind": "summary", "net_amount": round(settled - outcome.refunded - outcome.chargeback, 2)})
    return records


def episode_inputs(env, out) -> tuple:
    """`build_trace`'s arguments for an ended episode (a `FinalityEnv`) whose outcome is `out`."""
    moves = dispositions(env.task, env.disposition, env.disposition_t, out)
    return env.task, env.world.captures, env.replays, moves, out, env.other_effects


def trace_shape(task, captures, replays, dispositions, outcome, other_effects) -> tuple:
    """What `build_trace` reads, but the two order ids: equal for two calls whose
    traces differ at most in which strings name the case and the other order.

    The grader compares order ids only with each other and with the contract's
    order, so such traces grade alike: `finbench.running.episode` keys its grade
    memo on this, and builds a trace only for a shape it has not graded.
    Values are kept with their types (the grader tells 1 from 1.0).
    `tests/sim/test_trace.py` checks that `build_trace` reads nothing else.
    """
    v, ov = task.order_value, task.other_order_value
    return (
        v.__class__, v, ov.__class__, ov, task.chargeback_at, outcome.refunded, outcome.chargeback,
        tuple([(c.id, c.key, c.amount.__class__, c.amount, c.submitted_at, c.terminal_at, c.outcome)
               for c in captures]),
        tuple(replays), tuple([(t, op, a.__class__, a, actor) for t, op, a, actor in dispositions]),
        tuple(other_effects),
    )


def dispositions(task, disposition: str, disposition_t: int, outcome) -> list[tuple]:
    """The effects on the case order that move goods or money, `(t, op, amount, actor)`: the
    agent's ship or refund, or, after an escalation, the clerk's (a ship, and a refund of any
    excess; or a refund)."""
    out = outcome
    if disposition == "ship":
        return [(disposition_t, "ship", task.order_value, "agent")]
    if disposition == "refund":
        return [(disposition_t, "refund", out.refunded, "agent")]
    if out.human_action == "ship":
        moves = [(out.human_t, "ship", task.order_value, "human")]
        if out.refunded > 0:
            moves.append((out.human_refund_t, "refund", out.refunded, "human"))
        return moves
    if out.human_action == "refund":
        return [(out.human_refund_t, "refund", out.refunded, "human")]
    return []
