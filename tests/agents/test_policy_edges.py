"""The policies' edges (SPEC section 7; finbench.agents.policies): knobs refused by name and
range, and their defaults; the deadline and budget arithmetic of each polling rule at the exact
tick or call where it turns; majority vote's reading of each system; react's retry key and
deadline; reflection's second look; the gate's probe budget and its wait without a probe; the
random policy's stream; the privileged reference's plan.

Expected ticks are derived from SPEC sections 1 and 4: the hand-over at 120, a read takes one
tick, a probe 5 (Costs.probe_ticks), a wait its ticks, the deadline SHIP_BY = 600, a budget of 40
calls (Costs.step_budget); the boundary cases were found by choosing knobs that land a call on
the tick (or the call count) where the rule turns.
"""
from __future__ import annotations

import dataclasses

import pytest

import finbench as fb
from finbench.agents.policies import POLICIES, FinalityOracle, Routine, system_verdicts
from finbench.sim import constants as C
from finbench.sim.constants import ARCHETYPES
from finbench.sim.env import FinalityEnv
from finbench.sim.rng import generator
from finbench.sim.systems import completed_order_views
from finbench.sim.tools import TOOL_NAMES

NONE = fb.FaultProfile.none()
LOST = fb.FaultProfile.only("loss", intensity=1.0)  # nothing ever reaches a system
UNDETERMINED = fb.make_task("pending_settle", seed=0, determined_at=300)


def steps(res) -> list[tuple[str, int, int]]:
    """(tool, tick observed, calls left) of each call."""
    return [(tool, obs["t"], obs["calls_left"]) for _, tool, _, obs in res.actions]


# --- knobs -------------------------------------------------------------------------

KNOBS = [  # (policy, knob, lowest, highest), from each policy's signature and SPEC section 4
    ("optimistic", "poll_interval", 1, 600),
    ("majority_vote", "wait", 1, 600),
    ("sop", "poll_interval", 1, 600),
    ("sop", "patience", 0, 1800),
    ("react", "wait", 1, 600),
    ("reflection", "wait", 1, 600),
    ("reflection", "pause", 0, 600),
    ("finality_gate", "wait", 1, 600),
]


@pytest.mark.parametrize("policy,name,lo,hi", KNOBS)
def test_a_knob_takes_its_range_and_refuses_beyond_it_by_name(policy, name, lo, hi):
    cls = POLICIES[policy]
    for ok in (lo, hi):
        cls(**{name: ok})
    for bad in (lo - 1, hi + 1):
        with pytest.raises(fb.PolicyError) as e:
            cls(**{name: bad})
        assert str(e.value) == f"{policy}: {name} must be an integer in [{lo}, {hi}], got {bad}"


def test_sop_refuses_an_unknown_fallback_by_name():
    with pytest.raises(fb.PolicyError) as e:
        POLICIES["sop"](fallback="ship")
    assert str(e.value) == "sop: fallback must be one of 'bank', 'refund', got 'ship'"


# --- optimistic: another round needs a wait, a read and a ship by SHIP_BY, and three calls -------

def test_optimistic_waits_again_when_the_round_ends_exactly_at_the_deadline():
    # reads at 121 and 360; 360 + 238 (wait) + 1 (read) + 1 (ship) = 600 still fits
    res = fb.run_episode(UNDETERMINED, fb.get_policy("optimistic", poll_interval=238), 0, profile=LOST)
    assert [(tool, t) for tool, t, _ in steps(res)] == [
        ("read_ledger", 121), ("wait", 359), ("read_ledger", 360), ("wait", 598), ("read_ledger", 599),
        ("close", 600)]


def test_optimistic_closes_when_another_round_would_end_past_the_deadline():
    # reads every 30 ticks from 121: at 571 another round (29 + 1 + 1) would end at 602
    res = fb.run_episode(UNDETERMINED, fb.get_policy("optimistic", poll_interval=29), 0, profile=LOST)
    reads = [t for tool, t, _ in steps(res) if tool == "read_ledger"]
    assert reads == list(range(121, 572, 30))
    assert steps(res)[-1][:2] == ("close", 572)


