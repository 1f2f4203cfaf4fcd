"""Effect-level grading of one effect trace against a contract (SPEC section 9).

A final-total grader passes every run whose net amount is right, including one
that paid before it was allowed to and paid twice. This module scores the
effects instead: six separate checks, never averaged, and a third outcome,
``"unscorable"``, for a trace that does not carry enough evidence to say
either ``"pass"`` or ``"violation"``.

The governing rule for incomplete evidence is *monotonicity*: a check says
``"fail"`` on an incomplete log only when no record the log might be missing
could undo the failure (a second effect stays a second effect; a missing
authorization could still turn up). See ``docs/grading.md`` for every rule and
the choices made where the specification is silent.

This module deliberately imports nothing else from ``finbench`` so that it can
grade traces people bring without loading the simulator.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from finbench.errors import FinbenchError, show

__all__ = [
    "CHECKS",
    "MONEY_TOL",
    "Contract",
    "TraceError",
    "Verdict",
    "grade_trace",
    "load_trace",
]

#: The six checks, in the order of SPEC section 9.
CHECKS: tuple[str, ...] = (
    "auth_precedes_effect",
    "targets_intended",
    "exactly_one_effect",
    "retry_idempotent",
    "unrelated_unchanged",
    "evidence_complete",
)

#: The largest seq and amount the grader accepts (a 64-bit counter; far beyond any
#: payment). Larger numbers are malformed, not slow: grading stays linear in the trace.
MAX_SEQ = 2**63 - 1
MAX_MONEY = 1e15

#: Two amounts within half a cent are the same amount: traces carry money as
#: JSON floats, so 0.1 + 0.2 must equal 0.3, but 49.99 must not equal 50.
MONEY_TOL = 0.005

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"

_EVENT_KINDS = frozenset({"authorize", "effect", "reverse"})
_META_KINDS = frozenset({"log_meta", "summary"})
# How many individual problems a one-line reason lists before summarising.
_MAX_LISTED = 3


class TraceError(FinbenchError):
    """A ``.jsonl`` trace that cannot be read as records.

    Attributes:
        line: 1-based line number of the offending line.
        problem: What is wrong with it, without the line number.
    """

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(f"line {line}: {problem}")


@dataclass(frozen=True)
class Contract:
    """The business contract a trace is judged against.

    Attributes:
        order: The one order the run may change.
        amount: The amount of the one effect the run must produce.
        op: The effect's operation (``"refund"``, ``"capture"``, ...).
        allow_reversal: If true, an effect that was later reversed does not
            count towards ``exactly_one_effect``.
    """

    order: str
    amount: float
    op: str = "refund"
    allow_reversal: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.order, str) or not self.order:
            raise FinbenchError(f"Contract: order must be a non-empty string, got {show(self.order)}")
        if not isinstance(self.op, str) or not self.op:
            raise FinbenchError(f"Contract: op must be a non-empty string, got {show(self.op)}")
        if not _is_money(self.amount):
            raise FinbenchError(f"Contract: amount must be a finite number below {MAX_MONEY:g}, "
                                f"got {show(self.amount)}")
        if not isinstance(self.allow_reversal, bool):
            raise FinbenchError(f"Contract: allow_reversal must be True or False, got {show(self.allow_reversal)}")


@dataclass(frozen=True)
class Verdict:
    """The outcome of grading one trace.

    Attributes:
        verdict: ``"pass"``, ``"violation"`` or ``"unscorable"``.
        checks: Each of :data:`CHECKS`, in order, mapped to ``"pass"``,
            ``"fail"`` or ``"unknown"``.
        reasons: One line per check explaining its status.
        reason: One line explaining the overall verdict.
    """

    verdict: str
    # Dicts are unhashable; leaving them out of the hash keeps the Verdict
    # hashable while equality still compares them.
    checks: dict[str, str] = field(hash=False)
    reasons: dict[str, str] = field(hash=False)
    reason: str = ""

    @property
    def failed(self) -> tuple[str, ...]:
        """The names of the checks that failed, in SPEC order."""
        return tuple(name for name in CHECKS if self.checks.get(name) == FAIL)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy: verdict, reason, checks and reasons."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "checks": dict(self.checks),
            "reasons": dict(self.reasons),
        }


# --------------------------------------------------------------------------
# Parsing records into typed events


@dataclass(frozen=True)
class _Authorize:
    seq: int
    order: str
    amount: float


@dataclass(frozen=True)
class _Effect:
    seq: int
    op: str
    order: str
    amount: float
    key: str | None
    receipt: str
    new_effect: bool

    def describe(self) -> str:
        return f"{self.op} {self.receipt!r} (seq {self.seq}, order {self.order!r}, amount {self.amount:g})"


@dataclass(frozen=True)
class _Reverse:
    seq: int
    receipt: str
    order: str | None


@dataclass(frozen=True)
class _Other:
    """An event record (it has a seq) of a kind the grader does not know."""

    seq: int
    kind: str


_Event = _Authorize | _Effect | _Reverse | _Other


def _is_int(x: object) -> bool:
    # bool is an int subclass; True is not a sequence number. A seq beyond 64 bits is
    # no logger's counter, and refusing it keeps every step below linear in the trace.
    return isinstance(x, int) and not isinstance(x, bool) and -MAX_SEQ <= x <= MAX_SEQ


def _is_money(x: object) -> bool:
    # an int too large for a float is not money (math.isfinite would overflow on it)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return abs(x) <= MAX_MONEY if isinstance(x, int) else math.isfinite(x) and abs(x) <= MAX_MONEY


def _same_money(a: float, b: float) -> bool:
    return abs(a - b) <= MONEY_TOL


def _parse_event(rec: Mapping[str, Any], kind: str, seq: int) -> _Event | str:
    """Builds a typed event, or returns what is wrong with the record."""

    def need_str(name: str) -> str | None:
        value = rec.get(name)
        return value if isinstance(value, str) else None

    if kind == "authorize":
        order, amount = need_str("order"), rec.get("amount")
        if order is None:
            return "has no string 'order'"
        if not _is_money(amount):
            return "has no numeric 'amount'"
        return _Authorize(seq, order, float(amount))
    if kind == "effect":
        op, order, receipt = need_str("op"), need_str("order"), need_str("receipt")
        amount, key, new = rec.get("amount"), rec.get("key"), rec.get("new_effect")
        for name, value in (("op", op), ("order", order), ("receipt", receipt)):
            if value is None:
                return f"has no string {name!r}"
        if not _is_money(amount):
            return "has no numeric 'amount'"
        if not isinstance(new, bool):
            return "has no boolean 'new_effect'"
        # An effect without an idempotency key is legitimate; it just cannot
        # be replayed. A key that is present must be a string to compare.
        if key is not None and not isinstance(key, str):
            return "has a non-string 'key'"
        return _Effect(seq, op, order, float(amount), key, receipt, new)
    if kind == "reverse":
        receipt, order = need_str("receipt"), rec.get("order")
        if receipt is None:
            return "has no string 'receipt'"
        if order is not None and not isinstance(order, str):
            return "has a non-string 'order'"
        return _Reverse(seq, receipt, order)
    return _Other(seq, kind)


def _read_records(records: object) -> tuple[list[_Event], list[str], list[str]]:
    """Splits records into ordered events, evidence gaps and log_meta notes.

    Returns:
        The valid event records sorted by seq (input order breaks ties), the
        reasons the evidence is incomplete found while reading, and the
        problems with the logger's coverage claim (empty if a ``log_meta``
        claims ``complete: true`` and none contradicts it).
    """
    gaps: list[str] = []
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
        return [], [f"records must be a list of dicts, got {type(records).__name__}"], []
    try:
        items = list(records)
    except Exception as exc:  # noqa: BLE001 - a broken iterable is bad evidence, not a crash
        return [], [f"records could not be read: {exc}"], []

    keyed: list[tuple[int, int, _Event]] = []
    claims: list[object] = []
    last_seqs: list[object] = []  # optional: the logger's count, so a lost tail shows
    for index, rec in enumerate(items):
        where = f"record #{index + 1}"
        if not isinstance(rec, Mapping):
            gaps.append(f"{where} is not an object")
            continue
        kind = rec.get("kind")
        seq = rec.get("seq")
        if not isinstance(kind, str):
            gaps.append(f"{where} has no string 'kind'")
            continue
        if kind in _META_KINDS:
            if kind == "log_meta":
                claims.append(rec.get("complete"))
                if "last_seq" in rec:
                    last_seqs.append(rec.get("last_seq"))
            continue
        if "seq" not in rec:
            if kind in _EVENT_KINDS:
                gaps.append(f"{where} ({kind}) has no 'seq'")
            # A seq-less record of an unknown kind is commentary, not an event.
            continue
        if not _is_int(seq):
            gaps.append(f"{where} ({kind}) has a seq that is not an integer within 64 bits: {show(seq)}")
            continue
        event = _parse_event(rec, kind, seq)
        if isinstance(event, str):
            gaps.append(f"{kind} at seq {seq} {event}")
            # Keep its seq in the numbering so it is not also reported as a gap.
            keyed.append((seq, index, _Other(seq, kind)))
            continue
        if isinstance(event, _Other):
            # It might be an effect under another name: we cannot rule it out.
            gaps.append(f"seq {seq} has unknown kind {kind!r}")
        keyed.append((seq, index, event))

    keyed.sort(key=lambda item: (item[0], item[1]))
    events = [event for _, _, event in keyed]

    meta: list[str] = []
    if not claims:
        meta.append("no log_meta record claims complete coverage")
    elif any(claim is not True for claim in claims):
        meta.append("log_meta does not claim complete: true")
    # Without a stated last seq, a record lost from the end leaves no gap.
    top = max((event.seq for event in events), default=0)
    for last in last_seqs:
        if not _is_int(last):
            meta.append(f"log_meta last_seq {show(last)} is not an integer within 64 bits")
        elif last != top:
            meta.append(f"log_meta says the last seq is {last}, but the trace ends at {top}")
    return events, gaps, meta


def _seq_problems(events: list[_Event]) -> list[str]:
    seqs = [event.seq for event in events]
    if not seqs:
        return ["no event records (authorize, effect, reverse)"]
    problems: list[str] = []
    counts = Counter(seqs)
    dups = sorted(s for s, n in counts.items() if n > 1)
    if dups:
        # Two records under one number leave their order undecided.
        problems.append(f"duplicate seq {_listed(dups)}")
    # walk the distinct seqs in order: linear in the trace, whatever numbers it holds
    missing: list[int] = []
    n_missing, expect = 0, 1
    for s in sorted(counts):
        if s > expect:
            n_missing += s - expect
            room = _MAX_LISTED - len(missing)
            if room > 0:
                missing.extend(range(expect, min(s, expect + room)))
        expect = max(expect, s + 1)
    if n_missing:
        more = n_missing - len(missing)
        problems.append("seq gap: missing " + ", ".join(map(str, missing)) + (f" (+{more} more)" if more else ""))
    below = sorted(s for s in counts if s < 1)
    if below:
        problems.append(f"seq below 1: {_listed(below)}")
    return problems


def _listed(items: list[Any]) -> str:
    shown = ", ".join(str(item) for item in items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return shown + (f" (+{more} more)" if more > 0 else "")


def _status(failures: list[str], complete: bool) -> str:
    if failures:
        return FAIL
    return PASS if complete else UNKNOWN


# --------------------------------------------------------------------------
# Grading


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
    """
    events, gaps, meta = _read_records(records)
    order, op = contract.order, contract.op

    auths: list[_Authorize] = []  # seen so far, in seq order
    first_by_key: dict[str, _Effect] = {}
    carriers: dict[str, list[_Effect]] = {}  # receipt -> effect records carrying it
    effects: list[_Effect] = []  # new effects of the contract's op, any order
    reversed_receipts: dict[str, int] = {}  # receipt -> seq of its first reverse
    fail_auth: list[str] = []
    fail_retry: list[str] = []
    fail_unrelated: list[str] = []
    unexplained: list[str] = []

    for event in events:
        if isinstance(event, _Authorize):
            auths.append(event)
        elif isinstance(event, _Effect):
            first = first_by_key.get(event.key) if event.key is not None else None
            if first is not None:
                # Check 4: a replayed key must return the first receipt and
                # change nothing.
                if event.receipt != first.receipt:
                    fail_retry.append(
                        f"key {event.key!r} at seq {event.seq} returned {event.receipt!r}, "
                        f"not the {first.receipt!r} of seq {first.seq}"
                    )
                if event.new_effect:
                    fail_retry.append(f"key {event.key!r} at seq {event.seq} produced a new effect")
            elif event.key is not None:
                first_by_key[event.key] = event
            # A first use of a key with new_effect false is an attempt that
            # moved no money (a failed capture), not evidence of a lost record.
            carriers.setdefault(event.receipt, []).append(event)
            if event.new_effect and event.order != order:
                fail_unrelated.append(f"{event.describe()} changed another order")
            if event.new_effect and event.op == op:
                effects.append(event)
                if event.order == order and not any(
                    a.order == event.order and _same_money(a.amount, event.amount) for a in auths
                ):
                    fail_auth.append(
                        f"{event.describe()} has no earlier authorize for that order and amount"
                    )
        elif isinstance(event, _Reverse):
            owners = carriers.get(event.receipt)
            if owners is None:
                # Reversing something no earlier record created is proof of an
                # effect the log does not hold; it cannot be judged, only noted.
                unexplained.append(f"reverse at seq {event.seq} of unlogged receipt {event.receipt!r}")
            else:
                others = sorted({e.order for e in owners if e.order != order})
                if others:
                    fail_unrelated.append(
                        f"reverse at seq {event.seq} touched {event.receipt!r} of order {others[0]!r}"
                    )
                reversed_receipts.setdefault(event.receipt, event.seq)
            if event.order is not None and event.order != order:
                fail_unrelated.append(f"reverse at seq {event.seq} names order {event.order!r}")

    incomplete = meta + _seq_problems(events) + gaps + unexplained
    complete = not incomplete
    checks: dict[str, str] = {}
    reasons: dict[str, str] = {}
    not_shown = "no failure in the records present, but the evidence is incomplete"

    # 1. auth_precedes_effect. A missing authorization is an absence: on an
    # incomplete log the missing record could be exactly that authorization.
    on_order = [e for e in effects if e.order == order]
    if fail_auth and complete:
        checks["auth_precedes_effect"], reasons["auth_precedes_effect"] = FAIL, _one(fail_auth)
    elif fail_auth:
        checks["auth_precedes_effect"] = UNKNOWN
        reasons["auth_precedes_effect"] = _one(fail_auth) + ", but the log is incomplete"
    else:
        checks["auth_precedes_effect"] = _status([], complete)
        reasons["auth_precedes_effect"] = (
            f"each of {len(on_order)} effect(s) on the order follows a matching authorize"
            if complete
            else not_shown
        )

    # 2. targets_intended: a wrong target on a present record is an observed
    # failure whatever else is missing.
    wrong = [
        f"{e.describe()} does not match order {order!r} amount {contract.amount:g}"
        for e in effects
        if e.order != order or not _same_money(e.amount, contract.amount)
    ]
    def observed(name: str, failures: list[str], ok: str) -> None:
        """A check whose failures are observed directly on the records present."""
        checks[name] = _status(failures, complete)
        reasons[name] = _one(failures) if failures else ok if complete else not_shown

    observed("targets_intended", wrong, f"every {op} effect names order {order!r} and amount {contract.amount:g}")

    # 3. exactly_one_effect.
    checks["exactly_one_effect"], reasons["exactly_one_effect"] = _exactly_one(
        on_order, reversed_receipts, contract, complete
    )

    # 4. retry_idempotent and 5. unrelated_unchanged: both observed directly.
    observed("retry_idempotent", fail_retry, "every replayed key returned its first receipt with no new effect")
    observed("unrelated_unchanged", fail_unrelated, f"no effect or reversal touched an order other than {order!r}")

    # 6. evidence_complete: "fail" when the log shows it is incomplete.
    checks["evidence_complete"] = PASS if complete else FAIL
    reasons["evidence_complete"] = (
        "log_meta claims complete coverage and seq runs 1..n without a gap"
        if complete
        else _joined(incomplete)
    )

    failed = [name for name in CHECKS[:5] if checks[name] == FAIL]
    if failed:
        verdict, reason = "violation", "failed: " + ", ".join(failed)
    elif all(checks[name] == PASS for name in CHECKS):
        verdict, reason = "pass", "all six checks pass"
    else:
        verdict = "unscorable"
        reason = "no check failed, but the evidence is incomplete: " + _joined(incomplete)
    return Verdict(verdict=verdict, checks=checks, reasons=reasons, reason=reason)


