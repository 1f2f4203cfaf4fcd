"""The environment (tools in, JSON out), one episode, and its result (SPEC §4, §8).

Outside agents call `FinalityEnv.step`, which checks every call and copies every
observation. The package's own policies are played (`play`) through a fast path
that skips that defensive work and gives the identical episode.
"""
from __future__ import annotations

import gc
import marshal
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

from finbench.sim import constants as C
from finbench.sim.corpus import Task
from finbench.sim.economics import Costs, Outcome, settle_case
from finbench.errors import PolicyError, bad, check_int, show
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode, check_probe
from finbench.sim.tools import READS, TOOLS, tool_ticks, validate
from finbench.sim.trace import build_trace
from finbench.sim.trace import clear_memo as clear_grades
from finbench.sim.world import World
from finbench.sim.world import clear_memos as clear_worlds

IRREVERSIBLE = ("ship", "refund", "write_off")
_SYSTEM_OF = {tool: tool[len("read_"):] for tool in READS}


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


_RESULT_FIELDS = tuple(EpisodeResult.__dataclass_fields__)
_OUTCOMES: dict = {}  # settle_case memo, see `FinalityEnv.outcome`
_OUTCOMES_SIZE = 1 << 14


def _episode_result(**values) -> EpisodeResult:
    """`EpisodeResult(**values)` without the frozen dataclass's field-by-field
    `object.__setattr__` (a fifth of a short episode's cost): the same object,
    attributes set in declaration order. Any other set of names takes the
    constructor, so a field added later cannot be skipped silently."""
    if tuple(values) != _RESULT_FIELDS:
        return EpisodeResult(**values)
    res = object.__new__(EpisodeResult)
    res.__dict__.update(values)
    return res