@pytest.mark.parametrize("budget,reads", [(40, 20), (41, 20)])
def test_optimistic_closes_when_fewer_than_three_calls_are_left_after_a_read(budget, reads):
    # polling every tick spends the budget first: after the k-th read budget - (2k - 1) calls are left
    res = fb.run_episode(UNDETERMINED, fb.get_policy("optimistic", poll_interval=1), 0, profile=LOST,
                         costs=fb.Costs(step_budget=budget))
    s = steps(res)
    assert [tool for tool, _, _ in s].count("read_ledger") == reads
    assert s[-1][0] == "close" and s[-2] == ("read_ledger", s[-2][1], budget - (2 * reads - 1))
    assert res.disposition == "close"


# --- sop: another poll needs a wait, a read, a bank read and an act by SHIP_BY, and four calls ----

def _sop(poll, patience=1800, budget=40):
    res = fb.run_episode(UNDETERMINED, fb.get_policy("sop", poll_interval=poll, patience=patience), 0,
                         profile=LOST, costs=fb.Costs(step_budget=budget))
    return steps(res), res


@pytest.mark.parametrize("poll,last_read", [(29, 571), (52, 598)])
def test_sop_falls_back_when_another_poll_would_leave_no_time_for_the_bank(poll, last_read):
    # reads every poll + 1 ticks from 121; the fallback once read + poll + 1 + 1 + 1 > SHIP_BY.
    # With poll 52 the read at 545 still fits exactly (545 + 55 = 600): it polls once more.
    s, res = _sop(poll)
    reads = [t for tool, t, _ in s if tool == "read_processor"]
    assert reads == list(range(121, last_read + 1, poll + 1))
    assert [(tool, t) for tool, t, _ in s[-2:]] == [("read_bank", last_read + 1), ("refund", last_read + 2)]
    assert res.disposition == "refund"


@pytest.mark.parametrize("budget,reads", [(40, 19), (41, 20)])
def test_sop_falls_back_when_three_calls_or_fewer_are_left_after_a_read(budget, reads):
    s, res = _sop(1, budget=budget)
    assert [tool for tool, _, _ in s].count("read_processor") == reads
    last = max(i for i, (tool, _, _) in enumerate(s) if tool == "read_processor")
    assert s[last][2] == budget - (2 * reads - 1) <= 3
    assert [tool for tool, _, _ in s[last + 1:]] == ["read_bank", "refund"]


def test_sop_falls_back_as_soon_as_its_patience_is_spent():
    # reads at 121 and 152: 32 ticks after the hand-over, exactly the patience
    s, _ = _sop(30, patience=32)
    assert [(tool, t) for tool, t, _ in s] == [
        ("read_processor", 121), ("wait", 151), ("read_processor", 152), ("read_bank", 153), ("refund", 154)]


# --- random: one stream keyed by (unit, seed) --------------------------------------------

def test_random_plays_the_draws_of_its_stream():
    """Each step: a tool uniformly from the twelve; a wait of 1-120 ticks; a retry under key-1 with
    probability one half, else under the next fresh key (key-2, key-3, ...). The stream is
    `generator("random-policy", unit, seed)` (finbench.sim.rng: a generator keyed by what it is for);
    the published random baseline is these draws."""
    waits = 0
    for seed in range(150):
        task = fb.make_task(ARCHETYPES[seed % len(ARCHETYPES)], seed=seed)
        res = fb.run_episode(task, "random", seed, profile=NONE)
        rng = generator("random-policy", task.order_id, seed)
        fresh = 1
        for _, tool, args, _ in res.actions:
            assert tool == TOOL_NAMES[int(rng.integers(len(TOOL_NAMES)))]
            if tool == "wait":
                assert args["ticks"] == int(rng.integers(1, 121))
                waits += 1
            elif tool == "retry_capture":
                if rng.random() < 0.5:
                    assert args["idempotency_key"] == "key-1"
                else:
                    fresh += 1
                    assert args["idempotency_key"] == f"key-{fresh}"
    assert waits >= 20


