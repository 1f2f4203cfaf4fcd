"""Tests for finbench.analysis.metrics: pass^k, rates, the unit-clustered bootstrap, twins."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.analysis import metrics as m
from finbench.analysis import ordering

SEEDS = range(5)


def results(
    exact: dict[str, dict[str, list[bool]]],
    gap: dict[str, dict[str, list[float]]] | None = None,
    units: dict[str, str] | None = None,
) -> pd.DataFrame:
    """A results table from {policy: {task_id: [per-seed values]}}."""
    rows = []
    for policy, tasks in exact.items():
        for task, flags in tasks.items():
            for seed, flag in enumerate(flags):
                g = gap[policy][task][seed] if gap else (0.0 if flag else 10.0)
                rows.append(
                    {
                        "task_id": task,
                        "archetype": "pending_settle",
                        "unit": (units or {}).get(task, task),
                        "twin_side": None,
                        "policy": policy,
                        "seed": seed,
                        "gap": float(g),
                        "exact": bool(flag),
                        "premature_irreversible": False,
                    }
                )
    return pd.DataFrame(rows)


def synthetic(n_units: int = 60, n_twins: int = 15, policies=("a", "b", "c"), seed: int = 7) -> pd.DataFrame:
    """A random results table shaped like evaluate()'s: twins share a unit."""
    rng = np.random.default_rng(seed)
    archetypes = ["settled_clean", "pending_settle", "unresolvable", "partial_ledger"]
    rows = []
    for u in range(n_units):
        unit = f"u{u:03d}"
        sides = ("settle", "fail") if u < n_twins else (None,)
        for side in sides:
            task = f"t{u:03d}" + (f"-{side}" if side else "")
            arch = archetypes[u % len(archetypes)]
            for policy in policies:
                skill = {"a": 0.8, "b": 0.5, "c": 0.3}.get(policy, 0.5)
                for s in SEEDS:
                    ok = rng.random() < skill
                    rows.append(
                        {
                            "task_id": task,
                            "archetype": arch,
                            "unit": unit,
                            "twin_side": side,
                            "policy": policy,
                            "seed": s,
                            "position": 0.0,
                            "reference_position": 0.0,
                            "gap": 0.0 if ok else float(np.round(rng.uniform(1, 500), 2)),
                            "exact": ok,
                            "premature_irreversible": bool(rng.random() < 1 - skill),
                            "n_calls": 3,
                            "end_t": 200,
                        }
                    )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- pass^k


def test_pass_hat_k_hand_computed_single_task():
    df = results({"p": {"t1": [True, True, True, False, False]}})
    expected = {1: 3 / 5, 2: 3 / 10, 3: 1 / 10, 4: 0.0, 5: 0.0}
    for k, value in expected.items():
        assert m.pass_hat_k(df, k)["p"] == pytest.approx(value, abs=1e-15)
    assert m.pass_hat_k(df, 2).name == "pass^2"


def test_pass_hat_k_averages_over_tasks_per_policy():
    df = results(
        {
            "p": {"t1": [True] * 5, "t2": [True, True, True, False, False]},
            "q": {"t1": [False] * 5, "t2": [True] * 4 + [False]},
        }
    )
    got = m.pass_hat_k(df, 2)
    assert got["p"] == pytest.approx((1 + 3 / 10) / 2)
    assert got["q"] == pytest.approx((0 + math.comb(4, 2) / math.comb(5, 2)) / 2)
    assert list(got.index) == ["p", "q"]


def test_pass_n_is_share_of_tasks_exact_under_every_seed_and_pass_1_is_exact_rate():
    df = synthetic()
    all_right = df.groupby(["policy", "task_id"])["exact"].all().groupby("policy").mean()
    pdt.assert_series_equal(m.pass_hat_k(df, 5), all_right.astype(float), check_names=False)
    pdt.assert_series_equal(m.pass_hat_k(df, 1), m.exact_rate(df), check_names=False)


