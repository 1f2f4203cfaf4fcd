"""The experiment layer's run description: one frozen value that evaluates itself and stamps its outputs.

    run = Run.make(n_tasks=321, seeds=range(5), n_jobs=2)
    df = run.evaluate()                    # episode rows, cached, shared
    run.stamp(), run.caption()             # what every table and figure prints
    frame = sweep(run, {"profile": [FaultProfile.none(), FaultProfile.only("loss")]})

A `Run` names everything that decides its episodes: the corpus, the seeds, the
fault profile, the costs, the policies, and the bootstrap (replicates and
seed). How it is executed (`n_jobs`, the cache folder, a progress bar) is not
part of its identity and cannot change a result.

Episodes are shared between runs: in memory (the same simulation, policy by
policy) and on disk (the episode cache). A run whose costs differ from an
already simulated one only in prices is re-priced, not simulated
(`finbench.running.reprice`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from finbench.sim import constants as C
from finbench.sim.corpus import Corpus, corpus_for
from finbench.sim.economics import Costs
from finbench.errors import FinbenchError, check_int, show
from finbench.memo import register
from finbench.running import origin as O
from finbench.running.stats import add
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode, check_probe
from finbench.agents.registry import DEFAULT_POLICIES, PolicyRef, resolve_policies
from finbench.running.evaluation import check_inputs
from finbench.running.reprice import Repricer, simulation_key
from finbench.running.evaluation import evaluate
from finbench.running.overlap import check_connections


def seeds_label(seeds) -> str:
    """'0..4' for a contiguous range, else '0,2,7'."""
    s = list(seeds)
    if len(s) > 2 and s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}..{s[-1]}"
    return ",".join(map(str, s))


def costs_label(costs: Costs) -> str:
    """'default', or the fields that differ from SPEC's defaults: 'cogs_rate=0.4,dispute_fee=15'."""
    base = Costs()
    diff = [f"{f.name}={getattr(costs, f.name):g}" for f in dataclasses.fields(Costs)
            if getattr(costs, f.name) != getattr(base, f.name)]
    return ",".join(diff) or "default"


