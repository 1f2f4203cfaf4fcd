"""A task (one order and its hidden canonical log), and the checks every task passes where it enters
(SPEC §1, §6): a corpus file, a `Corpus`, a `FinalityEnv`."""
from __future__ import annotations

from dataclasses import dataclass, fields

from finbench.memo import memoised
from finbench.errors import FinbenchError, check_choice, check_int, check_real, show
from finbench.sim import constants as C

MAX_VALUE = 1e9
"""The largest order value a task may carry (the retail amounts are at most $3,499)."""

OUTCOMES = {a: ("settled",) for a in C.ARCHETYPES}
"""The original capture's possible outcomes by archetype."""
OUTCOMES["pending_fail"] = ("failed",)
OUTCOMES["unresolvable"] = ("settled", "failed")


class CorpusError(FinbenchError):
    """A corpus file that cannot be trusted: unreadable, malformed, or not matching its digests."""


@dataclass(frozen=True)
class Event:
    """One entry of the canonical log."""

    t: int
    kind: str  # order_placed, auth_approved, capture_submitted, capture_settled, capture_failed, chargeback
    capture: str | None = None
    key: str | None = None
    amount: float = 0.0


@dataclass(frozen=True)
class Task:
    """One order and its hidden truth.

    Attributes beyond SPEC's list are the per-unit draws that the archetype
    mechanisms need (replica lag, duplicate gap, chargeback delay), and the
    unrelated order every world holds.
    """

    task_id: str
    order_id: str
    archetype: str
    order_value: float
    determined_at: int
    outcome: str
    retry_outcome: str
    retry_delay: int
    twin_id: str | None = None
    twin_side: str | None = None
    unit: str = ""
    stream: str = ""
    processor_lag: int = 0
    duplicate_gap: int = 0
    chargeback_at: int | None = None
    other_order_id: str = ""
    other_order_value: float = 0.0

    def __hash__(self) -> int:
        # a task keys most memos, several times an episode: hashing the fields that tell tasks apart (equal
        # tasks agree on them, as a hash must) costs a third of hashing all seventeen
        return hash((self.task_id, self.stream, self.order_value, self.determined_at))

    @property
    def log(self) -> tuple[Event, ...]:
        """The canonical log as it stands before the agent acts."""
        v = self.order_value
        events = [
            Event(0, "order_placed", amount=v),
            Event(C.AUTH_AT, "auth_approved", amount=v),
            Event(C.CAPTURE_AT, "capture_submitted", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, v),
            Event(self.determined_at, f"capture_{self.outcome}", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, v),
        ]
        if self.chargeback_at is not None:
            events.append(Event(self.chargeback_at, "chargeback", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, v))
        return tuple(events)

    def to_dict(self) -> dict:
        """The fields by name, in order (every value is a scalar: `dataclasses.asdict`'s deep copy is not needed)."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(f.name for f in fields(Task))

_TASK_TYPES = {
    "task_id": str, "order_id": str, "unit": str, "stream": str, "other_order_id": str,
}

@memoised("sim.task.checked", keys="the task (a frozen value): checked once", bound=65536)
def _checked(task: Task) -> None:
    _check_fields(task.to_dict(), f"task {task.task_id!r}")
    if task.other_order_id == task.order_id:
        raise CorpusError(f"task {task.task_id!r}: other_order_id must differ from order_id, got "
                          f"{show(task.order_id)} for both")


def check_task(task: object, where: str) -> Task:
    """`task` if it is a `Task` whose every field is in range and agrees with its archetype (checked
    once per task: a hand-built task with, say, a NaN value or a determination past every
    deadline is refused where it enters, not priced into a negative gap)."""
    if not isinstance(task, Task):
        raise CorpusError(f"{where} must be a Task (make_task, or a corpus's tasks), got {show(task)}")
    try:
        _checked(task)
    except CorpusError as e:
        raise CorpusError(f"{where}: {e}") from None
    return task


def validate_task(d: dict, where: str) -> Task:
    """A task from its dict, every field checked (type, range, and agreement with the archetype)."""
    _check_fields(d, where)
    return Task(**d)


def _check_fields(d: dict, where: str) -> None:
    for name, typ in _TASK_TYPES.items():
        if not isinstance(d[name], typ) or not d[name]:
            raise CorpusError(f"{where}: {name} must be a non-empty string, got {show(d[name])}")
    try:
        a = check_choice(where, "archetype", d["archetype"], C.ARCHETYPES)
        for name in ("order_value", "other_order_value"):
            check_real(where, name, d[name], 0.0, MAX_VALUE, lo_open=True)
        lo, hi = C.DETERMINATION[a]
        check_int(where, "determined_at", d["determined_at"], lo, hi)
        check_choice(where, "outcome", d["outcome"], OUTCOMES[a])
        check_choice(where, "retry_outcome", d["retry_outcome"], ("settled", "failed"))
        check_int(where, "retry_delay", d["retry_delay"], *C.RETRY_DELAY)
        for name in ("processor_lag", "duplicate_gap"):
            check_int(where, name, d[name], 0, C.HORIZON)
        if d["chargeback_at"] is not None:
            check_int(where, "chargeback_at", d["chargeback_at"], d["determined_at"], 10 * C.HORIZON)
        check_choice(where, "twin_side", d["twin_side"], (None, "settle", "fail"))
        if (d["twin_id"] is None) != (d["twin_side"] is None) or not isinstance(d["twin_id"], (str, type(None))):
            raise CorpusError(f"{where}: twin_id and twin_side must both be set or both be null, got "
                              f"{show(d['twin_id'])} and {show(d['twin_side'])}")
    except CorpusError:
        raise
    except FinbenchError as e:
        raise CorpusError(str(e)) from None


def twin_problem(tasks) -> tuple[int, str] | None:
    """None if the tasks hold whole twin pairs, else (index of the task at fault, what is wrong).

    Every task's unrelated order differs from its own (`other_order_id != order_id`);
    every twin id has exactly two halves, one `settle` (whose capture settles) and one
    `fail` (whose capture fails), and the two share the order id and the unit (SPEC: the
    twins are one order, one unit, told apart only by the outcome)."""
    halves: dict[str, dict[str, int]] = {}
    for i, t in enumerate(tasks):
        if t.other_order_id == t.order_id:
            return i, (f"task {t.task_id!r}: other_order_id must differ from order_id (the unrelated order is "
                       f"another order), got {show(t.other_order_id)} for both")
        if t.twin_id is None:
            continue
        want = "settled" if t.twin_side == "settle" else "failed"
        if t.outcome != want:
            return i, (f"task {t.task_id!r}: outcome must be {want!r} on the {t.twin_side} half of twin "
                       f"{t.twin_id!r}, got {t.outcome!r}")
        sides = halves.setdefault(t.twin_id, {})
        if t.twin_side in sides:
            other = tasks[sides[t.twin_side]]
            return i, (f"task {t.task_id!r}: twin {t.twin_id!r} must have one {t.twin_side} half, "
                       f"got a second after task {other.task_id!r}")
        for j in sides.values():
            mate = tasks[j]
            if (mate.order_id, mate.unit) != (t.order_id, t.unit):
                return i, (f"task {t.task_id!r}: the halves of twin {t.twin_id!r} must share the order id and "
                           f"the unit, got {show(t.order_id)}/{show(t.unit)} and "
                           f"{show(mate.order_id)}/{show(mate.unit)} (task {mate.task_id!r})")
        sides[t.twin_side] = i
    for twin_id, sides in halves.items():
        if len(sides) == 1:
            (side, i), = sides.items()
            missing = "fail" if side == "settle" else "settle"
            return i, (f"task {tasks[i].task_id!r}: twin {twin_id!r} must have a settle and a fail half, "
                       f"got only the {side} half (the {missing} half is missing)")
    return None