class FinalityEnv:
    """One task's episode, played through tool calls: `reset()`, then `step()` until `done`.

    The environment holds one order whose payment is still settling across four
    systems of record (processor, ledger, ERP, bank). An agent sees the case only
    through tool calls; each call costs simulated ticks and one call of the
    budget, and a terminal disposition (`ship`, `refund`, `write_off`,
    `escalate`, `close`) ends the case. Afterwards `result()` runs the world on
    to `HORIZON` and prices the agent's position against the privileged
    reference.

    Observations are plain JSON-serialisable dicts (what a language model would
    see), each a fresh copy: editing one cannot change a later read or another
    episode. `step` never raises for a bad tool, argument or order id; it answers
    with an `"error"` and charges the call.

    Args:
        task: The task (one order and its hidden canonical log), e.g. from
            `make_corpus()`.
        seed: The fault seed; with `task` and `profile` it fixes every fault draw.
        profile: Which fault families fire and how often (default:
            `FaultProfile.default()`, all six at 0.30).
        costs: Tool ticks, the call budget and the economics (default: `Costs()`).
        double_effect: A logger self-test only: a replayed idempotency key
            silently charges again.
        probe: What `probe_processor` answers (default: `ProbeMode.full()`,
            SPEC §4's probe); see `finbench.sim.probe` for the other arms.

    Attributes:
        now (int): The current tick (`HANDOVER` after `reset`).
        done (bool): Whether the case has ended.
        calls_left (int): Calls left in the budget.
        actions (list): After `reset`, one `(issued_t, tool, args, observation)`
            per call, in order.

    Example:
        >>> import finbench as fb
        >>> env = fb.FinalityEnv(fb.make_corpus(n_tasks=9).tasks[0], seed=0)
        >>> brief = env.reset()
        >>> obs = env.step("probe_processor", order_id=brief["order_id"])
        >>> obs["t"], obs["calls_left"]
        (125, 39)
        >>> while not env.done:
        ...     obs = env.step("ship", order_id=brief["order_id"])
        >>> env.result("ship-at-once").disposition
        'ship'
    """

    def __init__(self, task: Task, seed: int = 0, profile: FaultProfile | None = None,
                 costs: Costs | None = None, *, double_effect: bool = False, probe: ProbeMode | None = None):
        if not isinstance(task, Task):
            raise bad("FinalityEnv", "task", task, "a Task (make_task, or a corpus's tasks)")
        self.task = task
        self.seed = check_int("FinalityEnv", "seed", seed, 0)
        self.profile = profile if profile is not None else FaultProfile.default()
        self.costs = costs if costs is not None else Costs()
        if not isinstance(self.profile, FaultProfile):
            raise bad("FinalityEnv", "profile", profile, "a FaultProfile")
        if not isinstance(self.costs, Costs):
            raise bad("FinalityEnv", "costs", costs, "a Costs")
        self.double_effect = double_effect  # logger self-test: a replayed key silently charges again
        self.probe = check_probe("FinalityEnv", probe)
        self.world: World | None = None
        self.now = C.HANDOVER
        self.done = False
        self.calls_left = self.costs.step_budget

    # --- lifecycle -------------------------------------------------------------
    def reset(self) -> dict:
        """Start (or restart) the episode at t = `HANDOVER` and return the case brief.

        Builds the task's world for this seed and profile (the fault schedule of
        every canonical delivery), puts the clock at `HANDOVER`, refills the
        call budget and forgets any earlier episode of this object.

        Returns:
            The brief, a dict with:

            - `order_id` (str): the case order, e.g. `"ord-0042"`.
            - `order_value` (float): its value.
            - `t` (int): the current tick, `HANDOVER` (120).
            - `ship_by` (int): the last tick at which `ship` succeeds (600).
            - `horizon` (int): the tick the world runs to (1800); reaching it
              ends the case as a `close`.
            - `calls_left` (int): the call budget (`Costs.step_budget`, 40).
            - `capture` (dict): the original capture,
              `{"id": "cap-1", "key": "key-1", "submitted_at": 10}`.
            - `customer_orders` (list[str]): the customer's other, completed
              order id (acting on it is an unrelated-state violation).
            - `tool_ticks` (dict): ticks per call, `{"read": ..,
              "probe_processor": .., "other": 1}` (`wait` costs its ticks).
            - `seed` (int): the fault seed.

        Example:
            >>> import finbench as fb
            >>> env = fb.FinalityEnv(fb.make_corpus(n_tasks=9).tasks[0], seed=0)
            >>> brief = env.reset()
            >>> brief["t"], brief["calls_left"], brief["capture"]["key"]
            (120, 40, 'key-1')
        """
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
        self.probe_answers = 0  # probe calls that the probe mode answered (see `finbench.sim.probe`)
        self._shared: list[int] = []  # actions whose observation holds a memoised fold (see `_call`)
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
        """Make one tool call: spend its ticks, then observe or act at the new time.

        A read or probe issued at `now` observes the world at `now + cost`;
        `ship` succeeds only if `now + cost <= ship_by`. Every call, valid or
        not, uses one call of the budget. The case ends at the first successful
        disposition of the case order; an exhausted budget or the clock reaching
        `horizon` ends it as a `close`.

        Args:
            tool: One of the twelve tools (`finbench.sim.tools.TOOL_NAMES`):
                `read_processor`, `read_ledger`, `read_erp`, `read_bank` (1 tick
                each), `probe_processor` (5 ticks), `wait`, `retry_capture`,
                `ship`, `refund`, `write_off`, `escalate`, `close` (1 tick each).
            **args: The tool's arguments, exactly as in `tool_schemas()`: every
                tool takes `order_id` (str); `wait` also takes `ticks` (int,
                1..600); `retry_capture` also takes `idempotency_key`
                (non-empty str).

        Returns:
            The observation, a fresh JSON-serialisable dict with:

            - `t` (int): the tick after the call.
            - `tool` (str): the tool called.
            - `result` (dict), on success: what the tool returned. A read gives
              the system's view (`system`, `order_id` and the system's fold:
              processor `authorization`/`captures`/`chargebacks`; ledger
              `lines`/`balances`/`balanced`; ERP `status`/`amount`/`disposition`;
              bank `lines`/`total`); `probe_processor` gives `order_id` and
              `captures` (`id`, `key`, `status` in settled/failed/unknown);
              `wait` gives `waited`; `retry_capture` gives `receipt`, `key`,
              `new_capture`; a disposition gives `order_id` and `disposition`
              (on the unrelated order: `order_id` and `effect`).
            - `error` (str), instead of `result`, when the call failed: unknown
              tool, bad or missing argument, unknown order id, or `ship` after
              the deadline. The call still costs one tick and one call.
            - `calls_left` (int): the budget left.
            - `note` (str), only when the call ended the case without a
              disposition: `"call budget exhausted"` or `"horizon reached"`.
            - `done` (bool): whether the case has ended.

            Once the case has ended, a further call changes nothing and returns
            `{"t", "tool", "error": "the case is closed", "done": True}`.

        Raises:
            RuntimeError: `reset()` has not been called.

        Example:
            >>> import finbench as fb
            >>> env = fb.FinalityEnv(fb.make_corpus(n_tasks=9).tasks[0], seed=0)
            >>> order = env.reset()["order_id"]
            >>> obs = env.step("wait", order_id=order, ticks=30)
            >>> obs["t"], obs["result"], obs["calls_left"], obs["done"]
            (150, {'waited': 30}, 39, False)
            >>> env.step("wait", order_id=order, ticks=0)["error"]
            'wait: ticks must be an integer in 1..600, got 0'
            >>> env.step("read_processor", order_id=order)["result"]["captures"][0]["status"]
            'submitted'
        """
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
            return self._finish_call(tool, dict(args), min(self.now + 1, C.HORIZON), {"error": err})
        t = min(self.now + tool_ticks(tool, args, self.costs), C.HORIZON)
        if order == task.other_order_id:
            return self._finish_call(tool, dict(args), t, self._other(tool, args, t))
        return self._finish_call(tool, dict(args), t, self._case(tool, args, t))

    def _call(self, tool: str, args: dict) -> dict:
        """`step` for the package's own policies (see `play`): the same state
        changes and the same observation, without the defensive work they do
        not need.

        Their calls are well-formed, their `args` are fresh dicts they never
        touch again, and they never mutate an observation, so arguments are
        neither re-validated nor copied and a read hands out the memoised fold
        itself. Reads and waits, most calls, are finished here; anything unusual
        (another order, an unknown tool, a closed case) takes the checked path.
        """
        if self.done or args.get("order_id") != self.task.order_id or tool not in TOOLS:
            return self.step(tool, **args)
        now = self.now
        system = _SYSTEM_OF.get(tool)
        if system is not None:
            t = now + self.costs.read_ticks
            if t > C.HORIZON:
                t = C.HORIZON
            self._shared.append(len(self.actions))
            result = self.world.read(system, t, copy=False)
        elif tool == "wait":
            t = now + int(args["ticks"])
            if t > C.HORIZON:
                t = C.HORIZON
            self.wait_calls += 1
            result = {"waited": t - now}
        else:
            t = min(now + tool_ticks(tool, args, self.costs), C.HORIZON)
            return self._finish_call(tool, args, t, self._case(tool, args, t))
        # as `_finish_call`, with the observation built in one go
        self.now = t
        left = self.calls_left = self.calls_left - 1
        obs = {"t": t, "tool": tool, "result": result, "calls_left": left}
        if left <= 0 or t >= C.HORIZON:
            self._dispose("close", t)
            obs["note"] = "call budget exhausted" if left <= 0 else "horizon reached"
        obs["done"] = self.done
        self.actions.append((now, tool, args, obs))
        return obs

    # --- the case order -------------------------------------------------------
    def _case(self, tool: str, args: dict, t: int) -> dict:
        w = self.world
        if tool in READS:
            return {"result": w.read(tool[5:], t)}
        if tool == "probe_processor":
            # both `step` and `_call` come here: every probe mode is honoured on either path
            self.probe_calls += 1
            if self.probe.is_full:
                return {"result": w.probe(t)}
            result, answered = self.probe.answer(w, t, self.probe_answers)
            self.probe_answers += answered
            return {"result": result}
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
        self.actions.append((issued, tool, args, obs))
        return obs

    # --- grading --------------------------------------------------------------
    def outcome(self) -> Outcome:
        """What the case came to once the world has run on to HORIZON (SPEC §5).

        Raises:
            RuntimeError: the episode is not over.
        """
        if not self.done:
            raise RuntimeError("the episode is not over: step until env.done")
        caps = self.world.captures
        # settle_case reads the captures' terminal times and outcomes only; many
        # episodes of a task end alike (the same disposition at the same tick)
        key = (id(self.task), id(self.costs), self.disposition, self.disposition_t,
               len(self.other_effects), tuple([(c.terminal_at, c.outcome) for c in caps]))
        hit = _OUTCOMES.get(key)
        if hit is not None:
            return hit[2]
        out = settle_case(self.task, caps, self.disposition, self.disposition_t, self.costs,
                          len(self.other_effects))
        if len(_OUTCOMES) >= _OUTCOMES_SIZE:
            _OUTCOMES.clear()
        # the entry holds the task and costs, so their ids cannot be reused while it lives
        _OUTCOMES[key] = (self.task, self.costs, out)
        return out

    def result(self, policy_name: str = "?", reference: float | None = None, *,
               actions: bool = True) -> EpisodeResult:
        """Run the world on to HORIZON and grade the episode against the reference.

        Args:
            policy_name: The label stored in the result.
            reference: The reference position, if already known (else computed).
            actions: False leaves `EpisodeResult.actions` empty, for callers that
                never read them (the runner's rows): it spares copying the
                observations of an episode played by a built-in policy.

        Raises:
            RuntimeError: the episode is not over.
        """
        out = self.outcome()
        task = self.task
        ref = reference_position(task, self.costs) if reference is None else reference
        gap = round(ref - out.position, 6)
        first = self.first_irreversible_t
        return _episode_result(
            task_id=task.task_id, archetype=task.archetype, policy=policy_name, seed=self.seed,
            position=out.position, reference_position=ref, gap=gap, exact=gap <= 0.005,
            premature_irreversible=first is not None and first < task.determined_at,
            disposition=self.disposition, end_t=self.disposition_t,
            n_calls=self.costs.step_budget - self.calls_left, fired=self.world.fired(),
            loss_breakdown={**out.breakdown, "unrelated": out.unrelated},
            actions=self._own_actions() if actions else (), trace=tuple(self._trace(out)),
            unrelated_effects=len(self.other_effects), probe_calls=self.probe_calls,
            wait_calls=self.wait_calls)

    def _own_actions(self) -> tuple:
        """The actions, with every observation the result's own: a read of the
        fast path shares its fold with the world's memo, so it is copied here,
        lest editing a result change a later episode."""
        acts = self.actions
        if self._shared:
            acts = list(acts)
            for i in self._shared:
                issued, tool, args, obs = acts[i]
                acts[i] = (issued, tool, args, {**obs, "result": marshal.loads(marshal.dumps(obs["result"]))})
        return tuple(acts)

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


