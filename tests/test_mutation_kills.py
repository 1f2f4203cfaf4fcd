"""Tests that kill mutants which survived `make mutate` (docs/mutation.md) in the engine's
economics and faults and in re-pricing: each pins one rule at the place where a changed
comparison, constant or default would otherwise go unnoticed (boundaries of the horizon and
of the shipping deadline, the order of same-tick money events, rounding, error messages).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim.economics import Costs, settle_case
from finbench.sim.faults import Delivery, FaultProfile, Spec, _reorder, deliver, nominal_arrival, posted_at
from finbench.sim.rng import Keyed
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



# --- faults ------------------------------------------------------------------------------------

def test_a_bad_family_collection_is_named_as_a_fault_profile_field():
    with pytest.raises(FinbenchError, match=r"^FaultProfile: families must be a collection of family names, "
                                            r"e\.g\. \{'loss', 'delay'\} \(FaultProfile\.only\('loss'\) for one\)"):
        FaultProfile(families="loss")


def test_families_of_any_kind_and_order_are_checked_and_kept_as_a_frozenset():
    with pytest.raises(FinbenchError, match="unknown fault family 1"):
        FaultProfile(families=[1, "loss"])  # a mix of types still gets our error, not Python's
    profile = FaultProfile(0.3, ["loss", "delay"])
    assert type(profile.families) is frozenset and profile.families == {"loss", "delay"}
    assert hash(profile) == hash(FaultProfile(0.3, frozenset({"delay", "loss"})))


def test_profile_constructors_keep_exactly_the_families_asked_for():
    assert FaultProfile.default(0.5).families == frozenset(C.FAMILIES)
    assert FaultProfile.only("loss", "delay").families == frozenset({"loss", "delay"})
    assert FaultProfile.without("loss").families == frozenset(C.FAMILIES) - {"loss"}
    assert FaultProfile.only("loss").name == "only:loss"


def test_the_profile_key_is_stable_text():
    # part of every episode-cache key: a change re-simulates every cached episode
    assert FaultProfile.only("loss", "delay", intensity=0.25).key() == "0.25|delay,loss"


def test_nominal_arrival_is_latency_then_the_bank_batch():
    assert [nominal_arrival(s, 100) for s in ("processor", "ledger", "erp")] == [102, 105, 115]
    assert nominal_arrival("bank", 100) == posted_at("bank", 100) == 120
    assert nominal_arrival("bank", 120) == 180  # strictly after the arrival


def _spec(id, system, t, arrival, group="g"):
    return Spec(id, system, SimpleNamespace(t=t, kind="capture_submitted"), group, arrival)


@pytest.mark.parametrize("family", ["loss", "delay", "duplicate", "partial_commit"])
def test_each_family_fires_by_its_own_draw_strictly_below_the_intensity(family):
    # the draw of (stream, seed, family, delivery id); a ledger settlement can take every family
    spec = Spec("A", "ledger", SimpleNamespace(t=10, kind="capture_settled"), "g", 15)
    u = Keyed("stream", 7).uniform(family, "A")
    fired, quiet = [], []
    out = deliver([spec], "stream", 7, FaultProfile(math.nextafter(u, 1.0), {family}), fired)
    deliver([spec], "stream", 7, FaultProfile(u, {family}), quiet)
    assert (fired, quiet) == ([(family, "A")], [])
    if family == "partial_commit":
        assert out[0].partial is True


def test_deliveries_are_numbered_named_and_grouped_as_specified():
    specs = [_spec("A", "ledger", 10, 100), Spec("B", "ledger", SimpleNamespace(t=10, kind="capture_settled"), "h",
                                                 110, copy_gap=100, partial=True)]
    out = deliver(specs, "s", 0, FaultProfile(1.0, {"reorder"}), [], seq_start=5)
    # A and B come from two origins: never exchanged; B's copy is a plain delivery named after it
    assert [(d.id, d.arrival, d.seq, d.group, d.partial) for d in out] == [
        ("A", 100, 5, "g", False), ("B", 110, 6, "h", True), ("B#copy1", 210, 7, "h", False)]
    assert Delivery("X", "erp", None, "agent", 1, 1, 0).partial is False


def test_an_intensity_is_kept_as_the_checked_float():
    profile = FaultProfile.only("loss", intensity=1)
    assert type(profile.intensity) is float and profile.key() == "1.0|loss"


def test_only_a_ledger_settlement_can_commit_partially():
    every = FaultProfile(1.0, {"partial_commit"})
    for system, kind in [("ledger", "capture_submitted"), ("bank", "capture_settled")]:
        firings = []
        out = deliver([Spec("A", system, SimpleNamespace(t=10, kind=kind), "g", 15)], "s", 0, every, firings)
        assert firings == [] and not out[0].partial
    already = Spec("A", "ledger", SimpleNamespace(t=10, kind="capture_settled"), "g", 15, partial=True)
    firings = []
    assert deliver([already], "s", 0, every, firings)[0].partial and firings == []


IDS = ["A", "B", "C", "D", "E"]


def test_a_delay_and_a_duplicate_gap_are_drawn_per_delivery():
    draw = Keyed("stream", 7)
    specs = [_spec(i, "ledger", 10, 15) for i in IDS]
    delayed = deliver(specs, "stream", 7, FaultProfile(1.0, {"delay"}), [])
    assert [d.arrival for d in delayed] == [15 + draw.integer(*C.DELAY_RANGE, "delay-by", i) for i in IDS]
    doubled = deliver(specs, "stream", 7, FaultProfile(1.0, {"duplicate"}), [])
    assert [d.arrival for d in doubled] == [t for i in IDS
                                            for t in (15, 15 + draw.integer(*C.DUPLICATE_GAP, "duplicate-gap", i))]


def test_reorder_never_shows_an_event_before_its_system_can():
    every = FaultProfile(1.0, {"reorder"})
    # the bank posts an event strictly after its tick: B (event at 60) cannot move onto the 60 batch
    assert [d.arrival for d in deliver([_spec("A", "bank", 50, 50), _spec("B", "bank", 60, 60)],
                                       "s", 0, every, [])] == [60, 120]
    # ... and can move onto the 120 batch when its event is at 119
    assert [d.arrival for d in deliver([_spec("A", "bank", 100, 100), _spec("B", "bank", 119, 125)],
                                       "s", 0, every, [])] == [180, 120]
    # the ledger shows an event at its own tick: B (event at 100) may move onto 100
    assert [d.arrival for d in deliver([_spec("A", "ledger", 90, 100), _spec("B", "ledger", 100, 105)],
                                       "s", 0, every, [])] == [105, 100]


def _lane(*arrivals, earliest=0, group="g", system="ledger"):
    return [Delivery(f"{group}{i}", system, None, group, t, earliest, i) for i, t in enumerate(arrivals)]


def _reordered(ds, p, seed=7):
    firings = []
    _reorder(ds, Keyed("stream", seed), p, firings)
    return [d.arrival for d in ds], firings


def test_reorder_swaps_by_its_own_draw_strictly_below_the_intensity():
    u = Keyed("stream", 7).uniform("reorder", "g0", "g1")
    assert _reordered(_lane(100, 110), math.nextafter(u, 1.0)) == ([110, 100], [("reorder", ("g0", "g1"))])
    assert _reordered(_lane(100, 110), u) == ([100, 110], [])


@pytest.mark.parametrize("a, b, b_earliest, swapped", [
    (100, 101, 0, True),  # one tick apart
    (100, 100 + C.REORDER_WINDOW, 0, True),  # the whole window
    (100, 101 + C.REORDER_WINDOW, 0, False),
    (100, 110, 100, True),  # the first may arrive exactly when the second's event can first show
    (100, 110, 101, False),
    (100, 100, 0, False),
])
def test_reorder_window_and_causality(a, b, b_earliest, swapped):
    ds = [Delivery("a", "ledger", None, "g", a, 0, 0), Delivery("b", "ledger", None, "g", b, b_earliest, 1)]
    assert _reordered(ds, 1.0)[0] == ([b, a] if swapped else [a, b])


def test_reorder_swaps_disjoint_adjacent_pairs_in_order():
    ds = _lane(100, 110, 120, 130, 140) + _lane(100, 200, 210, group="h")
    arrivals, firings = _reordered(ds, 1.0)
    assert arrivals == [110, 100, 130, 120, 140, 100, 210, 200]
    assert firings == [("reorder", ("g0", "g1")), ("reorder", ("g2", "g3")), ("reorder", ("h1", "h2"))]

# --- re-pricing --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def episodes():
    import finbench as fb
    from finbench.running.evaluation import evaluate

    corpus = fb.make_corpus(n_tasks=20)
    return corpus, evaluate(corpus, ["sop", "eager"], seeds=[0], cache=False)


CHEAPER = Costs(cogs_rate=0.4, dispute_fee=50.0, escalation_cost=10.0)


def test_repricing_across_what_policies_see_says_why(episodes):
    from finbench.running.reprice import reprice

    corpus, df = episodes
    with pytest.raises(ValueError, match=r"cannot re-price across step_budget, read_ticks or probe_ticks: "
                                         r"policies see them, so actions may change; simulate instead"):
        reprice(df, corpus, Costs(step_budget=39), COSTS)


def test_repricing_rows_whose_retry_list_reads_back_as_missing(episodes):
    # a row without retries has retry_at "", which a CSV round trip turns into NaN
    import numpy as np

    from finbench.running.reprice import PRICED, reprice

    corpus, df = episodes
    assert (df["retry_at"] == "").any()
    missing = df.assign(retry_at=df["retry_at"].replace("", np.nan))
    pd_testing().assert_frame_equal(reprice(missing, corpus, CHEAPER, COSTS)[list(PRICED)],
                                    reprice(df, corpus, CHEAPER, COSTS)[list(PRICED)])


def test_repricing_some_rows_prices_each_row_as_its_own(episodes):
    from finbench.running.reprice import PRICED, reprice

    corpus, df = episodes
    some = df.iloc[::-3]  # not 0..n-1: prices must follow the rows' own index
    pd_testing().assert_frame_equal(reprice(some, corpus, CHEAPER, COSTS)[list(PRICED)],
                                    reprice(df, corpus, CHEAPER, COSTS).loc[some.index, list(PRICED)])


def pd_testing():
    import pandas.testing

    return pandas.testing
