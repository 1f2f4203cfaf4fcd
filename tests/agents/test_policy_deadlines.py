"""Every built-in policy's deadline arithmetic at the exact tick (DESIGN §7), on hand-made tasks.

For each polling policy: the tick T of its last observation that still goes round (a wait, another
observation and an act all land by SHIP_BY), checked at T - 1, T and T + 1, where it gives up
(optimistic closes, sop falls back to the bank, react and reflection refund, majority_vote and
finality_gate escalate); and the last tick at which it may still ship, checked from both sides.

The policy is handed the case at a chosen tick: the episode is started, one `wait` brings the clock
to `start`, and the policy begins with the brief as it stands then (its `t` and `calls_left`). Its
first observation then lands at `start` plus that call's ticks (a read 1, a probe 5), so the tick
under test is set directly rather than reached through a knob that happens to land there. The
budget is 41, so the policy itself has the usual 40 calls.

Expected ticks are derived from SPEC §4 (a read and every act take one tick, a probe
`Costs.probe_ticks`, a wait its ticks, `ship` succeeds only at a tick <= SHIP_BY = 600) and each
policy's rule in DESIGN §7:
- optimistic (poll p): another round (wait p, read, ship) must end by SHIP_BY: t + p + 2 <= 600.
- majority_vote (wait w): another round (wait w, four reads, act): t + w + 5 <= 600.
- sop (poll p): another poll (wait p, read) and the fallback (bank read, act): t + p + 3 <= 600.
- react: a wait of at least 1, a read, an act: t + 3 <= 600; it ships only if the ship lands by 600.
- reflection (pause q): a wait, a read, then the second look (wait q, read) and the act:
  t + 2 + q + 2 <= 600.
- finality_gate (probe of k ticks): a wait of at least 1, a probe, an act: t + 1 + k + 1 <= 600; its
  wait is capped to land the next probe at SHIP_BY - 1.
"""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.agents.policies import POLICIES
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv

SHIP_BY = C.SHIP_BY
NONE = fb.FaultProfile.none()
LOST = fb.FaultProfile.only("loss", intensity=1.0)  # nothing reaches a system: every read shows nothing new
UNDETERMINED = fb.make_task("unresolvable", seed=0, determined_at=900)  # nothing terminal before SHIP_BY
SETTLES = fb.make_task("pending_settle", seed=0, determined_at=300)  # settled and visible everywhere by 360
LOST_SETTLEMENT = fb.make_task("lost_settlement", seed=0, determined_at=300)  # the bank alone shows it


def play_from(policy: str, task, start: int, profile=NONE, probe_ticks: int = 5, probe=None, **knobs):
    """The calls `(tool, tick observed, wait ticks or None)` a fresh `policy` makes when handed the
    case at `start`, and the episode's disposition."""
    env = FinalityEnv(task, 0, profile, fb.Costs(step_budget=41, probe_ticks=probe_ticks), probe=probe)
    brief = env.reset()
    env.step("wait", order_id=brief["order_id"], ticks=start - C.HANDOVER)
    p = POLICIES[policy](**knobs)
    obs = {**brief, "t": env.now, "calls_left": env.calls_left}
    p.begin(obs)
    assert (p.now, p.calls_left) == (start, 40)
    while not env.done:
        tool, args = p.act(obs)
        obs = env.step(tool, **args)
    played = [(tool, obs["t"], args.get("ticks")) for _, tool, args, obs in env.actions[1:]]
    return played, env.disposition


def after_first_observation(policy, task, t, first_call_ticks, profile=NONE, **knobs):
    """The calls after the policy's first observation, which lands at t."""
    played, _ = play_from(policy, task, t - first_call_ticks, profile, **knobs)
    return played


# --- optimistic: goes round while t + p + 2 <= SHIP_BY; ships on the last read at SHIP_BY - 1 ---------

@pytest.mark.parametrize("t,next_call", [(567, ("wait", 597, 30)), (568, ("wait", 598, 30)), (569, ("close", 570, None))])
def test_optimistic_polls_again_only_while_the_round_ends_by_the_deadline(t, next_call):
    played = after_first_observation("optimistic", UNDETERMINED, t, 1, LOST, poll_interval=30)
    assert played[0] == ("read_ledger", t, None)
    assert played[1] == next_call


def test_optimistic_reads_last_at_ship_by_minus_one_and_closes():
    played = after_first_observation("optimistic", UNDETERMINED, 568, 1, LOST, poll_interval=30)
    assert played == [("read_ledger", 568, None), ("wait", 598, 30), ("read_ledger", 599, None), ("close", 600, None)]


