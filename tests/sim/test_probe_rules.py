"""Probe modes rule by rule (finbench.sim.probe; issue 12): what `ProbeMode.answer` returns in each arm, at
the edges of its rules, and the checks a mode makes of itself, each message written out from the one shape
of finbench.errors (`<where>: <parameter> must be <allowed>, got <value>`). Expected answers are written by
hand from the module's table and `World.probe` (each capture submitted by t: its terminal status once
determined, else "unknown") for one hand-picked task (mutation testing, issue 32)."""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.sim.env import FinalityEnv
from finbench.sim.probe import ProbeMode, check_probe
from finbench.sim.world import World

TASK = fb.make_task("pending_settle", seed=4, determined_at=300)  # cap-1 submitted at 10, settles at 300
O = TASK.order_id


def _world():
    return World(TASK, 0, fb.FaultProfile.none())


def _cap1(status):
    return {"id": "cap-1", "key": "key-1", "status": status}


# --- what each arm answers ------------------------------------------------------------------------------

def test_the_full_probe_answers_the_canonical_status_and_counts_as_an_answer():
    w = _world()
    assert ProbeMode.full().answer(w, 299, 0) == ({"order_id": O, "captures": [_cap1("unknown")]}, True)
    assert ProbeMode.full().answer(w, 300, 7) == ({"order_id": O, "captures": [_cap1("settled")]}, True)


def test_the_none_arm_answers_unavailable_with_no_captures_and_no_answer():
    got = ProbeMode.none().answer(_world(), 400, 0)
    assert got == ({"order_id": O, "unavailable": "no probe in this arm", "captures": []}, False)


def test_a_rate_limited_probe_answers_until_the_limit_then_says_why_it_does_not():
    w, mode = _world(), ProbeMode.rate_limited(3)
    # two earlier answers: the third is still given (the full probe's)
    assert mode.answer(w, 305, 2) == ({"order_id": O, "captures": [_cap1("settled")]}, True)
    # three earlier answers: the limit is reached
    assert mode.answer(w, 305, 3) == (
        {"order_id": O, "unavailable": "rate limit reached (3 answers per episode)", "captures": []}, False)


def test_a_delayed_probe_answers_as_of_t_minus_d():
    w, mode = _world(), ProbeMode.delayed(120)
    # at 419 it sees 299 (not yet determined), at 420 it sees 300 (settled)
    assert mode.answer(w, 419, 0) == ({"order_id": O, "captures": [_cap1("unknown")], "as_of": 299}, True)
    assert mode.answer(w, 420, 0) == ({"order_id": O, "captures": [_cap1("settled")], "as_of": 300}, True)


def test_a_delayed_probe_before_d_has_passed_answers_as_of_tick_zero():
    # t - D < 0 is clamped to 0: no capture had been submitted then
    assert ProbeMode.delayed(120).answer(_world(), 100, 0) == ({"order_id": O, "captures": [], "as_of": 0}, True)


def test_an_identity_only_probe_lists_each_capture_submitted_by_t_without_a_status():
    w = _world()
    w.add_capture("key-2", 200)  # cap-2, submitted at 200
    v = TASK.order_value
    cap1 = {"id": "cap-1", "key": "key-1", "amount": v}
    mode = ProbeMode.identity_only()
    assert mode.answer(w, 199, 0) == ({"order_id": O, "captures": [cap1]}, True)
    # a capture submitted at t itself is listed
    assert mode.answer(w, 200, 0) == ({"order_id": O, "captures": [cap1, {"id": "cap-2", "key": "key-2",
                                                                          "amount": v}]}, True)


def test_only_answers_count_against_a_rate_limit_in_an_episode():
    """The env counts what `answer` says is an answer: with N=1 the second probe is refused."""
    env = FinalityEnv(TASK, 0, fb.FaultProfile.none(), probe=ProbeMode.rate_limited(1))
    env.reset()
    first = env.step("probe_processor", order_id=O)["result"]
    second = env.step("probe_processor", order_id=O)["result"]
    assert first == {"order_id": O, "captures": [_cap1("unknown")]}
    assert second == {"order_id": O, "unavailable": "rate limit reached (1 answers per episode)", "captures": []}
    assert env.probe_answers == 1 and env.probe_calls == 2


# --- a mode checks itself --------------------------------------------------------------------------------

def test_the_default_mode_has_no_delay_and_no_limit():
    assert (ProbeMode().kind, ProbeMode().delay, ProbeMode().limit) == ("full", 0, 0)
    assert ProbeMode.full().key() == ["full", 0, 0]
    assert check_probe("X", None) == ProbeMode.full()


@pytest.mark.parametrize("mode,key", [
    (ProbeMode("delayed", delay=1), ["delayed", 1, 0]),  # the smallest delay
    (ProbeMode("delayed", delay=1800), ["delayed", 1800, 0]),  # the largest
    (ProbeMode("rate_limited", limit=0), ["rate_limited", 0, 0]),  # a probe that never answers
    (ProbeMode("rate_limited", limit=40), ["rate_limited", 0, 40]),  # one answer per call of the budget
])
def test_the_edges_of_the_delay_and_limit_ranges_are_allowed(mode, key):
    assert mode.key() == key


class _Index:
    """An integer that is not an int (like numpy.int64): usable wherever Python wants an index."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


def test_a_mode_stores_its_delay_and_limit_as_plain_ints():
    d = ProbeMode("delayed", delay=_Index(60))
    n = ProbeMode("rate_limited", limit=_Index(2))
    assert type(d.delay) is int and d.delay == 60 and d == ProbeMode.delayed(60)
    assert type(n.limit) is int and n.limit == 2 and n == ProbeMode.rate_limited(2)


@pytest.mark.parametrize("kwargs,message", [
    (dict(kind="partial"), "ProbeMode: kind must be one of 'full', 'none', 'delayed', 'rate_limited', "
                           "'identity_only', got 'partial'"),
    (dict(kind="delayed", delay=1801), "ProbeMode: delay must be an integer in [0, 1800], got 1801"),
    (dict(kind="delayed", delay=-5), "ProbeMode: delay must be an integer in [0, 1800], got -5"),
    (dict(kind="delayed", delay=0), "ProbeMode: delay must be an integer in 1..1800 for a delayed probe, got 0"),
    (dict(kind="full", delay=5), "ProbeMode: delay must be 0 unless kind='delayed', got 5"),
    (dict(kind="rate_limited", limit=41), "ProbeMode: limit must be an integer in [0, 40], got 41"),
    (dict(kind="rate_limited", limit=-1), "ProbeMode: limit must be an integer in [0, 40], got -1"),
    (dict(kind="none", limit=2), "ProbeMode: limit must be 0 unless kind='rate_limited', got 2"),
    (dict(kind="delayed", delay=60, limit=2), "ProbeMode: limit must be 0 unless kind='rate_limited', got 2"),
])
def test_a_bad_mode_is_refused_with_a_message_naming_the_parameter(kwargs, message):
    with pytest.raises(FinbenchError) as err:
        ProbeMode(**kwargs)
    assert str(err.value) == message


def test_anything_but_a_probe_mode_is_refused_where_it_is_given():
    with pytest.raises(FinbenchError) as err:
        FinalityEnv(TASK, probe="none")
    assert str(err.value) == ("FinalityEnv: probe must be a ProbeMode (ProbeMode.full(), .none(), .delayed(120), "
                              ".rate_limited(3), .identity_only()), got 'none'")
    mode = ProbeMode.none()
    assert check_probe("X", mode) is mode
