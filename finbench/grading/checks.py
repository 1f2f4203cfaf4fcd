"""The six checks of one trace against a contract, and the verdict they give (SPEC section 9)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from finbench.errors import FinbenchError, show
from finbench.grading.contract import CHECKS, FAIL, MAX_LISTED, MONEY_TOL, PASS, UNKNOWN, Contract, Verdict, same_money
from finbench.grading.records import Authorize, Effect, Event, Reverse, read_records, seq_problems


@dataclass
class _Evidence:
    """What one pass over a trace's events found, check by check."""

    effects: list[Effect] = field(default_factory=list)  # new effects of the contract's op, any order
    reversed_receipts: dict[str, int] = field(default_factory=dict)  # receipt -> seq of its first reverse
    fail_auth: list[str] = field(default_factory=list)
    fail_retry: list[str] = field(default_factory=list)
    fail_unrelated: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)


def _walk(events: list[Event], contract: Contract) -> _Evidence:
    """One pass over the events in seq order, collecting each check's failures."""
    order, op = contract.order, contract.op
    ev = _Evidence()
    auths: dict[tuple[str, int], list[float]] = {}  # (order, amount bucket) -> [least, greatest] amount seen
    first_by_key: dict[str, Effect] = {}
    carriers: dict[str, str | None] = {}  # receipt -> the least other order among the effects carrying it
    for event in events:
        if isinstance(event, Authorize):
            span = auths.setdefault((event.order, _bucket(event.amount)), [event.amount, event.amount])
            span[0], span[1] = min(span[0], event.amount), max(span[1], event.amount)
        elif isinstance(event, Effect):
            first = first_by_key.get(event.key) if event.key is not None else None
            if first is not None:
                # Check 4: a replayed key must return the first receipt and change nothing.
                if event.receipt != first.receipt:
                    ev.fail_retry.append(f"key {event.key!r} at seq {event.seq} returned {event.receipt!r}, "
                                         f"not the {first.receipt!r} of seq {first.seq}")
                if event.new_effect:
                    ev.fail_retry.append(f"key {event.key!r} at seq {event.seq} produced a new effect")
            elif event.key is not None:
                first_by_key[event.key] = event
            # A first use of a key with new_effect false is an attempt that
            # moved no money (a failed capture), not evidence of a lost record.
            # kept as the one order a reverse names, so a reverse costs O(1) however many records share it
            if event.order == order:
                carriers.setdefault(event.receipt, None)
            else:
                held = carriers.get(event.receipt)
                if held is None or event.order < held:
                    carriers[event.receipt] = event.order
            if event.new_effect and event.order != order:
                ev.fail_unrelated.append(f"{event.describe()} changed another order")
            if event.new_effect and event.op == op:
                ev.effects.append(event)
                if event.order == order and not _authorized(auths, event):
                    ev.fail_auth.append(f"{event.describe()} has no earlier authorize for that order and amount")
        elif isinstance(event, Reverse):
            _reverse(event, carriers, order, ev)
    return ev


def _bucket(amount: float) -> int:
    """The amount's bucket, `MONEY_TOL` wide: an amount within the tolerance of another lies in
    its bucket or a neighbouring one, so finding an authorization takes constant time, not a
    scan of every authorization (a trace of 64k of each stays linear)."""
    return math.floor(amount / MONEY_TOL)


def _authorized(auths: dict[tuple[str, int], list[float]], effect: Effect) -> bool:
    """Whether an authorization seen so far names the effect's order and, within the tolerance, its amount.

    Each bucket keeps its least and greatest amount: the one nearest the effect's amount among
    them is within the tolerance exactly when some authorization in the bucket is (the bucket is
    narrower than the tolerance).
    """
    b = _bucket(effect.amount)
    for key in ((effect.order, b), (effect.order, b - 1), (effect.order, b + 1)):
        span = auths.get(key)
        if span is not None and same_money(effect.amount, min(max(effect.amount, span[0]), span[1])):
            return True
    return False


def _reverse(event: Reverse, carriers: dict[str, str | None], order: str, ev: _Evidence) -> None:
    if event.receipt not in carriers:
        # Reversing something no earlier record created is proof of an
        # effect the log does not hold; it cannot be judged, only noted.
        ev.unexplained.append(f"reverse at seq {event.seq} of unlogged receipt {event.receipt!r}")
    else:
        other = carriers[event.receipt]
        if other is not None:
            ev.fail_unrelated.append(f"reverse at seq {event.seq} touched {event.receipt!r} of order {other!r}")
        ev.reversed_receipts.setdefault(event.receipt, event.seq)
    if event.order is not None and event.order != order:
        ev.fail_unrelated.append(f"reverse at seq {event.seq} names order {event.order!r}")


