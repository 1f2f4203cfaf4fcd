"""One episode with its reference and its effect-level grade (SPEC §8, §9).

`run_episode` plays any policy reference on one task; `grade_episode` grades an
episode's trace against the benchmark's own contract, once per trace shape.
"""
from __future__ import annotations

import sys
from itertools import repeat
from operator import itemgetter

from finbench.agents.registry import as_ref
from finbench.memo import register
from finbench.running import origin as O
from finbench.running.stats import add
from finbench.grading import CHECKS, FIELDS_READ, Contract, grade_trace
from finbench.sim.task import Task
from finbench.sim.economics import Costs
from finbench.sim.env import FinalityEnv
from finbench.sim.faults import FaultProfile
from finbench.sim.play import play, policy_name
from finbench.sim.probe import ProbeMode
from finbench.sim.result import EpisodeResult
from finbench.sim.trace import build_trace, episode_inputs, trace_shape


OUTCOME = ("position", "gap", "exact", "disposition", "n_calls")
"""What a policy that has `episode_end(outcome)` is told when its case has ended."""


def tell_start(policy, task: Task, seed: int) -> None:
    """Tell the package's `ModelAgent` which (task, seed) it is about to play, to name its transcript: a
    twin pair's halves share their order id and their brief, which is all `begin` sees. No other policy is
    told (a task id names a twin half's outcome). `finbench eval` plays a policy inside a wrapper that holds
    it as `_policy`."""
    llm = sys.modules.get("finbench.agents.llm")  # not imported: no `ModelAgent` exists
    inner = getattr(policy, "_policy", policy)
    if llm is not None and isinstance(inner, llm.ModelAgent):
        inner.bind(task.task_id, seed)


def tell_end(policy, outcome: dict) -> None:
    """Tell a policy that has an `episode_end(outcome)` method (a `ModelAgent`: it closes its transcript)
    that its case has ended; `outcome` holds `OUTCOME`'s values."""
    end = getattr(policy, "episode_end", None)
    if callable(end):
        end(outcome)