def test_random_fresh_keys_count_up_from_key_2():
    keys = []
    for seed in range(40):
        task = fb.make_task("unresolvable", seed=seed)
        res = fb.run_episode(task, "random", seed, profile=NONE)
        fresh = [a["idempotency_key"] for _, tool, a, _ in res.actions
                 if tool == "retry_capture" and a["idempotency_key"] != "key-1"]
        assert fresh == [f"key-{i}" for i in range(2, 2 + len(fresh))]
        keys += fresh
    assert "key-2" in keys  # some episode makes a fresh retry


# --- the privileged reference ------------------------------------------------------------

def _brief():
    return {"order_id": "ord-x", "order_value": 10.0, "t": 120, "calls_left": 40}


def test_the_oracle_refuses_to_play_without_the_resolution():
    with pytest.raises(ValueError) as e:
        FinalityOracle().begin(_brief())
    assert str(e.value) == "finality_oracle is privileged: run it through run_episode/play"


@pytest.mark.parametrize("resolution,plan", [
    ({"outcome": "settled", "retry_outcome": "failed", "determined_at": 300}, ["ship"]),
    ({"outcome": "failed", "retry_outcome": "settled", "determined_at": 300}, ["retry_capture", "ship"]),
    ({"outcome": "failed", "retry_outcome": "failed", "determined_at": 300}, ["write_off"]),
])
def test_the_oracle_plays_its_plan_then_closes(resolution, plan):
    p = FinalityOracle()
    p.begin(_brief(), resolution)
    played = [p.act({"t": 120}) for _ in range(len(plan) + 2)]
    assert [tool for tool, _ in played] == plan + ["close", "close"]
    assert all(args["order_id"] == "ord-x" for _, args in played)


# --- majority vote's reading of the four systems -------------------------------------------

def test_system_verdicts_give_each_system_its_own_verdict_by_name():
    reads = completed_order_views("ord-x", 10.0)  # a completed order: every system shows it paid
    assert system_verdicts(reads, 10.0) == (dict.fromkeys(("processor", "ledger", "erp", "bank"), "settled"), False)
    reads["erp"]["status"] = "payment_failed"
    reads["processor"]["captures"][0]["status"] = "pending"
    assert system_verdicts(reads, 10.0)[0] == {"processor": "pending", "ledger": "settled", "erp": "failed",
                                              "bank": "settled"}


def test_the_ledger_shows_the_settlement_within_half_a_cent_and_is_pending_without_cash_or_a_failure():
    reads = completed_order_views("ord-x", 10.0)
    reads["ledger"]["balances"]["cash"] = 10.0 - 0.005  # exactly the tolerance short
    assert system_verdicts(reads, 10.0)[0]["ledger"] == "settled"
    reads["ledger"]["balances"]["cash"] = 0.0  # submitted, nothing settled, nothing failed
    reads["ledger"]["lines"] = reads["ledger"]["lines"][:2]
    assert system_verdicts(reads, 10.0)[0]["ledger"] == "pending"


@pytest.mark.parametrize("status,verdict", [
    ("paid", "settled"), ("payment_failed", "failed"), ("charged_back", "failed"), ("placed", "pending"),
    (None, "pending"),
])
def test_the_erp_status_reads_as_a_verdict(status, verdict):
    reads = completed_order_views("ord-x", 10.0)
    reads["erp"]["status"] = status
    assert system_verdicts(reads, 10.0)[0]["erp"] == verdict


def test_the_bank_shows_the_settlement_within_half_a_cent_and_is_pending_without_a_credit():
    reads = completed_order_views("ord-x", 10.0)
    reads["bank"]["lines"][0]["amount"] = 10.0 - 0.005
    assert system_verdicts(reads, 10.0)[0]["bank"] == "settled"
    reads["bank"]["lines"] = []
    assert system_verdicts(reads, 10.0)[0]["bank"] == "pending"


def test_a_double_posting_is_more_than_half_a_cent_over_the_value():
    reads = completed_order_views("ord-x", 10.0)
    reads["ledger"]["balances"]["cash"] = 10.0 + 0.005
    reads["bank"]["lines"][0]["amount"] = 10.0 + 0.005
    assert system_verdicts(reads, 10.0)[1] is False
    reads["ledger"]["balances"]["cash"] = 20.0
    assert system_verdicts(reads, 10.0)[1] is True
    reads["ledger"]["balances"]["cash"] = 10.0
    reads["bank"]["lines"].append(dict(reads["bank"]["lines"][0]))
    assert system_verdicts(reads, 10.0)[1] is True


