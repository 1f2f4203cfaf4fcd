"""The world's fault draws and what it hands out (SPEC sections 2-4; finbench.sim.world).

- Delivery ids name the capture (or the order), the stage and the system, and never whether a
  terminal event settled or failed: so the twins of a pair draw identical faults on every
  delivery they share (world.event_specs), and each fault decision is the draw keyed by
  (unit stream, seed, family, delivery id) (finbench.sim.rng), for the canonical log and for
  the captures the agent adds alike.
- `fired()` counts the firings by family; agent deliveries are numbered after the base's.
- Reads and views are copies; the probe is the canonical log (ids, keys, statuses) from each
  capture's submission tick; a stale read fires strictly below the intensity.

The expected delivery ids below are written from the rule in `event_specs` (`<capture or
"order">:<stage>:<system>`, stage "terminal" for a settlement or a failure, systems from
`RECEIVES` in the log's order); the expected firings are recomputed with `rng.uniform`
from that keying, not read back from the world.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from math import nextafter

import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.faults import FaultProfile
from finbench.sim.rng import integer, uniform
from finbench.sim.task import Event
from finbench.sim.world import Capture, World, agent_capture, capture_events

TASK = fb.make_task("settled_clean", seed=0)  # settles at 74, well before HORIZON
LOG_IDS = ["order:order_placed:erp", "order:auth_approved:processor",
           "cap-1:capture_submitted:processor", "cap-1:capture_submitted:ledger",
           "cap-1:terminal:processor", "cap-1:terminal:ledger", "cap-1:terminal:erp", "cap-1:terminal:bank"]


def _agent_ids(n: int, outcome: str) -> list[str]:
    ends = ("processor", "ledger", "erp", "bank") if outcome == "settled" else ("processor", "ledger", "erp")
    return ([f"cap-{n}:capture_submitted:{s}" for s in ("processor", "ledger")]
            + [f"cap-{n}:terminal:{s}" for s in ends])


def test_delivery_ids_name_capture_stage_and_system_but_not_the_outcome():
    w = World(TASK, 0)
    assert [s.id for s in w.specs] == LOG_IDS
    failed = fb.make_task("pending_fail", seed=0)
    assert failed.outcome == "failed" and failed.determined_at <= C.HORIZON
    assert [s.id for s in World(failed, 0).specs] == LOG_IDS[:-1]  # a failure reaches no bank
    # the agent's captures: every one keeps its specs, in the order they were made
    w.add_capture("key-2", 200)
    w.add_capture("key-3", 400)
    assert TASK.retry_outcome == "settled"
    assert [s.id for s in w.specs] == LOG_IDS + _agent_ids(2, "settled") + _agent_ids(3, "settled")


def _expected_firings(stream: str, seed: int, ids: list[str], p: float) -> list[tuple[str, str]]:
    """loss, else delay then duplicate, each fired by its own draw strictly below p (SPEC section 3)."""
    out = []
    for did in ids:
        if uniform(stream, seed, "loss", did) < p:
            out.append(("loss", did))
            continue
        out += [(fam, did) for fam in ("delay", "duplicate") if uniform(stream, seed, fam, did) < p]
    return out


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_each_fault_is_the_draw_keyed_by_stream_seed_family_and_delivery_id(seed):
    p = 0.5
    profile = FaultProfile.only("loss", "delay", "duplicate", intensity=p)
    w = World(TASK, seed, profile)
    assert w.firings == _expected_firings(TASK.stream, seed, LOG_IDS, p)
    w.add_capture("key-2", 200)
    assert w.firings == _expected_firings(TASK.stream, seed, LOG_IDS + _agent_ids(2, "settled"), p)


def test_the_draws_differ_between_seeds_and_between_tasks():
    profile = FaultProfile.default(0.5)
    other = fb.make_task("settled_clean", seed=1)
    by_seed = {tuple(World(TASK, s, profile).firings) for s in range(4)}
    assert len(by_seed) > 1
    assert other.stream != TASK.stream
    assert World(TASK, 0, profile).firings != World(other, 0, profile).firings


def _where(w: World) -> dict[str, tuple]:
    """Each spec id -> (system, event time, capture): what a delivery is, whatever its id."""
    return {s.id: (s.system, s.event.t, s.event.capture) for s in w.specs}


@pytest.mark.parametrize("seed", range(3))
def test_twins_draw_identical_faults_on_every_delivery_they_share(seed):
    pairs = fb.make_corpus().twin_pairs
    profile = FaultProfile.default()
    compared = 0
    for settle, fail in pairs:
        ws, wf = World(settle, seed, profile), World(fail, seed, profile)
        at_s, at_f = _where(ws), _where(wf)
        shared = set(at_s.values()) & set(at_f.values())
        fired_s = {(fam, at_s[x]) for fam, x in ws.firings if fam != "reorder" and at_s[x] in shared}
        fired_f = {(fam, at_f[x]) for fam, x in wf.firings if fam != "reorder" and at_f[x] in shared}
        # partial_commit is drawn only on a ledger settlement, which the failed twin has not
        assert {f for f in fired_s if f[0] != "partial_commit"} == fired_f, (settle.task_id, fail.task_id)
        arr_s = {at_s[d.id]: d.arrival for d in ws.deliveries if d.id in at_s and at_s[d.id] in shared}
        arr_f = {at_f[d.id]: d.arrival for d in wf.deliveries if d.id in at_f and at_f[d.id] in shared}
        assert arr_s == arr_f
        compared += settle.determined_at <= C.HORIZON
    assert compared > 0  # some pairs resolve within the episode, so terminal deliveries are compared


def test_fired_counts_every_firing_by_family():
    w = World(TASK, 0, FaultProfile.default(0.6))
    counts = Counter(fam for fam, _ in w.firings)
    assert max(counts.values()) >= 2
    assert w.fired() == {fam: counts.get(fam, 0) for fam in C.FAMILIES}
    w.add_capture("key-2", 200)
    for i in range(5):
        w.read("processor", 300 + i)
    counts = Counter(fam for fam, _ in w.firings)
    assert counts["stale_read"] >= 1
    assert w.fired() == {fam: counts.get(fam, 0) for fam in C.FAMILIES}


def test_agent_deliveries_are_numbered_after_the_bases():
    w = World(TASK, 0, FaultProfile.none())
    base = [d.seq for d in w.deliveries]
    w.add_capture("key-2", 200)
    w.add_capture("key-3", 400)
    w.record_disposition("ship", 500)
    seqs = [d.seq for d in w.deliveries]
    assert len(set(seqs)) == len(seqs)
    assert min(seqs[len(base):]) > max(base)
    assert seqs == sorted(seqs)


def test_a_stale_read_fires_strictly_below_the_intensity():
    seed = 2
    own = uniform(TASK.stream, seed, "stale_read", "erp", "0")
    at = World(TASK, seed, FaultProfile(own, frozenset({"stale_read"})))
    assert at.stale_draw("erp", 0) == (0, None)
    above = World(TASK, seed, FaultProfile(nextafter(own, 1.0), frozenset({"stale_read"})))
    lag = integer(*C.STALE_RANGE, TASK.stream, seed, "stale_read", "erp", 0, "lag")
    assert above.stale_draw("erp", 0) == (lag, ("stale_read", "erp#0"))


@pytest.mark.parametrize("system", C.SYSTEMS)
def test_reads_and_views_hand_out_copies(system):
    w = World(TASK, 0, FaultProfile.none())
    first = w.read(system, 300)
    fresh = w.read(system, 300)
    first.clear()
    assert w.read(system, 300) == fresh != {}
    seen = w.view(system, 300)
    seen["order_id"] = "changed"
    assert w.view(system, 300) == fresh


def test_the_probe_lists_each_capture_from_its_submission_with_id_key_and_status():
    w = World(TASK, 0)
    assert w.probe(C.CAPTURE_AT - 1) == {"order_id": TASK.order_id, "captures": []}
    assert w.probe(C.CAPTURE_AT) == {"order_id": TASK.order_id,
                                     "captures": [{"id": "cap-1", "key": "key-1", "status": "unknown"}]}
    w.add_capture("key-2", 200)
    assert w.probe(199)["captures"] == [{"id": "cap-1", "key": "key-1", "status": "settled"}]
    assert w.probe(200)["captures"] == [{"id": "cap-1", "key": "key-1", "status": "settled"},
                                        {"id": "cap-2", "key": "key-2", "status": "unknown"}]


@pytest.mark.parametrize("system", C.SYSTEMS)
def test_the_other_order_shows_its_own_id_and_value(system):
    view = World(TASK, 0).other_view(system)
    assert view["order_id"] == TASK.other_order_id != TASK.order_id
    assert view["system"] == system
    if system == "erp":
        assert view["amount"] == TASK.other_order_value


def test_an_agent_captures_events_carry_its_id_key_and_amount():
    cap = agent_capture(TASK, 2, "key-2", 200)
    v = TASK.order_value
    assert capture_events(cap) == [
        Event(200, "capture_submitted", "cap-2", "key-2", v),
        Event(200 + TASK.retry_delay, f"capture_{TASK.retry_outcome}", "cap-2", "key-2", v)]


def test_an_agent_capture_resolving_exactly_at_the_horizon_still_shows():
    at = Capture("cap-2", "key-2", 10.0, C.HORIZON - 100, C.HORIZON, "failed")
    assert [e.kind for e in capture_events(at)] == ["capture_submitted", "capture_failed"]
    after = Capture("cap-2", "key-2", 10.0, C.HORIZON - 100, C.HORIZON + 1, "failed")
    assert [e.kind for e in capture_events(after)] == ["capture_submitted"]


# --- the archetypes' perturbations fall on the original capture's settlement only ---------------

NONE = FaultProfile.none()


def _agent_specs(task, outcome: str) -> dict:
    """The delivery specs of the agent's first capture (cap-2, at 200) on `task`, by delivery id."""
    w = World(dataclasses.replace(task, retry_outcome=outcome), 0, NONE)
    w.add_capture("key-2", 200)
    return {s.id: s for s in w.extra_specs}