@dataclass(frozen=True)
class Run:
    """Everything that decides a set of episodes and the intervals over them.

    Attributes:
        corpus: the tasks.
        seeds: the fault seeds (a tuple of ints).
        profile: the fault profile.
        costs: the economics.
        policies: policy references (None: SPEC's nine); see `finbench.agents.registry`.
        probe: what `probe_processor` answers (default: SPEC's full probe); see `finbench.sim.probe`.
        n_boot, boot_seed: bootstrap replicates and seed for every interval.
        n_jobs, cache, progress: how to execute; not part of the run's identity.
        max_connections: episodes of a user's policy in flight at once, each on a thread with its own
            copy (`evaluate`'s argument: for an agent that waits on a server); not part of the identity.
    """

    corpus: Corpus
    seeds: tuple = tuple(range(5))
    profile: FaultProfile = field(default_factory=FaultProfile.default)
    costs: Costs = field(default_factory=Costs)
    policies: Any = None
    n_boot: int = 2000
    boot_seed: int = 0
    probe: ProbeMode = field(default_factory=ProbeMode.full)
    n_jobs: int = field(default=1, compare=False)
    cache: Any = field(default=True, compare=False)
    progress: bool = field(default=False, compare=False)
    max_connections: int = field(default=1, compare=False)

    def __post_init__(self):
        profile, costs, seeds = check_inputs("Run", self.corpus, self.seeds, self.profile, self.costs)
        object.__setattr__(self, "seeds", tuple(seeds))
        object.__setattr__(self, "profile", profile)  # None means the default, as in `evaluate`
        object.__setattr__(self, "costs", costs)
        object.__setattr__(self, "probe", check_probe("Run", self.probe))
        object.__setattr__(self, "policies", resolve_policies(self.policies))
        object.__setattr__(self, "n_boot", check_int("Run", "n_boot", self.n_boot, 1, 1_000_000))
        object.__setattr__(self, "boot_seed", check_int("Run", "boot_seed", self.boot_seed, 0))
        check_connections("Run", self.max_connections)

    @classmethod
    def make(cls, master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS, **kw) -> Run:
        """A run over `make_corpus(master_seed, n_tasks)` (memoised); `kw` as the fields."""
        return cls(corpus_for(master_seed, n_tasks), **kw)

    def replace(self, **changes) -> Run:
        return dataclasses.replace(self, **changes)

    # --- identity and stamps ---------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.policies]

    @property
    def default_policies(self) -> bool:
        return tuple(self.labels) == DEFAULT_POLICIES

    @property
    def episodes(self) -> int:
        return len(self.corpus) * len(self.seeds) * len(self.policies)

    @property
    def k(self) -> int:
        """The k of pass^k: 5 as in the paper, or every seed when there are fewer."""
        return min(5, len(self.seeds))

    def key(self) -> str:
        """16 hex digits naming the run (not its execution), stable across processes."""
        blob = json.dumps([C.ENGINE_VERSION, self.corpus.fingerprint, list(self.seeds), self.profile.key(),
                           self.costs.key(), [r.cache_key() or f"uncached:{r.label}" for r in self.policies],
                           self.n_boot, self.boot_seed] + ([] if self.probe.is_full else [self.probe.key()]))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def stamp(self, bootstrap: bool = True, **extra) -> dict:
        """What every table prints: corpus, seeds, profile, costs (and policies if not the nine)."""
        c = self.corpus
        meta = {"corpus": c.fingerprint, "master_seed": c.master_seed, "tasks": len(c), "units": len(c.units),
                "twin_pairs": len(c.twin_pairs), "engine": C.ENGINE_VERSION, "seeds": seeds_label(self.seeds),
                "profile": self.profile.name, "costs": costs_label(self.costs)}
        if not self.probe.is_full:
            meta["probe"] = self.probe.name
        if not self.default_policies:
            meta["policies"] = ", ".join(self.labels)
        if bootstrap:
            meta.update(n_boot=self.n_boot, boot_seed=self.boot_seed)
        clash = sorted(set(extra) & (set(meta) | {"probe", "policies", "n_boot", "boot_seed"}))
        if clash:  # the stamp is what the run was: extra entries add to it, never overwrite it
            raise FinbenchError(f"Run.stamp: extra entries may not replace the run's own {', '.join(clash)}")
        meta.update(extra)
        return meta

    def caption(self) -> str:
        """What every figure prints: corpus, episodes, seeds, profile, costs."""
        return (f"corpus {self.corpus.fingerprint} · {self.episodes:,} episodes · seeds {seeds_label(self.seeds)}"
                f" · profile {self.profile.name} · costs {costs_label(self.costs)}"
                + ("" if self.probe.is_full else f" · probe {self.probe.name}"))

    # --- episodes --------------------------------------------------------------------
    def evaluate(self):
        """The run's episode rows (`runner.evaluate`'s columns), shared with earlier runs where possible; a
        row's `origin` also says `memo`, `cut` or `repriced` when it came from an earlier run."""
        return _episodes(self)


# --- episodes shared between runs ------------------------------------------------------

_MEMO_SIZE = 512
_MEMO: OrderedDict = register("running.run.episodes", OrderedDict(), keys="(corpus fingerprint, seeds, profile, "
                              "the costs a policy sees, the policy's cache key, probe mode)", bound=_MEMO_SIZE)
"""A policy's episode rows in a run, with the costs they were priced under; only a policy with a cache key."""


class _Store:
    """Where `_episodes` keeps rows to share: the process's memos, or (`private`) one sweep's own, which a run
    that asks for nothing cached still shares within that sweep and drops after it (its costs re-priced, not
    played again)."""

    def __init__(self, memo: OrderedDict, repricers: OrderedDict, private: bool = False):
        self.memo, self.repricers, self.private = memo, repricers, private


def _sim_key(run: Run, ref: PolicyRef, store: _Store) -> tuple | None:
    """What decides a policy's episodes in a run, taken now; None (never shared) without a cache key
    (a user's policy that declares no `cache_id`) or when the run asks for nothing cached (but within its
    own sweep)."""
    key = None if run.cache is False and not store.private else ref.cache_key()
    if key is None:
        return None
    return (run.corpus.fingerprint, run.seeds, run.profile.key(), simulation_key(run.costs), key,
            tuple(run.probe.key()))