# --- majority vote: another round needs a wait, four reads and an act by SHIP_BY, and six calls ---

@pytest.mark.parametrize("wait,rounds", [(91, 6), (92, 5)])
def test_majority_vote_escalates_when_another_round_would_end_past_the_deadline(wait, rounds):
    # rounds of four reads end at 124 + (wait + 4) k; with wait 91 the round deciding at 504 still
    # fits exactly (504 + 91 + 4 + 1 = 600); with wait 92 the one at 508 does not (605)
    res = fb.run_episode(UNDETERMINED, fb.get_policy("majority_vote", wait=wait), 0, profile=LOST)
    s = steps(res)
    decided = [t for tool, t, _ in s if tool == "read_bank"]
    assert decided == [124 + (wait + 4) * k for k in range(rounds)]
    assert s[-1][:2] == ("escalate", decided[-1] + 1)


def test_majority_vote_goes_another_round_with_exactly_six_calls_left():
    # after k rounds 40 - (5k - 1) calls are left: 6 after the seventh, enough for one more round
    res = fb.run_episode(UNDETERMINED, fb.get_policy("majority_vote", wait=1), 0, profile=LOST)
    s = steps(res)
    ends = [left for tool, _, left in s if tool == "read_bank"]
    assert ends == [40 - (5 * k - 1) for k in range(1, 9)]
    assert [tool for tool, _, _ in s[-2:]] == ["read_bank", "escalate"]


# --- react and reflection: the last observation leaves time (and calls) to look again and act ------
# react acts on its first look: it observes while an observation at now still leaves now + 2 <= SHIP_BY
# (a read and an act), capping its wait to land there. Reflection looks again before acting (a wait
# of `pause`, a read): its last observation leaves pause + 2 more ticks, and it keeps 3 calls for it.

def _tail(policy, budget=40, n=4, **knobs):
    res = fb.run_episode(UNDETERMINED, fb.get_policy(policy, **knobs), 0, profile=LOST,
                         costs=fb.Costs(step_budget=budget))
    assert res.disposition == "refund"
    return steps(res)[-n:]


def test_react_observes_last_one_tick_before_the_deadline():
    # reads every 31 ticks from 121 up to 586, then a wait capped to land the last read at 599
    assert [(tool, t) for tool, t, _ in _tail("react", wait=30)] == [
        ("read_processor", 586), ("wait", 598), ("read_processor", 599), ("refund", 600)]


def test_reflection_leaves_its_last_observation_time_for_a_second_look():
    # 586 + 10 + 2 + 2 = 600 still fits: one more (1-tick) wait and read at 588, then the second
    # look (wait 10, read at 599) agrees and it refunds at 600
    assert [(tool, t) for tool, t, _ in _tail("reflection", wait=30, pause=10)] == [
        ("read_processor", 588), ("wait", 598), ("read_processor", 599), ("refund", 600)]


@pytest.mark.parametrize("budget,tail", [
    (40, [("read_processor", 157, 3), ("wait", 158, 2), ("read_processor", 159, 1), ("refund", 160, 0)]),
    (41, [("read_processor", 157, 4), ("wait", 158, 3), ("read_processor", 159, 2), ("refund", 160, 1)]),
])
def test_react_observes_while_two_calls_remain_for_a_read_and_an_act(budget, tail):
    assert _tail("react", budget, wait=1) == tail


@pytest.mark.parametrize("budget,tail", [
    (40, [("read_processor", 157, 3), ("wait", 167, 2), ("read_processor", 168, 1), ("refund", 169, 0)]),
    (41, [("read_processor", 157, 4), ("wait", 167, 3), ("read_processor", 168, 2), ("refund", 169, 1)]),
])
def test_reflection_keeps_three_calls_for_the_second_look_and_the_act(budget, tail):
    assert _tail("reflection", budget, wait=1, pause=10) == tail


