"""Driving a policy through an environment: the loop every episode runs.

A policy is any object with `begin(brief)` and `act(observation) -> (tool, args)`
(SPEC §8); this module knows that interface and nothing of any particular policy.
"""
from __future__ import annotations

import gc
import inspect
from contextlib import contextmanager

from finbench.errors import PolicyError, show
from finbench.memo import memoised
from finbench.sim.env import FinalityEnv

KNOBS = (int, float, str, bool, type(None))
"""What a trusted policy's own attributes may hold: its knobs, plain values its code reads and never calls."""
_DECLARED: set = set()


def fast_path(cls: type) -> type:
    """Declare a class of the package's own policies trusted (a class decorator, used by the agents layer on
    the nine and their kin and on the exploit search's routines): it makes well-formed calls on fresh
    argument dicts and never mutates an observation, so `play` may drive it through `FinalityEnv._call`.
    A subclass is not declared by its base's declaration."""
    _DECLARED.add(cls)
    return cls


def trusted(policy) -> bool:
    """Whether `play` may drive `policy` through the fast path.

    Only an instance of a class the package declared (`fast_path`), holding nothing of its own but plain
    knobs (`KNOBS`): an instance whose `act`, `begin` or `drive` was replaced, or that was given anything
    else, is played as a user's, through the public `step`, as is any subclass. Ask before `begin` (which
    gives the policy its case's state)."""
    if not _trusted_class(type(policy)):
        return False
    own = getattr(policy, "__dict__", None)
    return own is None or all(type(v) in KNOBS for v in own.values())


@memoised("sim.play.trusted", keys="a policy's class (asked twice an episode)", bound=256)
def _trusted_class(cls: type) -> bool:
    return cls in _DECLARED


def play(env: FinalityEnv, policy) -> FinalityEnv:
    """Drive `policy` through `env` until the case ends.

    A built-in policy (see `trusted`) is stepped through `FinalityEnv._call`,
    which gives the same observations and the same episode as `step`, minus the
    argument checks and copies; every other policy goes through `step`.
    """
    brief = env.reset()
    fast = trusted(policy)  # before `begin`, which gives it its case's state
    if getattr(policy, "privileged", False):
        if not _takes_resolution(policy.begin):
            raise PolicyError(f"policy {policy_name(policy)!r} is privileged (privileged = True), so it is told the "
                              "resolution: its begin must take (brief, resolution)")
        policy.begin(brief, env.resolution())
    else:
        policy.begin(brief)
    obs = brief
    if fast:
        drive = getattr(policy, "drive", None)
        if drive is not None:  # a routine: it drives itself through the fast path, as the loop below would
            drive(env._call)
        call, act = env._call, policy.act
        while not env.done:
            tool, args = act(obs)
            obs = call(tool, args)
        close = getattr(policy, "close", None)  # a routine: free its suspended generator
        if close is not None:
            close()
        return env
    call = env._step  # = env.step(tool, **args) on a copy of the policy's dict (not packed twice)
    step = 0
    while not env.done:
        step += 1
        try:
            answer = policy.act(obs)
        except Exception as exc:
            exc.add_note(f"raised by policy {policy_name(policy)!r}.act at step {step} (t={env.now})")
            raise
        if answer.__class__ is tuple and len(answer) == 2 and answer[1].__class__ is dict:
            # the usual answer, told here at every call; anything else is `_checked_answer`'s
            for k in answer[1]:
                if k.__class__ is not str:
                    break
            else:
                obs = call(answer[0], {**answer[1]})
                continue
        tool, args = _checked_answer(policy, answer, step, env.now)
        obs = call(tool, {**args})
    return env


def _takes_resolution(begin) -> bool:
    """Whether `begin(brief, resolution)` binds; a method of the package's own is looked at once
    (a user's function is looked at every time: it can be replaced or rewrapped between runs)."""
    func = getattr(begin, "__func__", None)
    if func is not None and getattr(begin, "__self__", None) is not None and \
            (getattr(func, "__module__", None) or "").startswith("finbench."):
        return _method_takes_resolution(func)
    return _binds(begin, 2)


