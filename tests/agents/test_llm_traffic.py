"""The gate on requests in flight (halving on a refusal, growing back to below the level refused) and a run's
tally of what its model episodes asked (`finbench.agents.llm_traffic`): rules, no server."""
from __future__ import annotations

import copy
import pickle
import threading

import pytest

from finbench.agents.llm_traffic import GROW_PAST_AFTER, Gate, Usage, gate_for


def _burst(gate: Gate, n: int) -> list:
    return [gate.acquire() for _ in range(n)]


def test_a_refusal_halves_the_limit_once_per_burst_and_remembers_the_level():
    gate = Gate(ceiling=64)
    tickets = _burst(gate, 16)
    assert [t[0] for t in tickets] == list(range(1, 17)) and gate.peak == 16
    for t in tickets[:4]:
        gate.release(t, refused=False)
    for t in tickets[4:]:  # the server took 4: every attempt above that level is refused, in one burst
        gate.release(t, refused=True)
    assert gate.limited == 12 and gate.in_flight == 0
    assert gate.limit == 2  # halved once (from the first refused level, 5), not twelve times
    assert gate.refused_at == 5  # the lowest level refused in that burst


def test_the_limit_grows_back_to_below_the_level_refused_then_only_after_a_long_run():
    gate = Gate(ceiling=64)
    first = _burst(gate, 5)
    for t in first[:4]:
        gate.release(t, refused=False)
    gate.release(first[4], refused=True)
    assert (gate.limit, gate.refused_at) == (2, 5)
    for _ in range(200):  # answers one at a time: additive growth, one per round of answers
        gate.release(gate.acquire(), refused=False)
        if gate.limit == 4:
            break
    assert gate.limit == 4  # the level below the refused one
    for _ in range(GROW_PAST_AFTER - 1):
        gate.release(gate.acquire(), refused=False)
    assert gate.limit == 4  # not past it before a long run of answers
    gate.release(gate.acquire(), refused=False)
    assert gate.limit == 5 and gate.refused_at == 6  # then one more is tried


def test_the_limit_never_falls_below_one_and_acquire_waits_for_a_slot():
    gate = Gate(ceiling=8)
    for _ in range(10):
        t = gate.acquire()
        gate._epoch = t[1]  # every refusal in its own burst
        gate.release(t, refused=True)
    assert gate.limit == 1
    held = gate.acquire()
    got = []
    waiter = threading.Thread(target=lambda: got.append(gate.acquire()))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got  # the one slot is taken
    gate.release(held, refused=False)
    waiter.join(5)
    assert got and gate.in_flight == 1


def test_one_gate_per_endpoint():
    assert gate_for("http://127.0.0.1:1/v1") is gate_for("http://127.0.0.1:1/v1")
    assert gate_for("http://127.0.0.1:1/v1") is not gate_for("http://127.0.0.1:2/v1")


def test_usage_reads_the_servers_counts_or_estimates_and_says_so():
    u = Usage()
    body = {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 100, "completion_tokens": 7}}
    u.request(0.5, body, lambda: pytest.fail("no estimate is made when the server counts"), {"sent": 3, "limited": 2})
    assert (u.requests, u.input_tokens, u.output_tokens, u.retries, u.rate_limited) == (1, 100, 7, 2, 2)
    assert not u.summary()["tokens_estimated"]
    u.request(1.5, {"choices": []}, lambda: "a" * 400, {"sent": 1, "limited": 0})
    s = u.summary()
    assert s["tokens_estimated"] and s["estimated_requests"] == 1 and s["input_tokens"] == 100 + 100
    assert s["requests_sent"] == 4 and s["latency_median_s"] == 1.0 and s["latency_p90_s"] == 1.5


def test_usage_counts_where_each_episode_came_from():
    u = Usage()
    u.episode(requests=12, replayed=0, malformed=1, ended=None)
    u.episode(requests=0, replayed=9, malformed=0, ended="context_length")
    u.episode(requests=3, replayed=5, malformed=0, ended=None)
    s = u.summary()
    assert s["episodes"] == {"asked_now": 1, "resumed": 1, "replayed": 1}
    assert s["malformed_calls"] == 1 and s["context_length_episodes"] == 1
    assert s["source"] == "1 asked now, 1 resumed (replayed, then asked), 1 replayed from transcripts (0 requests)"
    assert Usage().source_text() == "none played"


def test_copies_of_an_agent_share_its_tally_and_a_pickled_one_has_its_own():
    u = Usage()
    assert copy.deepcopy(u) is u and copy.deepcopy({"u": u})["u"] is u
    u.episode(1, 0, 0, None)
    back = pickle.loads(pickle.dumps(u))
    assert back is not u and back.asked == 1
    back.episode(1, 0, 0, None)  # its lock works
    assert back.asked == 2 and u.asked == 1


def test_latency_median_and_p90_and_tokens_counted_or_estimated():
    from math import ceil

    odd, even = Usage(), Usage()
    odd.seconds, even.seconds = [0.4, 0.1, 0.2], [0.1, 0.2, 0.3, 1.0]
    assert (odd.summary()["latency_median_s"], odd.summary()["latency_p90_s"]) == (0.2, 0.4)
    assert (even.summary()["latency_median_s"], even.summary()["latency_p90_s"]) == (0.25, 1.0)
    assert Usage().summary()["latency_median_s"] is None
    u = Usage()
    u.request(0.1, {"usage": {"prompt_tokens": 0, "completion_tokens": 3}}, lambda: "x" * 400)  # 0 is a count
    assert (u.input_tokens, u.output_tokens, u.estimated_requests) == (0, 3, 0)
    message = {"role": "assistant", "content": "y" * 41}
    u.request(0.1, {"choices": [{"message": message}]}, lambda: "x" * 400)  # no usage: estimated, 4 chars a token
    assert (u.input_tokens, u.output_tokens, u.estimated_requests) == (100, 3 + ceil(len(str(message)) / 4), 1)


def test_the_gate_counts_every_attempt_sent():
    gate = Gate(ceiling=4)
    gate.release(gate.acquire(), refused=False)
    gate.release(gate.acquire(), refused=True)
    assert (gate.sent, gate.limited, gate.in_flight) == (2, 1, 0)
