"""The headline's claims as strong as the paper's words (issue 31): the gate's pass^k equal to its exact rate,
the gamblers counted by shipping, the gap negative only on late_chargeback, the gate's interval roughly
threefold, and the levels judged on the comparison their row names."""
import pandas as pd
import pytest

import finbench as fb
from finbench.analysis.verdicts import paper_claims
from finbench.experiments import headline as H

GATE = "finality_gate"


@pytest.fixture(scope="module")
def small():
    run = fb.Run.make(n_tasks=60, seeds=range(3), n_boot=100, cache=False)
    rows = H.episodes(run)
    tables = H.tables(rows, run)
    assert {"unresolvable", "late_chargeback"} <= set(rows.archetype)
    return rows, tables


def _by_id(tables):
    return {c.id: c for c in H.claims(tables)}


def _cell(tables, stem, policy, **cells):
    t = tables[stem].copy()
    for col, v in cells.items():
        t.loc[t.policy == policy, col] = v
    return {**tables, stem: t}


def test_the_tables_and_the_claims_name_each_other(small):
    rows, tables = small
    assert tuple(tables) == H.TABLES and "table3_counts" in H.TABLES
    assert [c.id for c in H.claims(tables)] == [r.name for r in paper_claims("headline")]


def test_table3_counts_counts_the_episodes(small):
    rows, tables = small
    t = tables["table3_counts"].set_index(["archetype", "policy"])
    assert t.episodes.sum() == len(rows)
    for (arch, pol), r in t.iterrows():
        mine = rows[(rows.archetype == arch) & (rows.policy == pol)]
        assert r.episodes == len(mine) and r.exact == int(mine.exact.sum())
        assert r.exact_by_ship == int((mine.exact & (mine.disposition == "ship")).sum())
        assert r.negative_gap == int((mine.gap < -0.005).sum())


def test_the_gate_s_pass_k_must_equal_its_exact_rate(small):
    _, tables = small
    k = H._k(tables["table2"])
    g = tables["table2"].set_index("policy").loc[GATE]
    c = _by_id(tables)["gate_passk"]
    assert c.ours == pytest.approx(g[f"pass{k}_pct"] - g.exact_pct) and c.verdict == "reproduced"
    # 4.9 points below its exact rate: within the old 5-point tolerance, but it moved
    c = _by_id(_cell(tables, "table2", GATE, **{f"pass{k}_pct": g.exact_pct - 4.9}))["gate_passk"]
    assert c.verdict == "differs" and c.margin == pytest.approx(-4.9)


def test_gamblers_are_the_policies_exact_on_unresolvable_by_shipping(small):
    rows, tables = small
    u = rows[(rows.archetype == "unresolvable") & ~rows.privileged & (rows.policy != GATE)]
    by_ship = sorted(set(u.policy[u.exact & (u.disposition == "ship")]))
    any_exact = sorted(set(u.policy[u.exact]))
    c = _by_id(tables)["unresolvable_gamblers"]
    assert c.ours == len(by_ship) and ", ".join(p for p in H.policy_order(by_ship)) in c.measured
    # exact there by refunding or writing off is no gamble won: only the ships count
    t = tables["table3_counts"].copy()
    unres = t.archetype == "unresolvable"
    t.loc[unres, "exact_by_ship"] = 0
    t.loc[unres & (t.policy == "optimistic"), "exact_by_ship"] = 1
    t.loc[unres & t.policy.isin(["random", "optimistic", "eager", "sop"]), "exact"] = 5
    c = _by_id({**tables, "table3_counts": t})["unresolvable_gamblers"]
    assert (c.ours, c.verdict) == (1, "differs")  # four are exact there, one by shipping
    t.loc[unres & (t.policy == "random"), "exact_by_ship"] = 2
    assert _by_id({**tables, "table3_counts": t})["unresolvable_gamblers"].verdict == "differs"  # two: not several
    t.loc[unres & (t.policy == "sop"), "exact_by_ship"] = 1
    assert _by_id({**tables, "table3_counts": t})["unresolvable_gamblers"].verdict == "reproduced"  # three
    assert len(any_exact) >= len(by_ship)


