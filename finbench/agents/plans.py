"""Open-loop plans: wait, optionally retry, wait, one terminal action (SPEC §10, plan search).

A plan reads nothing and decides nothing from what it sees: its calls are
fixed before the episode starts. Its position therefore depends only on the
task's canonical log (when and how each capture resolves, the chargeback), the
times of its own calls and the costs, never on a fault draw: faults perturb
deliveries to the replicas, and a plan looks at no replica.

    first wait -> retry (none / original key / fresh key) -> second wait -> terminal action

9 x 3 x 9 x 5 = 1,215 plans (`all_plans`). Importing this module registers the
name "plan", so a plan goes wherever a policy reference does:

    evaluate(corpus, ["plan[action=ship,first=60,retry=fresh,second=120]"], seeds=[0])

Labels carry the knobs sorted by name (`policy_refs.policy_label`), and
`policy_refs.parse_label` reads any order back. For runs on several workers
use `plan_ref(knobs)`: its factory lives in this module, so a worker that
unpickles it imports the module (and the registration) too; a bare
"plan[...]" label names the registry, which a fresh worker process has not
filled unless something there imported `finbench.agents.plans`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator

from finbench.sim import constants as C
from finbench.errors import FinbenchError, PolicyError, bad, check_int
from finbench.agents.policies import Policy
from finbench.agents.registry import PolicyRef, policy_label, register_policy
from finbench.sim.tools import DISPOSITIONS

NAME = "plan"

WAITS: tuple[int, ...] = tuple(range(0, C.SHIP_BY - C.HANDOVER + 1, 60))
"""The nine wait lengths, 0, 60, ..., 480 ticks (0: no wait call).

Why these: one wait of 480 takes the clock from handover (120) to the ship-by
deadline (600), so the first wait alone spans the whole window in which
shipping is possible; 60 ticks is the bank's batch and a resolution no
decision here needs finer (every window a plan must hit is at least 200 ticks
wide: a late chargeback lands 200-600 ticks after the settlement). Two waits
reach 960 ticks past handover (t = 1080, plus a tick for a retry): the
latest a late chargeback can post (settlement by 480, chargeback within 600),
so a refund between settlement and chargeback is on the grid for every task.
A wait of 480 followed by `ship` arrives at 601 or later: the ship fails
(past the deadline) and the plan closes the case, as an open-loop plan would."""

RETRIES: dict[str, str | None] = {"none": None, "original": C.ORIGINAL_KEY, "fresh": "key-2"}
"""Retry choice -> idempotency key: no call, the original key (a replay, no new
capture), or a fresh key (a new capture: it double-charges an order whose
original capture settles)."""

ACTIONS: tuple[str, ...] = DISPOSITIONS  # one terminal action: any of the five dispositions
"""The five terminal dispositions (SPEC §4)."""

N_PLANS = len(WAITS) * len(RETRIES) * len(WAITS) * len(ACTIONS)  # 1,215


class Plan(Policy):
    """An open-loop plan: its calls are fixed by its four knobs; observations are never read.

    Args:
        first: ticks of the first wait, 0..600 (0: no call); the search uses `WAITS`.
        retry: "none", "original" (retry under `key-1`) or "fresh" (under `key-2`).
        second: ticks of the second wait, 0..600 (0: no call).
        action: the terminal disposition, one of `ACTIONS`.

    If the action fails (a `ship` past the deadline), the plan has nothing left
    to say and closes the case.

    Raises:
        PolicyError: a knob outside what is allowed.

    Example:
        >>> import finbench as fb
        >>> from finbench.agents.plans import Plan
        >>> task = fb.make_corpus(n_tasks=9).tasks[0]
        >>> res = fb.run_episode(task, Plan(first=60, retry="none", second=0, action="ship"))
        >>> [(t, tool) for t, tool, _, _ in res.actions]
        [(120, 'wait'), (180, 'ship')]
    """

    name = NAME
    # not declared `fast_path` (`sim.play.trusted`):
    # a plan makes at most four calls, so the checked path costs it little

    def __init__(self, first: int = 0, retry: str = "none", second: int = 0, action: str = "ship"):
        # PolicyError (not the plain FinbenchError of check_int), so `get_policy` passes the
        # message on instead of reading a bad value as an unknown knob
        try:
            self.first = check_int("plan", "first", first, 0, C.MAX_WAIT)
            self.second = check_int("plan", "second", second, 0, C.MAX_WAIT)
        except FinbenchError as e:
            raise PolicyError(str(e)) from None
        if retry not in RETRIES:
            raise PolicyError(str(bad("plan", "retry", retry, f"one of {', '.join(RETRIES)}")))
        if action not in ACTIONS:
            raise PolicyError(str(bad("plan", "action", action, f"one of {', '.join(ACTIONS)}")))
        self.retry, self.action = retry, action

    @property
    def knobs(self) -> dict:
        return {"first": self.first, "retry": self.retry, "second": self.second, "action": self.action}

    @property
    def label(self) -> str:
        return policy_label(NAME, self.knobs)

    def calls(self) -> list[tuple[str, dict]]:
        """The plan's calls in order (without `order_id`), e.g. [("wait", {"ticks": 60}), ("ship", {})]."""
        out: list[tuple[str, dict]] = []
        if self.first:
            out.append(("wait", {"ticks": self.first}))
        key = RETRIES[self.retry]
        if key is not None:
            out.append(("retry_capture", {"idempotency_key": key}))
        if self.second:
            out.append(("wait", {"ticks": self.second}))
        out.append((self.action, {}))
        return out

    def begin(self, brief: dict, resolution: dict | None = None) -> None:
        super().begin(brief)
        self._todo = self.calls()
        self._next = 0

    def act(self, obs: dict) -> tuple[str, dict]:
        # `obs` is deliberately unread: the plan is open-loop
        if self._next < len(self._todo):
            tool, args = self._todo[self._next]
            self._next += 1
            return self.call(tool, **args)
        return self.call("close")


@dataclass(frozen=True)
class PlanFactory:
    """A picklable zero-argument factory for one plan (see `plan_ref`)."""

    first: int
    retry: str
    second: int
    action: str

    def __call__(self) -> Plan:
        return Plan(self.first, self.retry, self.second, self.action)


def all_plans() -> Iterator[dict]:
    """The 1,215 plans as knob dicts, in a fixed order: first wait, retry, second wait, action
    (each in the order of `WAITS`, `RETRIES`, `ACTIONS`; the last varies fastest)."""
    for first, retry, second, action in itertools.product(WAITS, RETRIES, WAITS, ACTIONS):
        yield {"first": first, "retry": retry, "second": second, "action": action}


def plan_label(knobs: dict) -> str:
    """'plan[action=ship,first=60,retry=fresh,second=120]' (knobs sorted by name)."""
    return policy_label(NAME, dict(knobs))


def plan_ref(knobs: dict) -> PolicyRef:
    """A `PolicyRef` for one plan, with the label and cache identity a "plan[...]" label gets,
    and a factory defined here (so it works on any joblib worker)."""
    p = Plan(**knobs)
    label = p.label
    return PolicyRef(label, PlanFactory(p.first, p.retry, p.second, p.action), cache_id=f"registry:{label}",
                     builtin=True)


def charges_twice(knobs: dict, task) -> bool:
    """Whether the plan charges the customer twice on `task`: a fresh-key capture on an
    order whose original capture settles (the fresh capture then settles too on every
    settling archetype, SPEC §6)."""
    return knobs["retry"] == "fresh" and task.outcome == "settled"


register_policy(NAME, Plan, replace=True)
