"""FinalityEnv rule by rule (SPEC §4, the `step` docstring): each observation written out in full from the
rule, for the calls whose answers other tests only look at in passing (mutation testing, issue 32).

The customer's other, completed order (`customer_orders` in the brief): a read shows its view
(tests/sim/test_completed_order.py), the probe shows its one settled capture, a wait waits, a retry under its
own key `key-1` replays that capture, and anything else is an effect on it, answered `{order_id, effect}`
and counted against the agent."""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv

NONE = fb.FaultProfile.none()
TASK = fb.make_task("pending_settle", seed=4, determined_at=300)


def _env(task=TASK):
    env = FinalityEnv(task, 0, NONE)
    brief = env.reset()
    return env, brief["order_id"], brief["customer_orders"][0]


# --- the customer's other, completed order ------------------------------------------------------------

def test_a_probe_of_the_other_order_shows_its_one_settled_capture():
    """Paid long ago: the original capture under the original key, settled, whatever the case's state."""
    env, _, other = _env()
    obs = env.step("probe_processor", order_id=other)
    assert obs == {"t": C.HANDOVER + 5, "tool": "probe_processor",  # a probe costs 5 ticks on any order
                   "result": {"order_id": TASK.other_order_id,
                              "captures": [{"id": "cap-1", "key": "key-1", "status": "settled"}]},
                   "calls_left": 39, "done": False}
    assert env.other_effects == [] and env.probe_calls == 0  # looking is no effect (and no probe of the case)


def test_a_wait_on_the_other_order_reports_the_ticks_waited():
    env, case, other = _env()
    env.step("wait", order_id=case, ticks=10)  # now 130: the answer is the ticks, not the clock
    obs = env.step("wait", order_id=other, ticks=37)
    assert obs == {"t": 130 + 37, "tool": "wait", "result": {"waited": 37}, "calls_left": 38, "done": False}
    assert env.other_effects == [] and env.wait_calls == 1  # only the wait on the case order counts as one


def test_a_retry_under_the_original_key_on_the_other_order_replays_its_capture():
    env, _, other = _env()
    obs = env.step("retry_capture", order_id=other, idempotency_key="key-1")
    assert obs == {"t": C.HANDOVER + 1, "tool": "retry_capture",
                   "result": {"receipt": "cap-1", "key": "key-1", "new_capture": False},
                   "calls_left": 39, "done": False}
    assert env.other_effects == [] and env.replays == []  # neither an effect nor a replay on the case order


def test_a_retry_under_a_fresh_key_on_the_other_order_is_a_capture_effect_on_it():
    env, _, other = _env()
    obs = env.step("retry_capture", order_id=other, idempotency_key="key-7")
    assert obs == {"t": C.HANDOVER + 1, "tool": "retry_capture",
                   "result": {"order_id": TASK.other_order_id, "effect": "capture"},
                   "calls_left": 39, "done": False}
    assert env.other_effects == [(C.HANDOVER + 1, "capture")]
    assert [c.id for c in env.world.captures] == ["cap-1"]  # the case order is not charged


def test_a_disposition_of_the_other_order_is_an_effect_that_does_not_end_the_case():
    env, case, other = _env()
    env.step("wait", order_id=case, ticks=20)
    obs = env.step("refund", order_id=other)
    assert obs == {"t": 141, "tool": "refund", "result": {"order_id": TASK.other_order_id, "effect": "refund"},
                   "calls_left": 38, "done": False}
    env.step("escalate", order_id=other)
    assert env.other_effects == [(141, "refund"), (142, "escalate")]
    assert not env.done and env.disposition is None


# --- construction and reset ------------------------------------------------------------------------------

def test_a_new_env_waits_at_the_handover_with_the_default_settings():
    env = FinalityEnv(TASK)
    assert (env.seed, env.now, env.done, env.calls_left, env.world) == (0, C.HANDOVER, False, 40, None)
    assert env.done is False and env.double_effect is False
    assert env.profile == fb.FaultProfile.default() and env.costs == fb.Costs() and env.probe == fb.ProbeMode.full()