def trusted(policy) -> bool:
    """Whether `play` may drive `policy` through the fast path.

    Only the package's own policies qualify: their class itself (not a base
    class) sets `trusted = True` and lives in `finbench.agents.policies`. They make
    well-formed calls and never mutate an observation. A user's policy, even a
    subclass of a built-in one, always goes through the public `step`.
    """
    cls = type(policy)
    return vars(cls).get("trusted") is True and cls.__module__ == "finbench.agents.policies"


def play(env: FinalityEnv, policy) -> FinalityEnv:
    """Drive `policy` through `env` until the case ends.

    A built-in policy (see `trusted`) is stepped through `FinalityEnv._call`,
    which gives the same observations and the same episode as `step`, minus the
    argument checks and copies; every other policy goes through `step`.
    """
    brief = env.reset()
    if getattr(policy, "privileged", False):
        policy.begin(brief, env.resolution())
    else:
        policy.begin(brief)
    obs = brief
    if trusted(policy):
        call, act = env._call, policy.act
        while not env.done:
            tool, args = act(obs)
            obs = call(tool, args)
        close = getattr(policy, "close", None)  # a routine: free its suspended generator
        if close is not None:
            close()
        return env
    step = 0
    while not env.done:
        step += 1
        try:
            answer = policy.act(obs)
        except Exception as exc:
            exc.add_note(f"raised by policy {_policy_name(policy)!r}.act at step {step} (t={env.now})")
            raise
        tool, args = _checked_answer(policy, answer, step, env.now)
        obs = env.step(tool, **args)
    return env