def grade_trace(records: Iterable[Mapping[str, Any]], contract: Contract) -> Verdict:
    """Grades one effect trace against a contract, check by check.

    Args:
        records: The trace's records (dicts), in any order; event records are
            ordered by their ``seq``. ``log_meta`` and ``summary`` records are
            read for the coverage claim only and are never evidence.
        contract: What the run was supposed to do.

    Returns:
        The :class:`Verdict`: ``"violation"`` if any of checks 1-5 fails,
        ``"pass"`` if all six pass, ``"unscorable"`` otherwise.

    A strange but well-formed input (an empty list, only a summary, unknown
    kinds, records with fields missing, non-dict records) never raises: it
    makes the evidence incomplete, which at worst makes the trace unscorable.

    Example:
        >>> from finbench.grading import Contract, grade_trace
        >>> trace = [{"kind": "log_meta", "complete": True},
        ...          {"seq": 1, "kind": "authorize", "order": "A", "amount": 50},
        ...          {"seq": 2, "kind": "effect", "op": "refund", "order": "A", "amount": 50,
        ...           "key": "K", "receipt": "R1", "new_effect": True}]
        >>> grade_trace(trace, Contract("A", 50)).verdict
        'pass'
    """
    if not isinstance(contract, Contract):
        raise FinbenchError(f"grade_trace: contract must be a Contract(order, amount, op=...), got {show(contract)}")
    events, gaps, meta = read_records(records)
    ev = _walk(events, contract)
    incomplete = meta + seq_problems(events) + gaps + ev.unexplained
    checks, reasons = _checks(ev, contract, incomplete)
    failed = [name for name in CHECKS[:5] if checks[name] == FAIL]
    if failed:
        verdict, reason = "violation", "failed: " + ", ".join(failed)
    elif all(checks[name] == PASS for name in CHECKS):
        verdict, reason = "pass", "all six checks pass"
    else:
        verdict = "unscorable"
        reason = "no check failed, but the evidence is incomplete: " + _joined(incomplete)
    return Verdict(verdict=verdict, checks=checks, reasons=reasons, reason=reason)


def _checks(ev: _Evidence, contract: Contract, incomplete: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Each check's status and one-line reason, from the evidence and what the log lacks."""
    order, op = contract.order, contract.op
    complete = not incomplete
    checks: dict[str, str] = {}
    reasons: dict[str, str] = {}
    not_shown = "no failure in the records present, but the evidence is incomplete"

    # 1. auth_precedes_effect. A missing authorization is an absence: on an
    # incomplete log the missing record could be exactly that authorization.
    on_order = [e for e in ev.effects if e.order == order]
    if ev.fail_auth and complete:
        checks["auth_precedes_effect"], reasons["auth_precedes_effect"] = FAIL, _one(ev.fail_auth)
    elif ev.fail_auth:
        checks["auth_precedes_effect"] = UNKNOWN
        reasons["auth_precedes_effect"] = _one(ev.fail_auth) + ", but the log is incomplete"
    else:
        checks["auth_precedes_effect"] = _status([], complete)
        reasons["auth_precedes_effect"] = (
            f"each of {len(on_order)} effect(s) on the order follows a matching authorize" if complete else not_shown)

    def observed(name: str, failures: list[str], ok: str) -> None:
        """A check whose failures are observed directly on the records present."""
        checks[name] = _status(failures, complete)
        reasons[name] = _one(failures) if failures else ok if complete else not_shown

    # 2. targets_intended: a wrong target on a present record is an observed
    # failure whatever else is missing.
    wrong = [f"{e.describe()} does not match order {order!r} amount {contract.amount:g}"
             for e in ev.effects if e.order != order or not same_money(e.amount, contract.amount)]
    observed("targets_intended", wrong, f"every {op} effect names order {order!r} and amount {contract.amount:g}")
    # 3. exactly_one_effect.
    checks["exactly_one_effect"], reasons["exactly_one_effect"] = _exactly_one(
        on_order, ev.reversed_receipts, contract, complete)
    # 4. retry_idempotent and 5. unrelated_unchanged: both observed directly.
    observed("retry_idempotent", ev.fail_retry, "every replayed key returned its first receipt with no new effect")
    observed("unrelated_unchanged", ev.fail_unrelated, f"no effect or reversal touched an order other than {order!r}")
    # 6. evidence_complete: "fail" when the log shows it is incomplete.
    checks["evidence_complete"] = PASS if complete else FAIL
    reasons["evidence_complete"] = (
        "log_meta claims complete coverage and seq runs 1..n without a gap" if complete else _joined(incomplete))
    return checks, reasons


def _status(failures: list[str], complete: bool) -> str:
    if failures:
        return FAIL
    return PASS if complete else UNKNOWN


def _exactly_one(
    on_order: list[Effect],
    reversed_receipts: dict[str, int],
    contract: Contract,
    complete: bool,
) -> tuple[str, str]:
    # A reverse reverses only effects that came before it.
    def is_reversed(e: Effect) -> bool:
        first = reversed_receipts.get(e.receipt)  # None: no reverse names it (any seq, even one below 1)
        return first is not None and first > e.seq

    total = len(on_order)
    if contract.allow_reversal:
        counted = [e for e in on_order if not is_reversed(e)]
        what = f"{len(counted)} unreversed of {total} {contract.op} effect(s) on order {contract.order!r}"
        # A missing reverse record could still bring two unreversed effects
        # down to one, so "more than one" is only observed on a complete log.
        if len(counted) == 1:
            return (PASS, what) if complete else (UNKNOWN, what + "; the log is incomplete")
        return (FAIL, what) if complete else (UNKNOWN, what + "; the log is incomplete")
    what = f"{total} {contract.op} effect(s) on order {contract.order!r}"
    n_rev = sum(is_reversed(e) for e in on_order)
    if n_rev:
        what += f" ({n_rev} later reversed; reversal is not allowed, so they still count)"
    if total > 1:
        # Missing records can only add effects: two is already too many.
        return FAIL, what
    if total == 1:
        return (PASS, what) if complete else (UNKNOWN, what + "; the log is incomplete")
    # Zero effects is an absence; on an incomplete log the effect may be missing.
    return (FAIL, what) if complete else (UNKNOWN, what + "; the log is incomplete")


def _joined(items: list[str]) -> str:
    more = len(items) - MAX_LISTED
    return "; ".join(items[:MAX_LISTED]) + (f" (+{more} more)" if more > 0 else "")


def _one(items: list[str]) -> str:
    head = items[0]
    if len(items) > 1:
        head += f" (+{len(items) - 1} more)"
    return head
