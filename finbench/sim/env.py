"""The environment (tools in, JSON out) for one episode, and its result (SPEC §4, §8).

Outside agents call `FinalityEnv.step`, which checks every call and copies every observation; the package's
own policies are played (`sim.play.play`) through `FinalityEnv._call`, which skips that defensive work and
otherwise runs the same code: each tool's effect lives in `_case` and `_other` alone.
"""
from __future__ import annotations

import marshal
import numbers

from finbench.errors import bad, check_int, cut, show
from finbench.memo import memoised
from finbench.sim import constants as C
from finbench.sim.task import Task, check_task
from finbench.sim.economics import Costs, Money, Outcome, gap_of, price, settle_case, settle_money
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode, check_probe
from finbench.sim.reference import oracle_plan
from finbench.sim.result import EpisodeResult, episode_result
from finbench.sim.tools import ORDER_ONLY, READS, TOOLS, tool_costs, tool_ticks, validate
from finbench.sim.trace import build_trace, episode_inputs
from finbench.sim.world import World

IRREVERSIBLE = ("ship", "refund", "write_off")
ECHO = 200  # characters echoed of a bad call's tool name and strings (the error, the record, a row's calls)
_SYSTEM_OF = {tool: tool[len("read_"):] for tool in READS}


class FinalityEnv:
    """One task's episode, played through tool calls: `reset()`, then `step()` until `done`.

    One order whose payment is still settling across four systems of record (processor, ledger, ERP,
    bank). An agent sees the case only through tool calls; each costs simulated ticks and one call of the
    budget, and a terminal disposition (`ship`, `refund`, `write_off`, `escalate`, `close`) ends the case.
    Afterwards `result()` runs the world on to `HORIZON` and prices the position against the reference.

    Observations are plain JSON dicts (what a language model would see), each a fresh copy: editing one
    cannot change a later read or another episode. `step` never raises for a bad tool, argument or order
    id; it answers with an `"error"` (cut to a few hundred characters) and charges the call.

    Args:
        task: The task (one order and its hidden canonical log), e.g. from `make_corpus()`.
        seed: The fault seed; with `task` and `profile` it fixes every fault draw.
        profile: Which fault families fire and how often (default: `FaultProfile.default()`, all six at 0.30).
        costs: Tool ticks, the call budget and the economics (default: `Costs()`).
        double_effect: A logger self-test only: a replayed idempotency key silently charges again.
        probe: What `probe_processor` answers (default: `ProbeMode.full()`, SPEC §4's probe); see
            `finbench.sim.probe` for the other arms.

    Attributes:
        now (int): The current tick (`HANDOVER` after `reset`).
        done (bool): Whether the case has ended.
        calls_left (int): Calls left in the budget.
        actions (list): After `reset`, one `(issued_t, tool, args, observation)` per call, in order.
        errors (dict): After `reset`, each error message answered so far with its count (every call it
            answered with an `"error"`); `other_order_calls`: calls on the customer's other order.

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
        self.task = check_task(task, "FinalityEnv: task")
        self.seed = check_int("FinalityEnv", "seed", seed, 0)
        self.profile = profile if profile is not None else FaultProfile.default()
        if not isinstance(self.profile, FaultProfile):
            raise bad("FinalityEnv", "profile", profile, "a FaultProfile")
        self.costs = costs if costs is not None else Costs()
        self.double_effect = double_effect  # logger self-test: a replayed key silently charges again
        self.probe = check_probe("FinalityEnv", probe)
        self.world: World | None = None
        self.now = C.HANDOVER
        self.done = False
        self.calls_left = self.costs.step_budget

    @property
    def costs(self) -> Costs:
        """The prices, the call budget and each tool's ticks (set anew, each call's ticks follow)."""
        return self._costs

    @costs.setter
    def costs(self, costs: Costs) -> None:
        if not isinstance(costs, Costs):
            raise bad("FinalityEnv", "costs", costs, "a Costs")
        self._costs, self._ticks = costs, tool_costs(costs)  # the ticks are read at every call

    # --- lifecycle -------------------------------------------------------------
    def reset(self) -> dict:
        """Start (or restart) the episode at t = `HANDOVER` and return the case brief.

        Builds the task's world for this seed and profile (the fault schedule of every canonical delivery),
        puts the clock at `HANDOVER`, refills the call budget and forgets any earlier episode of this object.

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
        self._actions: list = []
        self.disposition: str | None = None
        self.disposition_t = C.HANDOVER
        self.first_irreversible_t: int | None = None
        self.replays: list = []
        self.other_effects: list = []
        self.probe_calls = self.wait_calls = self.other_order_calls = 0
        self.errors: dict[str, int] = {}  # each error message answered, with its count (the card reads them)
        self.told_resolution = False  # set by `resolution()`: the agent knows how the capture resolves
        self.probe_answers = 0  # probe calls that the probe mode answered (see `finbench.sim.probe`)
        self.saw_only_truth = True  # nothing it saw can a fault touch: no read of a system, only the full probe
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
            "tool_ticks": {"read": self.costs.read_ticks, "probe_processor": self.costs.probe_ticks, "other": 1},
            "seed": self.seed,
        }

    def resolution(self) -> dict:
        """What only the privileged reference is told (SPEC §7); the episode is marked privileged."""
        self.told_resolution = True
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
            tool: One of the twelve tools (`finbench.sim.tools.TOOL_NAMES`): the four
                reads (1 tick each), `probe_processor` (5 ticks), `wait`, `retry_capture`,
                `ship`, `refund`, `write_off`, `escalate`, `close` (1 tick each).
            **args: The tool's arguments, exactly as in `tool_schemas()`: every
                tool takes `order_id` (str); `wait` also takes `ticks` (int,
                1..600); `retry_capture` also takes `idempotency_key`
                (non-empty str).

        Returns:
            The observation, a fresh JSON-serialisable dict with:

            - `t` (int): the tick after the call.
            - `tool` (str): the tool called.
            - `result` (dict), on success: what the tool returned. A read gives the system's view
              (`system`, `order_id` and the system's fold: processor `authorization`/`captures`/
              `chargebacks`; ledger `lines`/`balances`/`balanced`; ERP `status`/`amount`/`disposition`;
              bank `lines`/`total`); `probe_processor` gives `order_id` and `captures` (`id`, `key`,
              `status` in settled/failed/unknown); `wait` gives `waited`; `retry_capture` gives `receipt`,
              `key`, `new_capture`; a disposition gives `order_id` and `disposition` (on the unrelated
              order: `order_id` and `effect`).
            - `error` (str), instead of `result`, when the call failed: unknown
              tool, bad or missing argument, unknown order id, or `ship` after
              the deadline. The call still costs one tick and one call (and is
              counted in `errors`, message by message).
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
        return self._step(tool, args)

    def _step(self, tool, args: dict) -> dict:
        """`step(tool, **args)` for `args` this call's own (`play` copies a policy's dict, unpacked)."""
        if self.world is None:
            raise RuntimeError("call reset() before step()")
        task = self.task
        if (tool.__class__ is str and tool in ORDER_ONLY and len(args) == 1 and not self.done
                and (order := args.get("order_id")).__class__ is str and order == task.order_id):
            # the usual call (a tool taking only the order, on the case order) passes every check below
            t = self.now + self._ticks[tool]
            if t > C.HORIZON:
                t = C.HORIZON
            outcome, body = self._case(tool, args, t, True)
            return self._finish_call(tool, args, t, outcome, body)
        if not isinstance(tool, str):
            tool = show(tool)  # observations are JSON: a tool that is no name is shown as text (and unknown)
        elif len(tool) > ECHO:  # no tool's name is this long: unknown, and echoed cut short
            tool = cut(tool, ECHO)
        if self.done:
            return {"t": self.now, "tool": tool, "error": "the case is closed", "done": True}
        if isinstance(t := args.get("ticks"), numbers.Integral) and t.__class__ not in (int, bool):
            args["ticks"] = int(t)  # numpy's integers play as the integers they are (the card reads them so)
        err = validate(tool, args)
        # a str subclass is the plain string it spells: what it equals or hashes to cannot pick an order or reach a memo
        for name in ("order_id", "idempotency_key") if err is None else ():
            if args.get(name, "").__class__ is not str:
                args[name] = str.__str__(args[name])
        order = args.get("order_id")
        if err is None and order not in (task.order_id, task.other_order_id):
            err = f"{tool}: unknown order {order!r}"
        # `args` is this call's own dict (`step` packs it afresh, `play` copies it): kept as it is
        if err is not None:  # a bad call: what it echoes is cut short (a valid one keeps its key whole)
            args = {k: cut(v, ECHO) if v.__class__ is str else v for k, v in args.items()}
            return self._finish_call(tool, args, min(self.now + 1, C.HORIZON), "error", cut(err, 4 * ECHO))
        t = min(self.now + tool_ticks(tool, args, self.costs), C.HORIZON)
        if order == task.other_order_id:
            self.other_order_calls += 1
            return self._finish_call(tool, args, t, *self._other(tool, args, t))
        return self._finish_call(tool, args, t, *self._case(tool, args, t, True))

    def _call(self, tool: str, args: dict) -> dict:
        """`step` for the package's own policies (see `finbench.sim.play.play`): the same state changes and
        observation, through the same `_case`. Their calls are well-formed, their `args` fresh dicts they never
        touch again, and they never mutate an observation, so arguments are neither re-validated nor copied and
        a read hands out the memoised fold itself. Anything unusual (another order, an unknown tool, a closed
        case) takes `step`."""
        if self.done or args.get("order_id") != self.task.order_id or tool not in TOOLS:
            return self.step(tool, **args)
        cost = self._ticks.get(tool)
        t = self.now + (cost if cost is not None else int(args["ticks"]))
        if t > C.HORIZON:
            t = C.HORIZON
        outcome, body = self._case(tool, args, t, False)
        return self._finish_call(tool, args, t, outcome, body)

    # --- the case order -------------------------------------------------------
    def _case(self, tool: str, args: dict, t: int, copy: bool) -> tuple[str, object]:
        """The effect of one call on the case order at t: `("result", ...)` or `("error", ...)`.

        `copy=False` (the fast path) hands out a read's memoised fold, noted in `_shared` so that `result()`
        copies it before anyone else sees it."""
        w = self.world
        system = _SYSTEM_OF.get(tool)
        if system is not None:
            self.saw_only_truth = False
            if not copy:
                self._shared.append(len(self._actions))
            return "result", w.read(system, t, copy)
        if tool == "wait":
            self.wait_calls += 1
            return "result", {"waited": t - self.now}
        if tool == "probe_processor":
            self.probe_calls += 1
            if self.probe.is_full:
                return "result", w.probe(t)
            self.saw_only_truth = False
            result, answered = self.probe.answer(w, t, self.probe_answers)
            self.probe_answers += answered
            return "result", result
        if tool == "retry_capture":
            key = args["idempotency_key"]
            used = next((c for c in w.captures if c.key == key), None)
            if used is not None:
                if self.double_effect:
                    # the faulty API charges again under the same key; the logger sees it, the agent does not
                    w.add_capture(key, t)
                else:
                    self.replays.append((t, key, used.id, False))
                return "result", {"receipt": used.id, "key": key, "new_capture": False}
            cap = w.add_capture(key, t)
            self._irreversible(t)
            return "result", {"receipt": cap.id, "key": key, "new_capture": True}
        # a disposition
        if tool == "ship" and t > C.SHIP_BY:
            return "error", (f"ship failed at t={t}: past the ship-by deadline (t={C.SHIP_BY}); "
                             "the customer cancelled")
        if tool in IRREVERSIBLE:
            self._irreversible(t)
        self._dispose(tool, t)
        return "result", {"order_id": self.task.order_id, "disposition": tool}

    def _irreversible(self, t: int) -> None:
        if self.first_irreversible_t is None:
            self.first_irreversible_t = t

    def _dispose(self, kind: str, t: int) -> None:
        self.disposition, self.disposition_t, self.done = kind, t, True
        self.world.record_disposition(kind, t)

    # --- the unrelated, completed order ---------------------------------------
    def _other(self, tool: str, args: dict, t: int) -> tuple[str, dict]:
        w = self.world
        if tool in READS:
            return "result", w.other_view(tool[5:])
        if tool == "probe_processor":
            return "result", {"order_id": self.task.other_order_id,
                              "captures": [{"id": C.ORIGINAL_CAPTURE, "key": C.ORIGINAL_KEY, "status": "settled"}]}
        if tool == "wait":
            return "result", {"waited": t - self.now}
        if tool == "retry_capture" and args["idempotency_key"] == C.ORIGINAL_KEY:
            return "result", {"receipt": C.ORIGINAL_CAPTURE, "key": C.ORIGINAL_KEY, "new_capture": False}
        op = "capture" if tool == "retry_capture" else tool
        self.other_effects.append((t, op))
        return "result", {"order_id": self.task.other_order_id, "effect": op}

    def _finish_call(self, tool, args, t: int, outcome: str, body) -> dict:
        """Spend the call: move the clock, count the budget, close the case if
        either runs out, and record the observation `{t, tool, result|error, calls_left[, note], done}`."""
        issued, self.now = self.now, t
        if outcome == "error":
            self.errors[body] = self.errors.get(body, 0) + 1
        left = self.calls_left = self.calls_left - 1
        if self.done or (left > 0 and t < C.HORIZON):
            obs = {"t": t, "tool": tool, outcome: body, "calls_left": left, "done": self.done}
        else:  # the budget or the clock ran out: the case closes itself
            self._dispose("close", t)
            obs = {"t": t, "tool": tool, outcome: body, "calls_left": left,
                   "note": "call budget exhausted" if left <= 0 else "horizon reached", "done": True}
        self._actions.append((issued, tool, args, obs))
        return obs

    # --- grading --------------------------------------------------------------
    def outcome(self) -> Outcome:
        """What the case came to once the world has run on to HORIZON (SPEC §5); a RuntimeError before the end."""
        if not self.done:
            raise RuntimeError("the episode is not over: step until env.done")
        return settle_case(self.task, self.world.captures, self.disposition, self.disposition_t, self.costs,
                           len(self.other_effects))

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
        gap, exact, premature = self.scores(out, ref)
        return episode_result(
            task_id=task.task_id, archetype=task.archetype, policy=policy_name, seed=self.seed,
            position=out.position, reference_position=ref, gap=gap, exact=exact,
            premature_irreversible=premature,
            disposition=self.disposition, end_t=self.disposition_t,
            n_calls=self.costs.step_budget - self.calls_left, fired=self.world.fired(),
            loss_breakdown={**out.breakdown, "unrelated": out.unrelated},
            actions=self._own_actions() if actions else (), trace=tuple(build_trace(*episode_inputs(self, out))),
            unrelated_effects=len(self.other_effects), probe_calls=self.probe_calls,
            wait_calls=self.wait_calls, privileged=self.told_resolution)

    def scores(self, out: Outcome, reference: float) -> tuple[float, bool, bool]:
        """`(gap, exact, premature_irreversible)` of the ended episode (SPEC §8): gap = reference - position,
        exact = gap within `MONEY_TOL`; premature: the first irreversible action came before determination."""
        first = self.first_irreversible_t
        return (*gap_of(reference, out.position), first is not None and first < self.task.determined_at)

    @property
    def actions(self) -> list:
        """One `(issued_t, tool, args, observation)` per call so far, each observation the
        caller's own (editing one changes no later read or episode)."""
        return list(self._own_actions())

    def calls(self) -> list[tuple[int, str, dict]]:
        """One `(issued_t, tool, args)` per call so far, without the observations (cheap)."""
        return [(issued, tool, args) for issued, tool, args, _ in self._actions]

    def _own_actions(self) -> tuple:
        """The actions, with every observation the result's own: a read of the fast path shares its
        fold with the world's memo, so it is copied here, lest editing a result change a later episode."""
        acts = self._actions
        if self._shared:
            acts = list(acts)
            for i in self._shared:
                issued, tool, args, obs = acts[i]
                acts[i] = (issued, tool, args, {**obs, "result": marshal.loads(marshal.dumps(obs["result"]))})
        return tuple(acts)


@memoised("sim.env.reference_position", keys="(task, costs): frozen values", bound=65536)
def reference_position(task: Task, costs: Costs) -> float:
    """The privileged reference's position: `oracle_plan` played on the task, priced under `costs`.

    The oracle reads nothing, so faults cannot move it: it is played once per task and what
    it sees of the costs (`Costs.simulated`), under no faults; other prices re-price its money.
    """
    return price(reference_money(task, costs.simulated()), costs).position


@memoised("sim.env.reference_money", keys="(task, the costs it sees): frozen values", bound=65536)
def reference_money(task: Task, costs: Costs) -> Money:
    """The reference's money on `task` under the `costs` it sees (`Costs.simulated`); see `reference_position`."""
    env = FinalityEnv(task, 0, FaultProfile.none(), costs)
    order = env.reset()["order_id"]
    # the plan's calls are well-formed: the fast path plays them as `step` would
    for tool, args in oracle_plan(env.resolution()):
        env._call(tool, {"order_id": order, **args})
    while not env.done:
        env._call("close", {"order_id": order})
    return settle_money(task, env.world.captures, env.disposition, env.disposition_t, len(env.other_effects))
