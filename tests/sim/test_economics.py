"""The economics (SPEC §5): `Costs`, the money of a case to HORIZON (`settle_money`) and its
position under prices (`price`, `settle_case`). Each test pins one rule at the place where a
changed comparison, constant or default would otherwise go unnoticed: the boundaries of the
horizon and of the shipping deadline, the order of same-tick money events, rounding, the
liability of an order not shipped, error messages.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim.economics import Costs, gap_of, price, settle_case, settle_money
from finbench.sim.world import Capture

COSTS = Costs()


def _task(v=100.0, chargeback_at=None, other=0.0):
    """What `settle_case` reads of a task."""
    return SimpleNamespace(order_value=v, chargeback_at=chargeback_at, other_order_value=other)


def _cap(n, terminal_at, outcome="settled", v=100.0):
    return Capture(f"cap-{n}", f"key-{n}", v, C.CAPTURE_AT, terminal_at, outcome)


# --- economics: Costs ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cogs_rate", "dispute_fee", "escalation_cost"])
def test_a_bad_price_is_named_as_a_costs_field(name):
    with pytest.raises(FinbenchError, match=rf"^Costs: {name} must be a finite number"):
        Costs(**{name: -1.0})


def test_the_step_budget_tops_out_at_ten_thousand():
    assert Costs(step_budget=10_000).step_budget == 10_000
    with pytest.raises(FinbenchError, match=r"^Costs: step_budget must be an integer in \[1, 10000\]"):
        Costs(step_budget=10_001)


# --- economics: settle_case --------------------------------------------------------------------

def test_no_effect_on_the_other_order_unless_told():
    out = settle_case(_task(other=40.0), [_cap(1, 100)], "ship", 200, COSTS)
    assert out.unrelated == 0.0 and out.cash == 100.0
    assert settle_case(_task(other=40.0), [_cap(1, 100)], "ship", 200, COSTS, 1).cash == 60.0


def test_a_settlement_at_the_horizon_is_money_and_one_after_is_not():
    assert settle_case(_task(), [_cap(1, C.HORIZON)], "ship", 200, COSTS).cash == 100.0
    assert settle_case(_task(), [_cap(1, C.HORIZON + 1)], "ship", 200, COSTS).cash == 0.0


def test_a_chargeback_at_the_horizon_posts_and_one_after_does_not():
    at = settle_case(_task(chargeback_at=C.HORIZON), [_cap(1, 100)], "ship", 200, COSTS)
    assert (at.cash, at.chargeback, at.dispute_fee) == (0.0, 100.0, COSTS.dispute_fee)
    after = settle_case(_task(chargeback_at=C.HORIZON + 1), [_cap(1, 100)], "ship", 200, COSTS)
    assert (after.cash, after.chargeback, after.dispute_fee) == (100.0, 0.0, 0.0)


@pytest.mark.parametrize("disposition", ["ship", "refund", "write_off"])
def test_only_an_escalation_has_a_clerk(disposition):
    out = settle_case(_task(), [_cap(1, 100)], disposition, 200, COSTS)
    assert out.human_action is None and out.human_t is None
    assert out.shipped is (disposition == "ship")


def test_the_clerk_ships_a_settlement_that_lands_exactly_at_the_deadline():
    out = settle_case(_task(), [_cap(1, C.SHIP_BY)], "escalate", 100, COSTS)
    assert (out.human_action, out.human_t, out.shipped) == ("ship", C.SHIP_BY, True)
    late = settle_case(_task(), [_cap(1, C.SHIP_BY + 1)], "escalate", 100, COSTS)
    assert (late.human_action, late.human_t, late.shipped) == ("refund", C.SHIP_BY + 1, False)
    assert late.human_refund_t == C.SHIP_BY + 1 and late.refunded == 100.0


def test_a_refund_blocks_a_later_chargeback_even_of_a_capture_that_settles_after_it():
    # refunded at 200, the customer disputes at 300, a retry capture settles at 400: no
    # chargeback posts on a refunded order, so the late capture is cash the merchant holds
    caps = [_cap(1, 100), _cap(2, 400)]
    out = settle_case(_task(chargeback_at=300), caps, "refund", 200, COSTS)
    assert (out.refunded, out.chargeback, out.cash, out.liability) == (100.0, 0.0, 100.0, 100.0)
    assert out.dispute_fee == COSTS.dispute_fee


def test_the_dispute_fee_threshold_sits_just_above_half_a_cent():
    # a double charge leaves one order value held beyond what shipped: the liability
    tiny = settle_case(_task(v=0.005), [_cap(1, 100, v=0.005), _cap(2, 150, v=0.005)], "ship", 200, COSTS)
    assert tiny.liability == 0.005 and tiny.dispute_fee == 0.0
    one = settle_case(_task(v=1.0), [_cap(1, 100, v=1.0), _cap(2, 150, v=1.0)], "ship", 200, COSTS)
    assert one.liability == 1.0 and one.dispute_fee == COSTS.dispute_fee


def test_any_chargeback_costs_the_fee_and_keeps_its_cents():
    out = settle_case(_task(v=0.5, chargeback_at=300), [_cap(1, 100, v=0.5)], "ship", 200, COSTS)
    assert (out.chargeback, out.dispute_fee) == (0.5, COSTS.dispute_fee)
    out = settle_case(_task(v=33.33, chargeback_at=300), [_cap(1, 100, v=33.33)], "ship", 200, COSTS)
    assert out.chargeback == 33.33


def test_money_is_rounded_to_six_decimals():
    v = 1.23456789
    two = [_cap(1, 100, v=v), _cap(2, 150, v=v)]
    shipped = settle_case(_task(v=v), two, "ship", 200, COSTS)
    assert (shipped.cash, shipped.cogs, shipped.liability) == (round(2 * v, 6), round(0.6 * v, 6), round(v, 6))
    refunded = settle_case(_task(v=v), two, "refund", 200, COSTS)
    assert refunded.refunded == round(2 * v, 6)
    charged = settle_case(_task(v=v, chargeback_at=300), two[:1], "ship", 200, COSTS)
    assert charged.chargeback == round(v, 6)


# --- economics: the liability and the dispute flag ----------------------------------------------

@pytest.mark.parametrize("v", [0.5, 1.0, 100.0])
@pytest.mark.parametrize("disposition", ["write_off", None])
def test_cash_kept_on_an_order_not_shipped_is_owed_whole_whatever_the_order_value(v, disposition):
    # nothing shipped: every cent held is owed back to the customer, and the fee applies
    money = settle_money(_task(v=v), [_cap(1, 100, v=v)], disposition, 200, 0)
    assert (money.cash, money.shipped, money.disputed) == (v, False, True)
    out = price(money, COSTS)
    assert out.liability == v and out.dispute_fee == COSTS.dispute_fee
    assert out.position == pytest.approx(v - v - COSTS.dispute_fee)


def test_a_clean_case_is_not_disputed_and_says_so_with_a_bool():
    # the flags are read as booleans downstream (rows, re-pricing): False, not a falsy None
    for disposition, caps in [("ship", [_cap(1, 100)]), ("write_off", [_cap(1, 100, "failed")]),
                              ("refund", [_cap(1, 100)])]:
        money = settle_money(_task(), caps, disposition, 200, 0)
        assert money.disputed is False, disposition
        assert type(money.shipped) is bool and type(money.escalated) is bool


def test_settle_money_is_told_the_unrelated_effects():
    # no default: every caller (the episode, re-pricing) says how many effects touched the other order
    with pytest.raises(TypeError):
        settle_money(_task(), [_cap(1, 100)], "ship", 200)
    assert settle_money(_task(other=40.0), [_cap(1, 100)], "ship", 200, 2).unrelated == 80.0


# --- the gap and exactness (SPEC §8) ------------------------------------------------------------

@pytest.mark.parametrize("reference, position, gap, exact", [
    (100.005, 100.0, 0.005, True),  # half a cent behind: still exact (within, not below, MONEY_TOL)
    (100.0051, 100.0, 0.0051, False),
    (100.0, 100.0, 0.0, True),
    (100.0, 250.0, -150.0, True),  # ahead of the reference: exact, with a negative gap
    (0.12345678, 0.0, 0.123457, False),  # to the millionth, not finer
    (0.3, 0.1 + 0.2, 0.0, True),  # float noise below the millionth is not a gap
])
def test_the_gap_is_kept_to_the_millionth_and_exact_within_half_a_cent(reference, position, gap, exact):
    assert gap_of(reference, position) == (gap, exact)
    assert isinstance(gap_of(reference, position)[1], bool)
