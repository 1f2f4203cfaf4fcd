"""Tasks and corpora: the archetype mix, twin pairs, fingerprints, JSONL files (SPEC §6)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from functools import cached_property, lru_cache
from pathlib import Path

from finbench.sim import constants as C
from finbench.errors import FinbenchError, check_choice, check_int, check_real, show
from finbench.files import atomic_write
from finbench.sim.rng import generator

MAX_TASKS = 100_000
MAX_VALUE = 1e9


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
        return asdict(self)


def _canonical(tasks) -> bytes:
    return json.dumps([t.to_dict() for t in tasks], sort_keys=True, separators=(",", ":")).encode()


def fingerprint_of(tasks) -> str:
    """16 hex digits of a SHA-256 over the canonical JSON of the tasks."""
    return hashlib.sha256(_canonical(tasks)).hexdigest()[:16]


@dataclass(frozen=True)
class Corpus:
    """An ordered set of tasks, grouped into independent units (twins together)."""

    tasks: tuple[Task, ...]
    master_seed: int | None = None

    # cached: the tasks are frozen, and the fingerprint keys every cache lookup
    @cached_property
    def fingerprint(self) -> str:
        return fingerprint_of(self.tasks)

    @cached_property
    def units(self) -> tuple[tuple[str, ...], ...]:
        """Tuples of task ids, one per independent unit (a twin pair is one unit)."""
        groups: dict[str, list[str]] = {}
        for t in self.tasks:
            groups.setdefault(t.unit, []).append(t.task_id)
        return tuple(tuple(g) for g in groups.values())

    @cached_property
    def twin_pairs(self) -> tuple[tuple[Task, Task], ...]:
        """(settle half, fail half) of every twin pair, in corpus order.

        Raises:
            CorpusError: a twin pair is not whole (see `twin_problem`)."""
        problem = twin_problem(self.tasks)
        if problem is not None:
            raise CorpusError(f"Corpus: {problem[1]}")
        by: dict[str, dict[str, Task]] = {}
        for t in self.tasks:
            if t.twin_id:
                by.setdefault(t.twin_id, {})[t.twin_side] = t
        return tuple((p["settle"], p["fail"]) for p in by.values())

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self):
        return iter(self.tasks)

    def __getitem__(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(task_id)

    def save(self, path: str | Path) -> Path:
        """Write a JSONL file: a header line with the fingerprint, then one task a line."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tasks = [json.dumps(t.to_dict(), sort_keys=True) for t in self.tasks]
        header = {"kind": "finbench-corpus", "fingerprint": self.fingerprint,
                  "master_seed": self.master_seed, "n_tasks": len(self)}
        header["digest"] = _file_digest(header, tasks)
        text = "\n".join([json.dumps(header, sort_keys=True), *tasks]) + "\n"
        # concurrent savers never share a temporary file; a reader sees the old file or the new one
        return atomic_write(path, text)


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


def _file_digest(header: dict, task_lines: list[str]) -> str:
    """SHA-256 over the header's own fields and the task lines: the header cannot be edited alone."""
    h = hashlib.sha256(json.dumps({k: header.get(k) for k in ("kind", "fingerprint", "master_seed", "n_tasks")},
                                  sort_keys=True).encode())
    for line in task_lines:
        h.update(b"\n" + line.encode())
    return h.hexdigest()[:32]


_TASK_TYPES = {
    "task_id": str, "order_id": str, "unit": str, "stream": str, "other_order_id": str,
}


def validate_task(d: dict, where: str) -> Task:
    """A task from its dict, every field checked (type, range, and agreement with the archetype)."""
    for name, typ in _TASK_TYPES.items():
        if not isinstance(d[name], typ) or not d[name]:
            raise CorpusError(f"{where}: {name} must be a non-empty string, got {show(d[name])}")
    try:
        a = check_choice(where, "archetype", d["archetype"], C.ARCHETYPES)
        for name in ("order_value", "other_order_value"):
            check_real(where, name, d[name], 0.0, MAX_VALUE, lo_open=True)
        lo, hi = C.DETERMINATION[a]
        check_int(where, "determined_at", d["determined_at"], lo, hi)
        check_choice(where, "outcome", d["outcome"], _OUTCOMES[a])
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
    return Task(**d)


