"""The metric rules one by one, on small hand-made results tables: pass^k and the rates per group
(with several grouping columns, in sorted order, under their names), the refusals with their messages,
and the unit-clustered bootstrap recomputed here from its documented random stream with plain numpy.

Expected values are written by hand or computed directly (math.comb, numpy loops over the drawn units),
never by calling the function under test a second time (test_metrics.py holds the broad properties)."""
from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from finbench.analysis import metrics as m


def episodes(rows, **const) -> pd.DataFrame:
    """A results table from tuples (policy, unit, task_id, seed, gap, exact[, archetype])."""
    out = []
    for r in rows:
        policy, unit, task, seed, gap, exact = r[:6]
        out.append(dict(policy=policy, unit=unit, task_id=task, seed=seed, gap=float(gap), exact=bool(exact),
                        archetype=r[6] if len(r) > 6 else "pending_settle", premature_irreversible=False, **const))
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- pass^k


def test_pass_hat_k_groups_by_several_columns_in_sorted_order():
    # per (archetype, policy, task): C(c, 2) / C(n, 2), then the mean over tasks
    rows = [("q", "u1", "t1", s, 0, e, "zeta") for s, e in enumerate([1, 1, 1])]  # 3 of 3: 1
    rows += [("q", "u2", "t2", s, 0, e, "zeta") for s, e in enumerate([1, 1, 0])]  # 2 of 3: 1/3
    rows += [("p", "u1", "t1", s, 0, e, "alpha") for s, e in enumerate([1, 0, 1, 1])]  # 3 of 4: 3/6
    rows += [("p", "u1", "t1", s, 0, e, "zeta") for s, e in enumerate([0, 0, 1, 1])]  # 2 of 4: 1/6
    got = m.pass_hat_k(episodes(rows), 2, by=["archetype", "policy"])
    assert got.name == "pass^2" and got.index.names == ["archetype", "policy"]
    assert list(got.index) == [("alpha", "p"), ("zeta", "p"), ("zeta", "q")]
    assert got.tolist() == pytest.approx([3 / 6, 1 / 6, (1 + 1 / 3) / 2], abs=1e-15)


def test_pass_hat_k_default_groups_by_policy_sorted_and_takes_k_as_an_integer():
    rows = [("b", "u1", "t1", s, 0, e) for s, e in enumerate([1, 1, 0, 1])]  # C(3,3)/C(4,3) = 1/4
    rows += [("a", "u1", "t1", s, 0, e) for s, e in enumerate([1, 1, 1, 0])]
    rows += [("a", "u2", "t2", s, 0, e) for s, e in enumerate([1, 1, 1, 1])]
    got = m.pass_hat_k(episodes(rows), 3.0)
    assert list(got.index) == ["a", "b"] and got.index.name == "policy" and got.name == "pass^3"
    assert got.tolist() == pytest.approx([(1 / 4 + 1) / 2, 1 / 4], abs=1e-15)


def test_pass_hat_k_reads_exact_as_truth():
    # exact given as 0/2 integers: a 2 is one exact seed, not two
    df = episodes([("p", "u1", "t1", s, 0, 0) for s in range(3)]).assign(exact=[2, 2, 0])
    assert m.pass_hat_k(df, 2)["p"] == pytest.approx(1 / 3)


def test_pass_hat_k_at_k_equal_to_the_seeds_is_allowed():
    df = episodes([("p", "u1", "t1", s, 0, 1) for s in range(3)])
    assert m.pass_hat_k(df, 3)["p"] == 1.0


def test_pass_hat_k_names_a_task_with_too_few_seeds():
    # t2 comes first in the table, but the example named is the first short task in sorted order
    rows = [("p", "u2", "t2", s, 0, 1) for s in range(1)]
    rows += [("p", "u1", "t1", s, 0, 1) for s in range(2)]
    rows += [("p", "u3", "t3", s, 0, 1) for s in range(3)]
    with pytest.raises(ValueError) as e:
        m.pass_hat_k(episodes(rows), 3)
    assert str(e.value) == "pass^3 needs at least 3 seeds per task; 2 task(s) have fewer (e.g. ('p', 't1') with 2)"