def test_the_profile_and_costs_given_are_the_ones_used():
    costs, profile = fb.Costs(step_budget=7), fb.FaultProfile.only("loss")
    env = FinalityEnv(TASK, 3, profile, costs)
    assert env.profile == profile and env.costs == costs and env.calls_left == 7


def test_a_step_before_reset_is_refused():
    env = FinalityEnv(TASK)
    with pytest.raises(RuntimeError, match=r"^call reset\(\) before step\(\)$"):
        env.step("read_erp", order_id=TASK.order_id)


@pytest.mark.parametrize("kwargs,message", [
    (dict(task="ord-1"), "FinalityEnv: task must be a Task (make_task, or a corpus's tasks), got 'ord-1'"),
    (dict(seed=-1), "FinalityEnv: seed must be an integer >= 0, got -1"),
    (dict(profile="loss"), "FinalityEnv: profile must be a FaultProfile, got 'loss'"),
    (dict(costs={"step_budget": 3}), "FinalityEnv: costs must be a Costs, got {'step_budget': 3}"),
])
def test_bad_construction_arguments_are_refused_naming_the_argument(kwargs, message):
    with pytest.raises(FinbenchError) as err:
        FinalityEnv(**{"task": TASK, **kwargs})
    assert str(err.value) == message


def test_the_brief_says_what_the_agent_may_know():
    costs = fb.Costs(step_budget=12, read_ticks=3, probe_ticks=7)  # not the defaults: the brief reads them
    env = FinalityEnv(TASK, 5, NONE, costs)
    assert env.reset() == {
        "order_id": TASK.order_id, "order_value": TASK.order_value, "t": 120, "ship_by": 600, "horizon": 1800,
        "calls_left": 12, "capture": {"id": "cap-1", "key": "key-1", "submitted_at": 10},
        "customer_orders": [TASK.other_order_id], "tool_ticks": {"read": 3, "probe_processor": 7, "other": 1},
        "seed": 5}


def test_reset_forgets_the_earlier_episode():
    env = FinalityEnv(TASK, 0, NONE, probe=fb.ProbeMode.rate_limited(2))
    case = env.reset()["order_id"]
    env.resolution()
    for tool, args in [("wait", {"ticks": 5}), ("probe_processor", {}), ("read_bank", {}),
                       ("retry_capture", {"idempotency_key": "key-1"}), ("retry_capture", {"idempotency_key": "key-2"}),
                       ("ship", {})]:
        env.step(tool, order_id=case, **args)
    env.step("refund", order_id=TASK.other_order_id)  # after the end: changes nothing
    assert env.done
    assert env.reset()["calls_left"] == 40
    assert (env.now, env.done, env.calls_left, env.actions, env.disposition, env.disposition_t) == (
        120, False, 40, [], None, 120)
    assert (env.first_irreversible_t, env.replays, env.other_effects, env.probe_calls, env.wait_calls) == (
        None, [], [], 0, 0)
    assert env.done is False and env.told_resolution is False and env.saw_only_truth is True
    assert env.probe_answers == 0 and [c.id for c in env.world.captures] == ["cap-1"]


def test_resolution_tells_the_reference_how_the_capture_resolves_and_marks_the_episode():
    env = FinalityEnv(TASK, 0, NONE)
    case = env.reset()["order_id"]
    assert env.told_resolution is False
    assert env.resolution() == {"outcome": "settled", "determined_at": 300, "retry_outcome": TASK.retry_outcome}
    env.step("escalate", order_id=case)
    assert env.result().privileged is True


# --- the case order: each tool's effect -------------------------------------------------------------------

def test_waits_and_probes_are_counted_and_reported_in_the_result():
    env, case, _ = _env()
    assert env.step("wait", order_id=case, ticks=30)["result"] == {"waited": 30}
    env.step("probe_processor", order_id=case)  # 150 -> 155
    assert env.step("wait", order_id=case, ticks=45)["result"] == {"waited": 45}
    env.step("probe_processor", order_id=case)
    env.step("probe_processor", order_id=case)
    env.step("escalate", order_id=case)
    res = env.result()
    assert (env.wait_calls, env.probe_calls, res.wait_calls, res.probe_calls) == (2, 3, 2, 3)
    assert res.privileged is False and res.n_calls == 6