@pytest.mark.parametrize("policy,budget,tools", [
    ("react", 1, ["refund"]),  # no call left to observe and then decide
    ("react", 2, ["read_processor", "refund"]),
    ("reflection", 3, ["refund"]),  # a decision needs a read, a second look (wait, read) and an act
    ("reflection", 4, ["read_processor", "wait", "read_processor", "refund"]),
])
def test_react_and_reflection_refund_at_once_without_the_calls_to_observe_and_decide(policy, budget, tools):
    res = fb.run_episode(UNDETERMINED, policy, 0, profile=LOST, costs=fb.Costs(step_budget=budget))
    assert [tool for tool, _, _ in steps(res)] == tools


def test_react_retries_under_key_2_with_exactly_the_calls_for_it():
    # polling every other tick from 121, the failure (at 155, seen from 157) is read with 3 calls
    # left: a retry, a read and an act
    task = fb.make_task("pending_fail", seed=0, determined_at=155)
    res = fb.run_episode(task, fb.get_policy("react", wait=1), 0, profile=NONE)
    s = steps(res)
    i = next(i for i, (tool, t, _) in enumerate(s) if tool == "read_processor" and t >= 157)
    assert s[i] == ("read_processor", 157, 3)
    assert s[i + 1][0] == "retry_capture" and res.actions[i + 1][2]["idempotency_key"] == "key-2"


def test_react_never_ships_past_the_deadline():
    # a replica 298 ticks late shows the settlement (at 300) only at 600; react reads every 53
    # ticks from 121, and its read landing at 598 leaves no room for another: it refunds at once
    task = dataclasses.replace(fb.make_task("stale_processor", seed=0, determined_at=300), processor_lag=298)
    res = fb.run_episode(task, fb.get_policy("react", wait=52), 0, profile=NONE)
    assert "ship" not in [tool for tool, _, _ in steps(res)]
    assert res.disposition == "refund"
    assert steps(res)[-2:] == [("read_processor", 598, 21), ("refund", 599, 20)]


@pytest.mark.parametrize("policy", ["react", "reflection"])
def test_every_observation_leaves_time_to_act_on_it_by_the_deadline(policy):
    # SPEC section 7: react ships on a settled read (reflection on a second read that agrees). A read
    # is worth making only if a ship right after it still lands by SHIP_BY: over every wait, on a
    # case that never resolves, no read lands later than SHIP_BY - 1 and the refund comes by SHIP_BY
    waits = [w for w in range(1, 601) if w <= 60 or w % 7 == 0]
    late = {}
    for wait in waits:
        s = _tail(policy, n=40, wait=wait)
        reads = [t for tool, t, _ in s if tool == "read_processor"]
        assert reads and s[-1][0] == "refund"
        if max(reads) > fb.SHIP_BY - 1 or s[-1][1] > fb.SHIP_BY:
            late[wait] = (max(reads), s[-1][1])
    assert late == {}


# --- reflection's second look, driven call by call with hand-made observations ---------------------

def _seen(t: int, left: int, status: str | None = None) -> dict:
    caps = [] if status is None else [{"id": "cap-1", "key": "key-1", "status": status}]
    return {"t": t, "calls_left": left, "result": {"captures": caps}}


def _after_a_disagreeing_second_look(t: int, left: int) -> str:
    """Reflection reads settled at t - 11, waits 10, reads pending at t with `left` calls left: its next call."""
    p = POLICIES["reflection"](wait=30, pause=10)
    p.begin({"order_id": "ord-x", "order_value": 10.0, "t": 120, "calls_left": 40})
    assert p.act({"t": 120, "calls_left": 40})[0] == "read_processor"
    assert p.act(_seen(t - 11, left + 2, "settled")) == ("wait", {"order_id": "ord-x", "ticks": 10})
    assert p.act(_seen(t - 1, left + 1))[0] == "read_processor"
    return p.act(_seen(t, left, "pending"))[0]


