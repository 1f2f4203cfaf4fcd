"""Rules of open-loop plans (finbench.agents.plans, SPEC §10): the grid of knobs, the calls a plan makes
in order, its knob checks and their messages, its label and reference, and the double-charge rule.
Expected values are written out by hand from the module's documented rules."""
from __future__ import annotations

import pickle

import pytest

import finbench as fb
from finbench.agents.plans import (ACTIONS, N_PLANS, NAME, RETRIES, WAITS, Plan, PlanFactory, all_plans,
                                   charges_twice, plan_label, plan_ref)
from finbench.agents.registry import REGISTRY
from finbench.errors import PolicyError
from finbench.sim.corpus import make_task


def test_the_grid_is_nine_waits_three_retries_five_actions():
    """Waits 0, 60, ..., 480; retries none / key-1 / key-2; the five dispositions."""
    assert WAITS == (0, 60, 120, 180, 240, 300, 360, 420, 480)
    assert RETRIES == {"none": None, "original": "key-1", "fresh": "key-2"}
    assert list(RETRIES) == ["none", "original", "fresh"]  # the order `all_plans` walks
    assert ACTIONS == ("ship", "refund", "write_off", "escalate", "close")
    assert N_PLANS == 9 * 3 * 9 * 5 == 1215
    assert NAME == "plan" and REGISTRY["plan"] is Plan


def test_all_plans_vary_the_action_fastest_then_second_retry_first():
    plans = list(all_plans())
    assert len(plans) == 1215
    assert plans[0] == {"first": 0, "retry": "none", "second": 0, "action": "ship"}
    assert plans[1] == {"first": 0, "retry": "none", "second": 0, "action": "refund"}
    assert plans[5] == {"first": 0, "retry": "none", "second": 60, "action": "ship"}  # after 5 actions
    assert plans[45] == {"first": 0, "retry": "original", "second": 0, "action": "ship"}  # after 9 x 5
    assert plans[135] == {"first": 60, "retry": "none", "second": 0, "action": "ship"}  # after 3 x 9 x 5
    assert plans[-1] == {"first": 480, "retry": "fresh", "second": 480, "action": "close"}
    assert list(plans[0]) == ["first", "retry", "second", "action"]


def test_the_default_plan_ships_at_once():
    """Defaults: no first wait, no retry, no second wait, `ship`."""
    p = Plan()
    assert p.knobs == {"first": 0, "retry": "none", "second": 0, "action": "ship"}
    assert p.calls() == [("ship", {})]
    assert p.label == "plan[action=ship,first=0,retry=none,second=0]"


@pytest.mark.parametrize("knobs, calls", [
    ((60, "none", 0, "ship"), [("wait", {"ticks": 60})]),
    ((0, "none", 120, "refund"), [("wait", {"ticks": 120})]),
    ((0, "original", 0, "close"), [("retry_capture", {"idempotency_key": "key-1"})]),
    ((1, "fresh", 600, "escalate"), [("wait", {"ticks": 1}), ("retry_capture", {"idempotency_key": "key-2"}),
                                     ("wait", {"ticks": 600})]),
], ids=["first-only", "second-only", "replay", "all-three"])
def test_a_wait_of_zero_makes_no_call_and_the_action_comes_last(knobs, calls):
    p = Plan(*knobs)
    assert p.calls() == calls + [(knobs[3], {})]


def test_act_plays_the_calls_in_order_then_closes_for_ever():
    p = Plan(first=60, retry="original", second=0, action="write_off")
    p.begin({"order_id": "ord-7", "order_value": 10.0})
    got = [p.act({}) for _ in range(5)]
    assert got == [("wait", {"order_id": "ord-7", "ticks": 60}),
                   ("retry_capture", {"order_id": "ord-7", "idempotency_key": "key-1"}),
                   ("write_off", {"order_id": "ord-7"}),
                   ("close", {"order_id": "ord-7"}), ("close", {"order_id": "ord-7"})]
    # a new episode starts the plan over
    p.begin({"order_id": "ord-8", "order_value": 10.0})
    assert p.act({}) == ("wait", {"order_id": "ord-8", "ticks": 60})


@pytest.mark.parametrize("first, second", [(0, 0), (600, 600), (0, 600), (600, 0)])
def test_waits_from_zero_to_600_are_allowed(first, second):
    p = Plan(first=first, second=second)
    assert (p.first, p.second) == (first, second)


@pytest.mark.parametrize("kw, message", [
    ({"first": -1}, "plan: first must be an integer in [0, 600], got -1"),
    ({"first": 601}, "plan: first must be an integer in [0, 600], got 601"),
    ({"second": -1}, "plan: second must be an integer in [0, 600], got -1"),
    ({"second": 601}, "plan: second must be an integer in [0, 600], got 601"),
    ({"first": True}, "plan: first must be an integer in [0, 600], got True"),
    ({"retry": "twice"}, "plan: retry must be one of none, original, fresh, got 'twice'"),
    ({"retry": "key-2"}, "plan: retry must be one of none, original, fresh, got 'key-2'"),
    ({"action": "wait"}, "plan: action must be one of ship, refund, write_off, escalate, close, got 'wait'"),
], ids=["first-low", "first-high", "second-low", "second-high", "bool", "retry", "retry-key", "action"])
def test_a_bad_knob_is_a_policy_error_naming_what_is_allowed(kw, message):
    with pytest.raises(PolicyError) as info:
        Plan(**kw)
    assert str(info.value) == message


def test_a_plan_label_sorts_the_knobs_by_name():
    knobs = {"first": 60, "retry": "fresh", "second": 120, "action": "ship"}
    assert plan_label(knobs) == "plan[action=ship,first=60,retry=fresh,second=120]"
    assert Plan(**knobs).label == "plan[action=ship,first=60,retry=fresh,second=120]"


def test_plan_ref_carries_the_label_a_registry_key_and_a_picklable_factory():
    knobs = {"first": 120, "retry": "original", "second": 60, "action": "refund"}
    ref = plan_ref(knobs)
    label = "plan[action=refund,first=120,retry=original,second=60]"
    assert ref.label == label
    assert ref.cache_id == f"registry:{label}" and ref.builtin is True
    assert ref.factory == PlanFactory(120, "original", 60, "refund")
    made = pickle.loads(pickle.dumps(ref.factory))()  # what a worker process calls
    assert type(made) is Plan and made.knobs == knobs


def test_plan_ref_checks_the_knobs():
    with pytest.raises(PolicyError):
        plan_ref({"first": 0, "retry": "none", "second": 0, "action": "wait"})


def test_a_fresh_key_charges_twice_only_when_the_original_settles():
    settles = make_task("pending_settle")
    fails = make_task("pending_fail")
    assert settles.outcome == "settled" and fails.outcome == "failed"
    fresh = {"first": 0, "retry": "fresh", "second": 0, "action": "ship"}
    assert charges_twice(fresh, settles) is True
    assert charges_twice(fresh, fails) is False
    for retry in ("none", "original"):  # a replay makes no new capture
        assert charges_twice({**fresh, "retry": retry}, settles) is False


def test_a_plan_resolves_through_get_policy_with_its_knobs():
    p = fb.get_policy("plan", first=60, retry="fresh", second=0, action="close")
    assert isinstance(p, Plan) and p.knobs == {"first": 60, "retry": "fresh", "second": 0, "action": "close"}
