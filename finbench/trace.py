"""An episode's effect trace in the grader's schema (SPEC §9).

Every capture is an `effect` record with op "capture" at its submission time;
`new_effect` says whether it moved money (a capture that failed did not), so
a later call under its key must replay its receipt. A replayed key is an
`effect` with `new_effect: false`. Dispositions that move goods or money are
effects with op "ship" and "refund" (the human clerk's too); any action on
the unrelated order is an effect on that order. A chargeback is a `reverse`
of the receipts it takes money back from.
"""
from __future__ import annotations

from finbench import constants as C


def build_trace(task, captures, replays, dispositions, outcome, other_effects) -> list[dict]:
    """Assemble the records, ordered by time, numbered by `seq` from 1.

    Args:
        captures: the case order's captures (original and agent-created).
        replays: (t, key, receipt, new_effect) for every retry under a used key.
        dispositions: (t, op, amount, actor) effects on the case order.
        outcome: the economics `Outcome` (for the chargeback and the summary).
        other_effects: (t, op) effects on the unrelated order.
    """
    o, v = task.order_id, task.order_value
    rows: list[tuple[int, int, dict]] = [(C.AUTH_AT, 0, {"kind": "authorize", "order": o, "amount": v})]
    for c in captures:
        rows.append((c.submitted_at, 1, {
            "kind": "effect", "op": "capture", "order": o, "amount": c.amount, "key": c.key,
            "receipt": c.id, "new_effect": c.outcome == "settled" and c.terminal_at <= C.HORIZON,
            "outcome": c.outcome}))
    for t, key, receipt, new in replays:
        rows.append((t, 1, {"kind": "effect", "op": "capture", "order": o, "amount": v, "key": key,
                            "receipt": receipt, "new_effect": new}))
    for i, (t, op, amount, actor) in enumerate(dispositions, start=1):
        rows.append((t, 2, {"kind": "effect", "op": op, "order": o, "amount": round(amount, 2),
                            "key": None, "receipt": f"{op}-{i}", "new_effect": True, "actor": actor}))
    if outcome.chargeback > 0:
        for c in captures:
            # only what was held when it landed: a capture settling later stays held
            if c.outcome == "settled" and c.terminal_at <= task.chargeback_at:
                rows.append((task.chargeback_at, 3, {"kind": "reverse", "receipt": c.id, "by": "chargeback"}))
    for i, (t, op) in enumerate(other_effects, start=1):
        rows.append((t, 2, {"kind": "effect", "op": op, "order": task.other_order_id,
                            "amount": task.other_order_value, "key": None, "receipt": f"other-{op}-{i}",
                            "new_effect": True, "actor": "agent"}))
    rows.sort(key=lambda r: (r[0], r[1]))
    records: list[dict] = [{"kind": "log_meta", "complete": True, "last_seq": len(rows)}]
    for seq, (t, _, rec) in enumerate(rows, start=1):
        records.append({"seq": seq, "t": t, **rec})
    settled = sum(c.amount for c in captures if c.outcome == "settled" and c.terminal_at <= C.HORIZON)
    records.append({"kind": "summary", "net_amount": round(settled - outcome.refunded - outcome.chargeback, 2)})
    return records