def test_pass_hat_k_rejects_too_few_seeds_and_repeated_rows():
    df = results({"p": {"t1": [True, False, True]}})
    with pytest.raises(ValueError, match="at least 5 seeds"):
        m.pass_hat_k(df, 5)
    with pytest.raises(ValueError, match="at least 1"):
        m.pass_hat_k(df, 0)
    with pytest.raises(ValueError, match="one row per seed"):
        m.pass_hat_k(pd.concat([df, df.iloc[:1]]), 2)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=1, max_value=8).flatmap(
        lambda n: st.lists(
            st.lists(st.booleans(), min_size=n, max_size=n), min_size=1, max_size=12
        )
    )
)
def test_pass_hat_k_is_a_probability_non_increasing_in_k(matrix):
    n = len(matrix[0])
    df = results({"p": {f"t{i}": row for i, row in enumerate(matrix)}})
    curve = m.pass_k_curve(df, ks=range(1, n + 1)).loc["p"].to_numpy()
    assert np.all((curve >= 0) & (curve <= 1))
    assert np.all(np.diff(curve) <= 1e-12)
    assert curve[-1] == pytest.approx(np.mean([all(row) for row in matrix]))
    assert curve[0] == pytest.approx(np.mean(matrix))


def test_pass_k_curve_shape():
    curve = m.pass_k_curve(synthetic())
    assert list(curve.columns) == [1, 2, 3, 4, 5]
    assert list(curve.index) == ["a", "b", "c"]


# --------------------------------------------------------------------------- rates


def test_summary_table_and_archetype_table():
    df = results(
        {"p": {"t1": [True, False, True, True, True]}, "q": {"t1": [False] * 5}},
        gap={"p": {"t1": [0, 10, 0, 0, 0]}, "q": {"t1": [1, 2, 3, 4, 5]}},
    )
    df.loc[(df["policy"] == "q") & (df["seed"] < 2), "premature_irreversible"] = True
    table = m.summary_table(df)
    assert list(table.columns) == ["n_episodes", "exact", "mean_gap", "pass^5", "premature_irreversible"]
    assert table.loc["p"].tolist() == pytest.approx([5, 0.8, 2.0, 0.0, 0.0])
    assert table.loc["q"].tolist() == pytest.approx([5, 0.0, 3.0, 0.0, 0.4])
    arch = m.exact_by_archetype(df)
    assert arch.loc["pending_settle", "p"] == pytest.approx(0.8)


# --------------------------------------------------------------------------- bootstrap: the draws


def test_bootstrap_units_shape_range_and_determinism():
    units = ["u2", "u0", "u1", "u1", "u0"]  # repeats are fine: 3 distinct units
    idx = m.bootstrap_units(units, n_boot=500, seed=3)
    assert idx.shape == (500, 3)
    assert idx.min() >= 0 and idx.max() <= 2
    np.testing.assert_array_equal(idx, m.bootstrap_units(["u0", "u1", "u2"], n_boot=500, seed=3))
    assert not np.array_equal(idx, m.bootstrap_units(units, n_boot=500, seed=4))


def test_bootstrap_never_touches_global_numpy_state():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    m.bootstrap_units(range(50), n_boot=100, seed=0)
    m.bootstrap_ci(synthetic(), n_boot=50)
    np.testing.assert_array_equal(before, np.random.get_state()[1])


def test_resamples_hold_twins_together():
    df = synthetic(n_units=20, n_twins=8, policies=("a",))
    universe = np.unique(df["unit"])
    idx = m.bootstrap_units(df["unit"], n_boot=300, seed=1)
    tasks_of_unit = df.groupby("unit")["task_id"].unique()
    for row in idx:
        drawn = pd.Series([t for u in universe[row] for t in tasks_of_unit[u]]).value_counts()
        for u in universe[:8]:  # the twin units
            settle, fail = f"t{u[1:]}-settle", f"t{u[1:]}-fail"
            assert drawn.get(settle, 0) == drawn.get(fail, 0)


