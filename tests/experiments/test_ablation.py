"""The fault ablation (issue 9): arms, firings, the gate's flat line, the 2x2 arithmetic, sop's fallback."""
import pandas as pd
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.experiments import ablation as A


@pytest.fixture(scope="module")
def small():
    run = fb.Run.make(n_tasks=40, seeds=range(2), n_boot=50, policies=A.POLICIES, cache=False)
    df = A.episodes(run)
    return run, df


def test_arms_are_the_fourteen_and_the_2x2():
    names = list(A.arms())
    assert len(names) == 15 and names[:2] == ["all", "none"]
    assert {f"only:{f}" for f in C.FAMILIES} | {f"without:{f}" for f in C.FAMILIES} <= set(names)
    assert A.BOTH in names


def test_under_only_f_no_other_family_fires(small):
    _, df = small
    for f in C.FAMILIES:
        arm = df[df.arm == f"only:{f}"]
        assert len(arm) > 0, f
        others = [f"fired_{g}" for g in C.FAMILIES if g != f]
        assert (arm[others] == 0).all().all(), f
    none = df[df.arm == "none"]
    assert len(none) > 0
    assert (none[[f"fired_{g}" for g in C.FAMILIES]] == 0).all().all()
    both = df[df.arm == A.BOTH]
    assert len(both) > 0
    assert (both[[f"fired_{g}" for g in C.FAMILIES if g not in ("loss", "delay")]] == 0).all().all()


def test_every_arm_runs_the_same_tasks_and_seeds(small):
    _, df = small
    keys = {arm: sorted(zip(d.policy, d.task_id, d.seed)) for arm, d in df.groupby("arm")}
    first = next(iter(keys.values()))
    assert all(k == first for k in keys.values()) and len(keys) == 15


def test_the_gate_is_identical_in_every_arm(small):
    run, df = small
    gate = df[df.policy == A.GATE]
    per_arm = gate.groupby("arm")
    assert per_arm["gap"].mean().nunique() == 1
    assert gate.groupby(["task_id", "seed"])["calls"].nunique().max() == 1  # the same actions everywhere
    t6 = A.table6(df, run)
    assert t6[t6.policy == A.GATE]["mean_gap"].nunique() == 1


def test_interaction_is_the_four_cells_arithmetic(small):
    run, df = small
    inter = A.interaction(df, run).set_index("policy")
    for p in ("sop", "react", "majority_vote"):
        r = inter.loc[p]
        assert r.interaction == pytest.approx(r.both - r.loss - r.delay + r["none"], abs=1e-9)
        assert r.interaction_lo <= r.interaction + 1e-9 <= r.interaction_hi + 2e-9
        cells = {arm: df[(df.arm == arm) & (df.policy == p)].gap.mean() for arm in ("none", A.LOSS, A.DELAY, A.BOTH)}
        assert r.both_cost == pytest.approx(cells[A.BOTH] - cells["none"])


def test_families_table_counts_changed_decisions(small):
    run, df = small
    fam = A.families(df, run).set_index(["family", "policy"])
    # the random policy never reads: no family can change what it does
    rnd = fam.xs("random", level="policy")
    assert len(rnd) == len(C.FAMILIES)
    assert (rnd[["changed_alone_n", "changed_removed_n"]] == 0).all().all()
    a, b = df[df.arm == "only:loss"], df[df.arm == "none"]
    opt = (a.policy == "optimistic").to_numpy()
    assert fam.loc[("loss", "optimistic"), "changed_alone_n"] == int((a.calls.to_numpy() != b.calls.to_numpy())[opt].sum())
    alone = (a.gap.to_numpy() - b.gap.to_numpy())[opt].mean()
    assert fam.loc[("loss", "optimistic"), "alone"] == pytest.approx(alone)


def test_claims_come_from_the_tables(small):
    run, df = small
    tables = A.tables(df, run)
    assert tuple(tables) == A.TABLES
    claims = A.claims(tables)
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids)) and "sop_interaction" in ids
    changed = tables["interaction"].copy()
    changed.loc[changed.policy == "sop", "interaction"] = -13.0
    again = {c.id: c for c in A.claims({**tables, "interaction": changed})}
    assert again["sop_interaction"].ours == -13.0 and again["sop_interaction"].verdict == "reproduced"


def test_sop_fallback_knob():
    task = fb.make_task("unresolvable", outcome="settled", seed=3)
    bank = fb.run_episode(task, "sop", 0, fb.FaultProfile.none())
    refund = fb.run_episode(task, "sop[fallback=refund]", 0, fb.FaultProfile.none())
    assert [a[1] for a in refund.actions][-1] == "refund" and "read_bank" not in [a[1] for a in refund.actions]
    assert "read_bank" in [a[1] for a in bank.actions]
    with pytest.raises(fb.PolicyError, match="fallback must be one of 'bank', 'refund'"):
        fb.get_policy("sop", fallback="guess")
