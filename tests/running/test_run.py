"""Run and sweep (issue 7): a run stamps itself, a sweep shares its episodes, and a run whose costs
differ only in prices is re-priced, exactly as simulating it would give."""
import pandas as pd
import pytest

import finbench as fb
from finbench.agents.registry import PolicyError
from finbench.running.reprice import PRICED, reprice
from finbench.memo import clear_caches
from finbench.running.run import costs_label
from finbench.running.evaluation import evaluate
from tests.agents.test_registry import Patient
from tests.rows import assert_same_rows, origins

SMALL = fb.make_corpus(n_tasks=40)


# --- re-pricing ----------------------------------------------------------------------------

COSTS = [fb.Costs(cogs_rate=0.4), fb.Costs(dispute_fee=50.0, escalation_cost=10.0),
         fb.Costs(cogs_rate=0.8, dispute_fee=15.0, escalation_cost=36.0)]


@pytest.mark.parametrize("costs", COSTS, ids=lambda c: costs_label(c))
def test_repricing_equals_simulating(costs):
    seeds = [0, 3]
    base = evaluate(SMALL, None, seeds=seeds, cache=False)
    direct = evaluate(SMALL, None, seeds=seeds, costs=costs, cache=False)
    priced = reprice(base, SMALL, costs, fb.Costs())
    assert_same_rows(priced, direct, check_exact=True)
    assert not base["position"].equals(direct["position"])  # the costs did matter


def test_repricing_refuses_what_policies_see():
    base = evaluate(SMALL, ["sop"], seeds=[0], cache=False)
    with pytest.raises(ValueError, match="probe_ticks"):
        reprice(base, SMALL, fb.Costs(probe_ticks=9), fb.Costs())
    assert set(PRICED) <= set(base.columns)


# --- Run and sweep -------------------------------------------------------------------------

def test_run_stamps_itself():
    run = fb.Run(SMALL, seeds=range(3), profile=fb.FaultProfile.only("loss"), costs=fb.Costs(cogs_rate=0.5),
                 policies=["sop", Patient], n_boot=100)
    s = run.stamp()
    assert s["corpus"] == SMALL.fingerprint and s["seeds"] == "0..2" and s["profile"] == "only:loss"
    assert s["costs"] == "cogs_rate=0.5" and s["policies"] == "sop, patient" and s["n_boot"] == 100
    assert "n_boot" not in run.stamp(bootstrap=False)
    assert run.caption() == (f"corpus {SMALL.fingerprint} · 240 episodes · seeds 0..2 · profile only:loss · "
                             "costs cogs_rate=0.5")
    assert run.key() == run.replace(n_jobs=2, cache=False).key() != run.replace(boot_seed=1).key()
    assert fb.Run(SMALL).stamp()["costs"] == "default" and "policies" not in fb.Run(SMALL).stamp()


def test_run_rejects_what_is_not_a_run():
    with pytest.raises(fb.FinbenchError, match="Run: corpus must be a Corpus"):
        fb.Run("corpus")
    with pytest.raises(fb.FinbenchError, match="Run: n_boot must be an integer"):
        fb.Run(SMALL, n_boot=0)
    with pytest.raises(PolicyError):
        fb.Run(SMALL, policies=["sop", "sop"])


