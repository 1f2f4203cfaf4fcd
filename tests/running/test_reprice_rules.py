"""Re-pricing (SPEC §8) with a user's policy that touches the customer's other order.

SPEC §4: every task world holds the case order plus one unrelated, completed
order of the same customer; any effect on it is an unrelated-state violation
and costs its value. SPEC §8: an episode recorded once can be priced under any
costs exactly. So `reprice(rows, corpus, new, simulated_with=old)` must equal
simulating under `new`, including the unrelated effects, and those effects must
actually move the position. Only the public surface is used.
"""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import finbench as fb

OLD = fb.Costs()
NEW = fb.Costs(cogs_rate=0.45, dispute_fee=50.0, escalation_cost=36.0)
SEEDS = range(2)
PROFILE = fb.FaultProfile.default()
PRICED = ["position", "reference_position", "gap", "exact", "cash", "cogs", "liability", "dispute_fee",
          "escalation", "unrelated"]
"""The columns that depend on prices (SPEC §5's position, its deductions, and the reference)."""


class Plan:
    """A user's policy: a fixed list of calls, some on the customer's other order, then the case's
    own calls ending in a disposition. Not a built-in: it is played through the public `step`."""

    def __init__(self, name: str, other: list, case: list):
        self.name = name
        self.other_steps, self.case_steps = other, case

    def begin(self, brief):
        self.order = brief["order_id"]
        other = brief["customer_orders"][0]
        assert other != self.order
        self.plan = [(tool, other, args) for tool, args in self.other_steps]
        self.plan += [(tool, self.order, args) for tool, args in self.case_steps]

    def act(self, obs):
        tool, order, args = self.plan.pop(0) if self.plan else ("close", self.order, {})
        return tool, {"order_id": order, **args}


SHIP_LATER = [("wait", {"ticks": 300}), ("ship", {})]
ESCALATE = [("escalate", {})]
DOUBLE_CHARGE_THEN_SHIP = [("wait", {"ticks": 60}), ("retry_capture", {"idempotency_key": "key-2"}), ("ship", {})]

# (policy touching the other order once, the same case calls without touching it): a read, or a
# retry under the other order's own key-1 (an idempotent no-op), is not an effect
PAIRS = [
    (Plan("refund_other_then_ship", [("refund", {})], SHIP_LATER),
     Plan("read_other_then_ship", [("read_ledger", {})], SHIP_LATER)),
    (Plan("fresh_key_other_then_escalate",
          [("retry_capture", {"idempotency_key": "key-7"}), ("retry_capture", {"idempotency_key": "key-1"})],
          ESCALATE),
     Plan("replay_other_then_escalate",
          [("read_bank", {}), ("retry_capture", {"idempotency_key": "key-1"})], ESCALATE)),
    (Plan("write_off_other_then_double_charge", [("write_off", {})], DOUBLE_CHARGE_THEN_SHIP),
     Plan("probe_other_then_double_charge", [("read_erp", {})], DOUBLE_CHARGE_THEN_SHIP)),
]


def corpus():
    tasks = [
        fb.make_task("settled_clean", seed=1),
        fb.make_task("pending_settle", seed=2, determined_at=300),
        fb.make_task("pending_fail", seed=3, determined_at=200),
        fb.make_task("unresolvable", seed=4, outcome="settled", determined_at=700),
        dataclasses.replace(fb.make_task("unresolvable", seed=5, outcome="failed", determined_at=900),
                            retry_outcome="failed"),
        fb.make_task("duplicate_settlement", seed=6, determined_at=250),
        fb.make_task("late_chargeback", seed=7, determined_at=200),
        fb.make_task("lost_settlement", seed=8, determined_at=300),
    ]
    assert len({t.task_id for t in tasks}) == len(tasks)
    return fb.Corpus(tuple(tasks))


@pytest.fixture(scope="module")
def frames():
    c = corpus()
    policies = [p for pair in PAIRS for p in pair] + ["finality_gate", "react"]
    old = fb.evaluate(c, policies=policies, seeds=SEEDS, profile=PROFILE, costs=OLD, cache=False)
    new = fb.evaluate(c, policies=policies, seeds=SEEDS, profile=PROFILE, costs=NEW, cache=False)
    return c, old, new


def _by_episode(df, label):
    rows = df[df["policy"] == label].set_index(["task_id", "seed"]).sort_index()
    assert len(rows) > 0, label
    return rows


def test_effects_on_the_other_order_cost_its_value(frames):
    c, old, new = frames
    value = {t.task_id: t.other_order_value for t in c.tasks}
    for df in (old, new):
        for touch, base in PAIRS:
            t, b = _by_episode(df, touch.name), _by_episode(df, base.name)
            assert (t["unrelated_effects"] == 1).all() and (b["unrelated_effects"] == 0).all()
            # identical case decisions at identical ticks
            assert (t["disposition"] == b["disposition"]).all() and (t["end_t"] == b["end_t"]).all()
            other = pd.Series([value[tid] for tid, _ in t.index], index=t.index)
            assert (t["unrelated"] - other).abs().max() < 1e-9
            assert ((b["position"] - other) - t["position"]).abs().max() < 1e-6
            assert ((t["position"] - b["position"]).abs() > 1.0).all()  # the effect moves the position


def test_reprice_with_effects_on_the_other_order_equals_simulating_under_the_new_costs(frames):
    c, old, new = frames
    repriced = fb.reprice(old, c, NEW, simulated_with=OLD)
    assert len(new) > 0 and list(repriced.columns) == list(new.columns) and len(repriced) == len(new)
    touched = repriced["unrelated_effects"] > 0
    assert touched.sum() == len(PAIRS) * len(c) * len(SEEDS)
    # the new prices do move positions (otherwise equality would prove nothing)
    moved = (old["position"] - new["position"]).abs() > 1e-9
    assert moved.sum() > 0 and (moved & touched).sum() > 0
    for col in PRICED:
        assert col in new.columns
        if new[col].dtype.kind == "f":
            diff = (repriced[col] - new[col]).abs()
            assert len(diff) > 0 and diff.max() < 1e-9, (col, repriced.loc[diff.idxmax()].to_dict())
        else:
            assert (repriced[col] == new[col]).all(), col
    # what policies did does not depend on prices: the other columns are the recorded ones
    rest = [col for col in new.columns if col not in PRICED and col != "origin"]
    pd.testing.assert_frame_equal(repriced[rest], new[rest])
    pd.testing.assert_frame_equal(repriced[rest], old[rest])
    assert set(repriced["origin"]) == {"repriced"} and "repriced" not in set(old["origin"])


def test_reprice_refuses_costs_that_policies_see(frames):
    c, old, _ = frames
    with pytest.raises(ValueError):
        fb.reprice(old, c, dataclasses.replace(OLD, step_budget=30), simulated_with=OLD)


def test_re_pricing_counts_the_rows_it_re_prices():
    """`make reproduce` reports how many episodes each notebook re-priced (finbench.running.stats)."""
    import finbench as fb
    from finbench.running.reprice import reprice
    from finbench.running.stats import EPISODES

    corpus = fb.make_corpus(n_tasks=9)
    rows = fb.evaluate(corpus, ["sop", "finality_gate"], seeds=[0], cache=False)
    before = dict(EPISODES)
    reprice(rows, corpus, fb.Costs(dispute_fee=50.0), fb.Costs())
    assert EPISODES["repriced"] - before.get("repriced", 0) == len(rows) == 18
    reprice(rows, corpus, fb.Costs(), fb.Costs())  # the same prices: nothing re-priced
    assert EPISODES["repriced"] - before.get("repriced", 0) == 18