def test_pass_hat_k_refusals_say_what_is_wrong():
    df = episodes([("p", "u1", "t1", s, 0, 1) for s in range(3)])
    with pytest.raises(ValueError) as e:
        m.pass_hat_k(df, 0)
    assert str(e.value) == "k must be at least 1, got 0"
    with pytest.raises(ValueError) as e:
        m.pass_hat_k(pd.concat([df, df.iloc[:1]]), 1, by=["policy", "archetype"])
    assert str(e.value) == ("results repeat a (policy, archetype, task_id, seed); pass^k needs one row per seed")
    # a repeat is the same (group, task, seed), whatever else the row says
    with pytest.raises(ValueError, match="one row per seed"):
        m.pass_hat_k(pd.concat([df, df.iloc[:1].assign(gap=99.0, exact=False)]), 1)
    # the same seed of one task under two policies is not a repeat
    assert m.pass_hat_k(pd.concat([df, df.assign(policy="q")]), 1).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("column", ["task_id", "seed", "exact", "policy"])
def test_pass_hat_k_names_a_missing_column(column):
    df = episodes([("p", "u1", "t1", 0, 0, 1)]).drop(columns=column)
    with pytest.raises(KeyError) as e:
        m.pass_hat_k(df, 1)
    assert e.value.args[0] == f"results table lacks column(s) ['{column}']; it has {list(df.columns)}"


def test_pass_k_curve_defaults_to_k_one_to_five_by_policy():
    flags = [1, 1, 1, 1, 0, 1]  # 5 of 6 seeds exact
    df = episodes([("p", "u1", "t1", s, 0, e) for s, e in enumerate(flags)])
    curve = m.pass_k_curve(df)
    assert list(curve.columns) == [1, 2, 3, 4, 5] and curve.columns.name == "k"
    assert curve.index.name == "policy" and list(curve.index) == ["p"]
    assert curve.loc["p"].tolist() == pytest.approx([math.comb(5, k) / math.comb(6, k) for k in range(1, 6)])
    two = m.pass_k_curve(df.assign(archetype="x"), ks=[6.0, 2], by=["policy", "archetype"])
    assert list(two.columns) == [6, 2] and list(two.index) == [("p", "x")]
    assert two.iloc[0].tolist() == pytest.approx([0.0, 10 / 15])


# --------------------------------------------------------------------------- rates


def rates_table() -> pd.DataFrame:
    df = episodes([
        ("b", "u1", "t1", 0, 0, 1, "y"), ("b", "u1", "t1", 1, 30, 0, "y"), ("b", "u2", "t2", 0, 6, 0, "x"),
        ("a", "u1", "t1", 0, 2, 0, "y"), ("a", "u2", "t2", 0, 0, 1, "x"), ("a", "u2", "t2", 1, 0, 1, "x"),
    ])
    df["premature_irreversible"] = [True, True, False, False, True, False]
    df["verdict"] = ["ok", "late", "ok", "late", "late", "late"]
    return df


def test_each_rate_is_per_policy_sorted_and_named():
    df = rates_table()
    for got, name, want in [
        (m.exact_rate(df), "exact", [2 / 3, 1 / 3]),
        (m.mean_gap(df), "mean_gap", [2 / 3, 12.0]),
        (m.premature_rate(df), "premature_irreversible", [1 / 3, 2 / 3]),
        (m.verdict_rate(df, "late"), "late", [1.0, 1 / 3]),
    ]:
        assert got.name == name and got.index.name == "policy" and list(got.index) == ["a", "b"]
        assert got.tolist() == pytest.approx(want)


def test_each_rate_takes_several_grouping_columns():
    df = rates_table()
    idx = [("x", "a"), ("x", "b"), ("y", "a"), ("y", "b")]
    for got, want in [
        (m.exact_rate(df, by=["archetype", "policy"]), [1.0, 0.0, 0.0, 0.5]),
        (m.mean_gap(df, by=["archetype", "policy"]), [0.0, 6.0, 2.0, 15.0]),
        (m.premature_rate(df, by=["archetype", "policy"]), [0.5, 0.0, 0.0, 1.0]),
        (m.verdict_rate(df, "ok", by=["archetype", "policy"]), [0.0, 1.0, 0.0, 0.5]),
    ]:
        assert list(got.index) == idx and got.index.names == ["archetype", "policy"]
        assert got.tolist() == pytest.approx(want)
    assert m.mean_gap(df, by="archetype").to_dict() == pytest.approx({"x": 2.0, "y": 32 / 3})


@pytest.mark.parametrize("fn, column", [(m.exact_rate, "exact"), (m.mean_gap, "gap"),
                                        (m.premature_rate, "premature_irreversible"),
                                        (lambda df: m.verdict_rate(df, "ok"), "verdict"),
                                        (m.summary_table, "policy")])
