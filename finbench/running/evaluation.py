"""Evaluate policies over a corpus: one row per episode, parallel, cached, resumable (SPEC §8).

Work is split into chunks of whole tasks (every seed of a task in one chunk,
so a world's fault schedule is built once and shared by the policies). Each
(chunk, policy) is cached as one checked JSON file (`finbench.running.cache`), so
notebooks share episodes and an interrupted run resumes from the chunks it
finished. Rows come back in (policy, corpus, seed) order whatever `n_jobs` or
the joblib backend, and are mapped to policies by position, never by label.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from finbench.running import cache as K
from finbench.running import origin as O
from finbench.running.stats import count
from finbench.sim import constants as C
from finbench.sim.economics import Costs
from finbench.errors import bad, check_int, note, warn_caller
from finbench.sim.env import FinalityEnv
from finbench.sim.play import batch_mode, play, thawed, trusted
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode, check_probe
from finbench.agents.registry import PolicyRef, policy_label, resolve_policies
from finbench.running import derivation as D
from finbench.running.columns import COLUMNS
from finbench.running.endings import ended
from finbench.running.overlap import check_connections, overlapped
from finbench.running.episode import OUTCOME as _OUTCOME_COLUMNS, episode_contract, tell_start
from finbench.running.episode import tell_end as told_end
from finbench.sim.corpus import Corpus

CacheWarning = K.CacheWarning

__all__ = ["COLUMNS", "CacheWarning", "episode_contract", "evaluate", "policy_label", "run_chunk"]

CACHE_DIR = K.CACHE_DIR
CHUNK_TASKS = 24
CHUNK_SEEDS = 5


def chunk_tasks(n_seeds: int, package: bool = True) -> int:
    """Whole tasks a chunk holds. For the package's own policies (`package`: an episode takes microseconds,
    so a chunk's fixed costs, a cache file and a worker's round trip, dominate), `CHUNK_TASKS` at
    `CHUNK_SEEDS` seeds or more and more with fewer seeds, so a chunk plays a similar number of episodes
    (a run of one seed writes a fifth as many cache files). With a user's policy (a model may take seconds
    an episode), `CHUNK_TASKS`: the work spreads over the workers and an interrupted run loses little.
    Rows never depend on it: every memo is per task."""
    return CHUNK_TASKS * max(1, CHUNK_SEEDS // n_seeds) if package else CHUNK_TASKS


def episode_row(task, ref: PolicyRef, seed: int, profile: FaultProfile, costs: Costs,
             probe: ProbeMode | None = None) -> tuple:
    """Play one episode; its row as a tuple in `COLUMNS` order (what `FinalityEnv.result`
    and `grade_episode` give, read straight from the ended environment)."""
    return _row(play(FinalityEnv(task, seed, profile, costs, probe=probe), ref.make()), ref.label)


def _row(env: FinalityEnv, label: str) -> tuple:
    task = env.task
    world = env.world
    score, money, graded = ended(env)
    fired = world.fired()
    return (
        task.task_id, task.archetype, task.unit, task.twin_side, label, env.told_resolution, env.seed, *score,
        env.costs.step_budget - env.calls_left, env.disposition_t, env.disposition, env.probe_calls,
        env.wait_calls, len(env.other_effects), *money,
        *(fired[f] for f in C.FAMILIES),
        ";".join(str(c.submitted_at) for c in world.captures[1:]),
        _calls(env.calls(), task.order_id),
        sum(env.errors.values()), env.other_order_calls, json.dumps(env.errors) if env.errors else "",
        *graded,
    )


_OUTCOME = tuple(COLUMNS.index(c) for c in _OUTCOME_COLUMNS)


def tell_end(policy, row: tuple) -> None:
    """`episode.tell_end` with the outcome read from an episode row."""
    told_end(policy, {c: row[i] for c, i in zip(_OUTCOME_COLUMNS, _OUTCOME)})


def played_row(task, ref: PolicyRef, seed: int, profile: FaultProfile, costs: Costs,
               probe: ProbeMode | None = None) -> tuple:
    """A user's episode as `run_chunk` plays it (a fresh policy, the public step, its end told), outside a
    chunk and its `batch_mode`: what `evaluate` runs in threads when episodes overlap (`max_connections`)."""
    policy = ref.make()
    tell_start(policy, task, seed)
    row = _row(play(FinalityEnv(task, seed, profile, costs, probe=probe), policy), ref.label)
    tell_end(policy, row)
    return row


def _overlapped_chunks(pending: list, chunks: list, refs: list, seeds: list, how: tuple, max_connections: int,
                       progress: bool):
    """Play the user's (chunk, policy) pairs `pending` ((ci, (si, path, key)) each) with up to
    `max_connections` episodes in flight across all of them; yields (ci, (si, path, key), columns) per pair,
    in order, as soon as its episodes are all in."""
    jobs = [(ci, si, task, seed) for ci, (si, _, _) in pending for task in chunks[ci] for seed in seeds]
    results = overlapped(jobs, lambda j: played_row(j[2], refs[j[1]], j[3], *how), max_connections)
    if progress:
        from tqdm import tqdm

        results = iter(tqdm(results, total=len(jobs), desc="episodes", leave=False))
    for ci, item in pending:
        rows = [next(results) for _ in range(len(chunks[ci]) * len(seeds))]
        yield ci, item, {**{c: list(v) for c, v in zip(COLUMNS, zip(*rows))}, O.COLUMN: [O.PLAYED] * len(rows)}


def _calls(actions, order_id: str) -> str:
    out = []
    add = out.append
    for _, tool, args in actions:
        if args.get("order_id") == order_id:  # the usual calls: on the case order, no other argument or a wait's ticks
            n = len(args)
            if n == 1:
                add(tool)
                continue
            if n == 2 and tool == "wait" and args.get("ticks").__class__ is int:
                add("wait:" + str(args["ticks"]))
                continue
        extra = ",".join(_plain(str(v)) for k, v in args.items() if k != "order_id")
        where = "" if args.get("order_id") == order_id else "@other"
        tool = _plain(tool)
        add(f"{tool}{where}:{extra}" if extra else tool + where)
    return ";".join(out)


_SEPARATORS = str.maketrans({c: f"%{ord(c):02X}" for c in "%;,:@"})


def _plain(text: str) -> str:
    """`text` with the rendering's separators written as `%XX`: a key holding `;` is one call, not two."""
    return text.translate(_SEPARATORS) if any(c in text for c in "%;,:@") else text