def test_only_reads_and_a_probe_that_is_not_the_full_one_see_what_faults_touch():
    env, case, _ = _env()
    for tool, args in [("probe_processor", {}), ("wait", {"ticks": 3}), ("retry_capture", {"idempotency_key": "key-1"}),
                       ("read_bank", {"order_id": TASK.other_order_id})]:  # the other order's view is no fault's
        env.step(tool, **{"order_id": case, **args})
        assert env.saw_only_truth is True, tool
    env.step("read_erp", order_id=case)
    assert env.saw_only_truth is False
    env = FinalityEnv(TASK, 0, NONE, probe=fb.ProbeMode.identity_only())
    env.reset()
    env.step("probe_processor", order_id=case)
    assert env.saw_only_truth is False


def test_a_rate_limited_probe_counts_its_answers_over_the_episode():
    env = FinalityEnv(TASK, 0, NONE, probe=fb.ProbeMode.rate_limited(2))
    case = env.reset()["order_id"]
    got = [env.step("probe_processor", order_id=case)["result"] for _ in range(3)]
    assert ["unavailable" in r for r in got] == [False, False, True]
    assert env.probe_answers == 2 and env.probe_calls == 3


def test_a_retry_under_a_used_key_replays_its_receipt_and_is_no_irreversible_step():
    env, case, _ = _env()
    obs = env.step("retry_capture", order_id=case, idempotency_key="key-1")
    assert obs["result"] == {"receipt": "cap-1", "key": "key-1", "new_capture": False}
    assert env.replays == [(121, "key-1", "cap-1", False)]
    assert [c.id for c in env.world.captures] == ["cap-1"] and env.first_irreversible_t is None


def test_a_fresh_key_captures_again_and_a_later_retry_under_it_replays_that_capture():
    env, case, _ = _env()
    env.step("wait", order_id=case, ticks=9)  # now 129
    obs = env.step("retry_capture", order_id=case, idempotency_key="key-2")
    assert obs["result"] == {"receipt": "cap-2", "key": "key-2", "new_capture": True}
    cap = env.world.captures[1]
    assert (cap.id, cap.key, cap.submitted_at) == ("cap-2", "key-2", 130)
    assert env.first_irreversible_t == 130
    # the key it was made under now names it
    assert env.step("retry_capture", order_id=case, idempotency_key="key-2")["result"] == {
        "receipt": "cap-2", "key": "key-2", "new_capture": False}
    env.step("retry_capture", order_id=case, idempotency_key="key-3")  # a third capture, at 132
    assert env.first_irreversible_t == 130  # the first irreversible step stays the first
    assert env.replays == [(131, "key-2", "cap-2", False)]


def test_the_double_effect_engine_charges_again_under_a_used_key_and_logs_no_replay():
    env = FinalityEnv(TASK, 0, NONE, double_effect=True)
    case = env.reset()["order_id"]
    obs = env.step("retry_capture", order_id=case, idempotency_key="key-1")
    assert obs["result"] == {"receipt": "cap-1", "key": "key-1", "new_capture": False}
    assert [(c.id, c.key, c.submitted_at) for c in env.world.captures] == [("cap-1", "key-1", 10), ("cap-2", "key-1", 121)]
    assert env.replays == []


def test_a_ship_past_the_deadline_fails_and_says_when():
    env, case, _ = _env()
    env.step("wait", order_id=case, ticks=480)  # now 600: the ship would land at 601
    obs = env.step("ship", order_id=case)
    assert obs == {"t": 601, "tool": "ship", "calls_left": 38, "done": False,
                   "error": "ship failed at t=601: past the ship-by deadline (t=600); the customer cancelled"}
    assert env.first_irreversible_t is None
    # the deadline is the ship's alone: a refund after it ends the case
    obs = env.step("refund", order_id=case)
    assert obs["result"] == {"order_id": case, "disposition": "refund"} and env.done


@pytest.mark.parametrize("tool,irreversible", [("ship", True), ("refund", True), ("write_off", True),
                                               ("escalate", False), ("close", False)])