def test_a_rate_names_the_column_it_lacks(fn, column):
    df = rates_table().drop(columns=column)
    with pytest.raises(KeyError) as e:
        fn(df)
    assert e.value.args[0] == f"results table lacks column(s) ['{column}']; it has {list(df.columns)}"


def test_exact_by_archetype_is_archetype_rows_by_policy_columns():
    table = m.exact_by_archetype(rates_table())
    assert list(table.index) == ["x", "y"] and list(table.columns) == ["a", "b"]
    assert table.index.name == "archetype" and table.columns.name == "policy"
    assert table.values.tolist() == [[1.0, 0.0], [0.0, 0.5]]


def test_summary_table_is_table_ii_per_policy_with_pass_5_by_default():
    # five seeds of one task each: a exact on 5 of 5, b on 4 of 5
    df = episodes([("b", "u1", "t1", s, g, g == 0) for s, g in enumerate([0, 0, 8, 0, 0])]
                  + [("a", "u1", "t1", s, 0, 1) for s in range(5)])
    df.loc[(df["policy"] == "b") & (df["seed"] == 2), "premature_irreversible"] = True
    table = m.summary_table(df)
    assert list(table.index) == ["a", "b"]
    assert list(table.columns) == ["n_episodes", "exact", "mean_gap", "pass^5", "premature_irreversible"]
    assert table.loc["a"].tolist() == [5, 1.0, 0.0, 1.0, 0.0]
    assert table.loc["b"].tolist() == pytest.approx([5, 0.8, 1.6, 0.0, 0.2])
    assert m.summary_table(df, k=2).loc["b", "pass^2"] == pytest.approx(math.comb(4, 2) / math.comb(5, 2))


@pytest.mark.parametrize("column", [False, True])
def test_privileged_reads_the_rows_or_else_only_the_reference(column):
    order = ["finality_gate", "finality_oracle", "told", "absent"]
    df = pd.DataFrame({"policy": ["finality_gate", "finality_gate", "told", "told", "finality_oracle"]})
    if column:
        df["privileged"] = [False, False, False, True, False]  # one told episode makes a policy told
        assert m.privileged(df, order) == [False, False, True, False]
    else:
        assert m.privileged(df, order) == [False, True, False, False]


# --------------------------------------------------------------------------- bootstrap: the draws

KEY = int.from_bytes(hashlib.sha256(b"finbench/bootstrap").digest()[:4], "big")


