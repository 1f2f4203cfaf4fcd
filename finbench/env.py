"""The environment (tools in, JSON out), one episode, and its result (SPEC §4, §8)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from finbench import constants as C
from finbench.corpus import Task
from finbench.economics import Costs, Outcome, settle_case
from finbench.faults import FaultProfile
from finbench.tools import READS, tool_ticks, validate
from finbench.trace import build_trace
from finbench.world import World

IRREVERSIBLE = ("ship", "refund", "write_off")


@dataclass(frozen=True)
class EpisodeResult:
    """One graded episode. `gap` = reference position - position; `exact` = gap <= 0.005."""

    task_id: str
    archetype: str
    policy: str
    seed: int
    position: float
    reference_position: float
    gap: float
    exact: bool
    premature_irreversible: bool
    disposition: str
    end_t: int
    n_calls: int
    fired: dict
    loss_breakdown: dict
    actions: tuple = field(repr=False)
    trace: tuple = field(repr=False)
    unrelated_effects: int = 0
    probe_calls: int = 0
    wait_calls: int = 0


class FinalityEnv:
    """One task's episode: `reset()` at HANDOVER, then `step(tool, **args)` until `done`.

    Observations are plain JSON-serialisable dicts, a fresh copy for every call.
    `step` never raises for a bad tool, argument or order id: it answers with an
    `error` and charges the call (one tick, one call of the budget).
    """

    def __init__(self, task: Task, seed: int = 0, profile: FaultProfile | None = None,
                 costs: Costs | None = None, *, double_effect: bool = False):
        self.task = task
        self.seed = int(seed)
        self.profile = profile if profile is not None else FaultProfile.default()
        self.costs = costs if costs is not None else Costs()
        self.double_effect = double_effect  # logger self-test: a replayed key silently charges again
        self.world: World | None = None
        self.now = C.HANDOVER
        self.done = False
        self.calls_left = self.costs.step_budget

    # --- lifecycle -------------------------------------------------------------
    def reset(self) -> dict:
        task = self.task
        self.world = World(task, self.seed, self.profile)
        self.now = C.HANDOVER
        self.done = False
        self.calls_left = self.costs.step_budget
        self.actions: list = []
        self.disposition: str | None = None
        self.disposition_t = C.HANDOVER
        self.first_irreversible_t: int | None = None
        self.replays: list = []
        self.other_effects: list = []
        self.probe_calls = self.wait_calls = 0
        return {
            "order_id": task.order_id,
            "order_value": task.order_value,
            "t": self.now,
            "ship_by": C.SHIP_BY,
            "horizon": C.HORIZON,
            "calls_left": self.calls_left,
            "capture": {"id": C.ORIGINAL_CAPTURE, "key": C.ORIGINAL_KEY, "submitted_at": C.CAPTURE_AT},
            "customer_orders": [task.other_order_id],
            "tool_ticks": {"read": self.costs.read_ticks, "probe_processor": self.costs.probe_ticks,
                           "other": 1},
            "seed": self.seed,
        }

    def resolution(self) -> dict:
        """What only the privileged reference is told (SPEC §7)."""
        t = self.task
        return {"outcome": t.outcome, "determined_at": t.determined_at, "retry_outcome": t.retry_outcome}

    def step(self, tool: str, /, **args) -> dict:
        if self.world is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            return {"t": self.now, "tool": tool, "error": "the case is closed", "done": True}
        err = validate(tool, args)
        order = args.get("order_id")
        task = self.task
        if err is None and order not in (task.order_id, task.other_order_id):
            err = f"{tool}: unknown order {order!r}"
        if err is not None:
            return self._finish_call(tool, args, min(self.now + 1, C.HORIZON), {"error": err})
        t = min(self.now + tool_ticks(tool, args, self.costs), C.HORIZON)
        if order == task.other_order_id:
            return self._finish_call(tool, args, t, self._other(tool, args, t))
        return self._finish_call(tool, args, t, self._case(tool, args, t))

    # --- the case order -------------------------------------------------------
    def _case(self, tool: str, args: dict, t: int) -> dict:
        w = self.world
        if tool in READS:
            return {"result": w.read(tool[5:], t)}
        if tool == "probe_processor":
            self.probe_calls += 1
            return {"result": w.probe(t)}
        if tool == "wait":
            self.wait_calls += 1
            return {"result": {"waited": t - self.now}}
        if tool == "retry_capture":
            key = args["idempotency_key"]
            used = next((c for c in w.captures if c.key == key), None)
            if used is not None:
                if self.double_effect:
                    # the faulty API charges again under the same key; the logger sees it, the agent does not
                    w.add_capture(key, t)
                else:
                    self.replays.append((t, key, used.id, False))
                return {"result": {"receipt": used.id, "key": key, "new_capture": False}}
            cap = w.add_capture(key, t)
            self._irreversible(t)
            return {"result": {"receipt": cap.id, "key": key, "new_capture": True}}
        # a disposition
        if tool == "ship" and t > C.SHIP_BY:
            return {"error": f"ship failed at t={t}: past the ship-by deadline (t={C.SHIP_BY}); "
                             "the customer cancelled"}
        if tool in IRREVERSIBLE:
            self._irreversible(t)
        self._dispose(tool, t)
        return {"result": {"order_id": self.task.order_id, "disposition": tool}}

    def _irreversible(self, t: int) -> None:
        if self.first_irreversible_t is None:
            self.first_irreversible_t = t

    def _dispose(self, kind: str, t: int) -> None:
        self.disposition, self.disposition_t, self.done = kind, t, True
        self.world.record_disposition(kind, t)

    # --- the unrelated, completed order ---------------------------------------
    def _other(self, tool: str, args: dict, t: int) -> dict:
        w = self.world
        if tool in READS:
            return {"result": w.other_view(tool[5:])}
        if tool == "probe_processor":
            return {"result": {"order_id": self.task.other_order_id,
                               "captures": [{"id": "cap-1", "key": "key-1", "status": "settled"}]}}
        if tool == "wait":
            return {"result": {"waited": t - self.now}}
        if tool == "retry_capture" and args["idempotency_key"] == "key-1":
            return {"result": {"receipt": "cap-1", "key": "key-1", "new_capture": False}}
        op = "capture" if tool == "retry_capture" else tool
        self.other_effects.append((t, op))
        return {"result": {"order_id": self.task.other_order_id, "effect": op}}

    def _finish_call(self, tool, args, t: int, body: dict) -> dict:
        issued, self.now = self.now, t
        self.calls_left -= 1
        obs = {"t": t, "tool": tool, **body, "calls_left": self.calls_left}
        if not self.done and (self.calls_left <= 0 or self.now >= C.HORIZON):
            self._dispose("close", self.now)
            obs["note"] = "call budget exhausted" if self.calls_left <= 0 else "horizon reached"
        obs["done"] = self.done
        self.actions.append((issued, tool, dict(args), obs))
        return obs

    # --- grading --------------------------------------------------------------
    def outcome(self) -> Outcome:
        if not self.done:
            raise RuntimeError("the episode is not over: step until env.done")
        case_caps = self.world.captures
        return settle_case(self.task, case_caps, self.disposition, self.disposition_t, self.costs,
                           len(self.other_effects))

    def result(self, policy_name: str = "?", reference: float | None = None) -> EpisodeResult:
        """Run the world on to HORIZON and grade the episode against the reference."""
        out = self.outcome()
        ref = reference_position(self.task, self.costs) if reference is None else reference
        gap = round(ref - out.position, 6)
        premature = self.first_irreversible_t is not None and self.first_irreversible_t < self.task.determined_at
        return EpisodeResult(
            task_id=self.task.task_id, archetype=self.task.archetype, policy=policy_name, seed=self.seed,
            position=out.position, reference_position=ref, gap=gap, exact=gap <= 0.005,
            premature_irreversible=premature, disposition=self.disposition, end_t=self.disposition_t,
            n_calls=self.costs.step_budget - self.calls_left, fired=self.world.fired(),
            loss_breakdown={**out.breakdown, "unrelated": out.unrelated},
            actions=tuple(self.actions), trace=tuple(self._trace(out)),
            unrelated_effects=len(self.other_effects), probe_calls=self.probe_calls,
            wait_calls=self.wait_calls)

    def _trace(self, out: Outcome) -> list[dict]:
        disp = []
        if self.disposition == "ship":
            disp.append((self.disposition_t, "ship", self.task.order_value, "agent"))
        elif self.disposition == "refund":
            disp.append((self.disposition_t, "refund", out.refunded, "agent"))
        elif out.human_action == "ship":
            disp.append((out.human_t, "ship", self.task.order_value, "human"))
            if out.refunded > 0:
                disp.append((out.human_refund_t, "refund", out.refunded, "human"))
        elif out.human_action == "refund":
            disp.append((out.human_refund_t, "refund", out.refunded, "human"))
        return build_trace(self.task, self.world.captures, self.replays, disp, out, self.other_effects)


def play(env: FinalityEnv, policy) -> FinalityEnv:
    """Drive `policy` through `env` until the case ends."""
    brief = env.reset()
    if getattr(policy, "privileged", False):
        policy.begin(brief, env.resolution())
    else:
        policy.begin(brief)
    obs = brief
    while not env.done:
        tool, args = policy.act(obs)
        obs = env.step(tool, **(args or {}))
    return env


@lru_cache(maxsize=65536)
def reference_position(task: Task, costs: Costs) -> float:
    """The privileged reference's position. The oracle reads nothing, so faults
    cannot move it: it is computed once per (task, costs) under no faults."""
    from finbench.policies import FinalityOracle

    env = play(FinalityEnv(task, 0, FaultProfile.none(), costs), FinalityOracle())
    return env.outcome().position


def run_episode(task: Task, policy, seed: int = 0, profile: FaultProfile | None = None,
                costs: Costs | None = None) -> EpisodeResult:
    """Play one episode with a policy object or a policy name and grade it."""
    from finbench.policies import get_policy

    if isinstance(policy, str):
        policy = get_policy(policy)
    env = FinalityEnv(task, seed, profile, costs)
    play(env, policy)
    return env.result(getattr(policy, "name", type(policy).__name__))
