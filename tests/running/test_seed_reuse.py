"""`run_chunk` plays a truth-only episode once per task and derives its other seeds.

An episode in which a built-in policy that ignores the brief's seed saw nothing the faults
touch (no read of a system; only the full probe) is the same under every seed but for the
firings. Derived rows must equal simulated ones exactly: each seed alone (nothing to derive
from) against all seeds together, for every built-in policy and some knob and probe variants,
under profiles whose draws differ.
"""
from __future__ import annotations


import pandas as pd
import pytest

import finbench as fb
from finbench.agents.policies import POLICIES, FinalityGate, Policy
from finbench.agents.registry import as_ref
from finbench.running.evaluation import run_chunk
from finbench.sim.env import FinalityEnv
from finbench.sim.play import fast_path, play, trusted
from finbench.sim import constants as C
from finbench.sim.probe import ProbeMode
from tests.rows import assert_same_rows, played_alone

TASKS = fb.make_corpus(n_tasks=45).tasks
SEEDS = [0, 3, 1, 4]
REFS = [as_ref(p) for p in [*POLICIES, "finality_gate[wait=7]", "react[wait=52]"]]


def _frame(tasks, refs, seeds, profile, probe=None) -> pd.DataFrame:
    parts = run_chunk(tasks, refs, seeds, profile, fb.Costs(), probe)
    return pd.concat([pd.DataFrame(cols) for cols in parts], ignore_index=True)


@pytest.mark.parametrize("profile", [fb.FaultProfile.default(), fb.FaultProfile.only("duplicate", "reorder",
                                                                                     intensity=0.9)],
                         ids=["default", "duplicate+reorder"])
def test_derived_seeds_equal_simulated_ones(profile):
    together = _frame(TASKS, REFS, SEEDS, profile)
    assert_same_rows(together, played_alone(TASKS, REFS, SEEDS, profile))
    # the derivation is exercised: the gate and the oracle are truth-only, and firings do move
    gate = together[together.policy == "finality_gate"]
    assert len(gate) == len(TASKS) * len(SEEDS)
    fired = gate.filter(like="fired_").sum(axis=1)
    assert fired.groupby(gate.task_id).nunique().max() > 1


@pytest.mark.parametrize("share", [False, True], ids=["alone", "shared"])
@pytest.mark.parametrize("probe", [ProbeMode.delayed(), ProbeMode.rate_limited(), ProbeMode.identity_only(),
                                   ProbeMode.none()], ids=lambda p: p.name)
def test_a_probe_that_is_not_the_truth_is_never_derived(probe, share):
    refs = [as_ref("finality_gate")]
    parts = run_chunk(TASKS[:20], refs, SEEDS, fb.FaultProfile.default(), fb.Costs(), probe, share)
    got = pd.concat([pd.DataFrame(cols) for cols in parts], ignore_index=True)
    assert_same_rows(got, played_alone(TASKS[:20], refs, SEEDS, fb.FaultProfile.default(), probe))
    assert "derived_seed" not in set(got["origin"])  # only an episode that never probed is shared, by its reads


def test_an_episode_saw_only_the_truth_until_it_reads_a_system():
    task = TASKS[0]
    env = FinalityEnv(task, 0)
    order = env.reset()["order_id"]
    env.step("probe_processor", order_id=order)
    env.step("wait", order_id=order, ticks=5)
    assert env.saw_only_truth
    env.step("read_bank", order_id=order)
    assert not env.saw_only_truth
    delayed = FinalityEnv(task, 0, probe=ProbeMode.delayed())
    delayed.step("probe_processor", order_id=delayed.reset()["order_id"])
    assert not delayed.saw_only_truth


def test_a_policy_that_reads_the_seed_is_played_under_every_seed():
    # a built-in gate that (unlike the real one) keys its wait by the seed: it must not be derived
    class SeedWaitGate(FinalityGate):
        def __init__(self):
            super().__init__()

        def begin(self, brief, resolution=None):
            super().begin(brief, resolution)
            self.wait_ticks = 5 + 7 * brief["seed"]

    assert SeedWaitGate.ignores_seed  # inherited, but not trusted: it takes the public step
    env = play(FinalityEnv(TASKS[0], 1), SeedWaitGate())
    assert env.saw_only_truth
    refs = [as_ref(SeedWaitGate)]
    pd.testing.assert_frame_equal(_frame(TASKS[:20], refs, SEEDS, fb.FaultProfile.default()),
                                  played_alone(TASKS[:20], refs, SEEDS, fb.FaultProfile.default()))