def test_a_disposition_ends_the_case_and_only_ship_refund_and_write_off_are_irreversible(tool, irreversible):
    env, case, _ = _env()
    env.step("wait", order_id=case, ticks=10)
    obs = env.step(tool, order_id=case)
    assert obs == {"t": 131, "tool": tool, "result": {"order_id": case, "disposition": tool}, "calls_left": 38,
                   "done": True}
    assert (env.disposition, env.disposition_t, env.done) == (tool, 131, True)
    assert env.first_irreversible_t == (131 if irreversible else None)
    # determined at 300: an irreversible step at 131 is premature
    assert env.result().premature_irreversible is irreversible


def test_the_erp_records_the_agents_disposition_after_its_latency():
    env, case, _ = _env()
    env.step("ship", order_id=case)  # at 121
    erp = C.LATENCY["erp"]
    assert env.world.view("erp", 121 + erp - 1)["disposition"] is None
    assert env.world.view("erp", 121 + erp)["disposition"] == "ship"


# --- the clock, the budget and the end ---------------------------------------------------------------------

def test_the_last_call_of_the_budget_closes_the_case():
    env = FinalityEnv(TASK, 0, NONE, fb.Costs(step_budget=3))
    case = env.reset()["order_id"]
    assert env.step("read_erp", order_id=case)["done"] is False
    assert env.step("read_erp", order_id=case)["done"] is False
    obs = env.step("read_erp", order_id=case)
    assert {k: v for k, v in obs.items() if k != "result"} == {"t": 123, "tool": "read_erp", "calls_left": 0,
                                                               "note": "call budget exhausted", "done": True}
    assert (env.disposition, env.disposition_t) == ("close", 123)


def test_a_disposition_on_the_last_call_of_the_budget_stands():
    env = FinalityEnv(TASK, 0, NONE, fb.Costs(step_budget=2))
    case = env.reset()["order_id"]
    env.step("wait", order_id=case, ticks=4)
    obs = env.step("ship", order_id=case)
    assert obs == {"t": 125, "tool": "ship", "result": {"order_id": case, "disposition": "ship"}, "calls_left": 0,
                   "done": True}
    assert env.disposition == "ship"


def test_reaching_the_horizon_closes_the_case_with_calls_left():
    env = FinalityEnv(TASK, 0, NONE, fb.Costs(step_budget=4))
    case = env.reset()["order_id"]
    env.step("wait", order_id=case, ticks=600)
    env.step("wait", order_id=case, ticks=600)  # 1320
    obs = env.step("wait", order_id=case, ticks=600)  # capped at the horizon, one call left
    assert obs == {"t": 1800, "tool": "wait", "result": {"waited": 480}, "calls_left": 1,
                   "note": "horizon reached", "done": True}
    assert (env.disposition, env.disposition_t) == ("close", 1800)


def test_when_the_budget_and_the_horizon_run_out_together_the_note_names_the_budget():
    env = FinalityEnv(TASK, 0, NONE, fb.Costs(step_budget=3))
    case = env.reset()["order_id"]
    for _ in range(3):
        obs = env.step("wait", order_id=case, ticks=600)
    assert (obs["t"], obs["calls_left"], obs["note"]) == (1800, 0, "call budget exhausted")


def test_a_call_after_the_end_changes_nothing():
    env, case, _ = _env()
    env.step("close", order_id=case)
    obs = env.step("ship", order_id=case)
    assert obs == {"t": 121, "tool": "ship", "error": "the case is closed", "done": True}
    assert env.calls_left == 39 and len(env.actions) == 1 and env.disposition == "close"
    assert env._call("ship", {"order_id": case}) == obs  # the fast path too


def test_a_tool_that_is_not_a_string_is_shown_as_text():
    env, case, _ = _env()
    obs = env.step(5, order_id=case)
    assert obs["tool"] == "5" and obs["error"].startswith("unknown tool '5'; tools: read_processor, ")
    assert (obs["t"], obs["calls_left"], env.done) == (121, 39, False)