@pytest.mark.parametrize("t,left,next_call", [
    (586, 20, "read_processor"),  # 586 + 10 + 2 + 2 = 600: time to look once more
    (587, 20, "refund"),
    (400, 5, "read_processor"),  # a read, a second look (wait, read) and an act: 4 calls, plus this one
    (400, 4, "refund"),
])
def test_reflection_keeps_observing_after_a_disagreeing_second_look_only_with_time_and_calls_to_spare(
        t, left, next_call):
    assert _after_a_disagreeing_second_look(t, left) == next_call


@pytest.mark.parametrize("policy,first_wait", [
    ("sop", 60), ("react", 30), ("reflection", 30), ("finality_gate", 25),  # SPEC section 7's defaults
    ("optimistic", 30), ("majority_vote", 75),  # the signatures' defaults
])
def test_a_policy_with_default_knobs_waits_its_default(policy, first_wait):
    res = fb.run_episode(UNDETERMINED, policy, 0, profile=LOST)
    waits = [args["ticks"] for _, tool, args, _ in res.actions if tool == "wait"]
    assert waits[0] == first_wait


def test_reflection_pauses_ten_ticks_by_default_before_acting():
    res = fb.run_episode(fb.make_task("settled_clean", seed=0), "reflection", 0, profile=NONE)
    assert [(tool, args.get("ticks")) for _, tool, args, _ in res.actions] == [
        ("read_processor", None), ("wait", 10), ("read_processor", None), ("ship", None)]


# --- the finality gate budgets its last probe with the probe's own duration (the brief's tool_ticks) --

@pytest.mark.parametrize("probe_ticks,tail", [
    # probes take 5 ticks: every 30 from 125; the wait before the last is capped to land it at 599
    (5, [("probe_processor", 575), ("wait", 594), ("probe_processor", 599), ("escalate", 600)]),
    # probes take 20 ticks: every 45 from 140; at 590 another probe (20) and an act would end at 612
    (20, [("probe_processor", 545), ("wait", 570), ("probe_processor", 590), ("escalate", 591)]),
])
def test_finality_gate_escalates_when_another_probe_would_end_past_the_deadline(probe_ticks, tail):
    task = fb.make_task("unresolvable", seed=0, determined_at=900)
    res = fb.run_episode(task, "finality_gate", 0, profile=NONE, costs=fb.Costs(probe_ticks=probe_ticks))
    assert [(tool, t) for tool, t, _ in steps(res)][-4:] == tail


def test_finality_gate_retries_a_confirmed_failure_under_key_2():
    task = dataclasses.replace(fb.make_task("pending_fail", seed=0, determined_at=200), retry_outcome="settled")
    res = fb.run_episode(task, "finality_gate", 0, profile=NONE)
    retries = [args["idempotency_key"] for _, tool, args, _ in res.actions if tool == "retry_capture"]
    assert retries == ["key-2"] and res.disposition == "ship"


def test_finality_gate_escalates_after_a_probe_that_leaves_no_time_for_another():
    # wait 42: probes every 47 ticks from 125; at 548 one more (42 + 5) still fits, at 595 it does not
    # (595 + 5 + 1 + 1 > 600)
    task = fb.make_task("unresolvable", seed=0, determined_at=900)
    res = fb.run_episode(task, fb.get_policy("finality_gate", wait=42), 0, profile=NONE)
    assert [(tool, t) for tool, t, _ in steps(res)][-4:] == [
        ("probe_processor", 548), ("wait", 590), ("probe_processor", 595), ("escalate", 596)]


@pytest.mark.parametrize("wait,tail", [
    # every 26 ticks from 125: the probe at 593 leaves exactly a 1-tick wait, a probe and an act
    # (593 + 1 + 5 + 1 = 600) and exactly three calls
    (21, [("probe_processor", 593, 3), ("wait", 594, 2), ("probe_processor", 599, 1), ("escalate", 600, 0)]),
    # every 6 ticks from 125: the budget binds first; three calls left still buy one more probe
    (1, [("probe_processor", 233, 3), ("wait", 234, 2), ("probe_processor", 239, 1), ("escalate", 240, 0)]),
])
def test_finality_gate_probes_once_more_with_exactly_the_time_and_calls_for_it(wait, tail):
    task = fb.make_task("unresolvable", seed=0, determined_at=900)
    res = fb.run_episode(task, fb.get_policy("finality_gate", wait=wait), 0, profile=NONE)
    assert steps(res)[-4:] == tail