def draws(n_units: int, n_boot: int, seed: int) -> np.ndarray:
    """The documented stream: PCG64 from SeedSequence([key of the purpose, seed]), units drawn with replacement."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([KEY, seed])))
    return rng.integers(0, n_units, size=(n_boot, n_units), dtype=np.int64)


@pytest.mark.parametrize("units", [["c", "a", "b", "a"], np.array([3, 1, 2, 2]), pd.Series([0.5, 0.1, 0.2]),
                                   pd.Index(["x", "y", "z"]), (u for u in "qrsq")])
def test_bootstrap_units_is_the_documented_stream_over_distinct_units(units):
    got = m.bootstrap_units(units, n_boot=7, seed=4)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, draws(3, 7, 4))


def test_bootstrap_units_refusals():
    with pytest.raises(ValueError, match=r"^cannot bootstrap over zero units$"):
        m.bootstrap_units([], n_boot=5)
    with pytest.raises(ValueError, match=r"^n_boot must be at least 1, got 0$"):
        m.bootstrap_units(["a"], n_boot=0)
    with pytest.raises(ValueError, match=r"^units must be one-dimensional$"):
        m.bootstrap_units(np.zeros((2, 2)))
    assert m.bootstrap_units(["a", "b"], n_boot=1).shape == (1, 2)  # one resample is allowed
    np.testing.assert_array_equal(m.bootstrap_units(["a", "b"], n_boot=3), draws(2, 3, 0))  # seed 0 by default
    assert m.bootstrap_units(["a", "b"]).shape == (2000, 2)


# --------------------------------------------------------------------------- bootstrap: intervals by hand


def uneven() -> pd.DataFrame:
    """Four units; policy a in all of them (two episodes in u0), b only in u0 and u1."""
    return episodes([
        ("a", "u0", "t0", 0, 0, 1), ("a", "u0", "t0", 1, 10, 0), ("a", "u1", "t1", 0, 4, 0),
        ("a", "u2", "t2", 0, 30, 0), ("a", "u3", "t3", 0, 1, 0),
        ("b", "u0", "t0", 0, 5, 0), ("b", "u1", "t1", 0, 20, 0),
    ])


def by_hand(df, policy, value, idx, universe) -> np.ndarray:
    """Mean of `value` over the episodes of the drawn units (with their multiplicity), per resample;
    NaN when the policy has no episode in the resample."""
    rows = df[df["policy"] == policy]
    of_unit = [rows.loc[rows["unit"] == u, value].astype(float).tolist() for u in universe]
    out = []
    for draw in idx:
        vals = [v for j in draw for v in of_unit[j]]
        out.append(sum(vals) / len(vals) if vals else np.nan)
    return np.array(out)


def interval(reps, alpha):
    ok = reps[~np.isnan(reps)]
    return np.quantile(ok, alpha / 2), np.quantile(ok, 1 - alpha / 2)


@pytest.mark.parametrize("alpha", [0.05, 0.3])
def test_bootstrap_ci_is_the_percentile_interval_of_unit_resamples(alpha):
    df = uneven()
    universe = np.array(["u0", "u1", "u2", "u3"])
    idx = draws(4, 300, 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a resample without b is 0/0: NaN, silently left out
        got = m.bootstrap_ci(df, n_boot=300, seed=9, alpha=alpha)
    assert list(got.index) == ["a", "b"] and got.index.name == "policy"
    assert list(got.columns) == ["estimate", "lo", "hi"]
    assert got["estimate"].tolist() == pytest.approx([45 / 5, 25 / 2])
    for p in ("a", "b"):
        lo, hi = interval(by_hand(df, p, "gap", idx, universe), alpha)
        assert (got.loc[p, "lo"], got.loc[p, "hi"]) == pytest.approx((lo, hi), rel=1e-12)


def test_bootstrap_ci_of_one_policy_resamples_every_unit_of_the_table():
    # b has episodes in two of four units, but the draws are over all four (the table's units)
    df = uneven()
    got = m.bootstrap_ci(df, value="exact", policies=["b", "a", "b"], n_boot=200, seed=3)
    assert list(got.index) == ["b", "a"]  # in the order asked, once each
    idx = draws(4, 200, 3)
    universe = np.array(["u0", "u1", "u2", "u3"])
    for p in ("a", "b"):
        lo, hi = interval(by_hand(df, p, "exact", idx, universe), 0.05)
        assert (got.loc[p, "lo"], got.loc[p, "hi"]) == pytest.approx((lo, hi), rel=1e-12)
    assert got["estimate"].tolist() == pytest.approx([0.0, 0.2])


def spread() -> pd.DataFrame:
    """Fifteen units of one episode each with distinct gaps: enough distinct resample means that
    another seed or another number of resamples moves the interval's ends."""
    return episodes([(p, f"u{u:02d}", f"t{u:02d}", 0, (u * u * k) % 23 + math.sqrt(u * k + 2), u % 3 == 0)
                     for p, k in (("a", 5), ("b", 3)) for u in range(15)])


SPREAD_UNITS = np.array([f"u{u:02d}" for u in range(15)])


def test_bootstrap_ci_defaults_are_gap_all_policies_2000_resamples_seed_0_and_95_percent():
    df = spread()
    got = m.bootstrap_ci(df)
    idx = draws(15, 2000, 0)
    universe = SPREAD_UNITS
    for p in ("a", "b"):
        lo, hi = interval(by_hand(df, p, "gap", idx, universe), 0.05)
        assert (got.loc[p, "lo"], got.loc[p, "hi"]) == pytest.approx((lo, hi), rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 1.5, -0.1])
def test_alpha_must_lie_strictly_between_zero_and_one(alpha):
    with pytest.raises(ValueError) as e:
        m.bootstrap_ci(uneven(), n_boot=10, alpha=alpha)
    assert str(e.value) == f"alpha must be in (0, 1), got {alpha}"


def test_an_unknown_policy_is_named_with_those_present():
    with pytest.raises(ValueError) as e:
        m.bootstrap_ci(uneven(), policies=["a", "zz"], n_boot=10)
    assert str(e.value) == "no episodes for policy ['zz']; the table has ['a', 'b']"


