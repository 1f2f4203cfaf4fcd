"""Tasks and corpora: the archetype mix, twin pairs, fingerprints, JSONL files (SPEC §6)."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path

import numpy as np

from finbench.sim import constants as C
from finbench.errors import check_choice, check_int, check_real, show
from finbench.files import atomic_write
from finbench.memo import memoised
from finbench.sim.rng import generator
from finbench.sim.task import MAX_VALUE, OUTCOMES, CorpusError, Task, check_task, twin_problem, validate_task

MAX_TASKS = 100_000


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

    def __post_init__(self):
        # a tuple: a list edited after a cached run would no longer match its fingerprint
        if isinstance(self.tasks, (str, bytes)) or not hasattr(self.tasks, "__iter__"):
            raise CorpusError(f"Corpus: tasks must be a sequence of Tasks, got {show(self.tasks)}")
        object.__setattr__(self, "tasks", tuple(self.tasks))
        for i, t in enumerate(self.tasks):
            check_task(t, f"Corpus: task {i}")
        ids = [t.task_id for t in self.tasks]
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            raise CorpusError(f"Corpus: task ids must be distinct, got {dup!r} twice")

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


def _file_digest(header: dict, task_lines: list[str]) -> str:
    """SHA-256 over the header's own fields and the task lines: the header cannot be edited alone."""
    h = hashlib.sha256(json.dumps({k: header.get(k) for k in ("kind", "fingerprint", "master_seed", "n_tasks")},
                                  sort_keys=True).encode())
    for line in task_lines:
        h.update(b"\n" + line.encode())
    return h.hexdigest()[:32]



def load_corpus(path: str | Path) -> Corpus:
    """Read a corpus file written by `Corpus.save`, checking everything before trusting it.

    Raises:
        CorpusError: the file cannot be read or decoded; a line is not a JSON
            object with exactly the task fields; a field has the wrong type or
            range, or contradicts its archetype; task ids repeat; the task count,
            the content fingerprint or the header digest do not match; the
            tasks do not hold whole twin pairs (`twin_problem`), naming the task.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise CorpusError(f"load_corpus: path must be a file path, got {show(path)}")
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
    kinds, counts = _unit_counts(n_tasks)
    plan = []
    for (kind, arch, _), c in zip(kinds, counts):
        plan += [(kind, arch)] * c
    return plan


def _unit_counts(n_tasks: int) -> tuple[list[tuple[str, tuple[str, ...], int]], list[int]]:
    """The kinds of unit (kind, archetypes, default count) and how many of each `n_tasks` holds."""
    kinds = [(a, (a,), n) for a, n in C.SINGLES.items()]
    kinds += [(k, arch, n) for k, (arch, n) in C.PAIRS.items()]
    if n_tasks == C.DEFAULT_TASKS:
        counts = [n for _, _, n in kinds]
    else:
        share = [n * n_tasks / C.DEFAULT_TASKS for _, _, n in kinds]
        counts = [int(s) for s in share]
        used = sum(c * len(a) for c, (_, a, _) in zip(counts, kinds))
        order = sorted(range(len(kinds)), key=lambda i: (-(share[i] - counts[i]), i))
        # one extra unit each, largest remainder first, while it fits: for every size from 1 to MAX_TASKS this
        # ends on exactly n_tasks (tests/sim/test_corpus_rules.py checks them all), so no slot is left to fill
        for i in order:
            if used + len(kinds[i][1]) <= n_tasks:
                counts[i] += 1
                used += len(kinds[i][1])
    return kinds, counts


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
        check_choice("make_task", f"outcome (of a {archetype} task)", outcome, OUTCOMES[archetype])
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
    order_id = f"ord-{seed:04d}"  # one order per seed: seeds 1 and 10001 are two orders
    return _build(archetype, draws, order_id=order_id, task_id=f"{archetype}-{seed}",
                  unit=order_id, stream=f"task/{archetype}/{seed}", outcome=outcome)


@memoised("sim.corpus.corpus_for", keys="(master seed, number of tasks)", bound=64)
def corpus_for(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS) -> Corpus:
    """`make_corpus`, memoised: runs over one corpus share one object."""
    return make_corpus(master_seed, n_tasks)


def stratified_subset(corpus: Corpus, size: int = 60, seed: int = 0) -> Corpus:
    """About `size` tasks: every stratum (the archetypes of a unit) kept, twin pairs whole.

    Units are drawn per stratum, proportionally to the stratum's share of the
    corpus's tasks and at least one unit each, from a generator keyed by
    (`seed`, "model_arm"); the subset keeps the corpus's task order. Table V's
    subset (the model arm, and the Inspect task that plays its episodes).

    Raises:
        FinbenchError: `size` is not a positive integer or `seed` a non-negative one.
    """
    size = check_int("stratified_subset", "size", size, 1)
    seed = check_int("stratified_subset", "seed", seed, 0)
    by_id = {t.task_id: t for t in corpus.tasks}
    strata: dict[tuple, list[tuple[str, ...]]] = {}
    for unit in corpus.units:
        strata.setdefault(tuple(sorted({by_id[i].archetype for i in unit})), []).append(unit)
    total = len(corpus)
    salt = int.from_bytes(hashlib.sha256(b"model_arm").digest()[:4], "big")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), salt]))
    chosen: set[str] = set()
    for key in sorted(strata):
        units = strata[key]
        n_tasks = sum(len(u) for u in units)
        want = max(1, round(size * n_tasks / total / (n_tasks / len(units))))
        pick = rng.choice(len(units), size=min(want, len(units)), replace=False)
        for i in sorted(pick):
            chosen.update(units[i])
    return Corpus(tuple(t for t in corpus.tasks if t.task_id in chosen), corpus.master_seed)