def _policy_name(policy) -> str:
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else type(policy).__name__


def _checked_answer(policy, answer, step: int, now: int) -> tuple[str, dict]:
    """`(tool, args)` from what a policy's `act` returned, or an error naming the policy and step."""
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and (answer[1] is None or isinstance(answer[1], dict)):
        tool, args = answer
        if all(isinstance(k, str) for k in (args or {})):
            return tool, dict(args or {})
    raise PolicyError(f"policy {_policy_name(policy)!r} at step {step} (t={now}): act(observation) must return "
                      f"(tool, args), a tool name and a dict of arguments such as ('wait', {{'order_id': ..., "
                      f"'ticks': 30}}); it returned {show(answer)}")


@contextmanager
def batch_mode():
    """Run many episodes with the cyclic garbage collector paused.

    An episode allocates thousands of short-lived dicts and lists, which sets
    off collections that find nothing: reference counting frees all of it
    (`play` closes a built-in routine, whose suspended generator would
    otherwise keep a cycle). With long-lived caches in the heap, each of those
    collections costs a walk over them; pausing saves about a third of the
    runtime. Use it around a batch (a runner chunk): a user's policy that does
    build cycles leaves them to the collector, which is resumed on the way out.
    Nested use, or a collector already off, is left as it is.

    Example:
        >>> import finbench as fb
        >>> from finbench.sim.env import batch_mode, run_episode
        >>> task = fb.make_corpus(n_tasks=9).tasks[0]
        >>> with batch_mode():
        ...     results = [run_episode(task, "sop", seed) for seed in range(5)]
        >>> len(results)
        5
    """
    if not gc.isenabled():  # nested, or the caller manages the collector
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def clear_memos() -> None:
    """Forget every memo of the engine: worlds and their folds and draws, settled
    outcomes, grades and reference positions. No result depends on them; a
    benchmark clears them to measure from cold."""
    clear_worlds()
    clear_grades()
    _OUTCOMES.clear()
    reference_position.cache_clear()