def played(env: FinalityEnv, policy) -> FinalityEnv:
    """`play` a policy, telling it where its episode starts and ends (`tell_start`, `tell_end`)."""
    tell_start(policy, env.task, env.seed)
    play(env, policy)
    if callable(getattr(policy, "episode_end", None)):  # the result only for a policy that is told it
        res = env.result(policy_name(policy))
        tell_end(policy, {c: getattr(res, c) for c in OUTCOME})
    return env


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

    Example:
        >>> import finbench as fb
        >>> task = fb.make_corpus(n_tasks=9).tasks[0]
        >>> res = fb.run_episode(task, "finality_gate", seed=0)
        >>> res.policy, res.gap == res.reference_position - res.position
        ('finality_gate', True)
    """
    label = None
    # a class has `act` and `begin` too, but as a reference: it makes the policy
    if isinstance(policy, type) or not (hasattr(policy, "act") and hasattr(policy, "begin")):
        ref = as_ref(policy)
        policy, label = ref.make(), ref.label
    env = played(FinalityEnv(task, seed, profile, costs, probe=probe), policy)
    add(O.PLAYED, 1)
    return env.result(label or policy_name(policy))


def episode_contract(task) -> Contract:
    """The benchmark's own contract: capture the order value once, after
    authorisation, and touch no other order."""
    return Contract(task.order_id, task.order_value, op="capture")


_MISSING = object()  # a field absent from a record (the grader tells absent from None)
# What the grader reads, by record kind (its own declaration), `order` first: the key
# renames orders. Fields it never reads (`t`, `outcome`, `actor`, `by`, a summary's
# amount) are left out, so traces that differ only in those grade alike; the capture
# count reads `op`, `new_effect` and `order` of effects, which the grader reads too.
_FIELDS = {kind: tuple(sorted(f, key=lambda name: name != "order")) for kind, f in FIELDS_READ.items()}
_GET = {kind: itemgetter(*f) for kind, f in _FIELDS.items() if len(f) > 1}
_OTHER = ("seq",)  # an unknown kind is read for its seq
_RENAMED = frozenset(kind for kind, f in _FIELDS.items() if f[:1] == ("order",))  # the kinds whose `order` is read
_MEMO_SIZE = 1 << 15
_MEMO: dict = register("running.episode.grades", {}, keys="what the grader reads of a trace (`_canonical`)",
                       bound=_MEMO_SIZE)
_SHAPES: dict = register("running.episode.shapes", {}, keys="an ended episode's trace shape (`trace_shape`)",
                         bound=_MEMO_SIZE)


def _canonical(task, trace) -> tuple:
    """A key equal for two traces only if the grader must give them the same checks.

    Order ids are only ever compared for equality (with each other and with the
    contract's order), so they are renamed by first appearance, the contract's
    order first: traces of different tasks with the same shape share one key.
    Every value read is kept with its type, since the grader tells True from 1
    and 1 from 1.0 where `==` does not. Raises TypeError for a record that is
    not a plain dict or holds an unhashable value (the caller grades directly).
    """
    orders = {task.order_id: 0}
    out = [task.order_value.__class__, task.order_value]
    for rec in trace:
        if rec.__class__ is not dict:
            raise TypeError("not a plain record")
        kind = rec.get("kind", _MISSING)
        get = _GET.get(kind) if kind.__class__ is str else None
        try:
            vals = get(rec)  # every field present: the usual case
        except (TypeError, KeyError):  # no getter, or a field missing
            fields = (_FIELDS.get(kind, _OTHER) if isinstance(kind, str) else ())
            vals = tuple(map(rec.get, fields, repeat(_MISSING)))
        types = tuple(map(type, vals))
        if kind in _RENAMED and types[0] is str:  # renamed; its type (str) stays in the key
            vals = (orders.setdefault(vals[0], len(orders)),) + vals[1:]
        out += (kind.__class__, kind, types, vals)
    return tuple(out)


def grade_episode(task, trace) -> dict:
    """The effect-level verdict of one episode's trace, as row columns.

    Traces of the same shape (what the grader reads: kinds, seq numbers, ops,
    amounts, keys, receipts, flags, and which records name the case order) are
    graded once; most episodes repeat a handful of shapes.

    Args:
        task: The episode's task (its order is the contract's, see `episode_contract`).
        trace: The episode's records, e.g. `EpisodeResult.trace`.

    Returns:
        A fresh dict: `verdict` and `check_<name>` for each of `grading.CHECKS`,
        exactly as `grade_trace(list(trace), episode_contract(task))` gives them,
        and `capture_effects`, the new captures of the case order in the trace.
    """
    try:
        key = _canonical(task, trace)
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable field or an unusual record: no memo
        key = hit = None
    if hit is None:
        hit = _grade(task, trace)
        if key is not None:
            if len(_MEMO) >= _MEMO_SIZE:
                _MEMO.clear()
            _MEMO[key] = hit
    return dict(hit)


def grade_played(env: FinalityEnv, out) -> dict:
    """`grade_episode(env.task, trace)` of an ended episode whose outcome is `out`, without
    building its trace when an episode of the same shape (`finbench.sim.trace.trace_shape`) was
    graded before: the runner's path (a shape is cheaper to make than a trace, and two of
    three episodes repeat one). A fresh dict, as `grade_episode` gives."""
    inputs = episode_inputs(env, out)
    key = trace_shape(*inputs)
    hit = _SHAPES.get(key)
    if hit is None:
        # a shape keeps ticks, the grade memo only their order: most new shapes grade as an old one
        hit = grade_episode(env.task, build_trace(*inputs))
        if len(_SHAPES) >= _MEMO_SIZE:
            _SHAPES.clear()
        _SHAPES[key] = hit
    return dict(hit)


def _grade(task, trace) -> dict:
    v = grade_trace(list(trace), episode_contract(task))
    captures = sum(1 for r in trace if r.get("kind") == "effect" and r.get("op") == "capture"
                   and r.get("new_effect") and r.get("order") == task.order_id)
    return {"verdict": v.verdict, "capture_effects": captures, **{f"check_{k}": v.checks[k] for k in CHECKS}}
