"""Hand-built tasks and corpora are checked where they enter, not priced into a wrong gap (issue 18)."""
from __future__ import annotations

import dataclasses

import pytest

import finbench as fb

C = fb.make_corpus(n_tasks=12)
T = C.tasks[0]


@pytest.mark.parametrize("change, named", [
    (dict(determined_at=10**9), "determined_at"),
    (dict(other_order_id=T.order_id), "other_order_id"),
    (dict(order_value=-50.0), "order_value"),
    (dict(order_value=float("nan")), "order_value"),
    (dict(outcome="maybe"), "outcome"),
], ids=["determined-never", "other-is-own", "negative-value", "nan-value", "unknown-outcome"])
def test_a_bad_hand_built_task_is_refused_at_every_door(change, named):
    bad = dataclasses.replace(T, **change)
    for door in (lambda: fb.FinalityEnv(bad), lambda: fb.run_episode(bad, "sop"),
                 lambda: fb.evaluate(fb.Corpus((bad,)), ["sop"], seeds=[0], cache=False)):
        with pytest.raises(fb.CorpusError, match=rf"task '{T.task_id}'.*{named}"):
            door()


def test_a_corpus_keeps_its_tasks_as_built():
    tasks = list(C.tasks)
    corpus = fb.Corpus(tasks)
    fingerprint = corpus.fingerprint
    tasks.reverse()  # editing the caller's list changes nothing the cache keys on
    assert isinstance(corpus.tasks, tuple) and corpus.fingerprint == fingerprint == fb.Corpus(C.tasks).fingerprint


@pytest.mark.parametrize("tasks", [[1, 2, 3], "tasks", [T, T]], ids=["not-tasks", "a-string", "duplicate-ids"])
def test_a_corpus_of_something_else_is_refused(tasks):
    with pytest.raises(fb.CorpusError, match="Corpus: task"):
        fb.Corpus(tasks)


@pytest.mark.parametrize("change, says", [
    (dict(archetype="nope"), "archetype must be one of"),
    (dict(retry_delay=-1), "retry_delay must be an integer in"),
    (dict(twin_side="both"), "twin_side must be one of"),
    (dict(twin_id="tw-x", twin_side=None), "twin_id and twin_side must both be set or both be null, got 'tw-x' and None"),
], ids=["archetype", "retry-delay", "twin-side", "twin-half"])
def test_a_bad_field_of_a_hand_built_task_is_named(change, says):
    with pytest.raises(fb.CorpusError) as caught:
        fb.FinalityEnv(dataclasses.replace(T, **change))
    assert str(caught.value).startswith(f"FinalityEnv: task: task '{T.task_id}': {says}")
