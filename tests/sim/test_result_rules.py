"""The rules of `finbench.sim.result`: `episode_result(**values)` is `EpisodeResult(**values)`.

- Given every field in declaration order (the fast path) it returns an `EpisodeResult` equal to the
  constructor's, with the same attributes in the same order, still frozen.
- Any other set of names goes through the constructor: a missing required field or an unknown name raises
  TypeError, omitted defaulted fields take their declared defaults (held on the instance), and the same
  names in another order give the same result.
- `EpisodeResult`'s repr leaves out `actions` and `trace`."""
from __future__ import annotations

import dataclasses

import pytest

from finbench.sim.result import EpisodeResult, episode_result

FULL = dict(task_id="ord-0001", archetype="settled_clean", policy="sop", seed=3, position=12.5,
            reference_position=20.0, gap=7.5, exact=False, premature_irreversible=True, disposition="refund",
            end_t=140, n_calls=9, fired={"loss": 1}, loss_breakdown={"refund": 7.5}, actions=("a", "b"),
            trace=({"t": 0},), unrelated_effects=2, probe_calls=4, wait_calls=5, privileged=True)
DEFAULTED = ("unrelated_effects", "probe_calls", "wait_calls", "privileged")


def test_declared_field_order():
    assert [f.name for f in dataclasses.fields(EpisodeResult)] == list(FULL)


def test_all_fields_in_order_give_the_constructors_object():
    r = episode_result(**FULL)
    assert type(r) is EpisodeResult
    assert r == EpisodeResult(**FULL)
    assert list(vars(r).items()) == list(FULL.items())
    assert r.fired is FULL["fired"] and r.actions is FULL["actions"]  # the values themselves, not copies


def test_fast_path_result_is_frozen():
    r = episode_result(**FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.gap = 0.0


def test_missing_field_raises():
    values = {k: v for k, v in FULL.items() if k != "gap"}
    with pytest.raises(TypeError, match="gap"):
        episode_result(**values)


def test_unknown_name_raises():
    with pytest.raises(TypeError, match="bogus"):
        episode_result(**FULL, bogus=1)


def test_omitted_defaults_are_set_on_the_instance():
    values = {k: v for k, v in FULL.items() if k not in DEFAULTED}
    r = episode_result(**values)
    assert (r.unrelated_effects, r.probe_calls, r.wait_calls, r.privileged) == (0, 0, 0, False)
    assert list(vars(r)) == list(FULL)  # the constructor set every field on the instance
    assert r == EpisodeResult(**values)


def test_names_in_another_order_give_the_same_result():
    r = episode_result(**dict(reversed(list(FULL.items()))))
    assert type(r) is EpisodeResult and r == EpisodeResult(**FULL)
    assert vars(r) == FULL


def test_repr_leaves_out_actions_and_trace():
    text = repr(episode_result(**FULL))
    assert "task_id='ord-0001'" in text and "privileged=True" in text
    assert "actions" not in text and "trace" not in text