def run_chunk(tasks, refs, seeds, profile: FaultProfile, costs: Costs, probe: ProbeMode | None = None,
              share: bool = False) -> list[dict]:
    """Column lists for each reference in `refs`, rows in (task, seed) order.

    An episode in which a package policy that ignores the seed saw only the truth (no read of a
    system; only a probe that tells the truth) is the same episode under
    every seed and every fault profile but for the faults fired: it is played once per task
    and derived for the other seeds (`_derived`), as simulating them would give. With `share`
    (a run that may reuse what it computed) a built-in policy's such episode is also kept in a
    bounded memo, so another profile (the ablation's arms) or another chunk of seeds derives it too.
    """
    rows: list[list[tuple]] = [[] for _ in refs]
    origins: list[list[str]] = [[] for _ in refs]
    costs_key = costs.key()
    probe_key = None if probe is None or probe.is_full else json.dumps(probe.key())  # a list: not hashable
    # the package's own policies make no reference cycles: the batch's closing collection is for a user's
    cycles = not all(ref.builtin and trusted(ref.make()) for ref in refs)
    with batch_mode(cycles):
        for task in tasks:
            for ref, mine, how in zip(refs, rows, origins):
                key = (task, ref.cache_key(), ref.label, costs_key, probe_key) if share and ref.builtin else None
                kept = None if key is None else D.TRUTH_ONLY.get(key)
                for seed in seeds:
                    if kept is not None:
                        mine.append(D.derive_seed(kept, task, seed, profile))
                        how.append(O.DERIVED_SEED)
                        continue
                    # by what decides a run's episodes but the probe mode, which `_same_reads` checks
                    variants = None if key is None else D.SAME_READS.get((key[:4], seed))
                    row = None if variants is None else D.same_reads(variants, task, seed, profile, probe_key)
                    if row is not None:
                        mine.append(row)
                        how.append(O.DERIVED_READS)
                        continue
                    policy = ref.make()
                    fast = trusted(policy)  # asked before it plays: `begin` gives it its case's state
                    if not ref.builtin:
                        tell_start(policy, task, seed)
                    env = play(FinalityEnv(task, seed, profile, costs, probe=probe), policy)
                    row = _row(env, ref.label)
                    mine.append(row)
                    how.append(O.PLAYED)
                    if not fast:
                        tell_end(policy, row)
                        continue
                    if env.saw_only_truth and policy.ignores_seed:
                        kept = (row, tuple(env.world.captures))
                        if key is not None:
                            D.keep_truth_only(key, kept)
                    elif key is not None:
                        D.keep_reads((key[:4], seed), env, row, probe_key)
    return [{**{c: list(v) for c, v in zip(COLUMNS, zip(*mine))}, O.COLUMN: how} for mine, how in zip(rows, origins)]


