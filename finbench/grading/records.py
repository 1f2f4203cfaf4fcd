"""Reading effect traces: records into typed events, the evidence they lack, and
`.jsonl` files into records (SPEC section 9)."""
from __future__ import annotations

import errno
import json
import os
import stat
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from os import PathLike
from typing import Any

from finbench.errors import FinbenchError, show
from finbench.grading.contract import MAX_LISTED, MAX_MONEY, TraceError, is_int, is_money

@dataclass(frozen=True)
class Authorize:
    seq: int
    order: str
    amount: float


@dataclass(frozen=True)
class Effect:
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
class Reverse:
    seq: int
    receipt: str
    order: str | None


@dataclass(frozen=True)
class Other:
    """An event record (it has a seq) of a kind the grader does not know."""

    seq: int
    kind: str


Event = Authorize | Effect | Reverse | Other



#: The fields grading reads, by record kind: each typed event's own fields, so a memo
#: keyed on them (`finbench.running.episode`) cannot drift from what the checks read.
#: `log_meta` is read for the coverage claim; a `summary` is never read.
FIELDS_READ: dict[str, tuple[str, ...]] = {
    **{kind: tuple(f.name for f in fields(cls)) for kind, cls in
       (("authorize", Authorize), ("effect", Effect), ("reverse", Reverse))},
    "log_meta": ("complete", "last_seq"),
    "summary": (),
}
EVENT_KINDS = frozenset({"authorize", "effect", "reverse"})
_META_KINDS = frozenset(FIELDS_READ) - EVENT_KINDS


def _parse_event(rec: Mapping[str, Any], kind: str, seq: int) -> Event | str:
    """Builds a typed event, or returns what is wrong with the record."""

    def need_str(name: str) -> str | None:
        value = rec.get(name)
        return value if isinstance(value, str) else None

    if kind == "authorize":
        order, amount = need_str("order"), rec.get("amount")
        if order is None:
            return "has no string 'order'"
        if not is_money(amount):
            return "has no numeric 'amount'"
        return Authorize(seq, order, float(amount))
    if kind == "effect":
        op, order, receipt = need_str("op"), need_str("order"), need_str("receipt")
        amount, key, new = rec.get("amount"), rec.get("key"), rec.get("new_effect")
        for name, value in (("op", op), ("order", order), ("receipt", receipt)):
            if value is None:
                return f"has no string {name!r}"
        if not is_money(amount):
            return "has no numeric 'amount'"
        if not isinstance(new, bool):
            return "has no boolean 'new_effect'"
        # An effect without an idempotency key is legitimate; it just cannot
        # be replayed. A key that is present must be a string to compare.
        if key is not None and not isinstance(key, str):
            return "has a non-string 'key'"
        return Effect(seq, op, order, float(amount), key, receipt, new)
    if kind == "reverse":
        receipt, order = need_str("receipt"), rec.get("order")
        if receipt is None:
            return "has no string 'receipt'"
        if order is not None and not isinstance(order, str):
            return "has a non-string 'order'"
        return Reverse(seq, receipt, order)
    return Other(seq, kind)


# About 60 lines on purpose: one pass over the records, each problem noted where it shows.
def read_records(records: object) -> tuple[list[Event], list[str], list[str]]:
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

    keyed: list[tuple[int, int, Event]] = []
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
            if kind in EVENT_KINDS:
                gaps.append(f"{where} ({kind}) has no 'seq'")
            # A seq-less record of an unknown kind is commentary, not an event.
            continue
        if not is_int(seq):
            gaps.append(f"{where} ({kind}) has a seq that is not an integer within 64 bits: {show(seq)}")
            continue
        event = _parse_event(rec, kind, seq)
        if isinstance(event, str):
            gaps.append(f"{kind} at seq {seq} {event}")
            # Keep its seq in the numbering so it is not also reported as a gap.
            keyed.append((seq, index, Other(seq, kind)))
            continue
        if isinstance(event, Other):
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
        if not is_int(last):
            meta.append(f"log_meta last_seq {show(last)} is not an integer within 64 bits")
        elif last != top:
            meta.append(f"log_meta says the last seq is {last}, but the trace ends at {top}")
    return events, gaps, meta


def seq_problems(events: list[Event]) -> list[str]:
    seqs = [event.seq for event in events]
    if not seqs:
        return ["no event records (authorize, effect, reverse)"]
    problems: list[str] = []
    counts = Counter(seqs)
    dups = sorted(s for s, n in counts.items() if n > 1)
    if dups:
        # Two records under one number leave their order undecided.
        problems.append(f"duplicate seq {listed(dups)}")
    # walk the distinct seqs in order: linear in the trace, whatever numbers it holds
    missing: list[int] = []
    n_missing, expect = 0, 1
    for s in sorted(counts):
        if s > expect:
            n_missing += s - expect
            room = MAX_LISTED - len(missing)
            if room > 0:
                missing.extend(range(expect, min(s, expect + room)))
        expect = max(expect, s + 1)
    if n_missing:
        more = n_missing - len(missing)
        problems.append("seq gap: missing " + ", ".join(map(str, missing)) + (f" (+{more} more)" if more else ""))
    below = sorted(s for s in counts if s < 1)
    if below:
        problems.append(f"seq below 1: {listed(below)}")
    return problems


def listed(items: list[Any]) -> str:
    shown = ", ".join(str(item) for item in items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return shown + (f" (+{more} more)" if more > 0 else "")



# --- reading .jsonl files ------------------------------------------------------------

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
    if not isinstance(path, (str, os.PathLike)):
        raise FinbenchError(f"load_trace: path must be a file path, got {show(path)}")
    # a FIFO or a device would block or never end: only a regular file is a trace
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a trace is a .jsonl file)", str(path))
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
            if "amount" in rec and not is_money(rec["amount"]):
                raise TraceError(lineno, f"'amount' must be a number below {MAX_MONEY:g}, got {show(rec['amount'])}")
            if "seq" in rec:
                seq = rec["seq"]
                if not is_int(seq):
                    raise TraceError(lineno, f"'seq' must be an integer within 64 bits, got {show(seq)}")
                if seq in seq_lines:
                    raise TraceError(lineno, f"duplicate seq {seq} (first on line {seq_lines[seq]})")
                seq_lines[seq] = lineno
            records.append(rec)
    return records


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