@pytest.mark.parametrize("column", ["policy", "unit", "task_id", "seed", "gap"])
def test_the_bootstrap_names_a_missing_column(column):
    df = uneven().drop(columns=column)
    with pytest.raises(KeyError) as e:
        m.bootstrap_ci(df, n_boot=10)
    assert e.value.args[0] == f"results table lacks column(s) ['{column}']; it has {list(df.columns)}"


def paired() -> pd.DataFrame:
    """Three units, both policies on the same episodes (u0 holds two tasks)."""
    gaps = {"a": [10, 0, 7, 3], "b": [2, 4, 1, 0]}
    rows = []
    for p, g in gaps.items():
        for (unit, task), gap in zip([("u0", "t0"), ("u0", "t0b"), ("u1", "t1"), ("u2", "t2")], g):
            rows.append((p, unit, task, 0, gap, gap == 0))
    return episodes(rows)


def test_bootstrap_diff_is_the_paired_difference_on_shared_resamples():
    df = paired()
    got = m.bootstrap_diff(df, "a", "b", n_boot=400, seed=2, alpha=0.1)
    assert got.name == "a - b" and list(got.index) == ["estimate", "lo", "hi"]
    idx = draws(3, 400, 2)
    universe = np.array(["u0", "u1", "u2"])
    reps = by_hand(df, "a", "gap", idx, universe) - by_hand(df, "b", "gap", idx, universe)
    lo, hi = interval(reps, 0.1)
    assert got.tolist() == pytest.approx([20 / 4 - 7 / 4, lo, hi], rel=1e-12)
    back = m.bootstrap_diff(df, "b", "a", n_boot=400, seed=2, alpha=0.1)
    assert back.name == "b - a" and back.tolist() == pytest.approx([-(20 / 4 - 7 / 4), -hi, -lo], rel=1e-12)


def test_bootstrap_diff_with_unequal_episodes_differences_the_two_means():
    df = uneven()  # a: 5 episodes in 4 units, b: 2 in 2
    got = m.bootstrap_diff(df, "b", "a", value="gap", n_boot=300, seed=5)
    idx = draws(4, 300, 5)
    universe = np.array(["u0", "u1", "u2", "u3"])
    reps = by_hand(df, "b", "gap", idx, universe) - by_hand(df, "a", "gap", idx, universe)
    lo, hi = interval(reps, 0.05)
    assert got.tolist() == pytest.approx([25 / 2 - 45 / 5, lo, hi], rel=1e-12)


def test_bootstrap_diff_defaults_are_gap_2000_resamples_seed_0_and_95_percent():
    df = spread()
    got = m.bootstrap_diff(df, "a", "b")
    idx = draws(15, 2000, 0)
    a, b = by_hand(df, "a", "gap", idx, SPREAD_UNITS), by_hand(df, "b", "gap", idx, SPREAD_UNITS)
    lo, hi = interval(a - b, 0.05)
    est = df.loc[df.policy == "a", "gap"].mean() - df.loc[df.policy == "b", "gap"].mean()
    assert got.tolist() == pytest.approx([est, lo, hi], rel=1e-12)


@pytest.mark.parametrize("fn", [m.bootstrap_diff, m.bootstrap_diff_unpaired])
def test_a_difference_names_an_unknown_policy(fn):
    with pytest.raises(ValueError) as e:
        fn(paired(), "a", "zz", n_boot=10)
    assert str(e.value) == "no episodes for policy ['zz']; the table has ['a', 'b']"


def test_the_unpaired_difference_resamples_b_on_the_next_seed():
    df = paired()
    got = m.bootstrap_diff_unpaired(df, "a", "b", n_boot=300, seed=6, alpha=0.2)
    assert got.name == "a - b" and list(got.index) == ["estimate", "lo", "hi"]
    universe = np.array(["u0", "u1", "u2"])
    reps = (by_hand(df, "a", "gap", draws(3, 300, 6), universe)
            - by_hand(df, "b", "gap", draws(3, 300, 7), universe))
    lo, hi = interval(reps, 0.2)
    assert got.tolist() == pytest.approx([20 / 4 - 7 / 4, lo, hi], rel=1e-12)


def test_the_unpaired_difference_defaults():
    df = spread()
    got = m.bootstrap_diff_unpaired(df, "b", "a")
    reps = (by_hand(df, "b", "gap", draws(15, 2000, 0), SPREAD_UNITS)
            - by_hand(df, "a", "gap", draws(15, 2000, 1), SPREAD_UNITS))
    lo, hi = interval(reps, 0.05)
    est = df.loc[df.policy == "b", "gap"].mean() - df.loc[df.policy == "a", "gap"].mean()
    assert got.tolist() == pytest.approx([est, lo, hi], rel=1e-12)


