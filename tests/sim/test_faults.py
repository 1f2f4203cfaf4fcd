"""The fault families (SPEC §3): `FaultProfile`, the nominal arrival of a delivery, and
`deliver`/`_reorder`, which decide by keyed draws which deliveries are lost, delayed,
duplicated, committed partially or exchanged. Each test pins one rule at a boundary a changed
comparison or constant would cross: strictly below the intensity, the reorder window, the
earliest tick a system can show an event, the bank batch.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim.faults import Delivery, FaultProfile, Spec, _reorder, deliver, nominal_arrival, posted_at
from finbench.sim.rng import Keyed, uniform



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
    out = deliver([spec], Keyed("stream", 7), FaultProfile(math.nextafter(u, 1.0), {family}), fired)
    deliver([spec], Keyed("stream", 7), FaultProfile(u, {family}), quiet)
    assert (fired, quiet) == ([(family, "A")], [])
    if family == "partial_commit":
        assert out[0].partial is True


def test_deliveries_are_numbered_named_and_grouped_as_specified():
    specs = [_spec("A", "ledger", 10, 100), Spec("B", "ledger", SimpleNamespace(t=10, kind="capture_settled"), "h",
                                                 110, copy_gap=100, partial=True)]
    out = deliver(specs, Keyed("s", 0), FaultProfile(1.0, {"reorder"}), [], seq_start=5)
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
        out = deliver([Spec("A", system, SimpleNamespace(t=10, kind=kind), "g", 15)], Keyed("s", 0), every, firings)
        assert firings == [] and not out[0].partial
    already = Spec("A", "ledger", SimpleNamespace(t=10, kind="capture_settled"), "g", 15, partial=True)
    firings = []
    assert deliver([already], Keyed("s", 0), every, firings)[0].partial and firings == []


IDS = ["A", "B", "C", "D", "E"]


def test_a_delay_and_a_duplicate_gap_are_drawn_per_delivery():
    draw = Keyed("stream", 7)
    specs = [_spec(i, "ledger", 10, 15) for i in IDS]
    delayed = deliver(specs, Keyed("stream", 7), FaultProfile(1.0, {"delay"}), [])
    assert [d.arrival for d in delayed] == [15 + draw.integer(*C.DELAY_RANGE, "delay-by", i) for i in IDS]
    doubled = deliver(specs, Keyed("stream", 7), FaultProfile(1.0, {"duplicate"}), [])
    assert [d.arrival for d in doubled] == [t for i in IDS
                                            for t in (15, 15 + draw.integer(*C.DUPLICATE_GAP, "duplicate-gap", i))]


def test_reorder_never_shows_an_event_before_its_system_can():
    every = FaultProfile(1.0, {"reorder"})
    # the bank posts an event strictly after its tick: B (event at 60) cannot move onto the 60 batch
    assert [d.arrival for d in deliver([_spec("A", "bank", 50, 50), _spec("B", "bank", 60, 60)],
                                       Keyed("s", 0), every, [])] == [60, 120]
    # ... and can move onto the 120 batch when its event is at 119
    assert [d.arrival for d in deliver([_spec("A", "bank", 100, 100), _spec("B", "bank", 119, 125)],
                                       Keyed("s", 0), every, [])] == [180, 120]
    # the ledger shows an event at its own tick: B (event at 100) may move onto 100
    assert [d.arrival for d in deliver([_spec("A", "ledger", 90, 100), _spec("B", "ledger", 100, 105)],
                                       Keyed("s", 0), every, [])] == [105, 100]


def test_deliver_asks_every_draw_of_the_stream_it_is_given_the_exchange_of_a_pair_included():
    """`deliver(specs, draw, ...)` draws through `draw` (the text after its prefix: family, then the delivery
    ids): the world hands it one memoised stream per (unit, seed), so a draw remembered there is the draw, for
    the loss of a delivery as for the exchange of two, and a draw asked afresh is remembered there."""
    specs = [_spec("A", "ledger", 90, 100), _spec("B", "ledger", 100, 105)]  # adjacent, B may move onto 100
    p = 1e-9
    assert min(uniform("s", 0, "loss", "A"), uniform("s", 0, "loss", "B"), uniform("s", 0, "reorder", "A", "B")) > p
    memo = {"loss\x1fA": 0.5, "reorder\x1fA\x1fB": 0.0}  # A kept, the pair exchanged; B's loss not asked yet
    firings = []
    out = deliver(specs, Keyed("s", 0, memo=memo), FaultProfile(p, {"loss", "reorder"}), firings)
    assert [(d.id, d.arrival) for d in out] == [("A", 105), ("B", 100)] and firings == [("reorder", ("A", "B"))]
    assert memo == {"loss\x1fA": 0.5, "reorder\x1fA\x1fB": 0.0, "loss\x1fB": uniform("s", 0, "loss", "B")}


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
