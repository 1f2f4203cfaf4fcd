"""Metrics over the per-episode results table.

Every function takes the DataFrame that ``evaluate`` returns (one row per
episode; columns ``task_id, archetype, unit, twin_side, policy, seed, gap,
exact, premature_irreversible, ...``) and returns a pandas object. Rates are
fractions in [0, 1]; notebooks format them as percentages.

Intervals are percentile bootstraps over *units*, not tasks or episodes:
twins share a unit, so resampling units keeps each twin pair together
(``scipy.stats.bootstrap`` cannot cluster). All policies in one call, and all
calls on the same table with the same seed, share one matrix of resampled
unit indices, so a comparison between two policies is measured on a shared
resample.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from finbench.memo import memoised, register

# The bootstrap's random stream is keyed by its purpose as well as the seed,
# so that seed 0 here is not the same stream as seed 0 anywhere else.
_BOOTSTRAP_KEY = int.from_bytes(hashlib.sha256(b"finbench/bootstrap").digest()[:4], "big")


def require(df: pd.DataFrame, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise KeyError(f"results table lacks column(s) {missing}; it has {list(df.columns)}")


def _as_list(by: str | Sequence[str]) -> list[str]:
    return [by] if isinstance(by, str) else list(by)


# --------------------------------------------------------------------------- pass^k


def pass_hat_k(df: pd.DataFrame, k: int, by: str | Sequence[str] = "policy") -> pd.Series:
    """The pass^k estimator of tau-bench, per group.

    For each task with ``c`` exact seeds out of ``n``, the chance that ``k``
    seeds drawn without replacement are all exact is ``C(c, k) / C(n, k)``;
    pass^k is its mean over tasks. With ``k == n`` it is the share of tasks
    exact under every seed; with ``k == 1`` it is the mean exact rate.

    Args:
        df: Per-episode results, one row per (group, task, seed).
        k: Number of seeds that must all be exact; ``1 <= k <= n``.
        by: Column(s) to group by; ``policy`` by default.

    Returns:
        pass^k per group (a fraction), named ``pass^{k}``.

    Raises:
        ValueError: If ``k < 1``, a task has fewer than ``k`` seeds, or a
            (group, task, seed) appears twice.
    """
    by = _as_list(by)
    require(df, [*by, "task_id", "seed", "exact"])
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if df.duplicated([*by, "task_id", "seed"]).any():
        raise ValueError(f"results repeat a ({', '.join(by)}, task_id, seed); pass^k needs one row per seed")
    per_task = (
        df.assign(exact=df["exact"].astype(bool))
        .groupby([*by, "task_id"], sort=True)["exact"]
        .agg(n="size", c="sum")
    )
    short = per_task[per_task["n"] < k]
    if len(short):
        raise ValueError(
            f"pass^{k} needs at least {k} seeds per task; {len(short)} task(s) have fewer "
            f"(e.g. {short.index[0]} with {int(short['n'].iloc[0])})"
        )
    # math.comb keeps the ratio exact for the small integers involved.
    ratio = [math.comb(int(c), k) / math.comb(int(n), k) for n, c in zip(per_task["n"], per_task["c"])]
    per_task = per_task.assign(p=ratio)
    out = per_task.groupby(level=by, sort=True)["p"].mean()
    return out.rename(f"pass^{k}")


def pass_k_curve(
    df: pd.DataFrame, ks: Iterable[int] = range(1, 6), by: str | Sequence[str] = "policy"
) -> pd.DataFrame:
    """pass^k for several k: one row per group, one column per k.

    Args:
        df: Per-episode results.
        ks: The values of k (columns, in this order).
        by: Column(s) to group by.

    Returns:
        A DataFrame indexed by group with integer columns ``k``.
    """
    ks = [int(k) for k in ks]
    curve = pd.concat({k: pass_hat_k(df, k, by=by) for k in ks}, axis=1)
    curve.columns.name = "k"
    return curve


# --------------------------------------------------------------------------- rates


def exact_rate(df: pd.DataFrame, by: str | Sequence[str] = "policy") -> pd.Series:
    """Share of episodes that are exact (gap <= $0.005), per group."""
    by = _as_list(by)
    require(df, [*by, "exact"])
    return df["exact"].astype(float).groupby([df[c] for c in by], sort=True).mean().rename("exact")


def mean_gap(df: pd.DataFrame, by: str | Sequence[str] = "policy") -> pd.Series:
    """Mean excess loss in dollars, per group."""
    by = _as_list(by)
    require(df, [*by, "gap"])
    return df["gap"].astype(float).groupby([df[c] for c in by], sort=True).mean().rename("mean_gap")


def premature_rate(df: pd.DataFrame, by: str | Sequence[str] = "policy") -> pd.Series:
    """Share of episodes with an irreversible action before determination, per group."""
    by = _as_list(by)
    require(df, [*by, "premature_irreversible"])
    col = df["premature_irreversible"].astype(float)
    return col.groupby([df[c] for c in by], sort=True).mean().rename("premature_irreversible")


def verdict_rate(df: pd.DataFrame, verdict: str, by: str | Sequence[str] = "policy") -> pd.Series:
    """Share of episodes whose effect-level verdict (the rows' `verdict`) is `verdict`."""
    require(df, ["verdict", *_as_list(by)])
    return df["verdict"].eq(verdict).groupby([df[c] for c in _as_list(by)], sort=True).mean().rename(verdict)


def privileged(df: pd.DataFrame, order) -> list[bool]:
    """Per policy in `order`, whether its episodes were told the resolution (the rows' `privileged`):
    such a policy is never compared as unprivileged. Rows without the column: only the reference."""
    if "privileged" not in df.columns:
        return [p == "finality_oracle" for p in order]
    told = df.groupby("policy")["privileged"].any()
    return [bool(told.get(p, False)) for p in order]


def summary_table(df: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The point estimates of Table II, per policy.

    Args:
        df: Per-episode results.
        k: The k of the pass^k column (5 in the paper).

    Returns:
        A DataFrame indexed by policy with columns ``n_episodes``, ``exact``,
        ``mean_gap``, ``pass^{k}`` and ``premature_irreversible`` (rates as
        fractions, gap in dollars).
    """
    require(df, ["policy"])
    return pd.concat(
        [
            df.groupby("policy", sort=True).size().rename("n_episodes"),
            exact_rate(df),
            mean_gap(df),
            pass_hat_k(df, k),
            premature_rate(df),
        ],
        axis=1,
    )


def exact_by_archetype(df: pd.DataFrame) -> pd.DataFrame:
    """Exact rate by archetype (rows) and policy (columns): Table III."""
    return exact_rate(df, by=["archetype", "policy"]).unstack("policy")


# --------------------------------------------------------------------------- bootstrap


def _universe(units: Iterable) -> np.ndarray:
    """The sorted distinct unit ids; column j of a resample refers to entry j."""
    arr = np.asarray(list(units) if not isinstance(units, (np.ndarray, pd.Series, pd.Index)) else units)
    if arr.ndim != 1:
        raise ValueError("units must be one-dimensional")
    return np.unique(arr)


def bootstrap_units(units: Iterable, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Resampled unit indices: the cluster bootstrap's draws.

    Units are drawn with replacement, as many as there are distinct units.
    Twins share a unit, so a resample holds both halves of a pair or neither.
    The draws depend only on the number of distinct units, ``n_boot`` and
    ``seed`` (a ``Generator`` from a ``SeedSequence`` keyed by the seed and
    this purpose; the global numpy state is never touched).

    Args:
        units: Unit ids; repeats are allowed (e.g. the ``unit`` column).
        n_boot: Number of resamples.
        seed: Non-negative integer seed.

    Returns:
        An integer array of shape ``(n_boot, n_units)``; entry ``[b, i]`` is
        an index into ``numpy.unique(units)`` (the sorted distinct ids).
    """
    return _draws(len(_universe(units)), n_boot, seed).copy()


@memoised("analysis.metrics.draws", keys="(units, resamples, seed): integers", bound=64)
def _draws(n_units: int, n_boot: int, seed: int) -> np.ndarray:
    """`bootstrap_units`' draws, read-only: they depend on the number of units alone, and every interval of a
    table (each arm, each policy pair) draws the same ones."""
    if n_units == 0:
        raise ValueError("cannot bootstrap over zero units")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_BOOTSTRAP_KEY, int(seed)])))
    idx = rng.integers(0, n_units, size=(int(n_boot), n_units), dtype=np.int64)
    idx.flags.writeable = False
    return idx


