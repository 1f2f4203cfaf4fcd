"""The guard `finbench eval` plays a user's agent in: a wall-clock limit per episode (SIGALRM in whichever
process plays it; on threads, checked at the agent's next call), and the agent's `SystemExit` and other
`BaseException`s turned into ordinary errors naming its line of code (`finbench.eval_cli`)."""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from finbench.errors import PolicyError

__all__ = ["AgentExit", "AgentTimeout", "Guarded"]


def _line(exc: BaseException, files) -> str:
    """' (line N, in f)': the last line of the agent's files that `exc` passed through, or ''."""
    mine = [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename in files or (f.filename[:1] != "<" and str(Path(f.filename).resolve()) in files)]
    return f" (line {mine[-1].lineno}, in {mine[-1].name})" if mine else ""


def _did(exc: BaseException, files) -> str:
    """What the agent did: 'called sys.exit(0) (line N, in act)' or 'raised Type: message (line N, in act)'."""
    from finbench.agents.loading import cause as _cause  # lazy: `grade` loads no simulator

    cause = _cause(exc, files)
    return cause.removeprefix("it ") if isinstance(exc, SystemExit) else f"raised {cause}"


def raised(exc: BaseException, label: str, files) -> str:
    """What the agent raised and where: its exception, play()'s note (policy, step, tick), its own line."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n.startswith("raised by policy")]
    if isinstance(exc, PolicyError) and not notes:  # a bad answer: the message names the policy and the step
        return f"the agent {label!r} broke the policy contract: {' '.join(str(exc).split())}"
    did = str(exc) if isinstance(exc, (AgentExit, AgentTimeout, Overtime)) else _did(exc, files)
    return f"the agent {label!r} {did}" + (f"; {notes[-1]}" if notes else "")


# --- the guard: a limit per episode, and no way out but an Exception -------------------------------------------

class AgentExit(RuntimeError):
    """What the agent raised that is not an `Exception` (SystemExit, a `BaseException` of its own), as one:
    the message says what it did and where. `play` notes the step, and the run ends as for any error."""


class AgentTimeout(RuntimeError):
    """The agent ran over the limit of one episode (``--episode-timeout``); the message names the episode."""


class Overtime(BaseException):
    """The alarm, raised in the agent's code: no `Exception`, so its ``except Exception`` does not stop it."""


class _Clock(threading.local):
    """A thread's clock: `inside` while the agent's code runs, `overdue` once the episode's limit has passed
    (the main thread's alarm sets it), `deadline` the monotonic time a thread's episode must end by (episodes
    played on threads, `--max-connections`: no signal reaches them, so the agent's next call checks it)."""

    inside = False
    overdue = False
    late = ""
    deadline = None


_CLOCK = _Clock()


def _on_alarm(signum, frame) -> None:
    _CLOCK.overdue = True
    if _CLOCK.inside:  # elsewhere (the engine mid-step) nothing is interrupted: the agent's next call raises
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # again in a second, should the agent swallow this one
        raise Overtime(_CLOCK.late)


def arm(limit: float | None) -> None:
    """Start the clock of one episode (or of making the policy) in this process."""
    _CLOCK.overdue, _CLOCK.late = False, f"ran over the limit of {limit or 0:g} s per episode (--episode-timeout)"
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        # a signal reaches the main thread only: here the agent's next call checks the thread's deadline
        _CLOCK.deadline = time.monotonic() + limit if limit else None
        return
    if signal.getsignal(signal.SIGALRM) is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
        import multiprocessing.util  # once per process

        if multiprocessing.parent_process() is not None:  # a worker
            multiprocessing.util.Finalize(None, _leave, exitpriority=-100)  # the last one before threads are joined
    signal.setitimer(signal.ITIMER_REAL, limit or 0)


def disarm() -> None:
    _CLOCK.deadline = None
    if hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) is _on_alarm:
        signal.setitimer(signal.ITIMER_REAL, 0)
    _CLOCK.overdue = False