def test_the_difference_table_is_each_policy_against_the_baseline():
    df = pd.concat([paired(), paired().query("policy == 'a'").assign(policy="c", gap=[1.0, 1.0, 1.0, 9.0])])
    universe = np.array(["u0", "u1", "u2"])
    idx = draws(3, 250, 4)
    base = by_hand(df, "b", "gap", idx, universe)
    table = m.bootstrap_diff_table(df, "b", n_boot=250, seed=4, alpha=0.1)
    assert list(table.index) == ["a", "b", "c"] and table.index.name == "policy"
    assert list(table.columns) == ["estimate", "lo", "hi"]
    for p, est in (("a", 20 / 4 - 7 / 4), ("c", 12 / 4 - 7 / 4)):
        lo, hi = interval(by_hand(df, p, "gap", idx, universe) - base, 0.1)
        assert table.loc[p].tolist() == pytest.approx([est, lo, hi], rel=1e-12)
    assert table.loc["b"].tolist() == [0.0, 0.0, 0.0]
    # policies asked without the baseline: still measured against it, its own row left out
    only = m.bootstrap_diff_table(df, "b", policies=["c", "a"], n_boot=250, seed=4, alpha=0.1)
    assert list(only.index) == ["c", "a"]
    pd.testing.assert_frame_equal(only, table.loc[["c", "a"]])


def test_the_difference_table_defaults():
    df = spread()
    table = m.bootstrap_diff_table(df, "a")
    idx = draws(15, 2000, 0)
    lo, hi = interval(by_hand(df, "b", "gap", idx, SPREAD_UNITS) - by_hand(df, "a", "gap", idx, SPREAD_UNITS), 0.05)
    est = df.loc[df.policy == "b", "gap"].mean() - df.loc[df.policy == "a", "gap"].mean()
    assert table.loc["b"].tolist() == pytest.approx([est, lo, hi], rel=1e-12)


def test_the_difference_table_with_unequal_episodes_differences_the_means():
    df = uneven()
    table = m.bootstrap_diff_table(df, "a", n_boot=300, seed=5)
    idx = draws(4, 300, 5)
    universe = np.array(["u0", "u1", "u2", "u3"])
    lo, hi = interval(by_hand(df, "b", "gap", idx, universe) - by_hand(df, "a", "gap", idx, universe), 0.05)
    assert table.loc["b"].tolist() == pytest.approx([25 / 2 - 45 / 5, lo, hi], rel=1e-12)
    with pytest.raises(KeyError):
        m.bootstrap_diff_table(df.drop(columns="policy"), "a")


def test_a_shift_on_the_same_episodes_is_differenced_unit_by_unit_and_exact():
    """Both policies on the same episodes: the difference is taken per unit before dividing, so a
    whole-dollar shift of 5 comes out as exactly 5 (two separate means differ from it in the last bit)."""
    rows = []
    for u, (g, n) in enumerate(zip([0, 1, 3, 7, 10, 2, 4], [1, 2, 3, 1, 2, 3, 1])):
        for s in range(n):
            rows += [("b", f"u{u}", f"t{u}", s, g + s, 0), ("a", f"u{u}", f"t{u}", s, g + s + 5, 0)]
    df = episodes(rows)
    assert 121 / 13 - 56 / 13 != 5.0  # the separate means are not exact here (sums 121 and 56 over 13)
    assert m.bootstrap_diff(df, "a", "b", n_boot=300).tolist() == [5.0, 5.0, 5.0]
    assert m.bootstrap_diff_table(df, "b", n_boot=300).loc["a"].tolist() == [5.0, 5.0, 5.0]


def test_bootstrap_diff_table_refuses_a_policy_named_twice():
    """A repeated name once gave the later policy's number under the earlier one's name (issue 43)."""
    df = paired()
    with pytest.raises(ValueError, match=r"bootstrap_diff_table: policies names 'a' twice"):
        m.bootstrap_diff_table(df, "b", policies=["a", "a", "b"], n_boot=50)
    ok = m.bootstrap_diff_table(df, "b", policies=["a", "b"], n_boot=50)
    assert list(ok.index) == ["a", "b"] and ok.loc["b", "estimate"] == 0
