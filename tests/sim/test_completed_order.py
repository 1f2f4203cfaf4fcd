"""The customer's earlier, completed order (SPEC §4: the brief lists it so that an agent can touch it): what
each system shows for it (`finbench.sim.systems.completed_order_views`) is what the four folds show for an
order that was authorized, captured, settled and shipped, every delivery long arrived (its bank line a day
before the hand-over). Derived here from the folds and the canonical events, not copied from the views."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.systems import RECEIVES, completed_order_views, fold_bank, fold_erp, fold_ledger, fold_processor
from finbench.sim.task import Event

DAY_BEFORE = -86400


def _arrived(events, system):
    """Deliveries to `system` of the canonical events it receives, all arrived a day before, in order."""
    return [SimpleNamespace(event=e, partial=False, arrival=DAY_BEFORE, seq=i) for i, e in enumerate(events)
            if system in RECEIVES.get(e.kind, ("erp",))]  # the ERP records the disposition


def folded(order_id: str, value: float) -> dict[str, dict]:
    events = [Event(0, "order_placed", amount=value), Event(C.AUTH_AT, "auth_approved", amount=value),
              Event(C.CAPTURE_AT, "capture_submitted", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, value),
              Event(60, "capture_settled", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, value),
              Event(61, "disposition", None, "shipped")]
    return {"processor": fold_processor(order_id, _arrived(events, "processor")),
            "ledger": fold_ledger(order_id, _arrived(events, "ledger")),
            "erp": fold_erp(order_id, _arrived(events, "erp"), value),
            "bank": fold_bank(order_id, _arrived(events, "bank"))}


@pytest.mark.parametrize("order_id,value", [("ord-0007", 12.5), ("ord-x", 3499.0), ("o", 0.25)])
def test_the_completed_order_shows_what_the_folds_show_for_an_order_paid_and_shipped(order_id, value):
    assert completed_order_views(order_id, value) == folded(order_id, value)


def test_a_read_of_the_completed_order_answers_its_view():
    task = fb.make_task("pending_settle", seed=4)
    env = FinalityEnv(task, 0, fb.FaultProfile.none())
    other = env.reset()["customer_orders"][0]
    for system in C.SYSTEMS:
        obs = env.step(f"read_{system}", order_id=other)
        assert obs["result"] == folded(task.other_order_id, task.other_order_value)[system]