# --- across fault profiles: the ablation's arms ------------------------------------------------------------------

ARMS = [fb.FaultProfile.default(), fb.FaultProfile.none(), *(fb.FaultProfile.only(f) for f in C.FAMILIES),
        *(fb.FaultProfile.without(f) for f in C.FAMILIES), fb.FaultProfile.only("loss", "delay"),
        fb.FaultProfile.only("duplicate", "reorder", intensity=0.9)]


def test_derived_across_profiles_equal_played_ones(monkeypatch):
    """Every arm after the first derives the truth-only episodes the first played (one shared memo), and
    each arm's rows equal those played for that arm alone, each seed on its own."""
    from finbench.running import derivation as D
    from finbench.running import evaluation as E

    played = []
    real = E.play
    monkeypatch.setattr(E, "play", lambda env, policy: played.append(type(policy).__name__) or real(env, policy))
    fb.clear_caches()
    tasks, seeds = TASKS[:20], [0, 3]
    shared = {}
    for i, arm in enumerate(ARMS):
        before = len(played)
        parts = run_chunk(tasks, REFS, seeds, arm, fb.Costs(), None, True)
        shared[arm.name] = pd.concat([pd.DataFrame(cols) for cols in parts], ignore_index=True)
        if i:  # the gate and the oracle were truth-only under the first arm: derived here, never played
            assert "FinalityGate" not in played[before:] and "FinalityOracle" not in played[before:]
            assert len(played) - before < len(tasks) * len(seeds) * len(REFS)
    assert len(D.TRUTH_ONLY) >= len(tasks) and {"FinalityGate", "FinalityOracle"} <= set(played)
    during = list(played)
    assert D.SAME_READS  # read before the oracle below empties every memo
    for arm in ARMS:
        alone = played_alone(tasks, REFS, seeds, arm)
        assert_same_rows(shared[arm.name], alone)
    # the firings do move between arms for a derived policy
    gate = pd.concat([f[f.policy == "finality_gate"] for f in shared.values()])
    assert len(gate) > 0 and gate.filter(like="fired_").sum(axis=1).nunique() > 1
    # policies that read the systems are derived too, where an arm gives the world an earlier arm gave
    readers = {type(as_ref(n).make()).__name__ for n in ("sop", "eager", "majority_vote")}
    plays = sum(1 for name in during if name in readers)
    assert 0 < plays < len(ARMS) * len(tasks) * len(seeds) * len(readers)


def test_same_world_derivation_compares_each_read_s_stale_lag(monkeypatch):
    """Stale reads change nothing a base holds: an arm with and one without them give one base signature,
    and an episode is derived only where its every read would be stale (or fresh) alike."""
    from finbench.running import evaluation as E

    fb.clear_caches()
    tasks, seeds = TASKS[:30], [0, 1, 2]
    refs = [as_ref("sop"), as_ref("eager")]
    off, on = fb.FaultProfile.none(), fb.FaultProfile.only("stale_read", intensity=0.5)
    played = []
    real = E.play
    monkeypatch.setattr(E, "play", lambda env, policy: played.append(env.profile.name) or real(env, policy))
    shared = [pd.concat([pd.DataFrame(c) for c in run_chunk(tasks, refs, seeds, arm, fb.Costs(), None, True)],
                        ignore_index=True) for arm in (off, on)]
    n = len(tasks) * len(seeds) * len(refs)
    assert played.count(off.name) == n
    assert 0 < played.count(on.name) < n  # some derived (no read stale), some played (a stale read)
    assert (shared[1]["origin"] == "derived_reads").sum() == n - played.count(on.name)  # each row says which
    assert shared[1].fired_stale_read.gt(0).any()
    for arm, frame in zip((off, on), shared):
        assert_same_rows(frame, played_alone(tasks, refs, seeds, arm))


