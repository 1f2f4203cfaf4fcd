"""The escalation clerk (DESIGN §5; `finbench.sim.economics.settle_money`), rule by rule, on hand-made
tasks: what the clerk does with the original capture and with a replacement the agent created, for
each outcome (settled, failed) and each timing of the determination against SHIP_BY (before it,
after it, never before HORIZON) and of the escalation.

The rule: the clerk ships at max(escalation tick, first settlement) if that is by SHIP_BY;
otherwise, once every capture is determined (the last terminal tick of all captures, the
replacement's included, HORIZON at most), refunds everything that settled if anything did, else
writes off; after shipping, it returns whatever was collected beyond the order value once every
capture is determined. It never retries. The dispute fee (once) if the order was ever held twice
over, or money is owed at HORIZON; the escalation cost always.

Every expected number below is derived from that rule and SPEC §5's prices (cogs 60% of the value
when shipped, dispute fee 25, escalation 18), for an order of 100; none is copied from a run.
"""
from __future__ import annotations

import dataclasses

import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.economics import settle_case
from finbench.sim.env import FinalityEnv
from finbench.sim.world import agent_capture, original_capture

COSTS = fb.Costs()
V = 100.0
ESC = COSTS.escalation_cost
SHIPPED_ONCE = V - COSTS.cogs_rate * V - ESC  # 22: shipped, one payment kept
SHIPPED_TWICE_CHARGED = SHIPPED_ONCE - COSTS.dispute_fee  # -3: the excess returned, the fee for the double charge
NOTHING_KEPT = -ESC  # -18: refunded (or nothing settled): only the escalation costs
REFUNDED_TWICE_CHARGED = -ESC - COSTS.dispute_fee  # -43: both payments returned, the fee for the double charge


def _task(archetype: str, d: int, outcome: str | None = None, retry_outcome: str = "settled",
          retry_delay: int = 60) -> fb.Task:
    task = fb.make_task(archetype, determined_at=d, order_value=V, outcome=outcome, seed=7)
    assert task.chargeback_at is None  # no chargeback: the clerk's rule alone decides the money
    return dataclasses.replace(task, retry_outcome=retry_outcome, retry_delay=retry_delay)


ORIGINAL = {  # the original capture: outcome and its determination against SHIP_BY
    "settles@300": ("pending_settle", 300, None),
    "settles@700": ("unresolvable", 700, "settled"),  # after SHIP_BY
    "fails@200": ("pending_fail", 200, None),
    "fails@300": ("pending_fail", 300, None),
    "fails@700": ("unresolvable", 700, "failed"),  # after SHIP_BY
}
REPLACEMENT = {  # (submitted at, retry_delay, outcome) of the capture the agent created (cap-2)
    None: None,
    "settles@310": (250, 60, "settled"),  # determined by SHIP_BY
    "fails@310": (250, 60, "failed"),
    "settles@660": (560, 100, "settled"),  # after SHIP_BY
    "fails@660": (560, 100, "failed"),
    "settles@1850": (1750, 100, "settled"),  # never before HORIZON
    "fails@1850": (1750, 100, "failed"),
}