@contextmanager
def alarm_restored():
    """The command's own process: SIGALRM's handler and timer as they were, once the command returns."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    handler, (delay, interval) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler if handler is not None else signal.SIG_DFL)
        if delay:
            signal.setitimer(signal.ITIMER_REAL, delay, interval)  # an outer timer goes on (late by this run)


def _leave() -> None:
    """A worker's exit: a thread the agent started and never ended (not a daemon) would keep the worker, and so
    the command waiting for it, alive once its work is done; the worker leaves without joining it."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _is_command(frame) -> bool:
    """Whether `frame` is `finbench eval`'s own (`eval_cli._eval`), named so as not to import it (it imports this)."""
    return frame.f_code.co_name == "_eval" and frame.f_globals.get("__name__") == "finbench.eval_cli"


def _episode(depth: int) -> str:
    """' on task T, seed S': the episode being played, from the stack above the caller's `depth`-th caller (the
    runner's task and seed, or play()'s environment); '' outside one."""
    frame = sys._getframe(depth + 1)
    while frame is not None and not _is_command(frame):  # not past the command itself
        names = frame.f_locals
        task, seed = names.get("task"), names.get("seed")
        if task is None or seed is None:
            env = names.get("env")
            task, seed = getattr(env, "task", None), getattr(env, "seed", None)
        if isinstance(getattr(task, "task_id", None), str) and type(seed) is int:
            return f" on task {task.task_id}, seed {seed}"
        frame = frame.f_back
    return ""


@dataclasses.dataclass(frozen=True)
class Guarded:
    """The user's `factory` under the guard: each policy it makes starts an episode's clock of `limit` seconds
    (None: no limit); `files` are the agent's, to name its line of code."""

    factory: Callable[[], Any] | None
    limit: float | None
    files: frozenset = frozenset()

    def __call__(self):
        arm(self.limit)
        return _Played(self.run(self.factory), self)

    def run(self, method, *args):
        """`method(*args)` as the agent's own code: under the clock, and raising nothing but an `Exception`."""
        clock = _CLOCK
        try:
            clock.inside = True
            if clock.overdue or (clock.deadline is not None and time.monotonic() > clock.deadline):
                raise Overtime
            return method(*args)
        except (Exception, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the clock, sys.exit, or a BaseException of the agent's own
            raise self.stopped(exc) from None
        finally:
            clock.inside = False

    def stopped(self, exc: BaseException) -> RuntimeError:
        """The `Exception` that ends the run for `exc`, a `BaseException` the agent's code let out."""
        if isinstance(exc, Overtime):
            _CLOCK.inside = False
            disarm()
            return AgentTimeout(_CLOCK.late + _episode(2) + _line(exc, self.files))
        return AgentExit(_did(exc, self.files))


class _Played:
    """The user's policy as played: begin and act run under its `Guarded`; any other attribute is its own."""

    def __init__(self, policy, guard: Guarded):
        self._policy, self._guard = policy, guard

    @property
    def name(self) -> str:
        own = getattr(self._policy, "name", None)  # as play() names a policy
        return own if isinstance(own, str) else type(self._policy).__name__

    def __getattr__(self, attr: str):
        if attr in ("_policy", "_guard"):  # not set yet (a copy being made)
            raise AttributeError(attr)
        return getattr(self._policy, attr)

    def begin(self, *args):
        return self._guard.run(self._policy.begin, *args)

    def act(self, observation):  # Guarded.run, inlined: this is every step of every episode
        clock = _CLOCK
        try:
            clock.inside = True
            if clock.overdue or (clock.deadline is not None and time.monotonic() > clock.deadline):
                raise Overtime
            return self._policy.act(observation)
        except (Exception, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - as in Guarded.run
            raise self._guard.stopped(exc) from None
        finally:
            clock.inside = False