def load_corpus(path: str | Path) -> Corpus:
    """Read a corpus file written by `Corpus.save`, checking everything before trusting it.

    Raises:
        CorpusError: the file cannot be read or decoded; a line is not a JSON
            object with exactly the task fields; a field has the wrong type or
            range, or contradicts its archetype; task ids repeat; the task count,
            the content fingerprint or the header digest do not match; the
            tasks do not hold whole twin pairs (`twin_problem`), naming the task.
    """
    path = Path(path)
    names = {f.name for f in fields(Task)}
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not a UTF-8 text file (byte {e.start}); not a corpus") from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise CorpusError(f"{path}: empty file, expected a corpus header line")

    def parse(i: int, line: str):
        try:
            return json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{path}:{i}: not JSON ({e.msg})") from None
        except (ValueError, RecursionError) as e:
            raise CorpusError(f"{path}:{i}: not usable JSON ({type(e).__name__})") from None

    header = parse(1, lines[0])
    if not isinstance(header, dict) or header.get("kind") != "finbench-corpus":
        raise CorpusError(f"{path}:1: not a finbench corpus header")
    tasks, seen = [], {}
    for i, line in enumerate(lines[1:], start=2):
        d = parse(i, line)
        if not isinstance(d, dict) or set(d) != names:
            raise CorpusError(f"{path}:{i}: task fields differ from {sorted(names)}")
        task = validate_task(d, f"{path}:{i}")
        if task.task_id in seen:
            raise CorpusError(f"{path}:{i}: task id {task.task_id!r} repeats line {seen[task.task_id]}")
        seen[task.task_id] = i
        tasks.append(task)
    n = header.get("n_tasks")
    if n != len(tasks):
        raise CorpusError(f"{path}: the header says n_tasks {show(n)}, the file holds {len(tasks)} tasks")
    corpus = Corpus(tuple(tasks), header.get("master_seed"))
    if corpus.fingerprint != header.get("fingerprint"):
        raise CorpusError(
            f"{path}: content fingerprint {corpus.fingerprint} does not match the header's "
            f"{show(header.get('fingerprint'))}: the file was edited or truncated; regenerate it"
        )
    if header.get("digest") != _file_digest(header, lines[1:]):
        raise CorpusError(f"{path}: the header's digest does not match its fields and tasks (was the header "
                          "edited, e.g. master_seed or n_tasks?); regenerate the file")
    problem = twin_problem(corpus.tasks)
    if problem is not None:
        i, what = problem
        raise CorpusError(f"{path}:{seen[corpus.tasks[i].task_id]}: {what}")
    return corpus


_OUTCOMES = {a: ("settled",) for a in C.ARCHETYPES}
_OUTCOMES["pending_fail"] = ("failed",)
_OUTCOMES["unresolvable"] = ("settled", "failed")


# --- generation ---------------------------------------------------------------

def _draw_unit(rng, archetype: str) -> dict:
    """Per-unit draws shared by both twins (streams are keyed by the unit)."""
    lo, hi = C.DETERMINATION[archetype]
    d = {
        "order_value": float(C.ORDER_VALUES[rng.integers(len(C.ORDER_VALUES))]),
        "determined_at": int(rng.integers(lo, hi + 1)),
        "retry_delay": int(rng.integers(C.RETRY_DELAY[0], C.RETRY_DELAY[1] + 1)),
        "other_order_value": float(C.ORDER_VALUES[rng.integers(len(C.ORDER_VALUES))]),
        # drawn for every unit, used by one archetype each, so the stream is the same shape
        "processor_lag": int(rng.integers(C.PROCESSOR_LAG[0], C.PROCESSOR_LAG[1] + 1)),
        "duplicate_gap": int(rng.integers(C.DUPLICATE_GAP[0], C.DUPLICATE_GAP[1] + 1)),
        "chargeback_delay": int(rng.integers(C.CHARGEBACK_DELAY[0], C.CHARGEBACK_DELAY[1] + 1)),
        "coin_outcome": bool(rng.random() < C.UNRESOLVABLE_SETTLE_P),
        "coin_retry": bool(rng.random() < C.UNRESOLVABLE_SETTLE_P),
    }
    return d


def _build(archetype: str, draws: dict, *, order_id: str, task_id: str, unit: str, stream: str,
           outcome: str | None = None, twin_id=None, twin_side=None) -> Task:
    if outcome is None:
        if archetype == "pending_fail":
            outcome = "failed"
        elif archetype == "unresolvable":
            outcome = "settled" if draws["coin_outcome"] else "failed"
        else:
            outcome = "settled"
    if archetype == "unresolvable":
        retry = "settled" if draws["coin_retry"] else "failed"
    else:
        # pending_fail recovers; a settling archetype's fresh key double-charges
        retry = "settled"
    det = draws["determined_at"]
    return Task(
        task_id=task_id,
        order_id=order_id,
        archetype=archetype,
        order_value=draws["order_value"],
        determined_at=det,
        outcome=outcome,
        retry_outcome=retry,
        retry_delay=draws["retry_delay"],
        twin_id=twin_id,
        twin_side=twin_side,
        unit=unit,
        stream=stream,
        processor_lag=draws["processor_lag"] if archetype == "stale_processor" else 0,
        duplicate_gap=draws["duplicate_gap"] if archetype == "duplicate_settlement" else 0,
        chargeback_at=det + draws["chargeback_delay"] if archetype == "late_chargeback" else None,
        other_order_id=f"{order_id}-prev",
        other_order_value=draws["other_order_value"],
    )


