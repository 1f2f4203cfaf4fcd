"""Episodes that overlap their waiting: up to N at once in threads, results in the order asked.

An agent that waits on something outside the process (a language model's server) spends its episode
waiting; `overlapped` keeps up to `max_connections` such episodes in flight, each on its own thread with
its own agent, and hands the results back in the order of the items, whatever order they finish in.
Nothing here decides a row: each episode is the same function of its task, seed and agent as when played
alone. What the threads share is made safe for them by design:

- the engine's memos are pure functions of their keys, read and filled one dict operation at a time (a
  race computes a value twice, the same value);
- the collector is left running: `batch_mode` (the collector paused and the survivors frozen, both
  process-wide) is for one chunk in one thread, and a user's agent may make reference cycles;
- each transcript has one writer (its lock), and each episode has its own transcript.

The worker threads are daemons: a Ctrl-C (or any error in the caller) leaves the episodes in flight
unfinished, as a killed process would, and a resumed run re-asks at most the requests they had in flight.
After an episode raises, no new episode is started, those in flight are let finish (their transcripts stay
whole), and the first error is raised in the caller once the results before it have been handed back.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Iterator

from finbench.errors import bad

__all__ = ["check_connections", "overlapped"]

_WAIT = 0.2  # seconds between looks at the workers while waiting (a Ctrl-C is taken between them)


def check_connections(where: str, max_connections) -> int:
    """`max_connections` checked: a positive integer (a `FinbenchError` naming `where` otherwise)."""
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise bad(where, "max_connections", max_connections, "a positive integer (episodes in flight at once)")
    return max_connections


def overlapped(items: Iterable, play_one: Callable[[Any], Any], max_connections: int) -> Iterator:
    """`play_one(item)` for each item, up to `max_connections` at once in threads; the results in order.

    With `max_connections == 1` the items are played one by one in the calling thread, as a plain loop.
    """
    items = list(items)
    if max_connections <= 1 or len(items) <= 1:
        for item in items:
            yield play_one(item)
        return
    done: dict[int, tuple[bool, Any]] = {}
    cond = threading.Condition()
    state = {"next": 0, "stop": False, "running": 0}

    def work() -> None:
        while True:
            with cond:
                if state["stop"] or state["next"] >= len(items):
                    return
                i = state["next"]
                state["next"] += 1
                state["running"] += 1
            try:
                result = (True, play_one(items[i]))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
                result = (False, exc)
            with cond:
                done[i] = result
                state["running"] -= 1
                if not result[0]:
                    state["stop"] = True
                cond.notify_all()

    workers = [threading.Thread(target=work, name=f"finbench-episode-{n}", daemon=True)
               for n in range(min(max_connections, len(items)))]
    for w in workers:
        w.start()
    try:
        for i in range(len(items)):
            with cond:
                while i not in done:
                    if state["stop"] and state["running"] == 0:
                        return  # stopped by a failure raised already: nothing more is played
                    cond.wait(_WAIT)
                ok, value = done.pop(i)
                if not ok:
                    state["stop"] = True
                    while state["running"]:  # those in flight finish their episode (transcripts whole)
                        cond.wait(_WAIT)
            if not ok:
                raise value
            yield value
    finally:  # an error, a Ctrl-C or a caller that stops reading: no new episode is started
        with cond:
            state["stop"] = True