@lru_cache(maxsize=65536)
def reference_position(task: Task, costs: Costs) -> float:
    """The privileged reference's position. The oracle reads nothing, so faults
    cannot move it: it is computed once per (task, costs) under no faults."""
    from finbench.agents.policies import FinalityOracle

    env = play(FinalityEnv(task, 0, FaultProfile.none(), costs), FinalityOracle())
    return env.outcome().position


def run_episode(task: Task, policy, seed: int = 0, profile: FaultProfile | None = None,
                costs: Costs | None = None, probe: ProbeMode | None = None) -> EpisodeResult:
    """Play one episode and grade it.

    Args:
        policy: a policy object, or any policy reference `evaluate` takes (a name, a
            label with knobs such as "sop[patience=60]", a `(name, knobs)` pair, a
            class or a factory); a reference makes a fresh policy.

        probe: the probe mode (default: `ProbeMode.full()`).

    Raises:
        PolicyError: an unknown policy, or a policy whose `act` returns something
            other than `(tool, args)`.
    """
    label = None
    # a class has `act` and `begin` too, but as a reference: it makes the policy
    if isinstance(policy, type) or not (hasattr(policy, "act") and hasattr(policy, "begin")):
        from finbench.agents.registry import as_ref

        ref = as_ref(policy)
        policy, label = ref.make(), ref.label
    env = FinalityEnv(task, seed, profile, costs, probe=probe)
    play(env, policy)
    return env.result(label or _policy_name(policy))