# (original, replacement, escalated at) -> (clerk's action, its tick, the tick of its refund of the
# excess or of everything, shipped, cash kept, refunded, dispute fee, position)
CASES = [
    # --- the original capture alone --------------------------------------------------------------
    # settles by SHIP_BY after the escalation: ships at the settlement
    ("settles@300", None, 200, ("ship", 300, 300, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    # settled before the escalation: ships at once
    ("settles@300", None, 400, ("ship", 400, 400, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    # escalated at SHIP_BY itself: max(600, 300) = 600 is by SHIP_BY, it ships; one tick later it cannot
    ("settles@300", None, C.SHIP_BY, ("ship", C.SHIP_BY, C.SHIP_BY, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    ("settles@300", None, C.SHIP_BY + 1, ("refund", C.SHIP_BY + 1, C.SHIP_BY + 1, False, 0.0, V, 0.0, NOTHING_KEPT)),
    # settles after SHIP_BY: refunds it once it is determined
    ("settles@700", None, 590, ("refund", 700, 700, False, 0.0, V, 0.0, NOTHING_KEPT)),
    # fails: writes off once determined (or at once if it already is)
    ("fails@300", None, 200, ("write_off", 300, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    ("fails@300", None, 400, ("write_off", 400, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    ("fails@700", None, 590, ("write_off", 700, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    # --- the original failed; the agent's replacement decides -------------------------------------
    # the replacement settles by SHIP_BY: shipped at its settlement (after the escalation) or at once
    ("fails@200", "settles@310", 260, ("ship", 310, 310, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    ("fails@200", "settles@310", 400, ("ship", 400, 400, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    # the replacement settles after SHIP_BY: refunded when it settles, not when the escalation comes
    # (a refund at 570 would return nothing and leave the payment of 660 held and owed)
    ("fails@200", "settles@660", 570, ("refund", 660, 660, False, 0.0, V, 0.0, NOTHING_KEPT)),
    # the replacement fails too: written off once it is determined
    ("fails@200", "fails@310", 260, ("write_off", 310, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    ("fails@200", "fails@660", 570, ("write_off", 660, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    # the replacement is determined only after HORIZON: nothing settled by then; written off at HORIZON
    ("fails@200", "settles@1850", 1751, ("write_off", C.HORIZON, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    ("fails@200", "fails@1850", 1751, ("write_off", C.HORIZON, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    # the original fails after SHIP_BY, the replacement settled before it (after SHIP_BY): the clerk
    # refunds once every capture is determined, the original's failure at 700 included
    ("fails@700", "settles@660", 570, ("refund", 700, 700, False, 0.0, V, 0.0, NOTHING_KEPT)),
    ("fails@700", "fails@660", 570, ("write_off", 700, None, False, 0.0, 0.0, 0.0, NOTHING_KEPT)),
    # --- the original settles and the agent charged again -----------------------------------------
    # both settle by SHIP_BY: shipped at the first settlement, the excess returned once both are
    # determined (310); over-collected in between: the fee
    ("settles@300", "settles@310", 260, ("ship", 300, 310, True, V, V, COSTS.dispute_fee, SHIPPED_TWICE_CHARGED)),
    # the second settles after SHIP_BY: shipped at once (570), the excess returned when it lands (660)
    ("settles@300", "settles@660", 570, ("ship", 570, 660, True, V, V, COSTS.dispute_fee, SHIPPED_TWICE_CHARGED)),
    # the second fails after SHIP_BY: shipped at once, nothing to return (660: every capture determined)
    ("settles@300", "fails@660", 570, ("ship", 570, 660, True, V, 0.0, 0.0, SHIPPED_ONCE)),
    # the second is determined only after HORIZON: too late to ship at 1751; the one payment is
    # refunded at HORIZON (the replacement's payment after HORIZON is never money)
    ("settles@300", "settles@1850", 1751, ("refund", C.HORIZON, C.HORIZON, False, 0.0, V, 0.0, NOTHING_KEPT)),
    # both settle after SHIP_BY (660, 700): both refunded once both are determined; held twice over at 700
    ("settles@700", "settles@660", 570, ("refund", 700, 700, False, 0.0, 2 * V, COSTS.dispute_fee,
                                         REFUNDED_TWICE_CHARGED)),
    ("settles@700", "fails@660", 570, ("refund", 700, 700, False, 0.0, V, 0.0, NOTHING_KEPT)),
]


def _captures(original: str, replacement: str | None):
    archetype, d, outcome = ORIGINAL[original]
    spec = REPLACEMENT[replacement]
    if spec is None:
        task = _task(archetype, d, outcome)
        return task, [original_capture(task)]
    submitted, delay, retry_outcome = spec
    task = _task(archetype, d, outcome, retry_outcome, delay)
    return task, [original_capture(task), agent_capture(task, 2, "key-2", submitted)]


@pytest.mark.parametrize("original,replacement,escalated_at,expected", CASES,
                         ids=[f"{o}-{r or 'alone'}-escalated@{e}" for o, r, e, _ in CASES])
def test_the_clerk_finishes_an_escalated_case_by_its_rule(original, replacement, escalated_at, expected):
    task, caps = _captures(original, replacement)
    out = settle_case(task, caps, "escalate", escalated_at, COSTS)
    action, at, refund_at, shipped, cash, refunded, fee, position = expected
    assert (out.human_action, out.human_t, out.human_refund_t) == (action, at, refund_at)
    assert (out.shipped, out.cash, out.refunded, out.chargeback) == (shipped, cash, refunded, 0.0)
    assert (out.dispute_fee, out.escalation, out.liability) == (fee, ESC, 0.0)
    assert out.position == pytest.approx(position, abs=1e-9)
    assert out.cogs == (COSTS.cogs_rate * V if shipped else 0.0)


def test_the_cases_cover_every_outcome_and_timing_of_both_captures():
    # the table above: each original (settled / failed, by or after SHIP_BY) alone and with a
    # replacement that settles / fails by SHIP_BY, after it, and never before HORIZON
    seen = {(o, r) for o, r, _, _ in CASES}
    assert {o for o, _ in seen} == set(ORIGINAL)
    assert {r for _, r in seen} == set(REPLACEMENT)
    for o in ("settles@300", "fails@200", "fails@300"):
        assert all(s < C.SHIP_BY for s in (ORIGINAL[o][1],))
    for r, spec in REPLACEMENT.items():
        if spec is not None:
            end = spec[0] + spec[1]
            assert (end <= C.SHIP_BY) == r.endswith("@310") and (end > C.HORIZON) == r.endswith("@1850")


def test_the_clerk_acts_on_the_replacement_the_environment_records():
    # end to end on the same hand-made task: the original fails at 200; at 559 the agent captures
    # again under a fresh key (effective at 560, settling 100 ticks later, at 660, after SHIP_BY) and
    # escalates (at 561). The clerk waits for the replacement and refunds it at 660.
    task = _task("pending_fail", 200, retry_outcome="settled", retry_delay=100)
    env = FinalityEnv(task, 0, fb.FaultProfile.none(), COSTS)
    order = env.reset()["order_id"]
    env.step("wait", order_id=order, ticks=559 - C.HANDOVER)
    assert env.step("retry_capture", order_id=order, idempotency_key="key-2")["result"]["new_capture"] is True
    env.step("escalate", order_id=order)
    assert (env.disposition, env.disposition_t) == ("escalate", 561)
    out = env.outcome()
    assert (out.human_action, out.human_t, out.human_refund_t) == ("refund", 660, 660)
    assert (out.cash, out.refunded, out.liability, out.dispute_fee) == (0.0, V, 0.0, 0.0)
    assert out.position == pytest.approx(NOTHING_KEPT)
    # and the trace shows the clerk's refund of the replacement's payment at 660
    res = env.result("scripted")
    refunds = [e for e in res.trace if e.get("op") == "refund"]
    assert [(e["t"], e["amount"], e["actor"]) for e in refunds] == [(660, V, "human")]