def test_sweep_shares_episodes_and_reprices(monkeypatch, tmp_path):
    from finbench.running import run as running_run

    clear_caches()
    calls = []
    real = running_run.evaluate
    monkeypatch.setattr(running_run, "evaluate", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    base = fb.Run(SMALL, seeds=[0, 1], policies=["sop", "finality_gate"], cache=tmp_path)
    costs = [fb.Costs(), fb.Costs(cogs_rate=0.4), fb.Costs(dispute_fee=50.0)]
    out = fb.sweep(base, {"costs": costs, "policies": [["sop", "finality_gate"], ["sop"]]})
    assert len(calls) == 1  # one simulation, re-priced twice, sliced for the second policy set
    assert list(out.columns[:2]) == ["costs", "policies"]
    assert set(out.costs) == {"default", "cogs_rate=0.4", "dispute_fee=50"}
    for c in costs[1:]:
        direct = evaluate(SMALL, ["sop", "finality_gate"], seeds=[0, 1], costs=c, cache=False)
        got = out[(out.costs == costs_label(c)) & (out.policies == "sop, finality_gate")]
        assert_same_rows(got.drop(columns=["costs", "policies"]).reset_index(drop=True), direct)
    # nothing cached: the sweep still plays once and re-prices its other costs, and keeps nothing after it
    clear_caches()
    for _ in range(2):
        calls.clear()
        alone = fb.sweep(base.replace(cache=False), {"costs": costs})
        assert len(calls) == 1
        assert not running_run._MEMO and not running_run._REPRICERS  # the sweep's own memo ended with it
        first = alone.costs == "default"
        assert first.sum() == len(alone) // 3 and "repriced" not in set(alone.origin[first])
        assert (alone.origin[~first] == "repriced").all()
        for c in costs:
            direct = evaluate(SMALL, ["sop", "finality_gate"], seeds=[0, 1], costs=c, cache=False)
            got = alone[alone.costs == costs_label(c)].drop(columns=["costs"]).reset_index(drop=True)
            assert_same_rows(got, direct)
    clear_caches()


def test_sweep_summarises_per_run():
    clear_caches()
    base = fb.Run(SMALL, seeds=[0], policies=["finality_gate", "optimistic"], cache=False)
    out = fb.sweep(base, {"profile": [fb.FaultProfile.none(), fb.FaultProfile.only("loss")]},
                   lambda run, df: df.groupby("policy", sort=False)["gap"].mean().reset_index())
    assert list(out.columns) == ["profile", "policy", "gap"]
    assert list(out.profile) == ["none", "none", "only:loss", "only:loss"]
    gate = out[out.policy == "finality_gate"].gap
    assert gate.iloc[0] == gate.iloc[1]  # the gate is fault-invariant
    with pytest.raises(ValueError, match="unknown Run field"):
        fb.sweep(base, {"n_jobs": [1, 2]})


def test_seeds_label_names_a_contiguous_run_from_any_start():
    from finbench.running.run import seeds_label

    assert (seeds_label(range(5)), seeds_label([3, 4, 5]), seeds_label([3, 5, 6]), seeds_label([7, 8])) == (
        "0..4", "3..5", "3,5,6", "7,8")


def test_an_unknown_sweep_field_is_refused_naming_the_sweepable_ones():
    with pytest.raises(fb.FinbenchError) as e:
        fb.sweep(fb.Run(SMALL, seeds=[0], cache=False), {"colour": [1]})
    assert str(e.value) == ("sweep: unknown Run field(s) ['colour']; sweepable: corpus, seeds, profile, costs, "
                            "policies, probe, n_boot, boot_seed")


def test_rows_of_two_memoised_policies_repriced_together_beside_one_played_are_each_their_own(tmp_path):
    """Two policies memoised under other costs are re-priced in one frame and sliced apart; a third is played."""
    clear_caches()
    pols = ["sop", "finality_gate"]
    fb.Run(SMALL, seeds=[0], policies=pols, cache=tmp_path).evaluate()
    costs = fb.Costs(cogs_rate=0.4)
    got = fb.Run(SMALL, seeds=[0], policies=[*pols, "optimistic"], costs=costs, cache=tmp_path).evaluate()
    assert list(got.policy.unique()) == [*pols, "optimistic"]
    for p in (*pols, "optimistic"):
        direct = evaluate(SMALL, [p], seeds=[0], costs=costs, cache=False)
        assert_same_rows(got[got.policy == p].reset_index(drop=True), direct)
    clear_caches()