@memoised("sim.play.takes_resolution", keys="a method of the package's own (its code never changes)", bound=256)
def _method_takes_resolution(func) -> bool:
    return _binds(func, 3)  # self, brief, resolution


def _binds(func, n: int) -> bool:
    try:
        inspect.signature(func).bind(*[None] * n)
    except (TypeError, ValueError):
        return False
    return True


def policy_name(policy) -> str:
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else type(policy).__name__


def _checked_answer(policy, answer, step: int, now: int) -> tuple[str, dict]:
    """`(tool, args)` from what a policy's `act` returned, or an error naming the policy and step."""
    # `play` tells the usual answer (a tuple, a plain dict, plain str keys) itself: here come the rest
    if isinstance(answer, (tuple, list)) and len(answer) == 2:
        tool, args = answer
        if args is None:
            return tool, {}
        if isinstance(args, dict):
            for k in args:
                if not isinstance(k, str):
                    break
            else:  # `play` copies the arguments, as `step(tool, **args)` would: the policy keeps its dict
                return tool, args
    raise PolicyError(f"policy {policy_name(policy)!r} at step {step} (t={now}): act(observation) must return "
                      f"(tool, args), a tool name and a dict of arguments such as ('wait', {{'order_id': ..., "
                      f"'ticks': 30}}); it returned {show(answer)}")


@contextmanager
def batch_mode(cycles: bool = True):
    """Run many episodes with the cyclic garbage collector paused.

    An episode allocates thousands of short-lived dicts and lists, which sets
    off collections that find nothing: reference counting frees all of it
    (`play` closes a built-in routine, whose suspended generator would
    otherwise keep a cycle). With long-lived caches in the heap, each of those
    collections costs a walk over them; pausing saves about a third of the
    runtime. Use it around a batch (a runner chunk): a user's policy that does
    build cycles leaves them to the collector, which is resumed on the way out.
    Nested use, or a collector already off, is left as it is. `cycles=False` says the batch
    played only the package's own policies (`trusted`), which make none (a test checks it):
    then there is nothing for the closing collection to find, and it is skipped.

    Example:
        >>> import finbench as fb
        >>> from finbench.sim.play import batch_mode
        >>> task = fb.make_corpus(n_tasks=9).tasks[0]
        >>> with batch_mode():
        ...     results = [fb.run_episode(task, "sop", seed) for seed in range(5)]
        >>> len(results)
        5
    """
    if not gc.isenabled():  # nested, or the caller manages the collector
        yield
        return
    # the caller's young garbage is collected now, while the young generation is small: what is
    # frozen at the end must be only what the batch left alive
    gc.collect(0)
    gc.disable()
    try:
        yield
    finally:
        # what the batch left alive (memos, rows) would be walked by the next collection, and
        # every later one, to find nothing: the batch's own cycles (a user's policy may make
        # some) are collected once, young, and the survivors frozen out of the collector's walks
        if cycles:
            gc.collect(0)
        gc.freeze()
        _froze[0] = True
        gc.enable()


_froze = [False]  # a batch froze survivors that no `thawed` has handed back yet (a batch run alone, in a worker)


@contextmanager
def thawed():
    """Hand back to the collector, on the way out, whatever `batch_mode` froze inside, and what a batch run
    alone froze before (a direct `run_chunk`), unless only the caller froze objects, its own: a frozen object is
    never collected, so a user's reference cycles that become garbage later would be kept for good.
    `evaluate` runs its batches inside it."""
    # counting the frozen objects walks them all: asked only when none of them are known to be a batch's
    # (once a batch's survivors were left frozen, each evaluate counted them: 74 ms at 736,000)
    ours = _froze[0] or gc.get_freeze_count() == 0
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()
            _froze[0] = False
