"""`evaluate(..., max_connections=N)`: a user's episodes on threads give the rows they give one at a time,
also when the agent makes reference cycles and many threads share the engine's memos (compared with episodes
played in a fresh process, with nothing memoised)."""
from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time

import pytest

import finbench as fb
from finbench.memo import clear_caches

CYCLES = '''
import threading, time

class Cyclic:
    """Probes and waits; each call leaves a reference cycle behind and yields the GIL (as a model's wait)."""
    name = "cyclic"
    def begin(self, brief):
        self.order = brief["order_id"]
        self.log = []
    def act(self, obs):
        node = {"obs": obs}
        node["self"] = node  # a cycle only the collector frees
        self.log.append(node)
        time.sleep(0.0005)
        caps = (obs.get("result") or {}).get("captures") or []
        status = {c["id"]: c.get("status") for c in caps}
        if status.get("cap-1") == "settled":
            return ("ship" if obs["t"] < 599 else "refund"), {"order_id": self.order}
        if status.get("cap-1") == "failed":
            return "write_off", {"order_id": self.order}
        if obs.get("tool") == "probe_processor":
            return ("escalate" if obs["t"] > 560 else "wait"), (
                {"order_id": self.order} if obs["t"] > 560 else {"order_id": self.order, "ticks": 45})
        return "probe_processor", {"order_id": self.order}
'''


@pytest.fixture(scope="module")
def cyclic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("agent")
    (folder / "cyclic_agent.py").write_text(CYCLES)
    sys.path.insert(0, str(folder))
    try:
        import cyclic_agent
        yield folder, cyclic_agent.Cyclic
    finally:
        sys.path.remove(str(folder))


def _fresh_process_rows(folder, n_tasks: int, seeds: int) -> list:
    """The rows played one at a time in a new process (no memo of this one's): the oracle."""
    code = (f"import sys, json; sys.path.insert(0, {str(folder)!r}); import finbench as fb; from cyclic_agent import "
            f"Cyclic; df = fb.evaluate(fb.make_corpus(n_tasks={n_tasks}), [Cyclic], seeds=range({seeds}), "
            "cache=False); print(df.to_json(orient='split'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)["data"]


@pytest.mark.slow  # a subprocess (the oracle)
def test_threads_give_the_rows_of_one_at_a_time_in_a_fresh_process(cyclic):
    folder, Cyclic = cyclic
    clear_caches()
    gc.unfreeze()  # what earlier tests froze in this process (frozen objects freed meanwhile would move the count)
    rows = fb.evaluate(fb.make_corpus(n_tasks=30), [Cyclic], seeds=range(3), cache=False, max_connections=16)
    assert len(rows) == 90 and gc.isenabled() and gc.get_freeze_count() == 0  # the collector left as it was
    assert json.loads(rows.to_json(orient="split"))["data"] == _fresh_process_rows(folder, 30, 3)


def test_threads_and_one_at_a_time_agree_beside_the_package_policies(cyclic):
    _, Cyclic = cyclic
    corpus = fb.make_corpus(n_tasks=24)
    clear_caches()
    one = fb.evaluate(corpus, ["finality_gate", Cyclic, "sop"], seeds=range(2), cache=False)
    clear_caches()
    many = fb.evaluate(corpus, ["finality_gate", Cyclic, "sop"], seeds=range(2), cache=False, max_connections=12)
    assert len(many) == 3 * 24 * 2 and many.equals(one)
    warm = fb.evaluate(corpus, ["finality_gate", Cyclic, "sop"], seeds=range(2), cache=False, max_connections=7)
    assert warm.equals(one)  # the memos now warm, filled from threads
    assert many.attrs["loaded"] == {"finality_gate": 0, "cyclic": 0, "sop": 0}


def test_each_thread_plays_its_own_instance_and_the_episodes_overlap():
    lock, now, most, seen = threading.Lock(), [0], [0], []

    class Waiting:
        name = "waiting"

        def begin(self, brief):
            self.order, self.calls = brief["order_id"], 0
            with lock:
                seen.append(self)  # kept alive: ids of freed instances are reused

        def act(self, obs):
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            time.sleep(0.005)
            with lock:
                now[0] -= 1
            self.calls += 1
            return ("probe_processor" if self.calls < 3 else "escalate"), {"order_id": self.order}

    rows = fb.evaluate(fb.make_corpus(n_tasks=9), [Waiting], seeds=range(4), cache=False, max_connections=6)
    assert len(rows) == 36 and (rows["n_calls"] == 3).all() and len({id(p) for p in seen}) == 36
    assert most[0] > 1  # their waiting overlapped


def test_a_user_agent_that_raises_on_a_thread_stops_the_run_with_its_error():
    class Broken:
        name = "broken"

        def begin(self, brief):
            self.n = 0

        def act(self, obs):
            raise RuntimeError("no luck")

    with pytest.raises(RuntimeError, match="no luck"):
        fb.evaluate(fb.make_corpus(n_tasks=9), [Broken], seeds=range(2), cache=False, max_connections=4)


@pytest.mark.parametrize("bad", [0, -2, 2.0, "8"])
def test_max_connections_is_checked(bad):
    with pytest.raises(fb.FinbenchError, match="max_connections"):
        fb.evaluate(fb.make_corpus(n_tasks=9), ["sop"], seeds=range(1), cache=False, max_connections=bad)
    with pytest.raises(fb.FinbenchError, match="max_connections"):
        fb.Run.make(n_tasks=9, max_connections=bad)