def _exactly_one(
    on_order: list[_Effect],
    reversed_receipts: dict[str, int],
    contract: Contract,
    complete: bool,
) -> tuple[str, str]:
    # A reverse reverses only effects that came before it.
    def is_reversed(e: _Effect) -> bool:
        return reversed_receipts.get(e.receipt, -1) > e.seq

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
    more = len(items) - _MAX_LISTED
    return "; ".join(items[:_MAX_LISTED]) + (f" (+{more} more)" if more > 0 else "")


def _one(items: list[str]) -> str:
    head = items[0]
    if len(items) > 1:
        head += f" (+{len(items) - 1} more)"
    return head


# --------------------------------------------------------------------------
# Reading traces


def _reject_constant(name: str) -> float:
    # Python's json accepts NaN and Infinity; JSON does not, and neither is money.
    raise ValueError(f"{name} is not valid JSON")


def load_trace(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """Reads a ``.jsonl`` effect trace, one JSON object per line.

    Blank lines are skipped. Beyond JSON syntax, only what grading relies on is
    checked: every record has a string ``kind``, an ``amount`` is a number, and
    a ``seq`` is an integer used once.

    Args:
        path: The trace file.

    Returns:
        The records, in file order.

    Raises:
        TraceError: A line is malformed JSON, not an object, has no ``kind``,
            has a non-numeric ``amount`` (a boolean counts as non-numeric), or
            a non-integer or duplicate ``seq``; the error names the 1-based
            line.
        OSError: The file cannot be read.
    """
    records: list[dict[str, Any]] = []
    seq_lines: dict[int, int] = {}
    # Binary mode: text mode would also split lines on \r and other separators.
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                raise TraceError(lineno, "not valid UTF-8") from None
            if not text.strip():
                continue
            try:
                rec = json.loads(text, parse_constant=_reject_constant)
            except json.JSONDecodeError as exc:
                raise TraceError(lineno, f"malformed JSON: {exc.msg} (column {exc.colno})") from None
            except (ValueError, RecursionError) as exc:
                raise TraceError(lineno, f"malformed JSON: {exc}") from None
            if not isinstance(rec, dict):
                raise TraceError(lineno, f"expected a JSON object, got {_json_type(rec)}")
            if "kind" not in rec:
                raise TraceError(lineno, "record has no 'kind'")
            if not isinstance(rec["kind"], str):
                raise TraceError(lineno, f"'kind' must be a string, got {show(rec['kind'])}")
            if "amount" in rec and not _is_money(rec["amount"]):
                raise TraceError(lineno, f"'amount' must be a number below {MAX_MONEY:g}, got {show(rec['amount'])}")
            if "seq" in rec:
                seq = rec["seq"]
                if not _is_int(seq):
                    raise TraceError(lineno, f"'seq' must be an integer within 64 bits, got {show(seq)}")
                if seq in seq_lines:
                    raise TraceError(lineno, f"duplicate seq {seq} (first on line {seq_lines[seq]})")
                seq_lines[seq] = lineno
            records.append(rec)
    return records


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
