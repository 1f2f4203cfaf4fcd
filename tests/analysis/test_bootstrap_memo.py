"""The bootstrap's two memos (`finbench.analysis.metrics`): the draws, shared read-only by every interval of a
table, and each resample's episode count, an integer sum computed once per (draws, counts)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finbench.analysis import metrics as M


def _frame(n_units: int = 30, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_units):
        for s in range(1 + u % 3):  # units of different sizes: the counts matter
            for p in ("a", "b", "c"):
                rows.append({"policy": p, "unit": f"u{u:03d}", "task_id": f"t{u}", "seed": s,
                             "gap": float(rng.normal(10, 5)) if p != "c" or u % 2 else 0.0})
    return pd.DataFrame(rows)


def _by_hand(df: pd.DataFrame, policy: str, n_boot: int, seed: int) -> np.ndarray:
    """The resampled means, spelled out: draws from a fresh generator, sums and counts per unit."""
    universe = np.unique(df["unit"])
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([M._BOOTSTRAP_KEY, seed])))
    idx = rng.integers(0, len(universe), size=(n_boot, len(universe)), dtype=np.int64)
    d = df[df.policy == policy].sort_values(["policy", "unit", "task_id", "seed", "gap"], kind="mergesort")
    g = d.groupby("unit")["gap"].agg(["sum", "size"]).reindex(universe, fill_value=0)
    return g["sum"].to_numpy()[idx].sum(axis=1) / g["size"].to_numpy()[idx].sum(axis=1)


def test_intervals_equal_those_drawn_by_hand_called_again_and_again():
    df = _frame()
    M._draws.cache_clear()
    M._COUNTS.clear()
    for _ in range(3):  # the second and third calls read both memos
        ci = M.bootstrap_ci(df, "gap", ["a", "b", "c"], n_boot=400, seed=5)
        for p in ("a", "b", "c"):
            lo, hi = np.nanquantile(_by_hand(df, p, 400, 5), [0.025, 0.975])
            assert (ci.loc[p, "lo"], ci.loc[p, "hi"]) == (lo, hi)
    assert M._draws.cache_info().hits >= 2 and M._COUNTS


def test_bootstrap_units_hands_out_a_copy_the_caller_may_change():
    units = [f"u{i}" for i in range(12)]
    first = M.bootstrap_units(units, n_boot=50, seed=1)
    assert first.flags.writeable
    first[:] = 0
    again = M.bootstrap_units(units, n_boot=50, seed=1)
    assert again.any() and not np.shares_memory(first, again)
    assert not M._draws(12, 50, 1).flags.writeable


@pytest.mark.parametrize("den", [np.array([1, 2, 0, 3]), np.array([1.0, 2.0, 0.5, 3.0])])
def test_drawn_counts_are_the_drawn_sums(den):
    M._COUNTS.clear()
    idx = M._draws(4, 100, 7)
    want = den[idx].sum(axis=1)
    assert np.array_equal(M._drawn_counts(den, idx), want)
    assert np.array_equal(M._drawn_counts(den, idx), want)
    assert len(M._COUNTS) == (den.dtype.kind == "i")  # integers only: a float sum depends on its order


def test_drawn_counts_of_draws_outside_the_memo_are_never_kept():
    M._COUNTS.clear()
    idx = np.array([[0, 1], [1, 1]])  # writeable: not the memo's draws, whose address may be reused
    assert M._drawn_counts(np.array([2, 5]), idx).tolist() == [7, 10]
    assert not M._COUNTS


def test_drawn_counts_are_keyed_by_the_counts_and_the_draws():
    M._COUNTS.clear()
    a, b = M._draws(3, 20, 0), M._draws(3, 20, 1)
    assert M._drawn_counts(np.array([1, 1, 1]), a).tolist() == [3] * 20
    two = np.array([2, 0, 0])
    assert np.array_equal(M._drawn_counts(two, a), two[a].sum(axis=1))
    assert np.array_equal(M._drawn_counts(two, b), two[b].sum(axis=1))
    assert len(M._COUNTS) == 3


def test_the_counts_memo_is_cleared_when_full(monkeypatch):
    M._COUNTS.clear()
    monkeypatch.setattr(M, "_COUNTS_SIZE", 2)
    idx = M._draws(3, 10, 0)
    for k in range(3):
        M._drawn_counts(np.array([k, 1, 1]), idx)
    assert len(M._COUNTS) == 1


def test_the_kept_counts_are_read_only_and_handed_out_again():
    """A caller that wrote into the counts would change every later interval that shares them."""
    M._COUNTS.clear()
    idx, den = M._draws(4, 100, 7), np.array([1, 2, 0, 3])
    first = M._drawn_counts(den, idx)
    assert not first.flags.writeable
    assert M._drawn_counts(den, idx) is first