def check_inputs(where: str, corpus, seeds, profile, costs) -> tuple[FaultProfile, Costs, list[int]]:
    """The checked (profile, costs, seeds) of an evaluation; defaults for None."""
    if not isinstance(corpus, Corpus):
        raise bad(where, "corpus", corpus, "a Corpus (make_corpus, load_corpus)")
    if len(corpus) == 0:
        raise bad(where, "corpus", corpus, "a Corpus with at least one task")
    profile = FaultProfile.default() if profile is None else profile
    if not isinstance(profile, FaultProfile):
        raise bad(where, "profile", profile, "a FaultProfile (FaultProfile.default(), .none(), .only(...), "
                                             ".without(...))")
    costs = Costs() if costs is None else costs
    if not isinstance(costs, Costs):
        raise bad(where, "costs", costs, "a Costs")
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__iter__"):
        raise bad(where, "seeds", seeds, "an iterable of integers >= 0, e.g. range(5)")
    seeds = [check_int(where, "each seed", s, 0) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise bad(where, "seeds", seeds, "a non-empty list of distinct integers")
    return profile, costs, seeds


_LOCAL_BACKENDS = ("LokyBackend", "MultiprocessingBackend", "ThreadingBackend", "SequentialBackend")


def _cluster_backend() -> bool:
    """Whether `joblib.parallel_config(backend=...)` has chosen a cluster (Dask, Ray, ...): its
    workers are not this machine's cores."""
    from joblib.parallel import get_active_backend

    return type(get_active_backend()[0]).__name__ not in _LOCAL_BACKENDS


def cap_jobs(n_jobs: int, work: int, where: str = "evaluate", pieces: str = "chunks") -> int:
    """At most one worker per piece of work and per core (a note when capped); under a cluster
    backend, per piece of work only (-1: one per piece, and the cluster schedules them).

    Raises:
        FinbenchError: `n_jobs` is not a positive integer or -1 (named as `where`'s argument).
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
        raise bad(where, "n_jobs", n_jobs, "a positive integer, or -1 for every core")
    if n_jobs != 1 and work > 1 and _cluster_backend():
        return work if n_jobs == -1 else min(n_jobs, work)
    cores = os.cpu_count() or 1
    want = cores if n_jobs == -1 else n_jobs
    capped = max(1, min(want, cores, work))
    if n_jobs > capped and n_jobs != -1:
        note(f"n_jobs={n_jobs} capped at {capped} ({work} {pieces} of work, {cores} cores)")
    return capped


def evaluate(corpus, policies=None, seeds=range(5), profile: FaultProfile | None = None,
             costs: Costs | None = None, n_jobs: int = 1, cache: bool | str | Path = True,
             progress: bool = False, probe: ProbeMode | None = None, max_connections: int = 1):
    """One row per (policy, task, seed), in that order; identical for any n_jobs or backend.

    Args:
        corpus: a `Corpus`.
        policies: None for SPEC's nine, or a list of policy references: names
            (`"sop"`, `"sop[patience=60]"`), `(name, knobs)` pairs, policy classes,
            factories or objects, or `PolicyRef`s (see `finbench.agents.registry`).
        seeds: the fault seeds.
        profile, costs: the fault profile and the economics (defaults: SPEC's).
        n_jobs: joblib workers (`joblib.parallel_config(backend=...)` picks the
            backend); capped at the chunks of work and the machine's cores.
        cache: True for `data/cache/`, a folder, or False: nothing read or written.
            A user's policy is played afresh unless it declares a `cache_id`
            (see `finbench.agents.registry`); a folder that cannot be written is
            warned about once and the run goes on uncached.
        progress: show a progress bar over chunks.
        probe: the probe mode (`finbench.sim.probe.ProbeMode`); None or `ProbeMode.full()` is
            SPEC's probe, and leaves every row and cache key as they were.
        max_connections: episodes of a user's policy in flight at once (default 1). Above 1, each
            of its episodes is played by a fresh copy of the policy on a thread of this process
            (`finbench.running.overlap`), up to this many at once: for an agent that waits on a
            server (a language model), whose episodes then overlap their waiting. Its code must be
            safe to run on several threads at once (one instance per thread; shared state locked).
            The package's policies are played as without it. Rows are the same for any value.

    Returns:
        A pandas DataFrame with the columns of `COLUMNS` and `origin` (how each row was obtained:
        `played`, `derived_seed`, `derived_reads` or `cache`; `finbench.running.origin`);
        `frame.attrs["loaded"]` maps each policy's label to how many of its episodes came from the cache.

    Raises:
        PolicyError: an unknown policy or knob, two policies with one label, or a policy that
            cannot be made (a factory that fails, an object that cannot be copied, a bad `cache_id`).
        FinbenchError: any other argument out of its domain (not a `Corpus`, an empty one, seeds
            that are not distinct integers >= 0, a profile, costs, probe mode, `n_jobs` or `cache`
            of the wrong kind). `PolicyError` is a `FinbenchError` too.
    """
    with thawed():  # whatever the batches froze is handed back to the collector once the rows are made
        return _evaluate(corpus, policies, seeds, profile, costs, n_jobs, cache, progress, probe, max_connections)


# About 65 lines on purpose: the public entry point checks every argument before any work.
def _evaluate(corpus, policies, seeds, profile, costs, n_jobs, cache, progress, probe, max_connections):
    import pandas as pd

    profile, costs, seeds = check_inputs("evaluate", corpus, seeds, profile, costs)
    probe = check_probe("evaluate", probe)
    max_connections = check_connections("evaluate", max_connections)
    if not (isinstance(cache, bool) or (isinstance(cache, (str, os.PathLike)) and str(cache).strip())):
        # an empty path would write into the current directory
        raise bad("evaluate", "cache", cache, "True (data/cache), False (no cache) or a folder path")
    refs = resolve_policies(policies)
    tasks = list(corpus.tasks)
    cache_dir = None if cache is False else K.usable(Path(CACHE_DIR if cache is True else cache))
    keys = [None if cache_dir is None else r.cache_key() for r in refs]  # taken now, as the episodes are played
    if cache_dir is not None:
        note_uncached(refs, keys)
    size = chunk_tasks(len(seeds), all(r.builtin for r in refs))
    chunks = [tasks[i:i + size] for i in range(0, len(tasks), size)]
    done: dict[tuple[int, int], dict] = {}
    todo: dict[int, list] = {}
    rejected = []
    loaded = dict.fromkeys((r.label for r in refs), 0)
    for ci, chunk in enumerate(chunks):
        ids = [t.task_id for t in chunk]
        for si, ref in enumerate(refs):
            path = key = None
            if keys[si] is not None:
                key = K.chunk_key(corpus.fingerprint, ids, keys[si], seeds, profile, costs, probe)
                path = K.chunk_path(cache_dir, ref.label, key)
                cols, why = K.load_chunk(path, key, ref.label, ids, seeds)
                if cols is not None:
                    cols[O.COLUMN] = [O.CACHE] * (len(ids) * len(seeds))
                    done[(ci, si)] = cols
                    count(cols[O.COLUMN])
                    loaded[ref.label] += len(ids) * len(seeds)
                    continue
                if why:
                    rejected.append(f"{ref.label}/{path.name} ({why})")
            todo.setdefault(ci, []).append((si, path, key))
    if rejected:
        warn_caller(f"recomputed {len(rejected)} cached chunk(s) that did not match what was asked, e.g. "
                    f"{rejected[0]}", CacheWarning)
    work = list(todo.items())
    pending = []  # a user's (chunk, policy) pairs whose episodes overlap, in threads of this process
    if max_connections > 1:
        pending = [(ci, item) for ci, items in work for item in items if not refs[item[0]].builtin]
        work = [(ci, kept) for ci, items in work if (kept := [it for it in items if refs[it[0]].builtin])]
    writable = True
    if work:
        calls = [(chunks[ci], [refs[si] for si, _, _ in items], seeds, profile, costs, probe, cache is not False)
                 for ci, items in work]
        workers = cap_jobs(n_jobs, len(work))
        if workers > 1:
            from joblib import Parallel, delayed

            results = Parallel(n_jobs=workers, return_as="generator")(delayed(run_chunk)(*c) for c in calls)
        else:
            results = (run_chunk(*c) for c in calls)
        if progress:
            from tqdm import tqdm

            results = tqdm(results, total=len(work), desc="chunks", leave=False)
        for (ci, items), per_ref in zip(work, results):
            ids = [t.task_id for t in chunks[ci]]
            for (si, path, key), cols in zip(items, per_ref):
                if path is not None and writable:
                    writable = K.try_save(path, key, refs[si].label, ids, seeds, _saved(cols))
                done[(ci, si)] = cols
                count(cols[O.COLUMN])
    for ci, (si, path, key), cols in _overlapped_chunks(pending, chunks, refs, seeds, (profile, costs, probe),
                                                        max_connections, progress):
        ids = [t.task_id for t in chunks[ci]]
        if path is not None and writable:
            writable = K.try_save(path, key, refs[si].label, ids, seeds, _saved(cols))
        done[(ci, si)] = cols
        count(cols[O.COLUMN])
    # one column at a time, each list freed once it is an array: the rows are never held twice over
    parts = [done.pop((ci, si)) for si in range(len(refs)) for ci in range(len(chunks))]
    frame = {}
    for c in (*COLUMNS, O.COLUMN):
        values = []
        for cols in parts:
            values.extend(cols.pop(c))
        frame[c] = pd.Series(values)
        del values
    out = pd.DataFrame(frame, copy=False)
    out.attrs["loaded"] = loaded
    return out


def _saved(cols: dict) -> dict:
    """The columns the episode cache holds: every one but `origin` (a loaded row's origin is `cache`)."""
    return {c: v for c, v in cols.items() if c != O.COLUMN}


def _shown(label: str) -> str:
    """A label as the terminal may print it: no control or escape characters (a user's name is theirs)."""
    return "".join(ch if ch.isprintable() else "?" for ch in label)


def note_uncached(refs, keys) -> None:
    """Say once which policies are played afresh, and how a user's policy is cached."""
    llm = sys.modules.get("finbench.agents.llm")  # a `ModelAgent` replays from its transcripts instead
    mine = [_shown(r.label) for r, k in zip(refs, keys) if k is None and not r.builtin and r.cache_id is None
            and not (llm is not None and isinstance(r.source, llm.ModelAgent))]
    if mine:
        note(f"playing {', '.join(mine)} afresh (not cached): a policy of your own is cached only when it "
             "declares a version, e.g. `cache_id = \"v1\"` on its class (bump it whenever what it plays changes)")
    odd = [_shown(r.label) for r, k in zip(refs, keys) if k is None and r.cache_id is not None]
    if odd:
        note(f"playing {', '.join(odd)} afresh (not cached): it declares a cache_id, but its code or state "
             "cannot be read or hashed to check it")