@pytest.mark.parametrize("outcome", ["settled", "failed"])
def test_a_stale_processor_lags_every_terminal_event_it_receives(outcome):
    # SPEC section 6: the stale replica lags the processor's view of a capture's end, whichever capture
    task = fb.make_task("stale_processor", seed=0)
    assert task.processor_lag > 0
    specs = _agent_specs(task, outcome)
    end = specs["cap-2:terminal:processor"]
    assert (end.lag, end.arrival) == (task.processor_lag, end.event.t + C.LATENCY["processor"] + task.processor_lag)
    for did, s in specs.items():
        if did != "cap-2:terminal:processor":
            assert s.lag == 0 and s.arrival == s.event.t + C.LATENCY[s.system], did


@pytest.mark.parametrize("archetype", ["lost_settlement", "duplicate_settlement", "partial_ledger"])
def test_an_agents_capture_escapes_the_archetypes_perturbation_of_the_original(archetype):
    # the archetype names the original capture's settlement: a fresh-key capture settles and
    # fails plainly (no lost, copied or partial delivery of its own)
    task = fb.make_task(archetype, seed=0)
    for outcome in ("settled", "failed"):
        specs = _agent_specs(task, outcome)
        assert specs and not any(s.drop or s.copy_gap or s.partial for s in specs.values()), (archetype, outcome)
    # ... while the original's settlement carries it
    original = [s for s in World(task, 0, NONE).specs if s.id.startswith("cap-1:terminal")]
    assert any(s.drop or s.copy_gap or s.partial for s in original)


def test_the_erp_records_the_agents_disposition_at_its_tick_after_its_latency():
    w = World(TASK, 0, NONE)
    w.record_disposition("refund", 300)
    d = w.deliveries[-1]
    assert (d.id, d.system, d.event, d.group, d.arrival, d.earliest) == (
        "order:disposition:refund", "erp", Event(300, "disposition", None, "refund"), "agent",
        300 + C.LATENCY["erp"], 300)
    assert w.view("erp", 300 + C.LATENCY["erp"] - 1)["disposition"] is None
    assert w.view("erp", 300 + C.LATENCY["erp"])["disposition"] == "refund"
