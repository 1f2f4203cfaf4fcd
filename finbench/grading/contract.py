"""What a trace is judged against and what grading returns: the checks, the contract,
the verdict, and the bounds on what counts as a number (SPEC section 9)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from finbench.errors import FinbenchError, show

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

# How many individual problems a one-line reason lists before summarising.
MAX_LISTED = 3




def is_int(x: object) -> bool:
    """A sequence number: an int within 64 bits, not a bool."""
    # bool is an int subclass; True is not a sequence number. A seq beyond 64 bits is
    # no logger's counter, and refusing it keeps every step below linear in the trace.
    return isinstance(x, int) and not isinstance(x, bool) and -MAX_SEQ <= x <= MAX_SEQ


def is_money(x: object) -> bool:
    """An amount: a finite int or float of at most `MAX_MONEY`, not a bool."""
    # an int too large for a float is not money (math.isfinite would overflow on it)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return abs(x) <= MAX_MONEY if isinstance(x, int) else math.isfinite(x) and abs(x) <= MAX_MONEY


def same_money(a: float, b: float) -> bool:
    """Two amounts within `MONEY_TOL`: the same amount."""
    return abs(a - b) <= MONEY_TOL


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
        if not is_money(self.amount):
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


