"""Open-loop plans (SPEC §10, finbench.agents.plans): 1,215 labels that round-trip, a plan that reads nothing
and calls what it says, and a plan label that goes wherever a policy does (the search over them:
tests/experiments/test_plan_search.py)."""
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.corpus import Corpus
from finbench.running.episode import run_episode
from finbench.errors import PolicyError
from finbench.agents.plans import ACTIONS, N_PLANS, RETRIES, WAITS, Plan, all_plans, plan_label, plan_ref
from finbench.agents.registry import as_ref, parse_label
from finbench.running.evaluation import evaluate

CORPUS = fb.make_corpus()


def test_all_plans_are_1215_distinct_labels_that_round_trip():
    plans = list(all_plans())
    labels = [plan_label(k) for k in plans]
    assert len(plans) == N_PLANS == 1215 == len(WAITS) * len(RETRIES) * len(WAITS) * len(ACTIONS)
    assert len(set(labels)) == 1215
    assert plans == list(all_plans())  # a fixed order
    assert WAITS[0] == 0 and WAITS[-1] == C.SHIP_BY - C.HANDOVER and len(set(WAITS)) == 9
    for k, label in zip(plans, labels):
        assert parse_label(label) == ("plan", k)
        ref = plan_ref(k)
        assert ref.label == label and ref == as_ref(label)  # the same label and cache identity as the string
        assert ref.make().knobs == k


def test_a_plan_reads_nothing_and_calls_what_it_says():
    p = Plan(first=60, retry="fresh", second=120, action="ship")
    p.begin({"order_id": "o", "order_value": 1.0})
    calls = [p.act(obs) for obs in (None, {"garbage": 1}, "x", 42, {})]
    assert calls == [("wait", {"order_id": "o", "ticks": 60}),
                     ("retry_capture", {"order_id": "o", "idempotency_key": "key-2"}),
                     ("wait", {"order_id": "o", "ticks": 120}), ("ship", {"order_id": "o"}),
                     ("close", {"order_id": "o"})]
    assert Plan(0, "none", 0, "refund").calls() == [("refund", {})]
    assert Plan(0, "original", 0, "close").calls() == [("retry_capture", {"idempotency_key": "key-1"}),
                                                      ("close", {})]
    for bad in ({"first": -1}, {"second": 601}, {"retry": "twice"}, {"action": "wait"}, {"first": 1.5}):
        with pytest.raises(PolicyError):
            fb.get_policy("plan", **bad)


def test_a_plan_label_goes_through_evaluate_like_any_policy():
    task = next(t for t in CORPUS.tasks if t.archetype == "pending_settle")
    label = "plan[first=60,retry=fresh,second=120,action=ship]"
    df = evaluate(Corpus((task,), CORPUS.master_seed), [label], seeds=[0], cache=False)
    assert list(df.policy) == ["plan[action=ship,first=60,retry=fresh,second=120]"]
    res = run_episode(task, label, 0)
    assert [(t, tool) for t, tool, _, _ in res.actions] == [(120, "wait"), (180, "retry_capture"),
                                                            (181, "wait"), (301, "ship")]
    assert df.position[0] == res.position
    # a fresh key on an order that settles charges twice: the second payment is a liability
    assert res.loss_breakdown["liability"] == task.order_value and res.gap > 0
    # past the deadline the ship fails and the plan closes the case
    late = run_episode(task, Plan(480, "none", 0, "ship"), 0)
    assert late.disposition == "close" and "error" in late.actions[1][3]