def test_twin_pair_of_plus_and_minus_100_cancels_in_every_resample():
    # All gaps 0 except one twin pair at +100 / -100: every resample that
    # keeps twins together has a mean of exactly 0.
    df = synthetic(n_units=40, n_twins=5, policies=("a",))
    df["gap"] = 0.0
    df.loc[df["task_id"] == "t002-settle", "gap"] = 100.0
    df.loc[df["task_id"] == "t002-fail", "gap"] = -100.0
    ci = m.bootstrap_ci(df, n_boot=2000, seed=0).loc["a"]
    assert (ci["estimate"], ci["lo"], ci["hi"]) == (0.0, 0.0, 0.0)
    # The same data resampled by task, splitting the pair, is not degenerate:
    # this is what the test above would catch.
    split = m.bootstrap_ci(df.assign(unit=df["task_id"]), n_boot=2000, seed=0).loc["a"]
    assert split["lo"] < 0 < split["hi"]


def test_bootstrap_ci_matches_a_naive_row_level_resample():
    df = synthetic(n_units=25, n_twins=6, policies=("a", "b"))
    n_boot = 200
    universe = np.unique(df["unit"])
    idx = m.bootstrap_units(df["unit"], n_boot=n_boot, seed=11)
    rows_of_unit = {u: g for u, g in df.groupby("unit")}
    for policy in ("a", "b"):
        reps = []
        for row in idx:
            sample = pd.concat([rows_of_unit[u] for u in universe[row]])
            reps.append(sample.loc[sample["policy"] == policy, "gap"].mean())
        lo, hi = np.quantile(reps, [0.025, 0.975])
        got = m.bootstrap_ci(df, n_boot=n_boot, seed=11).loc[policy]
        assert got["estimate"] == pytest.approx(df.loc[df["policy"] == policy, "gap"].mean())
        assert (got["lo"], got["hi"]) == pytest.approx((lo, hi), rel=1e-12)


# --------------------------------------------------------------------------- bootstrap: intervals


def test_bootstrap_ci_deterministic_contains_estimate_and_depends_on_seed():
    df = synthetic()
    one = m.bootstrap_ci(df, n_boot=1000, seed=5)
    pdt.assert_frame_equal(one, m.bootstrap_ci(df, n_boot=1000, seed=5), check_exact=True)
    assert list(one.columns) == ["estimate", "lo", "hi"]
    assert (one["lo"] <= one["estimate"]).all() and (one["estimate"] <= one["hi"]).all()
    assert (one["lo"] < one["hi"]).all()
    assert not one.equals(m.bootstrap_ci(df, n_boot=1000, seed=6))
    exact = m.bootstrap_ci(df, value="exact", n_boot=500, seed=5)
    assert ((exact["lo"] >= 0) & (exact["hi"] <= 1)).all()
    pdt.assert_series_equal(exact["estimate"], m.exact_rate(df), check_names=False)


@pytest.mark.parametrize("shuffle_seed", [0, 1, 2])
def test_bootstrap_is_invariant_to_row_order(shuffle_seed):
    df = synthetic()
    shuffled = df.sample(frac=1.0, random_state=shuffle_seed).reset_index(drop=True)
    pdt.assert_frame_equal(m.bootstrap_ci(df, n_boot=500), m.bootstrap_ci(shuffled, n_boot=500), check_exact=True)
    pdt.assert_series_equal(
        m.bootstrap_diff(df, "a", "b", n_boot=500), m.bootstrap_diff(shuffled, "a", "b", n_boot=500), check_exact=True
    )


def test_policy_subset_uses_the_same_resamples():
    df = synthetic()
    full = m.bootstrap_ci(df, n_boot=500, seed=2)
    pdt.assert_frame_equal(m.bootstrap_ci(df, policies=["c", "a"], n_boot=500, seed=2), full.loc[["c", "a"]])
    with pytest.raises(ValueError, match="no episodes"):
        m.bootstrap_ci(df, policies=["nope"])


def test_paired_diff_with_itself_is_exactly_zero():
    diff = m.bootstrap_diff(synthetic(), "b", "b", n_boot=2000, seed=0)
    assert (diff["estimate"], diff["lo"], diff["hi"]) == (0.0, 0.0, 0.0)


