"""`Run.evaluate()` takes a run's episodes from a memoised run of the same episodes under more seeds: its rows of
those seeds, in its order. Every such row must equal the row the run plays alone."""
from __future__ import annotations

import pandas as pd
import pytest

import finbench as fb
from finbench.memo import clear_caches
from finbench.running import run as R
from tests.rows import assert_same_rows, origins

CORPUS = fb.make_corpus(n_tasks=30)
POLICIES = ["sop", "react", "finality_gate", "random", "majority_vote"]


def _alone(tmp_path, seeds, profile=None, policies=POLICIES) -> pd.DataFrame:
    clear_caches()
    run = fb.Run(CORPUS, seeds=seeds, policies=policies, profile=profile or fb.FaultProfile.default(),
                 cache=tmp_path / "alone")
    return run.evaluate()


@pytest.mark.parametrize("seeds", [(0,), (2,), (1, 3), (0, 4), (0, 1, 2, 3)])
def test_a_run_of_fewer_seeds_takes_the_memoised_rows_and_they_equal_its_own(tmp_path, seeds, monkeypatch):
    want = _alone(tmp_path, seeds)
    clear_caches()
    fb.Run(CORPUS, seeds=range(5), policies=POLICIES, cache=tmp_path / "shared").evaluate()
    calls = []
    real = R.evaluate
    monkeypatch.setattr(R, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = fb.Run(CORPUS, seeds=seeds, policies=POLICIES, cache=tmp_path / "shared").evaluate()
    assert calls == []  # nothing evaluated: every policy's rows were cut from the five seeds'
    assert got.attrs["loaded"] == {p: len(CORPUS) * len(seeds) for p in POLICIES}
    assert_same_rows(got, want, check_exact=True)
    clear_caches()


@pytest.mark.parametrize("seeds, why", [((3, 1), "another order"), ((0, 7), "a seed the memo lacks")])
def test_seeds_out_of_the_memo_s_order_or_beyond_it_are_evaluated(tmp_path, seeds, why, monkeypatch):
    clear_caches()
    fb.Run(CORPUS, seeds=range(5), policies=["sop"], cache=tmp_path).evaluate()
    calls = []
    real = R.evaluate
    monkeypatch.setattr(R, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = fb.Run(CORPUS, seeds=seeds, policies=["sop"], cache=tmp_path).evaluate()
    assert len(calls) == 1, why
    assert list(got["seed"].unique()) == list(seeds)
    clear_caches()


def test_another_profile_costs_sim_or_probe_is_not_cut_from_the_memo(tmp_path, monkeypatch):
    clear_caches()
    fb.Run(CORPUS, seeds=range(3), policies=["sop"], cache=tmp_path).evaluate()
    calls = []
    real = R.evaluate
    monkeypatch.setattr(R, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k))
    for other in ({"profile": fb.FaultProfile.none()}, {"costs": fb.Costs(read_ticks=3)},
                  {"probe": fb.ProbeMode.delayed(60)}):
        fb.Run(CORPUS, seeds=[0], policies=["sop"], cache=tmp_path, **other).evaluate()
    assert len(calls) == 3
    clear_caches()


def test_a_run_with_cache_false_shares_nothing(monkeypatch):
    clear_caches()
    fb.Run(CORPUS, seeds=range(3), policies=["sop"], cache=False).evaluate()
    calls = []
    real = R.evaluate
    monkeypatch.setattr(R, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k))
    fb.Run(CORPUS, seeds=[1], policies=["sop"], cache=False).evaluate()
    assert len(calls) == 1
    clear_caches()


def test_the_cut_is_kept_under_the_memo_s_bound(tmp_path, monkeypatch):
    clear_caches()
    monkeypatch.setattr(R, "_MEMO_SIZE", 1)
    fb.Run(CORPUS, seeds=range(2), policies=["sop"], cache=tmp_path).evaluate()
    fb.Run(CORPUS, seeds=[1], policies=["sop"], cache=tmp_path).evaluate()
    assert len(R._MEMO) == 1 and next(iter(R._MEMO))[1] == (1,)
    clear_caches()


def test_a_user_policy_s_rows_are_never_cut_from_another_run(tmp_path, monkeypatch):
    """A user's policy is reused only for the very run it played (its declared `cache_id`): a run of fewer seeds
    plays it (or reads its own cache files), never the other run's rows."""
    from tests.user_policies import Closer

    clear_caches()
    fb.Run(CORPUS, seeds=range(3), policies=["sop", Closer], cache=tmp_path).evaluate()
    asked = []
    real = R.evaluate
    monkeypatch.setattr(R, "evaluate", lambda corpus, refs, *a, **k: asked.append([r.label for r in refs])
                        or real(corpus, refs, *a, **k))
    fb.Run(CORPUS, seeds=[0], policies=["sop", Closer], cache=tmp_path).evaluate()
    assert asked == [["closer"]]
    clear_caches()