def test_no_unprivileged_policy_avoids_the_unresolvable_loss_everywhere(small):
    rows, tables = small
    u = rows[(rows.archetype == "unresolvable") & ~rows.privileged]
    best = 100 * u.groupby("policy").exact.mean()
    c = _by_id(tables)["unresolvable_no_guarantee"]
    assert c.ours == pytest.approx(best.max()) and best.idxmax() in c.measured
    t = tables["table3"].copy()
    t.loc[t.archetype == "unresolvable", "react"] = 100.0
    assert _by_id({**tables, "table3": t})["unresolvable_no_guarantee"].verdict == "differs"


def test_the_gap_is_negative_only_on_late_chargeback(small):
    rows, tables = small
    neg = rows[rows.gap < -0.005]
    c = _by_id(tables)["negative_gap_late_chargeback"]
    assert c.holds is (len(neg) > 0 and set(neg.archetype) == {"late_chargeback"})
    assert f"{len(neg)} episodes" in c.measured
    t = tables["table3_counts"].copy()
    t.loc[(t.archetype == "pending_settle") & (t.policy == "eager"), "negative_gap"] = 1
    c = _by_id({**tables, "table3_counts": t})["negative_gap_late_chargeback"]
    assert c.holds is False and c.verdict == "differs" and "pending_settle 1" in c.measured
    t = tables["table3_counts"].assign(negative_gap=0)  # never negative: the paper's sentence does not hold
    assert _by_id({**tables, "table3_counts": t})["negative_gap_late_chargeback"].verdict == "differs"


def test_the_gate_s_interval_is_roughly_threefold(small):
    _, tables = small
    row = next(r for r in paper_claims("headline") if r.name == "gate_interval_threefold")
    for lo, hi, verdict in ((16.0, 48.0, "reproduced"), (18.0, 70.6, "same direction"), (20.0, 30.0, "differs")):
        c = _by_id(_cell(tables, "table2", GATE, gap_lo=lo, gap_hi=hi))["gate_interval_threefold"]
        assert c.ours == pytest.approx(hi / lo) and c.verdict == verdict, (lo, hi)
    assert row.favours == 1  # a wider interval keeps "the intervals are wide"
    assert _by_id(_cell(tables, "table2", GATE, gap_lo=0.0))["gate_interval_threefold"].verdict == "not run"


def test_optimistic_exact_is_judged_on_being_second(small):
    _, tables = small
    t2 = tables["table2"].set_index("policy")
    others = [p for p in t2.index if not t2.loc[p, "privileged"] and p not in (GATE, "optimistic")]
    t = _cell(tables, "table2", "optimistic", exact_pct=40.0)
    for p in others:
        t = _cell(t, "table2", p, exact_pct=30.0)
    c = _by_id(t)["optimistic_exact"]
    assert c.verdict == "same direction" and "30" in c.basis  # far below the paper's, still second
    t = _cell(t, "table2", "react", exact_pct=45.0)
    c = _by_id(t)["optimistic_exact"]
    assert c.verdict == "differs" and "45" in c.basis  # ReAct above it: no longer second
    # the gate's level against the best other unprivileged policy
    t = _cell(tables, "table2", GATE, exact_pct=95.0)
    assert _by_id(t)["gate_exact"].verdict == "same direction"
    t = _cell(t, "table2", "react", exact_pct=96.0)
    assert _by_id(t)["gate_exact"].verdict == "differs"


def test_small_runs_without_the_archetypes_are_not_run(small):
    _, tables = small
    t = tables["table3_counts"]
    t = t[~t.archetype.isin(["unresolvable", "late_chargeback"])]
    got = _by_id({**tables, "table3_counts": t})
    assert got["unresolvable_gamblers"].verdict == got["negative_gap_late_chargeback"].verdict == "not run"
    assert isinstance(H.table3_counts(pd.DataFrame(columns=small[0].columns)), pd.DataFrame)
