"""Rules of `run_episode` (`finbench.running.episode`) and of `Run` (`finbench.running.run`).

Pinned here:
- `run_episode` counts each episode it plays as one `simulated` episode (`running.stats.EPISODES`,
  the count every experiment notebook prints), and labels the result with the reference's label;
- `Run.stamp()` carries the run's own bootstrap (`n_boot`, `boot_seed`) and refuses an extra entry
  that would replace one of the run's own: any stamp key, and `probe`, `policies`, `n_boot`,
  `boot_seed` even when this run's stamp leaves them out;
- `Run.evaluate()` re-prices memoised episodes whose run differed only in prices: the rows equal a
  direct evaluation under the new costs, column for column, whether all of the run's policies were
  memoised, some of them (the re-priced rows are sliced per policy), or another run's policies were
  re-priced just before (each set of frames is re-priced from its own rows).

Fast: a 9-task corpus, one seed, a `tmp_path` cache folder; expectations come from `evaluate(...,
cache=False)` under the new costs, i.e. simulating instead of re-pricing.
"""
from __future__ import annotations

import pandas as pd
import pytest

import finbench as fb
from tests.rows import assert_same_rows
from finbench.memo import clear_caches
from finbench.running.evaluation import evaluate
from finbench.running.stats import EPISODES

CORPUS = fb.make_corpus(n_tasks=9, master_seed=4242)
PRICES = fb.Costs(cogs_rate=0.4, dispute_fee=50.0)


# --- run_episode ---------------------------------------------------------------------------------------

def test_each_episode_counts_once_as_played():
    task = CORPUS.tasks[0]
    start = EPISODES["played"]
    fb.run_episode(task, "sop", seed=0)
    assert EPISODES["played"] == start + 1
    fb.run_episode(task, "finality_gate", seed=1)
    fb.run_episode(task, fb.get_policy("sop"), seed=2)
    assert EPISODES["played"] == start + 3


def test_the_result_carries_the_reference_label():
    task = CORPUS.tasks[1]
    assert fb.run_episode(task, "sop[patience=60]").policy == "sop[patience=60]"
    assert fb.run_episode(task, "finality_gate").policy == "finality_gate"
    assert fb.run_episode(task, fb.get_policy("finality_gate")).policy == "finality_gate"


# --- Run.stamp -----------------------------------------------------------------------------------------

def test_stamp_carries_the_bootstrap_of_the_run():
    s = fb.Run(CORPUS, n_boot=123, boot_seed=7).stamp()
    assert (s["n_boot"], s["boot_seed"]) == (123, 7)
    assert not {"n_boot", "boot_seed"} & set(fb.Run(CORPUS, boot_seed=7).stamp(bootstrap=False))


@pytest.mark.parametrize("extra", ["probe", "policies", "n_boot", "boot_seed", "corpus", "seeds"])
def test_stamp_extras_never_replace_the_runs_own(extra):
    run = fb.Run(CORPUS)  # full probe, the nine policies: its stamp names neither
    assert "probe" not in run.stamp() and "policies" not in run.stamp()
    with pytest.raises(fb.FinbenchError) as e:
        run.stamp(bootstrap=False, **{extra: "x"})
    assert str(e.value) == f"Run.stamp: extra entries may not replace the run's own {extra}"


def test_stamp_names_every_clash_sorted_and_adds_other_extras():
    run = fb.Run(CORPUS)
    with pytest.raises(fb.FinbenchError) as e:
        run.stamp(probe=1, boot_seed=2, table="t")
    assert str(e.value) == "Run.stamp: extra entries may not replace the run's own boot_seed, probe"
    assert run.stamp(table="t3")["table"] == "t3"


# --- Run.evaluate: re-pricing memoised episodes ----------------------------------------------------------

def _direct(policies, costs):
    return evaluate(CORPUS, policies, seeds=[0], costs=costs, cache=False)


def test_some_policies_memoised_under_other_prices_are_repriced_and_sliced(tmp_path):
    clear_caches()
    fb.Run(CORPUS, seeds=[0], policies=["sop"], cache=tmp_path).evaluate()  # memoised at SPEC's prices
    got = fb.Run(CORPUS, seeds=[0], policies=["sop", "finality_gate"], costs=PRICES, cache=tmp_path).evaluate()
    want = _direct(["sop", "finality_gate"], PRICES)
    assert list(got.columns) == list(want.columns) and "index" not in got.columns
    assert_same_rows(got, want)
    assert got.attrs["loaded"] == {"sop": 9, "finality_gate": 0}
    assert set(got[got.policy == "sop"]["origin"]) == {"repriced"}
    assert set(got[got.policy == "finality_gate"]["origin"]) <= {"played", "derived_seed"}


def test_two_memoised_policies_repriced_in_turn_keep_their_own_rows(tmp_path):
    clear_caches()
    fb.Run(CORPUS, seeds=[0], policies=["sop", "finality_gate"], cache=tmp_path).evaluate()
    for policies in (["sop"], ["finality_gate"], ["finality_gate", "sop"]):
        got = fb.Run(CORPUS, seeds=[0], policies=policies, costs=PRICES, cache=tmp_path).evaluate()
        assert list(got["policy"].unique()) == policies
        assert_same_rows(got, _direct(policies, PRICES))
        assert set(got["origin"]) == {"repriced"}


def test_a_run_takes_one_to_a_million_bootstrap_resamples():
    corpus = fb.make_corpus(n_tasks=3)
    assert fb.Run(corpus, n_boot=1_000_000).n_boot == 1_000_000 and fb.Run(corpus, n_boot=1).n_boot == 1
    for n in (0, 1_000_001):
        with pytest.raises(fb.FinbenchError, match=r"Run: n_boot must be an integer in \[1, 1000000\]"):
            fb.Run(corpus, n_boot=n)


class _Told:
    """Closes at once; told its case's end (`episode_end`)."""

    def begin(self, brief):
        self.order, self.outcome = brief["order_id"], None

    def act(self, obs):
        return "close", {"order_id": self.order}

    def episode_end(self, outcome):
        self.outcome = outcome


def test_a_policy_with_episode_end_is_told_its_outcome_and_a_model_agent_its_task_and_seed():
    from finbench.agents.llm import ModelAgent
    from finbench.running.episode import played, tell_start

    task = fb.make_corpus(n_tasks=2).tasks[1]
    told = _Told()
    env = played(fb.FinalityEnv(task, 3), told)
    assert told.outcome == {"position": env.result().position, "gap": env.result().gap, "exact": False,
                            "disposition": "close", "n_calls": 1}
    agent = ModelAgent("m", None, transcripts=None)
    tell_start(agent, task, 3)
    assert agent._key == (task.task_id, 3)
    wrapped, inner = type("Wrapper", (), {})(), ModelAgent("m", None, transcripts=None)
    wrapped._policy = inner  # as `finbench eval` holds the user's policy
    tell_start(wrapped, task, 4)
    assert inner._key == (task.task_id, 4)


def test_an_episode_s_default_seed_is_0():
    assert fb.run_episode(fb.make_corpus(n_tasks=1).tasks[0], "sop").seed == 0