def test_an_unknown_order_is_named_in_the_error_unless_the_call_is_already_wrong():
    env, case, _ = _env()
    assert env.step("ship", order_id="ord-9")["error"] == "ship: unknown order 'ord-9'"
    assert env.step("teleport", order_id="ord-9")["error"].startswith("unknown tool 'teleport'")
    assert env.calls_left == 38 and env.now == 122 and not env.done


# --- the fast path (`_call`, the package's own policies) ----------------------------------------------------

def test_the_fast_path_moves_the_clock_like_step():
    env, case, _ = _env()
    obs = env._call("wait", {"order_id": case, "ticks": 30})
    assert obs == {"t": 150, "tool": "wait", "result": {"waited": 30}, "calls_left": 39, "done": False}


def test_the_fast_path_hands_an_unknown_tool_or_the_other_order_to_step():
    env, case, other = _env()
    assert env._call("teleport", {"order_id": case})["error"].startswith("unknown tool 'teleport'")
    assert env._call("refund", {"order_id": other})["result"] == {"order_id": TASK.other_order_id, "effect": "refund"}
    assert not env.done and env.other_effects == [(122, "refund")]


def test_editing_a_fast_path_reads_observation_in_the_actions_changes_no_later_read():
    """The fast path hands its caller the world's memoised fold; the actions must hold their own."""
    env, case, _ = _env()
    lines = list(env._call("read_ledger", {"order_id": case})["result"]["lines"])
    env.step("close", order_id=case)
    env.actions[0][3]["result"]["lines"].clear()
    again, case, _ = _env()  # the same world: it shares the memo
    assert lines and again._call("read_ledger", {"order_id": case})["result"]["lines"] == lines


# --- grading ----------------------------------------------------------------------------------------------

def test_an_outcome_before_the_end_is_refused():
    env, _, _ = _env()
    with pytest.raises(RuntimeError, match="^the episode is not over: step until env.done$"):
        env.outcome()


def test_two_episodes_that_end_alike_but_for_an_effect_on_the_other_order_are_priced_apart():
    # both ship at 122; one refunded the other order first
    plain, case, _ = _env()
    plain.step("wait", order_id=case, ticks=1)
    plain.step("ship", order_id=case)
    touched, case, other = _env()
    touched.step("refund", order_id=other)
    touched.step("ship", order_id=case)
    a, b = plain.outcome(), touched.outcome()
    assert (plain.disposition_t, touched.disposition_t) == (122, 122)
    # shipped, and the capture settles: the order's value in cash, less the goods' cost (60%)
    assert a.position == pytest.approx(0.4 * TASK.order_value)
    assert b.position == pytest.approx(a.position - TASK.other_order_value) and b.unrelated == TASK.other_order_value


def test_a_result_carries_the_episode():
    env, case, other = _env()
    env.step("refund", order_id=other)
    env.step("wait", order_id=case, ticks=8)
    env.step("ship", order_id=case)  # at 130
    res = env.result()
    out = env.outcome()
    assert (res.task_id, res.archetype, res.policy, res.seed) == ("pending_settle-4", "pending_settle", "?", 0)
    assert (res.disposition, res.end_t, res.n_calls, res.unrelated_effects) == ("ship", 130, 3, 1)
    assert res.position == out.position and res.loss_breakdown["unrelated"] == TASK.other_order_value
    assert [a[1] for a in res.actions] == ["refund", "wait", "ship"]
    assert res.trace and res.trace[0]["kind"] == "log_meta"
    assert res.premature_irreversible is True  # shipped at 130, determined at 300


def test_a_result_uses_the_reference_it_is_given_and_may_leave_out_the_actions():
    env, case, _ = _env()
    env.step("escalate", order_id=case)
    res = env.result("mine", reference=1000.0, actions=False)
    assert res.policy == "mine" and res.actions == ()
    assert res.reference_position == 1000.0 and res.gap == pytest.approx(1000.0 - res.position)


def test_the_fast_path_records_each_call_and_plays_a_retry_like_step():
    env, case, _ = _env()
    env._call("wait", {"order_id": case, "ticks": 30})
    obs = env._call("retry_capture", {"order_id": case, "idempotency_key": "key-2"})
    assert obs["result"] == {"receipt": "cap-2", "key": "key-2", "new_capture": True}
    assert env.calls() == [(120, "wait", {"order_id": case, "ticks": 30}),
                           (150, "retry_capture", {"order_id": case, "idempotency_key": "key-2"})]


