"""How `evaluate` cuts a corpus into chunks (`chunk_tasks`): whole tasks, more of them with fewer seeds, and
rows that never depend on the cut."""
from __future__ import annotations

import pandas as pd
import pytest

import finbench as fb
from finbench.running import evaluation as E
from tests.user_policies import Closer

CORPUS = fb.make_corpus(n_tasks=53)


@pytest.mark.parametrize("n_seeds, tasks", [(1, 120), (2, 48), (3, 24), (4, 24), (5, 24), (6, 24), (20, 24)])
def test_a_chunk_holds_more_tasks_with_fewer_seeds(n_seeds, tasks):
    assert E.chunk_tasks(n_seeds) == E.chunk_tasks(n_seeds, True) == tasks
    assert E.chunk_tasks(n_seeds, False) == 24  # a user's policy: small chunks, whatever the seeds


def test_a_run_with_a_user_policy_keeps_small_chunks(tmp_path):
    """A user's policy may take seconds an episode: 53 tasks at one seed are three chunks for every policy of
    the run, not one, so two workers share them and an interrupted run loses little."""
    E.evaluate(CORPUS, ["sop", Closer], seeds=[0], cache=tmp_path)
    files = [p for p in tmp_path.rglob("*.json") if p.is_file()]
    assert len(files) == 2 * 3


@pytest.mark.parametrize("seeds", [[0], [1, 4], [0, 1, 2, 3, 4]])
def test_one_cache_file_per_chunk_and_policy(tmp_path, seeds):
    E.evaluate(CORPUS, ["sop", "finality_gate"], seeds=seeds, cache=tmp_path)
    per_policy = -(-53 // E.chunk_tasks(len(seeds)))  # ceiling
    assert per_policy == {1: 1, 2: 2, 5: 3}[len(seeds)]
    files = sorted(p for p in tmp_path.rglob("*.json") if p.is_file())
    assert len(files) == 2 * per_policy


@pytest.mark.parametrize("seeds", [[0], [2, 3]])
def test_rows_do_not_depend_on_the_chunk_size(tmp_path, monkeypatch, seeds):
    """The same rows, in the same order, whether the corpus is one chunk or many (each with its own cache)."""
    policies = ["sop", "react", "finality_gate", "random"]
    fb.clear_caches()
    one = E.evaluate(CORPUS, policies, seeds=seeds, profile=fb.FaultProfile.without("loss"), cache=tmp_path / "a")
    assert -(-len(CORPUS) // E.chunk_tasks(len(seeds))) <= 2
    monkeypatch.setattr(E, "CHUNK_TASKS", 5)
    fb.clear_caches()
    many = E.evaluate(CORPUS, policies, seeds=seeds, profile=fb.FaultProfile.without("loss"), cache=tmp_path / "b")
    assert len(list((tmp_path / "b").rglob("*.json"))) > len(list((tmp_path / "a").rglob("*.json")))
    assert len(one) == len(CORPUS) * len(seeds) * len(policies)
    pd.testing.assert_frame_equal(one, many)
    fb.clear_caches()
