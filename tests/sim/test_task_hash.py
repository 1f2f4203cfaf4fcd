"""A task's hash reads four of its fields (it keys most memos, several times an episode); equality still reads
them all, so two tasks that differ anywhere are two keys."""
from __future__ import annotations

import dataclasses

import pytest

import finbench as fb

TASK = fb.make_corpus(n_tasks=4).tasks[0]
OTHER = {"str": "x-other", "float": 1234.5, "int": 977, "none": None}


def test_equal_tasks_hash_alike():
    copy = dataclasses.replace(TASK)
    assert copy == TASK and copy is not TASK and hash(copy) == hash(TASK)
    assert {TASK: 1}[copy] == 1


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(fb.Task)])
def test_a_task_that_differs_in_any_field_is_another_key(field):
    value = getattr(TASK, field)
    new = OTHER["str"] if isinstance(value, str) else OTHER["float"] if isinstance(value, float) else \
        OTHER["int"] if isinstance(value, int) else OTHER["int"]
    other = dataclasses.replace(TASK, **{field: new})
    assert other != TASK
    memo = {TASK: "a", other: "b"}
    assert len(memo) == 2 and memo[TASK] == "a" and memo[dataclasses.replace(other)] == "b"


def test_the_tasks_of_a_corpus_hash_apart():
    """The hash is a memo's speed: a corpus's tasks (twins included) fall in as many buckets as there are tasks."""
    tasks = fb.make_corpus(n_tasks=60).tasks
    assert len({hash(t) for t in tasks}) == len(tasks) == 60


def test_costs_hash_by_their_values():
    a, b = fb.Costs(), fb.Costs(cogs_rate=0.6, step_budget=40)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    others = [dataclasses.replace(a, **{f.name: 3 if f.type == "int" else 0.5}) for f in dataclasses.fields(fb.Costs)]
    assert len({a, *others}) == 1 + len(others)
