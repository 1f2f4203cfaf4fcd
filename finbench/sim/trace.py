"""An episode's effect trace in the grader's schema (SPEC §9).

Every capture is an `effect` record with op "capture" at its submission time;
`new_effect` says whether it moved money (a capture that failed did not), so
a later call under its key must replay its receipt. A replayed key is an
`effect` with `new_effect: false`. Dispositions that move goods or money are
effects with op "ship" and "refund" (the human clerk's too); any action on
the unrelated order is an effect on that order. A chargeback is a `reverse`
of the receipts it takes money back from.

`grade_episode` grades a trace against the benchmark's own contract, once per
trace shape.
"""
from __future__ import annotations

from itertools import repeat
from operator import itemgetter

from finbench.sim import constants as C
from finbench.grading import CHECKS, Contract, grade_trace

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


# --- grading one episode's trace, memoised --------------------------------------------------

def episode_contract(task) -> Contract:
    """The benchmark's own contract: capture the order value once, after
    authorisation, and touch no other order."""
    return Contract(task.order_id, task.order_value, op="capture")


_MISSING = object()  # a field absent from a record (the grader tells absent from None)
# The fields `grading.grade_trace` (and the capture count) read, by record kind,
# `order` first. It never reads `t`, `outcome`, `actor`, `by` or a summary's amount,
# so traces that differ only in those grade alike; an unknown kind is read for `seq`.
_FIELDS = {
    "authorize": ("order", "seq", "amount"),
    "effect": ("order", "seq", "op", "amount", "key", "receipt", "new_effect"),
    "reverse": ("order", "seq", "receipt"),
    "log_meta": ("complete", "last_seq"),
    "summary": (),
}
_GET = {kind: itemgetter(*f) for kind, f in _FIELDS.items() if len(f) > 1}
_OTHER = ("seq",)
_RENAMED = frozenset({"authorize", "effect", "reverse"})  # the kinds whose `order` is read
_MEMO: dict = {}
_MEMO_SIZE = 1 << 15


def _canonical(task, trace) -> tuple:
    """A key equal for two traces only if the grader must give them the same checks.

    Order ids are only ever compared for equality (with each other and with the
    contract's order), so they are renamed by first appearance, the contract's
    order first: traces of different tasks with the same shape share one key.
    Every value read is kept with its type, since the grader tells True from 1
    and 1 from 1.0 where `==` does not. Raises TypeError for a record that is
    not a plain dict or holds an unhashable value (the caller grades directly).
    """
    orders = {task.order_id: 0}
    out = [task.order_value.__class__, task.order_value]
    for rec in trace:
        if rec.__class__ is not dict:
            raise TypeError("not a plain record")
        kind = rec.get("kind", _MISSING)
        get = _GET.get(kind) if kind.__class__ is str else None
        try:
            vals = get(rec)  # every field present: the usual case
        except (TypeError, KeyError):  # no getter, or a field missing
            fields = (_FIELDS.get(kind, _OTHER) if isinstance(kind, str) else ())
            vals = tuple(map(rec.get, fields, repeat(_MISSING)))
        types = tuple(map(type, vals))
        if kind in _RENAMED and types[0] is str:  # renamed; its type (str) stays in the key
            vals = (orders.setdefault(vals[0], len(orders)),) + vals[1:]
        out += (kind.__class__, kind, types, vals)
    return tuple(out)


def grade_episode(task, trace) -> dict:
    """The effect-level verdict of one episode's trace, as row columns.

    Traces of the same shape (what the grader reads: kinds, seq numbers, ops,
    amounts, keys, receipts, flags, and which records name the case order) are
    graded once; most episodes repeat a handful of shapes.

    Args:
        task: The episode's task (its order is the contract's, see `episode_contract`).
        trace: The episode's records, e.g. `EpisodeResult.trace`.

    Returns:
        A fresh dict: `verdict` and `check_<name>` for each of `grading.CHECKS`,
        exactly as `grade_trace(list(trace), episode_contract(task))` gives them,
        and `capture_effects`, the new captures of the case order in the trace.
    """
    try:
        key = _canonical(task, trace)
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable field or an unusual record: no memo
        key = hit = None
    if hit is None:
        hit = _grade(task, trace)
        if key is not None:
            if len(_MEMO) >= _MEMO_SIZE:
                _MEMO.clear()
            _MEMO[key] = hit
    return dict(hit)


def _grade(task, trace) -> dict:
    v = grade_trace(list(trace), episode_contract(task))
    captures = sum(1 for r in trace if r.get("kind") == "effect" and r.get("op") == "capture"
                   and r.get("new_effect") and r.get("order") == task.order_id)
    return {"verdict": v.verdict, "capture_effects": captures, **{f"check_{k}": v.checks[k] for k in CHECKS}}


def clear_memo() -> None:
    """Forget memoised grades (benchmarks measure grading from cold)."""
    _MEMO.clear()
