"""Tasks and corpora: the archetype mix, twin pairs, fingerprints, JSONL files (SPEC §6)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from finbench import constants as C
from finbench.rng import generator


class CorpusError(ValueError):
    """A corpus file that cannot be trusted: malformed, or not matching its fingerprint."""


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

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.tasks)

    @property
    def units(self) -> tuple[tuple[str, ...], ...]:
        """Tuples of task ids, one per independent unit (a twin pair is one unit)."""
        groups: dict[str, list[str]] = {}
        for t in self.tasks:
            groups.setdefault(t.unit, []).append(t.task_id)
        return tuple(tuple(g) for g in groups.values())

    @property
    def twin_pairs(self) -> tuple[tuple[Task, Task], ...]:
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
        header = {"kind": "finbench-corpus", "fingerprint": self.fingerprint,
                  "master_seed": self.master_seed, "n_tasks": len(self)}
        lines = [json.dumps(header, sort_keys=True)]
        lines += [json.dumps(t.to_dict(), sort_keys=True) for t in self.tasks]
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(path)
        return path


def load_corpus(path: str | Path) -> Corpus:
    """Read a corpus file written by `Corpus.save`, refusing one whose content
    does not match the fingerprint it carries."""
    path = Path(path)
    names = {f.name for f in fields(Task)}
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        raise CorpusError(f"{path}: empty file, expected a corpus header line")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}:1: header is not JSON ({e.msg})") from None
    if not isinstance(header, dict) or header.get("kind") != "finbench-corpus":
        raise CorpusError(f"{path}:1: not a finbench corpus header")
    tasks = []
    for i, line in enumerate(lines[1:], start=2):
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{path}:{i}: not JSON ({e.msg})") from None
        if not isinstance(d, dict) or set(d) != names:
            raise CorpusError(f"{path}:{i}: task fields differ from {sorted(names)}")
        tasks.append(Task(**d))
    corpus = Corpus(tuple(tasks), header.get("master_seed"))
    if corpus.fingerprint != header.get("fingerprint"):
        raise CorpusError(
            f"{path}: content fingerprint {corpus.fingerprint} does not match the header's "
            f"{header.get('fingerprint')}: the file was edited or truncated; regenerate it"
        )
    return corpus


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
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 1:
        raise ValueError(f"n_tasks must be a positive integer (the paper's corpus has 321), got {n_tasks!r}")
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
    if archetype not in C.ARCHETYPES:
        raise ValueError(f"unknown archetype {archetype!r}; valid: {', '.join(C.ARCHETYPES)}")
    if outcome not in (None, "settled", "failed"):
        raise ValueError(f"outcome must be 'settled' or 'failed', got {outcome!r}")
    if determined_at is not None and not (C.CAPTURE_AT < determined_at <= C.HORIZON):
        raise ValueError(f"determined_at must be in ({C.CAPTURE_AT}, {C.HORIZON}], got {determined_at}")
    draws = _draw_unit(generator("make-task", archetype, seed), archetype)
    if determined_at is not None:
        draws["determined_at"] = int(determined_at)
    if order_value is not None:
        draws["order_value"] = float(order_value)
    order_id = f"ord-{seed % 10000:04d}"
    return _build(archetype, draws, order_id=order_id, task_id=f"{archetype}-{seed}",
                  unit=order_id, stream=f"task/{archetype}/{seed}", outcome=outcome)