def test_finality_gate_without_a_probe_waits_out_the_deadline_to_the_last_tick():
    # 1-tick probes every 68 ticks from 121; the eighth, at 597, finds the rate limit spent: it
    # waits the last two ticks (597 + 2 <= 599) and escalates at 600
    task = fb.make_task("unresolvable", seed=0, determined_at=900)
    res = fb.run_episode(task, fb.get_policy("finality_gate", wait=67), 0, profile=NONE,
                         costs=fb.Costs(probe_ticks=1), probe=fb.ProbeMode.rate_limited(7))
    assert [(tool, t) for tool, t, _ in steps(res)][-3:] == [("probe_processor", 597), ("wait", 599), ("escalate", 600)]
    assert "unavailable" in res.actions[-3][3]["result"]


@pytest.mark.parametrize("policy", ["optimistic", "eager", "majority_vote", "sop", "react", "reflection",
                                    "finality_gate"])
def test_a_routine_can_be_closed_before_it_began_and_after_it_ended(policy):
    p = POLICIES[policy]()
    p.close()  # never begun: nothing to stop
    res = fb.run_episode(UNDETERMINED, p, 0, profile=NONE)
    assert res.disposition is not None
    p.close()


# --- a routine that ends without a disposition ------------------------------------------------------

class _OneWait(Routine):
    """A user's routine that waits once and ends without ending the case."""

    name = "one_wait"

    def run(self):
        yield self.wait(10)


def test_a_routine_that_ends_without_a_disposition_closes_the_case_on_either_path():
    task = UNDETERMINED
    # through `act` (a user's class takes the public step) ...
    res = fb.run_episode(task, _OneWait(), 0, profile=NONE)
    assert [(tool, t) for tool, t, _ in steps(res)] == [("wait", 130), ("close", 131)]
    assert res.disposition == "close"
    # ... and through `drive` (the fast path of the built-in routines)
    env = FinalityEnv(task, 0, NONE)
    policy = _OneWait()
    policy.begin(env.reset())
    policy.drive(env._call)
    assert [(tool, obs["t"]) for _, tool, _, obs in env.actions] == [("wait", 130), ("close", 131)]
    assert (env.done, env.disposition, policy.now, policy.calls_left) == (True, "close", 130, 39)


def test_react_refunds_a_settlement_it_reads_only_at_the_deadline():
    # a read landing at SHIP_BY (the first read after a late retry) shows the capture settled: a ship
    # would land after SHIP_BY and fail, so react refunds
    p = POLICIES["react"]()
    p.begin({"order_id": "ord-x", "order_value": 10.0, "t": 120, "calls_left": 40})
    assert p.act({"t": 120, "calls_left": 40})[0] == "read_processor"
    assert p.act(_seen(598, 20, "failed")) == ("retry_capture", {"order_id": "ord-x", "idempotency_key": "key-2"})
    retried = {"t": 599, "calls_left": 19, "result": {"receipt": "cap-2", "key": "key-2", "new_capture": True}}
    assert p.act(retried)[0] == "read_processor"
    assert p.act(_seen(C.SHIP_BY, 18, "settled"))[0] == "refund"
    early = POLICIES["react"]()
    early.begin({"order_id": "ord-x", "order_value": 10.0, "t": 120, "calls_left": 40})
    early.act({"t": 120, "calls_left": 40})
    assert early.act(_seen(C.SHIP_BY - 1, 20, "settled"))[0] == "ship"


def test_reflection_aims_its_last_read_one_tick_earlier_than_it_must():
    # every 21 ticks from 121 the reads reach 583; the last wait aims the read at SHIP_BY - 14 + 1 (587),
    # one tick before the latest that leaves room for the second look (wait 10, read) and the act
    assert [(tool, t) for tool, t, _ in _tail("reflection", budget=60, n=6, wait=20, pause=10)] == [
        ("read_processor", 583), ("wait", 586), ("read_processor", 587), ("wait", 597), ("read_processor", 598),
        ("refund", 599)]
