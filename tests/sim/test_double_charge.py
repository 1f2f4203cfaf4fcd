"""A double charge is never free (SPEC §5 as amended, issue 19): an order over-collected at any
moment pays the dispute fee, even if the excess is returned later."""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.sim.economics import settle_case
from finbench.sim.world import agent_capture, original_capture

COSTS = fb.Costs()
V = 649.0
TASK = fb.make_task("pending_settle", determined_at=300, order_value=V, seed=3)  # settles; a fresh key settles too


class RetryThen:
    """At hand-over, a fresh-key capture (a second charge, since the original settles too), then `final`."""

    def __init__(self, final: str):
        self.final = final

    def begin(self, brief):
        self.order, self.step = brief["order_id"], 0

    def act(self, obs):
        self.step += 1
        if self.step == 1:
            return "retry_capture", {"order_id": self.order, "idempotency_key": "key-2"}
        return self.final, {"order_id": self.order}


def _two_captures(second_at: int = 121):
    return [original_capture(TASK), agent_capture(TASK, 2, "key-2", second_at)]


def test_the_task_charges_twice():
    assert TASK.outcome == "settled" and TASK.retry_outcome == "settled"
    assert TASK.determined_at <= fb.HORIZON and 121 + TASK.retry_delay <= fb.HORIZON


def test_an_escalated_order_on_which_two_captures_settled_pays_the_dispute_fee():
    res = fb.run_episode(TASK, RetryThen("escalate"), seed=0, profile=fb.FaultProfile.none())
    lb = res.loss_breakdown
    # the clerk ships at the first settlement and returns the excess: no liability remains
    assert res.disposition == "escalate" and lb["liability"] == 0
    assert lb["dispute_fee"] == COSTS.dispute_fee
    expected = V - COSTS.cogs_rate * V - COSTS.dispute_fee - COSTS.escalation_cost  # from SPEC §5's formula
    assert res.position == pytest.approx(expected)


def test_a_refunded_double_charge_pays_the_fee_and_a_single_charge_does_not():
    refunded = settle_case(TASK, _two_captures(), "refund", 700, COSTS)  # after both settled
    assert refunded.liability == 0 and refunded.dispute_fee == COSTS.dispute_fee
    assert refunded.position == pytest.approx(-COSTS.dispute_fee)
    single = settle_case(TASK, [original_capture(TASK)], "ship", 400, COSTS)
    assert single.dispute_fee == 0 and single.position == pytest.approx(V - COSTS.cogs_rate * V)


def test_refunding_before_the_second_settles_leaves_a_liability_and_one_fee():
    # the refund at t=305 returns the first charge; the second settles later into an empty account
    second_at = 305 - TASK.retry_delay + 10  # settles 10 ticks after the refund
    late = settle_case(TASK, _two_captures(second_at=second_at), "refund", 305, COSTS)
    assert TASK.determined_at < 305 < second_at + TASK.retry_delay
    # the second capture's money is then held with no goods behind it: a liability, so the fee, but once
    assert late.liability == pytest.approx(V) and late.dispute_fee == COSTS.dispute_fee


def test_the_fee_is_charged_once():
    twice = settle_case(TASK, _two_captures(), "ship", 400, COSTS)  # shipped, V held beyond the goods
    assert twice.liability == pytest.approx(V) and twice.dispute_fee == COSTS.dispute_fee
    assert twice.position == pytest.approx(2 * V - COSTS.cogs_rate * V - V - COSTS.dispute_fee)