def _unit_sums(
    df: pd.DataFrame, value: str, policies: Sequence[str], universe: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per (policy, unit): sum of ``value`` and number of episodes.

    Rows are put in a canonical order first, so the float sums (and with them
    every interval) do not depend on the row order of ``df``.
    """
    sub = df.loc[df["policy"].isin(policies), ["policy", "unit", "task_id", "seed", value]]
    sub = sub.assign(**{value: sub[value].astype(float)})
    sub = sub.sort_values(["policy", "unit", "task_id", "seed", value], kind="mergesort")
    grouped = sub.groupby(["policy", "unit"], sort=True)[value].agg(["sum", "size"])
    p = pd.Index(policies).get_indexer(grouped.index.get_level_values("policy"))
    u = pd.Index(universe).get_indexer(grouped.index.get_level_values("unit"))
    sums = np.zeros((len(policies), len(universe)))
    counts = np.zeros((len(policies), len(universe)), dtype=np.int64)
    sums[p, u] = grouped["sum"].to_numpy()
    counts[p, u] = grouped["size"].to_numpy()
    return sums, counts


def _resampled_ratio(num: np.ndarray, den: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Ratio estimator per resample: sum of drawn numerators / sum of drawn counts."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return num[idx].sum(axis=1) / _drawn_counts(den, idx)


_COUNTS_SIZE = 256
_COUNTS: dict = register("analysis.metrics.drawn_counts", {}, keys="(the draws, the per-unit counts' bytes)",
                         bound=_COUNTS_SIZE)


def _drawn_counts(den: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`den[idx].sum(axis=1)`, each resample's episode count: integers, so the same whoever sums them, and the
    same for every policy that ran the same episodes under every arm of a table (computed once)."""
    if den.dtype.kind not in "iu" or idx.flags.writeable:  # floats, or draws that are not the memo's own
        return den[idx].sum(axis=1)
    key = (id(idx), den.dtype.str, den.tobytes())
    hit = _COUNTS.get(key)
    if hit is not None and hit[0] is idx:  # the draws themselves, not others at a reused address
        return hit[1]
    out = den[idx].sum(axis=1)
    out.flags.writeable = False
    if len(_COUNTS) >= _COUNTS_SIZE:
        _COUNTS.clear()
    _COUNTS[key] = (idx, out)
    return out


def _prepare(
    df: pd.DataFrame, value: str, policies: Sequence[str] | None, n_boot: int, seed: int
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    require(df, ["policy", "unit", "task_id", "seed", value])
    present = sorted(df["policy"].unique())
    if policies is None:
        policies = present
    else:
        policies = list(dict.fromkeys(policies))
        unknown = [p for p in policies if p not in present]
        if unknown:
            raise ValueError(f"no episodes for policy {unknown}; the table has {present}")
    # The universe is every unit of the table, whatever policies are asked
    # for, so that separate calls with one seed draw the same resamples.
    universe = _universe(df["unit"])
    idx = _draws(len(universe), n_boot, seed)
    sums, counts = _unit_sums(df, value, policies, universe)
    return policies, sums, counts, idx


def _percentiles(reps: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    lo, hi = np.nanquantile(reps, [alpha / 2, 1 - alpha / 2], axis=0)
    return lo, hi


def bootstrap_ci(
    df: pd.DataFrame,
    value: str = "gap",
    policies: Sequence[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Mean of ``value`` per policy with a unit-clustered percentile interval.

    Args:
        df: Per-episode results.
        value: Column to average (``gap``, or a boolean such as ``exact``).
        policies: Policies to report, in this order; all (sorted) by default.
        n_boot: Number of resamples.
        seed: Seed of the resampling.
        alpha: 1 - confidence level; the interval is the ``alpha/2`` and
            ``1 - alpha/2`` quantiles of the resampled means.

    Returns:
        A DataFrame indexed by policy with columns ``estimate``, ``lo``, ``hi``.
    """
    policies, sums, counts, idx = _prepare(df, value, policies, n_boot, seed)
    estimate = sums.sum(axis=1) / counts.sum(axis=1)
    reps = np.stack([_resampled_ratio(sums[i], counts[i], idx) for i in range(len(policies))], axis=1)
    lo, hi = _percentiles(reps, alpha)
    return pd.DataFrame(
        {"estimate": estimate, "lo": lo, "hi": hi}, index=pd.Index(policies, name="policy")
    )


def _paired_diff(
    sums: np.ndarray, counts: np.ndarray, i: int, j: int, idx: np.ndarray
) -> tuple[float, np.ndarray]:
    if np.array_equal(counts[i], counts[j]):
        # The usual case (both policies ran the same episodes): difference the
        # unit sums first, which is the same estimator and exact in more cases.
        num, den = sums[i] - sums[j], counts[i]
        return num.sum() / den.sum(), _resampled_ratio(num, den, idx)
    est = sums[i].sum() / counts[i].sum() - sums[j].sum() / counts[j].sum()
    reps = _resampled_ratio(sums[i], counts[i], idx) - _resampled_ratio(sums[j], counts[j], idx)
    return est, reps


def bootstrap_diff(
    df: pd.DataFrame,
    a: str,
    b: str,
    value: str = "gap",
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.Series:
    """Paired difference mean(a) - mean(b) on shared resamples of units.

    Args:
        df: Per-episode results.
        a: First policy.
        b: Second policy.
        value: Column to average.
        n_boot: Number of resamples.
        seed: Seed of the resampling (same seed, same resamples as
            ``bootstrap_ci`` on the same table).
        alpha: 1 - confidence level.

    Returns:
        A Series with ``estimate``, ``lo`` and ``hi``, named ``"a - b"``.
    """
    names = list(dict.fromkeys([a, b]))  # a == b is allowed (a zero difference)
    names, sums, counts, idx = _prepare(df, value, names, n_boot, seed)
    est, reps = _paired_diff(sums, counts, names.index(a), names.index(b), idx)
    lo, hi = _percentiles(reps, alpha)
    return pd.Series({"estimate": est, "lo": float(lo), "hi": float(hi)}, name=f"{a} - {b}")


def bootstrap_diff_unpaired(
    df: pd.DataFrame,
    a: str,
    b: str,
    value: str = "gap",
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.Series:
    """mean(a) - mean(b) with each policy resampled on its own (independent resamples, seeds
    `seed` and `seed + 1`): the interval a comparison of two separately reported means would
    give, beside the paired one of `bootstrap_diff`.

    Returns:
        A Series with ``estimate``, ``lo`` and ``hi``, named ``"a - b"``.
    """
    names, sums, counts, idx = _prepare(df, value, [a, b], n_boot, seed)
    other = _draws(len(_universe(df["unit"])), n_boot, seed + 1)
    i, j = names.index(a), names.index(b)
    est = sums[i].sum() / counts[i].sum() - sums[j].sum() / counts[j].sum()
    reps = _resampled_ratio(sums[i], counts[i], idx) - _resampled_ratio(sums[j], counts[j], other)
    lo, hi = _percentiles(reps, alpha)
    return pd.Series({"estimate": est, "lo": float(lo), "hi": float(hi)}, name=f"{a} - {b}")


def bootstrap_diff_table(
    df: pd.DataFrame,
    baseline: str,
    value: str = "gap",
    policies: Sequence[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Every policy's paired difference to one baseline (Table II's last column).

    Args:
        df: Per-episode results.
        baseline: The policy subtracted (e.g. ``finality_gate``).
        value: Column to average.
        policies: Policies to compare, in this order; all (sorted) by default.
        n_boot: Number of resamples.
        seed: Seed of the resampling.
        alpha: 1 - confidence level.

    Returns:
        A DataFrame indexed by policy with ``estimate``, ``lo``, ``hi`` of
        mean(policy) - mean(baseline); the baseline's own row is zero.
    """
    require(df, ["policy"])
    if policies is None:
        policies = sorted(df["policy"].unique())
    policies = list(policies)
    twice = next((p for i, p in enumerate(policies) if p in policies[:i]), None)
    if twice is not None:  # the table is indexed by name: a second row of one name would hide the first
        raise ValueError(f"bootstrap_diff_table: policies names {twice!r} twice: {policies!r}")
    every = policies + ([baseline] if baseline not in policies else [])
    every, sums, counts, idx = _prepare(df, value, every, n_boot, seed)
    j = every.index(baseline)
    rows = {}
    for i, name in enumerate(policies):
        est, reps = _paired_diff(sums, counts, i, j, idx)
        lo, hi = _percentiles(reps, alpha)
        rows[name] = {"estimate": est, "lo": float(lo), "hi": float(hi)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "policy"
    return out
