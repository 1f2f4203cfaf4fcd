"""`finbench.running.overlap.overlapped`: results in the order asked whatever order they finish in, at most N
at once, and a failure stops new work, lets what is in flight finish and is raised after the results before it."""
from __future__ import annotations

import threading
import time

import pytest

from finbench.errors import FinbenchError
from finbench.running.overlap import check_connections, overlapped


def test_results_come_in_order_whatever_order_they_finish_in():
    def slow_first(i):
        time.sleep(0.02 * (10 - i))
        return i * i

    assert list(overlapped(range(10), slow_first, 4)) == [i * i for i in range(10)]
    assert list(overlapped(range(10), slow_first, 1)) == [i * i for i in range(10)]
    assert list(overlapped([], slow_first, 4)) == []


def test_at_most_n_in_flight_and_all_n_used():
    lock, now, most = threading.Lock(), [0], [0]

    def one(i):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.03)
        with lock:
            now[0] -= 1
        return i

    assert list(overlapped(range(24), one, 6)) == list(range(24))
    assert most[0] == 6


def test_one_at_a_time_runs_in_the_callers_thread():
    me = threading.get_ident()
    assert set(overlapped(range(3), lambda i: threading.get_ident(), 1)) == {me}
    assert me not in set(overlapped(range(6), lambda i: (time.sleep(0.01), threading.get_ident())[1], 3))


def test_a_failure_is_raised_after_the_results_before_it_and_starts_nothing_new():
    started, finished = [], []

    def one(i):
        started.append(i)
        if i == 5:
            raise ValueError("episode 5")
        time.sleep(0.05)
        finished.append(i)
        return i

    got = []
    with pytest.raises(ValueError, match="episode 5"):
        for r in overlapped(range(40), one, 3):
            got.append(r)
    assert got == [0, 1, 2, 3, 4]
    assert max(started) <= 5 + 3  # at most those in flight when it failed were started after it
    assert set(started) - {5} == set(finished)  # those in flight were let finish


def test_a_caller_that_stops_reading_stops_new_work():
    started = []

    def one(i):
        started.append(i)
        time.sleep(0.02)
        return i

    gen = overlapped(range(100), one, 2)
    assert [next(gen), next(gen)] == [0, 1]
    gen.close()
    time.sleep(0.2)
    assert len(started) <= 6


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4", None])
def test_max_connections_is_a_positive_integer(bad):
    with pytest.raises(FinbenchError, match="max_connections"):
        check_connections("evaluate", bad)


def test_the_workers_are_named_daemons():
    """A Ctrl-C in the caller leaves the episodes in flight behind, as a killed process would: the workers
    are daemon threads (the interpreter does not wait for them), named for the episode they play."""
    seen = []

    def where(i):
        seen.append((threading.current_thread().daemon, threading.current_thread().name.rsplit("-", 1)[0]))
        return i

    assert list(overlapped(range(4), where, 2)) == [0, 1, 2, 3]
    assert set(seen) == {(True, "finbench-episode")}