@pytest.mark.parametrize("read_at,ends", [(598, ("ship", 599)), (599, ("ship", 600))])
def test_optimistic_ships_on_a_read_that_leaves_the_ship_landing_by_the_deadline(read_at, ends):
    # the submission's clearing line is on the ledger from CAPTURE_AT + 5: the first read ships
    played, disposition = play_from("optimistic", SETTLES, read_at - 1)
    assert [(tool, t) for tool, t, _ in played] == [("read_ledger", read_at), ends]
    assert disposition == "ship"


# --- majority_vote: another round while t + w + 5 <= SHIP_BY --------------------------------------

@pytest.mark.parametrize("t,next_call", [(519, ("wait", 594, 75)), (520, ("wait", 595, 75)),
                                         (521, ("escalate", 522, None))])
def test_majority_vote_goes_another_round_only_while_it_ends_by_the_deadline(t, next_call):
    played = after_first_observation("majority_vote", UNDETERMINED, t, 4, wait=75)
    assert [tool for tool, _, _ in played[:4]] == ["read_processor", "read_ledger", "read_erp", "read_bank"]
    assert played[3][1] == t
    assert played[4] == next_call


def test_majority_vote_decides_last_at_ship_by_minus_one():
    # from a round ending at 520: wait 75 -> 595, reads at 596..599, escalate at 600
    played = after_first_observation("majority_vote", UNDETERMINED, 520, 4, wait=75)
    assert played[4:] == [("wait", 595, 75), ("read_processor", 596, None), ("read_ledger", 597, None),
                          ("read_erp", 598, None), ("read_bank", 599, None), ("escalate", 600, None)]


@pytest.mark.parametrize("decided_at,ends", [(599, ("ship", 600))])
def test_majority_vote_ships_on_a_majority_read_by_ship_by_minus_one(decided_at, ends):
    played, disposition = play_from("majority_vote", SETTLES, decided_at - 4)
    assert played[3][:2] == ("read_bank", decided_at) and played[4][:2] == ends and disposition == "ship"


# --- sop: polls again while t + p + 3 <= SHIP_BY, then reads the bank and acts by SHIP_BY ---------------

@pytest.mark.parametrize("t,next_call", [(566, ("wait", 596, 30)), (567, ("wait", 597, 30)),
                                         (568, ("read_bank", 569, None))])
def test_sop_polls_again_only_while_the_fallback_still_ends_by_the_deadline(t, next_call):
    played = after_first_observation("sop", UNDETERMINED, t, 1, poll_interval=30, patience=1800)
    assert played[0] == ("read_processor", t, None)
    assert played[1] == next_call


def test_sop_ships_on_the_bank_at_the_deadline_after_its_last_poll():
    # the processor never shows a lost settlement; from a read at 567 it polls once more (598), then
    # the bank (599) shows the credit and the ship lands at 600
    played, disposition = play_from("sop", LOST_SETTLEMENT, 566, poll_interval=30, patience=1800)
    assert played == [("read_processor", 567, None), ("wait", 597, 30), ("read_processor", 598, None),
                      ("read_bank", 599, None), ("ship", 600, None)]
    assert disposition == "ship"


# --- react: observes again while t + 3 <= SHIP_BY; ships a settlement read by SHIP_BY - 1 -------------

@pytest.mark.parametrize("t,next_call", [
    (596, ("wait", 598, 2)),  # a wait aimed to land the next read at SHIP_BY - 1: 600 - 2 - 596 = 2 ticks
    (597, ("wait", 598, 1)),  # the last that goes round: 597 + 1 + 1 + 1 = 600
    (598, ("refund", 599, None)),
])
def test_react_observes_again_only_while_a_read_and_an_act_still_fit(t, next_call):
    played = after_first_observation("react", UNDETERMINED, t, 1, wait=30)
    assert played[0] == ("read_processor", t, None)
    assert played[1] == next_call


def test_react_caps_its_wait_to_read_last_at_ship_by_minus_one():
    played = after_first_observation("react", UNDETERMINED, 570, 1, wait=30)
    assert played == [("read_processor", 570, None), ("wait", 598, 28), ("read_processor", 599, None),
                      ("refund", 600, None)]


@pytest.mark.parametrize("read_at,ends", [(598, ("ship", 599)), (599, ("ship", 600)), (600, ("refund", 601))])
def test_react_ships_a_settlement_only_while_the_ship_lands_by_the_deadline(read_at, ends):
    played, disposition = play_from("react", SETTLES, read_at - 1)
    assert played == [("read_processor", read_at, None), (*ends, None)]
    assert disposition == ends[0]


# --- reflection: observes again while t + 2 + pause + 2 <= SHIP_BY; its second look decides -----------

@pytest.mark.parametrize("t,next_call", [
    (585, ("wait", 586, 1)),  # goes round: a wait capped to land the read at 587 (SHIP_BY - 14 + 1)
    (586, ("wait", 587, 1)),  # the last that goes round: 586 + 2 + 10 + 2 = 600
    (587, ("wait", 597, 10)),  # out of time: the second look (a wait of `pause`) before the refund
])
def test_reflection_observes_again_only_while_the_second_look_and_the_act_still_fit(t, next_call):
    played = after_first_observation("reflection", UNDETERMINED, t, 1, wait=30, pause=10)
    assert played[0] == ("read_processor", t, None)
    assert played[1] == next_call