def _episodes(run: Run, store: _Store | None = None):
    """Per policy: a memoised simulation of the same episodes (re-priced if only prices differ),
    else `evaluate` for every missing policy at once (so worlds are built once for all of them).
    `df.attrs["loaded"]` counts each policy's episodes that were not played now."""
    import pandas as pd  # lazy: a Run is described without loading pandas

    store = store or _SHARED
    memo = store.memo
    parts: dict[int, Any] = {}
    missing = []
    hits: dict = {}  # simulated costs -> [(i, key, frame)]: one re-pricing for all of them (pandas costs per call)
    keys = [_sim_key(run, ref, store) for ref in run.policies]
    loaded = dict.fromkeys(run.labels, 0)
    for i, ref in enumerate(run.policies):
        key = keys[i]
        hit = None if key is None else memo.get(key)
        how = O.MEMO
        if hit is None and key is not None and ref.builtin:  # a user's rows only for the very run that played them
            hit, how = _fewer_seeds(key, memo), O.CUT
        if hit is None:
            missing.append(i)
            continue
        if key in memo:
            memo.move_to_end(key)
        frame, costs = hit
        loaded[ref.label] = len(frame)
        hits.setdefault(costs, []).append((i, key, frame, how))
    for costs, items in hits.items():
        if costs == run.costs:
            for i, _, frame, how in items:
                parts[i] = frame.assign(**{O.COLUMN: how})  # a copy: the memo keeps the rows' own origins
                add(how, len(frame))
            continue
        priced = _repricer(run.corpus, costs, items, store.repricers).priced(run.costs)
        if len(items) == len(run.policies):  # all of them, in order: the frame is the run's rows
            priced.attrs["loaded"] = loaded
            return priced
        start = 0
        for i, _, frame, _ in items:
            parts[i] = priced.iloc[start:start + len(frame)].reset_index(drop=True)
            start += len(frame)
    if missing:
        df = evaluate(run.corpus, [run.policies[i] for i in missing], run.seeds, run.profile, run.costs,
                      n_jobs=run.n_jobs, cache=run.cache, progress=run.progress, probe=run.probe,
                      max_connections=run.max_connections)
        loaded.update(df.attrs.get("loaded", {}))
        for i in missing:
            ref = run.policies[i]
            frame = df[df["policy"] == ref.label].reset_index(drop=True)
            key = keys[i]
            if key is not None:
                memo[key] = (frame, run.costs)
            parts[i] = frame
        while len(memo) > _MEMO_SIZE:
            memo.popitem(last=False)
    out = pd.concat([parts[i] for i in range(len(run.policies))], ignore_index=True)
    out.attrs["loaded"] = loaded
    return out


def _fewer_seeds(key: tuple, memo: OrderedDict) -> tuple | None:
    """A memoised frame of the same episodes under more seeds, cut to `key`'s (its rows of those seeds, in
    its order), kept under `key`: a row does not depend on which other seeds were asked (each seed's episode
    is played, or derived exactly as playing it would give). The splits' ablation and cost sweep on one seed
    take the headline's first seed so. The seeds must come in the memo's order (a subsequence of them)."""
    fp, seeds, *rest = key
    for (fp2, seeds2, *rest2), (frame, costs) in reversed(memo.items()):
        if fp2 != fp or rest2 != rest or len(seeds2) <= len(seeds):
            continue
        where = {s: n for n, s in enumerate(seeds2)}
        at = [where.get(s) for s in seeds]
        if None not in at and at == sorted(at):
            break
    else:
        return None
    cut = frame[frame["seed"].isin(seeds)].reset_index(drop=True)
    memo[key] = (cut, costs)
    while len(memo) > _MEMO_SIZE:
        memo.popitem(last=False)
    return cut, costs


_REPRICERS_SIZE = 8
_REPRICERS: OrderedDict = register("running.run.repricers", OrderedDict(), keys="(corpus fingerprint, simulated "
                                   "costs, the run memo's keys of the frames)", bound=_REPRICERS_SIZE)