def test_a_run_that_caches_nothing_keeps_no_episode_in_the_memo():
    from finbench.running import derivation as D

    fb.clear_caches()
    corpus = fb.make_corpus(n_tasks=30)
    fb.evaluate(corpus, ["finality_gate", "finality_oracle"], seeds=range(2), cache=False)
    assert not D.TRUTH_ONLY
    run_chunk(corpus.tasks[:5], [as_ref("finality_gate")], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    assert D.TRUTH_ONLY  # the same episodes, shared: the check above can fail


def test_one_package_policy_under_two_labels_keeps_each_label(tmp_path):
    """A package policy object has one cache key whatever its label: a row derived for one label must not
    carry the other's (the memos are keyed by the label too)."""
    fb.clear_caches()
    corpus = fb.make_corpus(n_tasks=12)
    refs = [fb.PolicyRef.of(FinalityGate(), label="gate_a"), fb.PolicyRef.of(FinalityGate(), label="gate_b"),
            fb.PolicyRef.of(POLICIES["sop"](), label="sop_a"), fb.PolicyRef.of(POLICIES["sop"](), label="sop_b")]
    assert refs[0].cache_key() == refs[1].cache_key() is not None
    for arm in ARMS[:3]:
        df = fb.evaluate(corpus, refs, seeds=[0, 1], profile=arm, cache=tmp_path)
        for ref in refs:
            mine = df[df.policy == ref.label]
            assert len(mine) == 24


def test_two_stale_read_intensities_in_one_process_equal_each_played_with_nothing_kept():
    """Profiles that differ only in their stale-read intensity share no draw: played one after the other in
    one process (every memo shared), each row equals the episode played after every memo was emptied."""
    from finbench.running.evaluation import COLUMNS, episode_row

    tasks, refs, seeds = TASKS[:24], [as_ref("sop"), as_ref("react")], [0, 1]
    arms = [fb.FaultProfile.only("stale_read", intensity=0.2), fb.FaultProfile.only("stale_read", intensity=0.9)]
    fb.clear_caches()
    shared = [run_chunk(tasks, refs, seeds, arm, fb.Costs(), None, True) for arm in arms]
    for arm, parts in zip(arms, shared):
        for ref, cols in zip(refs, parts):
            got = list(zip(*(cols[c] for c in COLUMNS)))
            alone = []
            for task in tasks:
                for seed in seeds:
                    fb.clear_caches()
                    alone.append(episode_row(task, ref, seed, arm, fb.Costs()))
            assert got == alone, (arm.name, ref.label)
    fired = [sum(parts[0]["fired_stale_read"]) for parts in shared]
    assert 0 < fired[0] < fired[1]  # the intensities really differ in what they fire
    fb.clear_caches()


@fast_path
class _BalancedReader(Policy):
    """Test-only, trusted as the package's own: it ships once the ledger says `balanced`, the one field a
    partial commit changes (no policy of the package reads it)."""

    name = "balanced_reader"

    def act(self, obs):
        result = obs.get("result") or {}
        if result.get("system") == "ledger" and result["balanced"] and result["lines"]:
            return self.call("ship")
        if obs["t"] > 560:
            return self.call("escalate")
        return self.call("wait", ticks=40) if obs.get("tool") == "read_ledger" else self.call("read_ledger")


def test_same_reads_tells_a_partial_commit_apart_from_a_whole_one():
    """Two profiles whose ledgers hold the same deliveries at the same ticks, half of them partial under one:
    an episode that reads `balanced` is derived across them only where it read no partial delivery, and each
    row equals the episode played with nothing kept."""
    from finbench.running.evaluation import COLUMNS, episode_row

    ref = fb.PolicyRef("balanced_reader", _BalancedReader, cache_id="test:balanced_reader", builtin=True)
    assert trusted(ref.make())
    tasks, seeds = TASKS[:30], [0, 1]
    arms = [fb.FaultProfile.none(), fb.FaultProfile.only("partial_commit", intensity=0.9)]
    fb.clear_caches()
    shared = [run_chunk(tasks, [ref], seeds, arm, fb.Costs(), None, True)[0] for arm in arms]
    origins = shared[1]["origin"]
    assert "derived_reads" in origins and "played" in origins  # both ways were taken
    assert sum(shared[1]["fired_partial_commit"]) > 0
    for arm, cols in zip(arms, shared):
        alone = []
        for task in tasks:
            for seed in seeds:
                fb.clear_caches()
                alone.append(episode_row(task, ref, seed, arm, fb.Costs()))
        assert list(zip(*(cols[c] for c in COLUMNS))) == alone, arm.name
    assert shared[0]["disposition"] != shared[1]["disposition"]  # the flag decides: the arms differ