def test_reflection_refunds_after_a_second_look_that_lands_by_the_deadline():
    played = after_first_observation("reflection", UNDETERMINED, 587, 1, wait=30, pause=10)
    assert played == [("read_processor", 587, None), ("wait", 597, 10), ("read_processor", 598, None),
                      ("refund", 599, None)]


@pytest.mark.parametrize("read_at,ends", [(587, ("ship", 599)), (588, ("ship", 600)), (589, ("refund", 601))])
def test_reflection_ships_only_if_the_ship_after_its_second_look_lands_by_the_deadline(read_at, ends):
    # a settled read at t, the second look at t + 11, the ship at t + 12 (<= 600 for t <= 588)
    played, disposition = play_from("reflection", SETTLES, read_at - 1, wait=30, pause=10)
    assert played == [("read_processor", read_at, None), ("wait", read_at + 10, 10),
                      ("read_processor", read_at + 11, None), (*ends, None)]
    assert disposition == ends[0]


# --- finality_gate: probes again while t + 1 + k + 1 <= SHIP_BY (the deadline margin) -----------

@pytest.mark.parametrize("k", [5, 20])
@pytest.mark.parametrize("offset,escalates", [(-1, False), (0, False), (1, True)])
def test_finality_gate_probes_again_only_while_a_wait_a_probe_and_an_act_fit(k, offset, escalates):
    t = SHIP_BY - k - 2 + offset  # offset 0: the last probe tick that goes round (593 for 5-tick probes)
    played = after_first_observation("finality_gate", UNDETERMINED, t, k, probe_ticks=k, wait=25)
    assert played[0] == ("probe_processor", t, None)
    if escalates:
        assert played[1:] == [("escalate", t + 1, None)]
    else:  # the wait is capped to land the next probe at SHIP_BY - 1, then the escalation at SHIP_BY
        wait = SHIP_BY - k - 1 - t
        assert played[1:] == [("wait", t + wait, wait), ("probe_processor", SHIP_BY - 1, None),
                              ("escalate", SHIP_BY, None)]


def test_finality_gate_waits_its_knob_when_that_lands_the_probe_before_the_cap():
    # from a probe at 560: min(25, 600 - 5 - 1 - 560 = 34) = 25 -> probe at 590; then min(25, 4) = 4 -> 599
    played = after_first_observation("finality_gate", UNDETERMINED, 560, 5, wait=25)
    assert played == [("probe_processor", 560, None), ("wait", 585, 25), ("probe_processor", 590, None),
                      ("wait", 594, 4), ("probe_processor", 599, None), ("escalate", 600, None)]


@pytest.mark.parametrize("wait", [62, 25])
def test_finality_gate_escalates_at_a_probe_landing_six_ticks_before_the_deadline(wait):
    # the survivor: the published `finality_gate[wait=62]` probes every 67 ticks from 125 and
    # so lands one at 594 (125 + 7 * 67): 594 + 1 + 5 > 599, another probe would leave no tick to ship
    res = fb.run_episode(UNDETERMINED, fb.get_policy("finality_gate", wait=wait), 0, profile=NONE)
    probes = [obs["t"] for _, tool, _, obs in res.actions if tool == "probe_processor"]
    assert probes[-1] + 7 > SHIP_BY and res.disposition == "escalate"
    if wait == 62:
        assert probes == [125 + 67 * k for k in range(8)] and res.end_t == 595


def test_finality_gate_ships_a_settlement_its_last_probe_shows_at_ship_by_minus_one():
    late = fb.make_task("pending_settle", seed=0, determined_at=560)
    played, disposition = play_from("finality_gate", late, 594)
    assert played == [("probe_processor", 599, None), ("ship", 600, None)] and disposition == "ship"


@pytest.mark.parametrize("t,tail", [
    # without a probe answer it waits to SHIP_BY - 1 and escalates at SHIP_BY ...
    (592, [("wait", 599, 7), ("escalate", 600, None)]),
    (593, [("wait", 599, 6), ("escalate", 600, None)]),
    # ... unless no probe could have landed in time anyway: the same escalation at once as with a probe
    (594, [("escalate", 595, None)]),
])
def test_finality_gate_without_a_probe_waits_out_the_deadline(t, tail):
    # the arm without a probe: every probe answers "unavailable" (and costs its 5 ticks)
    played, disposition = play_from("finality_gate", UNDETERMINED, t - 5, probe=fb.ProbeMode.none())
    assert played[0] == ("probe_processor", t, None)
    assert played[1:] == tail and disposition == "escalate"