def test_a_full_probe_of_the_case_order_answers_each_captures_status_after_its_cost():
    env, case, _ = _env()
    env.step("wait", order_id=case, ticks=175)  # 295: the probe observes at 300, when cap-1 is determined
    obs = env.step("probe_processor", order_id=case)
    assert obs == {"t": 300, "tool": "probe_processor", "calls_left": 38, "done": False,
                   "result": {"order_id": case, "captures": [{"id": "cap-1", "key": "key-1", "status": "settled"}]}}


def test_each_call_is_recorded_with_its_arguments_whatever_it_did():
    env, case, other = _env()
    env.step("wait", order_id=case, ticks=0)  # an error
    env.step("refund", order_id=other)  # an effect on the other order
    env.step("read_erp", order_id=case)
    assert env.calls() == [(120, "wait", {"order_id": case, "ticks": 0}), (121, "refund", {"order_id": other}),
                           (122, "read_erp", {"order_id": case})]


def test_a_result_is_exact_when_it_meets_the_reference_and_counts_no_firings_without_faults():
    env, case, _ = _env()
    env.step("escalate", order_id=case)
    position = env.outcome().position
    assert env.result(reference=position).exact is True
    far = env.result(reference=position + 1.0)
    assert far.exact is False and far.gap == pytest.approx(1.0)
    assert far.fired == dict.fromkeys(C.FAMILIES, 0)


def test_the_world_is_built_for_the_envs_own_seed():
    """With the task and the profile the seed fixes every fault draw: the env's world is that seed's."""
    from finbench.sim.world import World
    profile = fb.FaultProfile.default(0.9)
    fired = {seed: World(TASK, seed, profile).fired() for seed in (7, 8)}
    assert fired[7] != fired[8]  # so that the seed shows
    for seed in (7, 8):
        env = FinalityEnv(TASK, seed, profile)
        env.reset()
        assert env.world.fired() == fired[seed]


def test_what_a_bad_call_echoes_is_bounded():
    """A 10 MB tool name, order id or key is echoed in the observation, the recorded call and the row's
    `calls` cut to a few hundred characters (issue 43: it once cost 1,992 MB and a 400 MB cell)."""
    import finbench as fb

    huge = "x" * 10_000_000

    class Shouter:
        name = "shouter"

        def begin(self, brief):
            self.order, self.n = brief["order_id"], 0

        def act(self, obs):
            self.n += 1
            if self.n == 1:
                return huge, {"order_id": self.order}
            if self.n == 2:
                return "ship", {"order_id": huge}
            if self.n == 3:
                return "retry_capture", {"order_id": self.order, "idempotency_key": 7 * huge}
            return "close", {"order_id": self.order}

    task = fb.make_corpus(n_tasks=9).tasks[0]
    res = fb.run_episode(task, Shouter, seed=0)
    rows = fb.evaluate(fb.make_corpus(n_tasks=9), [Shouter], seeds=[0], cache=False)
    assert rows["calls"].str.len().max() < 2_000 and rows["n_calls"].iloc[0] == 4
    assert all(len(repr(a)) < 2_000 for a in res.actions)


def test_an_integral_numpy_scalar_plays_as_the_integer_it_is():
    """`wait` with `numpy.int64(10)` ticks waits 10 ticks (issue 43: every such wait was rejected while the
    card counted none invalid); a float or a bool is still refused."""
    import numpy as np

    import finbench as fb

    task = fb.make_corpus(n_tasks=9).tasks[0]
    env = fb.FinalityEnv(task, 0)
    order = env.reset()["order_id"]
    obs = env.step("wait", order_id=order, ticks=np.int64(10))
    assert "error" not in obs and obs["result"] == {"waited": 10} and obs["t"] == 130
    assert type(env.calls()[-1][2]["ticks"]) is int  # recorded as the integer
    for bad in (np.float64(10.0), True, np.bool_(True)):
        assert "error" in env.step("wait", order_id=order, ticks=bad)