def test_paired_diff_of_a_constant_shift_is_exactly_that_shift():
    df = synthetic(policies=("b",))
    df["gap"] = np.round(df["gap"])  # whole dollars, so the shift is exact in floating point
    shifted = df.assign(policy="a", gap=df["gap"] + 5.0)
    both = pd.concat([df, shifted], ignore_index=True)
    diff = m.bootstrap_diff(both, "a", "b", n_boot=2000, seed=0)
    assert (diff["estimate"], diff["lo"], diff["hi"]) == (5.0, 5.0, 5.0)
    # With arbitrary cents the shift holds to rounding.
    cents = synthetic(policies=("b",))
    both = pd.concat([cents, cents.assign(policy="a", gap=cents["gap"] + 5.0)], ignore_index=True)
    diff = m.bootstrap_diff(both, "a", "b", n_boot=500, seed=0)
    assert diff.tolist() == pytest.approx([5.0, 5.0, 5.0], abs=1e-9)


def test_paired_diff_is_tighter_than_unpaired_and_consistent_with_table():
    df = synthetic()
    diff = m.bootstrap_diff(df, "c", "a", n_boot=1000, seed=0)
    ci = m.bootstrap_ci(df, n_boot=1000, seed=0)
    assert diff["estimate"] == pytest.approx(ci.loc["c", "estimate"] - ci.loc["a", "estimate"])
    assert diff["lo"] <= diff["estimate"] <= diff["hi"]
    table = m.bootstrap_diff_table(df, baseline="a", n_boot=1000, seed=0)
    pdt.assert_series_equal(table.loc["c"], diff, check_names=False)
    assert table.loc["a"].tolist() == [0.0, 0.0, 0.0]


def test_paired_diff_with_unequal_episodes_is_difference_of_means():
    df = synthetic()
    df = df[~((df["policy"] == "a") & (df["seed"] == 4))]
    diff = m.bootstrap_diff(df, "a", "b", n_boot=500, seed=0)
    expected = df.loc[df["policy"] == "a", "gap"].mean() - df.loc[df["policy"] == "b", "gap"].mean()
    assert diff["estimate"] == pytest.approx(expected)
    assert diff["lo"] <= diff["estimate"] <= diff["hi"]


# --------------------------------------------------------------------------- rankings and twins


def test_rank_disagreements():
    assert ordering.rank_disagreements(["a", "b", "c"], ["a", "b", "c"]) == 0
    assert ordering.rank_disagreements(["a", "b", "c"], ["a", "c", "b"]) == 2
    assert ordering.rank_disagreements(["a", "b", "c"], ["c", "a", "b"]) == 3
    with pytest.raises(ValueError):
        ordering.rank_disagreements(["a", "b"], ["a", "c"])


def test_rank_policies_breaks_ties_by_name():
    scores = pd.Series({"z": 1.0, "a": 1.0, "m": 0.5})
    assert ordering.rank_policies(scores, ascending=True) == ["m", "a", "z"]
    assert ordering.rank_policies(scores, ascending=False) == ["a", "z", "m"]


def test_twin_table_hand_computed():
    rows = []
    for policy, settle_gap, fail_gap in [("gate", 0.0, 20.0), ("eager", 100.0, 0.0)]:
        for unit in ("u1", "u2"):
            for side, gap in (("settle", settle_gap), ("fail", fail_gap)):
                rows.append(
                    dict(task_id=f"{unit}-{side}", archetype="unresolvable", unit=unit, twin_side=side,
                         policy=policy, seed=0, gap=gap, exact=gap == 0.0,
                         premature_irreversible=policy == "eager")
                )
        rows.append(dict(task_id="solo", archetype="settled_clean", unit="u9", twin_side=None, policy=policy,
                         seed=0, gap=1000.0, exact=False, premature_irreversible=True))
    table = ordering.twin_table(pd.DataFrame(rows))
    assert table.loc["gate", ["paired_loss", "settle_gap", "fail_gap", "premature_irreversible", "exact"]].tolist() == (
        pytest.approx([10.0, 0.0, 20.0, 0.0, 0.5])
    )
    assert table.loc["eager", ["paired_loss", "settle_gap", "fail_gap", "premature_irreversible"]].tolist() == (
        pytest.approx([50.0, 100.0, 0.0, 1.0])
    )
    assert table.loc["gate", "n_pairs"] == 2
