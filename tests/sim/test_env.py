"""The engine's semantics: SPEC §1–§5, issue 2's acceptance points 1–5, 9."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.world import World

NONE = fb.FaultProfile.none()


def _play(task, calls, profile=NONE, seed=0, costs=None):
    env = FinalityEnv(task, seed, profile, costs)
    brief = env.reset()
    for tool, args in calls:
        if env.done:
            break
        env.step(tool, order_id=brief["order_id"], **args)
    while not env.done:
        env.step("close", order_id=brief["order_id"])
    return env


# --- 1. the paper's worked example -------------------------------------------

def test_worked_example_reads_probe_and_bank():
    task = fb.make_task("lost_settlement", determined_at=300)
    w = World(task, 0, NONE)
    assert [c["status"] for c in w.view("processor", 121)["captures"]] == ["submitted"]
    assert w.view("erp", 121)["status"] == "placed"
    ledger = w.view("ledger", 121)
    assert ledger["balances"] == {"clearing": task.order_value, "cash": 0.0}
    assert w.view("bank", 121)["lines"] == []
    assert w.probe(121)["captures"][0]["status"] == "unknown"
    assert w.probe(299)["captures"][0]["status"] == "unknown"
    assert w.probe(300)["captures"][0]["status"] == "settled"
    assert w.view("bank", 359)["lines"] == []
    assert [ln["posted_at"] for ln in w.view("bank", 360)["lines"]] == [360]
    # the settlement never reaches processor or ERP in this archetype
    assert w.view("processor", C.HORIZON)["captures"][0]["status"] == "submitted"
    assert w.view("erp", C.HORIZON)["status"] == "placed"


def test_worked_example_fresh_key_costs_one_dispute_fee():
    task = fb.make_task("lost_settlement", determined_at=300)
    plain = _play(task, [("ship", {})]).outcome()
    fresh_env = _play(task, [("retry_capture", {"idempotency_key": "key-2"}), ("ship", {})])
    fresh = fresh_env.outcome()
    settled = [c for c in fresh_env.world.captures if c.outcome == "settled"]
    assert len(settled) == 2
    assert fresh.position == pytest.approx(plain.position - 25.0, abs=1e-9)
    reused = _play(task, [("retry_capture", {"idempotency_key": "key-1"}), ("ship", {})]).outcome()
    assert reused.position == plain.position
    assert reused.cash == plain.cash


# --- 3. batching, stale reads, the deadline -----------------------------------

@given(st.sampled_from(C.ARCHETYPES), st.integers(0, 40), st.floats(0.0, 1.0))
def test_bank_lines_on_boundaries_strictly_after_the_event(archetype, seed, intensity):
    task = fb.make_task(archetype, seed=seed)
    w = World(task, seed, fb.FaultProfile.default(intensity))
    for d in w.deliveries:
        if d.system == "bank":
            assert d.arrival % C.BANK_BATCH == 0
            assert d.arrival > d.event.t
    settles = {e.capture: e.t for e in task.log if e.kind == "capture_settled"}
    for ln in w.view("bank", C.HORIZON)["lines"]:
        if ln["type"] == "credit":
            assert ln["posted_at"] > settles["cap-1"]


@given(st.sampled_from(C.ARCHETYPES), st.integers(0, 40), st.lists(st.integers(121, 1800), min_size=1, max_size=12))
def test_stale_read_never_shows_the_future(archetype, seed, times):
    task = fb.make_task(archetype, seed=seed)
    w = World(task, seed, fb.FaultProfile.only("stale_read", intensity=0.9))
    for t in sorted(times):
        for system in C.SYSTEMS:
            got = w.read(system, t)
            assert any(got == w.view(system, t - k) for k in range(0, C.STALE_RANGE[1] + 1))


def test_ship_at_599_succeeds_at_600_fails():
    task = fb.make_task("settled_clean", seed=3)
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    env.step("wait", order_id=b["order_id"], ticks=599 - 120)
    assert env.now == 599
    obs = env.step("ship", order_id=b["order_id"])
    assert env.done and "error" not in obs and env.disposition == "ship"

    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    env.step("wait", order_id=b["order_id"], ticks=600 - 120)
    obs = env.step("ship", order_id=b["order_id"])
    assert "error" in obs and not env.done
    assert obs["t"] == 601


def test_probe_observes_after_its_cost():
    task = fb.make_task("pending_settle", determined_at=200)
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    env.step("wait", order_id=b["order_id"], ticks=75)  # now 195
    assert env.step("probe_processor", order_id=b["order_id"])["result"]["captures"][0]["status"] == "settled"


# --- 4. no faults: the systems converge on the canonical log ----------------------

@given(st.sampled_from(["settled_clean", "pending_settle", "pending_fail", "unresolvable", "late_chargeback"]),
       st.integers(0, 60))
def test_no_faults_systems_agree_after_latencies(archetype, seed):
    task = fb.make_task(archetype, seed=seed)
    w = World(task, seed, NONE)
    last = max(e.t for e in task.log)
    t = (last // C.BANK_BATCH + 1) * C.BANK_BATCH + C.LATENCY["erp"]
    v = task.order_value
    proc, ledger, erp, bank = (w.view(s, t) for s in C.SYSTEMS)
    assert proc["captures"][0]["status"] == task.outcome
    assert ledger["balanced"] and ledger["balances"]["clearing"] == 0.0
    if task.chargeback_at is not None:
        assert erp["status"] == "charged_back" and len(proc["chargebacks"]) == 1
        assert ledger["balances"]["cash"] == 0.0 and bank["total"] == 0.0
    elif task.outcome == "settled":
        assert erp["status"] == "paid"
        assert ledger["balances"]["cash"] == v and bank["total"] == v
    else:
        assert erp["status"] == "payment_failed"
        assert ledger["balances"]["cash"] == 0.0 and bank["lines"] == []


def test_archetype_perturbations_are_what_they_say():
    dup = World(fb.make_task("duplicate_settlement", seed=1), 0, NONE).view("bank", C.HORIZON)
    assert len(dup["lines"]) == 2
    part = World(fb.make_task("partial_ledger", seed=1), 0, NONE).view("ledger", C.HORIZON)
    assert not part["balanced"] and part["balances"]["cash"] > 0 and part["balances"]["clearing"] > 0
    task = fb.make_task("stale_processor", seed=1)
    w = World(task, 0, NONE)
    assert w.view("processor", task.determined_at + 2)["captures"][0]["status"] == "submitted"
    assert w.view("processor", task.determined_at + 2 + task.processor_lag)["captures"][0]["status"] == "settled"


# --- 5. money ---------------------------------------------------------------

CALL = st.one_of(
    st.tuples(st.sampled_from(["read_processor", "read_ledger", "read_erp", "read_bank", "probe_processor",
                               "ship", "refund", "write_off", "escalate", "close"]), st.just({})),
    st.tuples(st.just("wait"), st.builds(lambda n: {"ticks": n}, st.integers(1, 600))),
    st.tuples(st.just("retry_capture"),
              st.builds(lambda k: {"idempotency_key": k}, st.sampled_from(["key-1", "key-2", "key-3"]))),
)


@given(st.sampled_from(C.ARCHETYPES), st.integers(0, 30), st.lists(CALL, max_size=25), st.booleans())
def test_money_identity_and_refund_bound(archetype, seed, calls, faults):
    task = fb.make_task(archetype, seed=seed)
    env = _play(task, calls, fb.FaultProfile.default() if faults else NONE, seed)
    res = env.result("hypothesis")
    b = res.loss_breakdown
    assert res.position == pytest.approx(b["cash"] - b["cogs"] - b["liability"] - b["dispute_fee"] - b["escalation"],
                                         abs=1e-9)
    out = env.outcome()
    settled = sum(c.amount for c in env.world.captures if c.outcome == "settled" and c.terminal_at <= C.HORIZON)
    # conservation: every settled dollar is held, refunded or charged back (cash also carries the unrelated cost)
    assert out.cash + out.unrelated + out.refunded + out.chargeback == pytest.approx(settled, abs=1e-9)
    if env.disposition == "refund":  # a refund returns what had settled by then, no more
        by_then = sum(c.amount for c in env.world.captures if c.outcome == "settled" and c.terminal_at <= env.disposition_t)
        assert out.refunded <= by_then + 1e-9
    # SPEC §5 liability, derived from the world's captures: the cash held for the order (settled, less refunds
    # and chargebacks) beyond the value of the goods the customer received, if any left
    shipped = env.disposition == "ship" or out.human_action == "ship"
    goods = task.order_value if shipped else 0.0
    assert out.cogs == pytest.approx(env.costs.cogs_rate * goods, abs=1e-6)
    held = settled - out.refunded - out.chargeback
    assert out.liability == pytest.approx(max(0.0, held - goods), abs=1e-6)
    assert out.cash >= -1e-9
    assert res.gap == pytest.approx(res.reference_position - res.position)


def test_effect_on_unrelated_order_shows_in_position():
    task = fb.make_task("settled_clean", seed=2)
    base = _play(task, [("ship", {})]).outcome()
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    other = b["customer_orders"][0]
    env.step("refund", order_id=other)
    assert not env.done
    env.step("ship", order_id=b["order_id"])
    res = env.result()
    assert res.position == pytest.approx(base.position - task.other_order_value)
    assert res.unrelated_effects == 1
    # reading the unrelated order is not an effect
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    env.step("read_ledger", order_id=other)
    env.step("ship", order_id=b["order_id"])
    assert env.outcome().position == base.position


def test_chargeback_and_refund_economics():
    task = fb.make_task("late_chargeback", seed=4)
    v = task.order_value
    shipped = _play(task, [("ship", {})]).outcome()
    assert shipped.chargeback == v and shipped.position == pytest.approx(-0.6 * v - 25)
    # a refund after settlement returns the money, and then no chargeback posts
    assert task.chargeback_at > task.determined_at + 1
    env = _play(task, [("wait", {"ticks": task.determined_at - 120}), ("refund", {})])
    out = env.outcome()
    assert out.chargeback == 0 and out.refunded == v and out.position == 0.0


def test_escalation_human_clerk():
    task = fb.make_task("pending_settle", determined_at=300, seed=5)
    out = _play(task, [("escalate", {})]).outcome()
    assert out.human_action == "ship" and out.position == pytest.approx(0.4 * task.order_value - 18)
    task = fb.make_task("unresolvable", determined_at=900, outcome="settled", seed=5)
    out = _play(task, [("escalate", {})]).outcome()
    assert out.human_action == "refund" and out.position == -18
    task = fb.make_task("pending_fail", determined_at=300, seed=5)
    out = _play(task, [("escalate", {})]).outcome()
    assert out.human_action == "write_off" and out.position == -18


# --- 9. bad input --------------------------------------------------------------

@pytest.mark.parametrize("tool,args", [
    ("teleport", {}),
    ("wait", {}),
    ("wait", {"ticks": 0}),
    ("wait", {"ticks": "ten"}),
    ("retry_capture", {}),
    ("ship", {"force": True}),
])
def test_bad_calls_are_error_observations_that_cost_the_call(tool, args):
    task = fb.make_task("pending_settle", seed=1)
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    obs = env.step(tool, order_id=b["order_id"], **args)
    assert "error" in obs and not env.done
    assert env.calls_left == b["calls_left"] - 1 and env.now == b["t"] + 1


def test_unknown_order_and_missing_order():
    task = fb.make_task("pending_settle", seed=1)
    env = FinalityEnv(task, 0, NONE)
    env.reset()
    assert "unknown order" in env.step("ship", order_id="ord-9999")["error"]
    assert "missing" in env.step("ship")["error"]
    assert env.calls_left == 38 and not env.done


def test_budget_exhaustion_closes():
    task = fb.make_task("pending_settle", seed=1)
    env = _play(task, [("read_processor", {})] * 40)
    assert env.done and env.disposition == "close" and env.calls_left == 0


def test_fault_profile_and_corpus_validation():
    with pytest.raises(ValueError, match="delay, duplicate, loss, reorder, partial_commit, stale_read"):
        fb.FaultProfile.only("nonsense")
    with pytest.raises(ValueError, match="nonsense"):
        fb.FaultProfile.without("nonsense")
    with pytest.raises(ValueError, match=r"n_tasks must be an integer in \[1, 100000\], got 0"):
        fb.make_corpus(n_tasks=0)
    with pytest.raises(ValueError, match="archetype must be one of"):
        fb.make_task("nope")
    with pytest.raises(ValueError, match="unknown policy"):
        fb.get_policy("nope")


def test_tool_schemas_are_the_twelve_tools():
    schemas = fb.tool_schemas()
    names = [s["function"]["name"] for s in schemas]
    assert len(names) == 12 and len(set(names)) == 12
    for s in schemas:
        assert "order_id" in s["function"]["parameters"]["required"]


def test_an_edited_observation_changes_nothing_later():
    task = fb.make_task("pending_settle", seed=1)
    first = FinalityEnv(task, 1)
    b = first.reset()
    obs = first.step("read_ledger", order_id=b["order_id"])
    obs["result"]["lines"].clear()
    obs["result"]["balances"]["cash"] = 1e9
    again = FinalityEnv(task, 1)
    b = again.reset()
    assert again.step("read_ledger", order_id=b["order_id"])["result"]["lines"]


def test_step_never_raises_on_argument_names():
    task = fb.make_task("pending_settle", seed=1)
    env = FinalityEnv(task, 0, NONE)
    b = env.reset()
    for bad in ({"tool": "x"}, {"self": 1}):
        obs = env.step("read_erp", order_id=b["order_id"], **bad)
        assert "unexpected argument" in obs["error"]


def test_fault_family_errors_are_deterministic():
    with pytest.raises(ValueError, match="'bogus1'"):
        fb.FaultProfile(0.3, frozenset({"bogus2", "bogus1"}))


def test_a_chargeback_disputes_the_order_whole():
    task = fb.make_task("late_chargeback", seed=4)
    v = task.order_value
    # a fresh-key capture that settles after the chargeback is reversed too (SPEC §5): a second
    # charge to the customer followed by shipping can no longer keep the second payment
    late = task.chargeback_at - C.HANDOVER - task.retry_delay + 5
    env = _play(task, [("wait", {"ticks": late}), ("retry_capture", {"idempotency_key": "key-9"}), ("ship", {})])
    out = env.outcome()
    assert out.chargeback == 2 * v and out.cash == 0.0 and out.liability == 0.0
    assert out.position == pytest.approx(-0.6 * v - 25.0)
    res = env.result()
    reverses = {r["receipt"]: r["t"] for r in res.trace if r.get("kind") == "reverse"}
    cap2 = next(c for c in env.world.captures if c.id == "cap-2")
    assert reverses == {"cap-1": task.chargeback_at, "cap-2": cap2.terminal_at} and cap2.terminal_at > task.chargeback_at
    v_ = fb.grade_trace(list(res.trace), fb.Contract(task.order_id, v, op="capture"))
    assert v_.checks["evidence_complete"] == "pass" and v_.checks["exactly_one_effect"] == "fail"
    # shipping once, with no second charge, is the same loss of the goods plus the fee
    once = _play(task, [("ship", {})]).outcome()
    assert once.chargeback == v and once.position == pytest.approx(-0.6 * v - 25.0)
    # none posts on an order refunded before it
    refunded = _play(task, [("wait", {"ticks": task.chargeback_at - C.HANDOVER - 30}), ("refund", {})]).outcome()
    assert refunded.chargeback == 0.0 and refunded.position == 0.0


def test_refund_returns_exactly_what_had_settled():
    task = fb.make_task("pending_settle", determined_at=200, seed=3)
    env = _play(task, [("retry_capture", {"idempotency_key": "key-2"}), ("wait", {"ticks": 300}), ("refund", {})])
    out = env.outcome()
    assert out.refunded == 2 * task.order_value and out.cash == 0.0
    # charged twice before the refund: the customer disputes it though all is returned (SPEC §5)
    assert out.dispute_fee == 25.0 and out.position == -25.0


def test_clerk_returns_the_excess_after_a_double_charge():
    task = fb.make_task("lost_settlement", determined_at=300, seed=3)
    out = _play(task, [("retry_capture", {"idempotency_key": "key-2"}), ("escalate", {})]).outcome()
    v = task.order_value
    assert out.human_action == "ship" and out.refunded == v and out.cash == v
    # the clerk returns the excess, but the double charge still draws the dispute fee (SPEC §5)
    assert out.liability == 0 and out.dispute_fee == 25.0
    assert out.position == pytest.approx(0.4 * v - 18 - 25)


@pytest.mark.parametrize("offset,premature", [(-1, True), (0, False)])
def test_premature_means_before_determination(offset, premature):
    task = fb.make_task("pending_settle", determined_at=300, seed=1)
    # ship takes effect one tick after it is issued
    res = _play(task, [("wait", {"ticks": 300 + offset - 1 - C.HANDOVER}), ("ship", {})]).result()
    assert res.end_t == 300 + offset and res.premature_irreversible is premature
