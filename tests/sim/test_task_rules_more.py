"""More rules of task validation (`finbench.sim.task.validate_task`, SPEC §1, §6).

Pinned here: a chargeback, when there is one, comes no earlier than the original capture's
determination and no later than ten horizons (0..18,000 ticks); a task breaking it is refused with
a `CorpusError` naming where, the field, the allowed range and the value; null means no chargeback.
"""
import dataclasses

import pytest

import finbench as fb
from finbench.sim.task import validate_task

TASK = fb.make_task("late_chargeback", seed=1)


def _dict(**change):
    return dataclasses.replace(TASK, **change).to_dict()


def test_the_chargeback_window_is_determination_to_ten_horizons():
    d = TASK.determined_at
    assert fb.HORIZON == 1800 and TASK.chargeback_at is not None and d < 18_000
    for at in (d, TASK.chargeback_at, 18_000, None):
        assert validate_task(_dict(chargeback_at=at), "here").chargeback_at == at


@pytest.mark.parametrize("at", [-1, "early", "late", 2.5], ids=["negative", "before-determination", "past", "float"])
def test_a_chargeback_outside_the_window_is_refused_with_its_message(at):
    d = TASK.determined_at
    value = {"early": d - 1, "late": 18_001}.get(at, at)
    with pytest.raises(fb.CorpusError) as e:
        validate_task(_dict(chargeback_at=value), "task 'x'")
    assert str(e.value) == f"task 'x': chargeback_at must be an integer in [{d}, 18000], got {value!r}"


def test_a_hand_built_task_with_an_early_chargeback_is_refused_where_it_enters():
    bad = dataclasses.replace(TASK, chargeback_at=TASK.determined_at - 1)
    d = TASK.determined_at
    with pytest.raises(fb.CorpusError) as e:
        fb.FinalityEnv(bad)
    msg = str(e.value)
    assert msg.startswith("FinalityEnv: ")
    assert msg.endswith(f"task '{TASK.task_id}': chargeback_at must be an integer in [{d}, 18000], got {d - 1}")