def _unit_plan(n_tasks: int) -> list[tuple[str, tuple[str, ...]]]:
    """(kind, archetypes) per unit; the default mix scaled to n_tasks by largest remainder."""
    kinds = [(a, (a,), n) for a, n in C.SINGLES.items()]
    kinds += [(k, arch, n) for k, (arch, n) in C.PAIRS.items()]
    if n_tasks == C.DEFAULT_TASKS:
        counts = [n for _, _, n in kinds]
    else:
        share = [n * n_tasks / C.DEFAULT_TASKS for _, _, n in kinds]
        counts = [int(s) for s in share]
        used = sum(c * len(a) for c, (_, a, _) in zip(counts, kinds))
        order = sorted(range(len(kinds)), key=lambda i: (-(share[i] - counts[i]), i))
        for i in order:  # one extra unit each, largest remainder first, while it fits
            if used + len(kinds[i][1]) <= n_tasks:
                counts[i] += 1
                used += len(kinds[i][1])
        singles = [i for i in order if len(kinds[i][1]) == 1]
        for i in singles * n_tasks:  # a skipped pair left a slot: singles fill it
            if used == n_tasks:
                break
            counts[i] += 1
            used += 1
    plan = []
    for (kind, arch, _), c in zip(kinds, counts):
        plan += [(kind, arch)] * c
    return plan


def make_corpus(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS) -> Corpus:
    """Generate a corpus: SPEC's 321-task mix by default, scaled for other sizes.

    Raises:
        ValueError: n_tasks is not a positive integer.
    """
    master_seed = check_int("make_corpus", "master_seed", master_seed, 0)
    n_tasks = check_int("make_corpus", "n_tasks", n_tasks, 1, MAX_TASKS)
    plan = _unit_plan(n_tasks)
    # shuffle so that order ids say nothing about the archetype
    perm = generator("corpus-order", master_seed).permutation(len(plan))
    tasks: list[Task] = []
    for number, idx in enumerate(perm, start=1):
        kind, archs = plan[idx]
        order_id = f"ord-{number:04d}"
        stream = f"{master_seed}/{order_id}"
        draws = _draw_unit(generator("corpus-unit", master_seed, order_id), archs[0])
        if len(archs) == 1:
            tasks.append(_build(archs[0], draws, order_id=order_id, task_id=order_id,
                                unit=order_id, stream=stream))
        else:
            twin = f"twin-{order_id}"
            for side, arch, outcome in (("settle", archs[0], "settled"), ("fail", archs[1], "failed")):
                tasks.append(_build(arch, draws, order_id=order_id, task_id=f"{order_id}:{side}",
                                    unit=order_id, stream=stream, outcome=outcome,
                                    twin_id=twin, twin_side=side))
    return Corpus(tuple(tasks), master_seed)


def make_task(archetype: str, *, determined_at: int | None = None, order_value: float | None = None,
              outcome: str | None = None, seed: int = 0) -> Task:
    """One task built to order, for tests and for exploring a case.

    Unspecified fields are drawn from the archetype's intervals with a stream
    keyed by (archetype, seed).
    """
    check_choice("make_task", "archetype", archetype, C.ARCHETYPES)
    if outcome is not None:
        check_choice("make_task", f"outcome (of a {archetype} task)", outcome, _OUTCOMES[archetype])
    if determined_at is not None:
        lo, hi = C.DETERMINATION[archetype]
        determined_at = check_int("make_task", f"determined_at (of a {archetype} task)", determined_at, lo, hi)
    if order_value is not None:
        order_value = check_real("make_task", "order_value", order_value, 0.0, MAX_VALUE, lo_open=True)
    seed = check_int("make_task", "seed", seed, 0)
    draws = _draw_unit(generator("make-task", archetype, seed), archetype)
    if determined_at is not None:
        draws["determined_at"] = int(determined_at)
    if order_value is not None:
        draws["order_value"] = float(order_value)
    order_id = f"ord-{seed % 10000:04d}"
    return _build(archetype, draws, order_id=order_id, task_id=f"{archetype}-{seed}",
                  unit=order_id, stream=f"task/{archetype}/{seed}", outcome=outcome)


@lru_cache(maxsize=64)
def corpus_for(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS) -> Corpus:
    """`make_corpus`, memoised: runs over one corpus share one object."""
    return make_corpus(master_seed, n_tasks)