def _repricer(corpus: Corpus, costs, items, repricers: OrderedDict) -> Repricer:
    """The memo's frames of `items`, concatenated and made ready to price, kept for the next costs
    (a cost sweep prices the same frames under 45). The memo's own rows, simulated here from this
    corpus under `costs`: no row check needed."""
    import pandas as pd  # lazy: a Run is described without loading pandas

    key = (corpus.fingerprint, costs, tuple(item[1] for item in items))
    rows = repricers.get(key)
    if rows is None:
        rows = repricers[key] = Repricer(pd.concat([item[2] for item in items], ignore_index=True), corpus)
        while len(repricers) > _REPRICERS_SIZE:
            repricers.popitem(last=False)
    repricers.move_to_end(key)
    return rows


_SHARED = _Store(_MEMO, _REPRICERS)


# --- sweeps ----------------------------------------------------------------------------

def _grid_label(value: Any) -> Any:
    if isinstance(value, (FaultProfile, ProbeMode)):
        return value.name
    if isinstance(value, Costs):
        return costs_label(value)
    if isinstance(value, Corpus):
        return value.master_seed if value.master_seed is not None else value.fingerprint
    if isinstance(value, (list, tuple, range)) and all(isinstance(x, int) for x in value):
        return seeds_label(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(getattr(x, "label", x)) for x in value)
    return value


def sweep(base: Run, grid: dict[str, list], summarise: Callable[[Run, Any], Any] | None = None):
    """Every combination of `grid` applied to `base`, as one tidy frame.

    Args:
        base: the run every combination starts from.
        grid: field name -> list of values (a dict of lists, as a scenario runner takes).
            Fields are `Run`'s: corpus, seeds, profile, costs, policies, probe, n_boot, boot_seed.
        summarise: `f(run, episodes) -> DataFrame` applied per combination; None keeps
            the episode rows.

    Returns:
        The concatenated frames, with one leading column per grid field (a readable
        label of the value: a profile's name, a costs label, ...), in grid order.
        Episodes are simulated once per distinct simulation and re-priced across costs.
    """
    import pandas as pd

    if not isinstance(base, Run):
        raise FinbenchError(f"sweep: base must be a Run, got {show(base)}")
    if not isinstance(grid, dict) or not grid:
        raise FinbenchError(f"sweep: grid must be a non-empty dict of Run field -> list of values, got {show(grid)}")
    if summarise is not None and not callable(summarise):
        raise FinbenchError(f"sweep: summarise must be f(run, episodes) -> DataFrame, got {show(summarise)}")
    names = list(grid)
    bad = [n for n in names if n not in {f.name for f in dataclasses.fields(Run)} or n in ("n_jobs", "cache",
                                                                                          "progress", "max_connections")]
    if bad:
        raise FinbenchError(f"sweep: unknown Run field(s) {bad}; sweepable: corpus, seeds, profile, costs, "
                            "policies, probe, n_boot, boot_seed")
    # each field's values read once: an iterator is not read twice
    values = {n: list(grid[n]) if hasattr(grid[n], "__iter__") and not isinstance(grid[n], (str, bytes)) else None
              for n in names}
    empty = [n for n, v in values.items() if not v]
    if empty:
        raise FinbenchError(f"sweep: grid field(s) {', '.join(empty)} must be a non-empty list of values")
    frames = []
    # a run that asks for nothing cached shares its rows within this sweep only (its other costs re-priced)
    store = _Store(OrderedDict(), OrderedDict(), private=True) if base.cache is False else None
    for combo in itertools.product(*(values[n] for n in names)):
        run = base.replace(**dict(zip(names, combo)))
        df = _episodes(run, store)  # `run.evaluate()` when store is None
        out = summarise(run, df) if summarise is not None else df
        if not isinstance(out, pd.DataFrame):
            raise FinbenchError(f"sweep: summarise must return a DataFrame, got {show(out)}")
        labels = {n: _grid_label(v) for n, v in zip(names, combo)}
        frames.append(out.assign(**labels)[[*names, *[c for c in out.columns if c not in names]]])
    return pd.concat(frames, ignore_index=True)

