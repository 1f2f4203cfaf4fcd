"""The scripted model server (`finbench.agents.mock_server`): its careful strategy read from a conversation
alone (rules, no server), and the server's knobs (latency, 429 above K in flight, context-length 400s in
vLLM's and llama.cpp's words, token usage, stopping when idle) against the real client."""
from __future__ import annotations

import json
import time

import openai
import pytest

import finbench as fb
from finbench.agents.llm import ModelAgent, brief_message, system_prompt
from finbench.agents.mock_server import NEAR, MockServer, careful_call
from finbench.experiments import model_arm as M


class Careful:
    """The careful strategy as a policy: the conversation a model would be sent, and `careful_call` on it."""

    name = "careful"

    def begin(self, brief):
        self.messages = [{"role": "system", "content": system_prompt()},
                         {"role": "user", "content": brief_message(brief)}]
        self.first = True

    def act(self, obs):
        if not self.first:
            self.messages.append({"role": "tool", "tool_call_id": "x", "content": json.dumps(obs, sort_keys=True)})
        self.first = False
        tool, args = careful_call(self.messages)
        self.messages.append({"role": "assistant", "content": None})
        return tool, args


@pytest.fixture(scope="module")
def played():
    corpus = fb.make_corpus(n_tasks=60)
    return [(t, s, fb.run_episode(t, Careful(), s)) for t in corpus.tasks for s in (0, 1)]


def test_it_ships_only_once_a_probe_said_settled_and_never_acts_before_the_outcome(played):
    assert played
    for task, seed, res in played:
        assert res.n_calls <= 40 and res.disposition in ("ship", "refund", "write_off", "escalate"), res
        assert not res.premature_irreversible, (task.task_id, seed, res.actions)
        tools = [a[1] for a in res.actions]
        assert tools[0] == "probe_processor"
        if res.disposition == "ship":
            assert tools[-2] == "probe_processor"


def test_it_retries_once_under_a_fresh_key_after_a_confirmed_failure(played):
    retried = [res for _, _, res in played if any(a[1] == "retry_capture" for a in res.actions)]
    assert retried, "the corpus holds failed captures"
    for res in retried:
        keys = [a[2]["idempotency_key"] for a in res.actions if a[1] == "retry_capture"]
        assert keys == ["key-2"]


def test_it_escalates_when_the_ship_by_time_is_near_and_nothing_settled(played):
    escalated = [res for _, _, res in played if res.disposition == "escalate"]
    assert escalated
    for res in escalated:
        assert 600 - res.actions[-2][0] < NEAR + 10  # the last probe came close to the ship-by time


def test_it_reads_nothing_but_the_conversation():
    brief = {"order_id": "ord-9", "t": 120, "ship_by": 600}
    msgs = [{"role": "system", "content": "x"}, {"role": "user", "content": brief_message(brief)}]
    assert careful_call(msgs) == ("probe_processor", {"order_id": "ord-9"})
    probe = {"t": 125, "tool": "probe_processor", "result": {"captures": [{"id": "cap-1", "status": "unknown"}]}}
    assert careful_call([*msgs, {"role": "tool", "content": json.dumps(probe)}]) == \
        ("wait", {"order_id": "ord-9", "ticks": 45})
    settled = {**probe, "t": 590, "result": {"captures": [{"id": "cap-1", "status": "settled"}]}}
    assert careful_call([*msgs, {"role": "tool", "content": json.dumps(settled)}])[0] == "ship"
    assert careful_call([*msgs, {"role": "tool", "content": json.dumps({**settled, "t": 600})}])[0] == "refund"
    error = {"error": "unknown tool 'x'"}
    assert careful_call([*msgs, {"role": "tool", "content": json.dumps(error)}])[0] == "probe_processor"
    assert careful_call([{"role": "user", "content": "no brief"}]) == ("probe_processor", {"order_id": ""})
    assert careful_call([*msgs, {"role": "tool", "content": "not json"}])[0] == "probe_processor"


# --- the server ---------------------------------------------------------------------------------------------------

@pytest.mark.slow  # a loopback server
def test_the_server_plays_the_strategy_through_the_client_with_usage_and_latency(tmp_path):
    task = fb.make_corpus(n_tasks=9).tasks[0]
    with MockServer(latency=0.05) as srv:
        agent = ModelAgent("careful", srv.base_url, transcripts=tmp_path)
        started = time.monotonic()
        res = agent.episode(task, 0)
        took = time.monotonic() - started
        stats = srv.stats()
    direct = fb.run_episode(task, Careful(), 0)
    assert (res.position, res.n_calls, res.disposition) == (direct.position, direct.n_calls, direct.disposition)
    assert stats["answered"] == stats["requests"] == res.n_calls == agent.requests
    assert took >= 0.05 * res.n_calls
    u = agent.usage.summary()
    assert u["requests"] == res.n_calls and not u["tokens_estimated"] and u["input_tokens"] > 1000
    assert u["episodes"] == {"asked_now": 1, "resumed": 0, "replayed": 0}


@pytest.mark.slow  # a loopback server
@pytest.mark.parametrize("wording,words", [("vllm", "maximum context length"), ("llamacpp", "exceeds the available")])
def test_the_server_refuses_a_long_conversation_in_a_servers_words(tmp_path, wording, words):
    task = next(t for t in fb.make_corpus(n_tasks=30).tasks if fb.run_episode(t, Careful(), 0).n_calls > 8)
    with MockServer(max_messages=12, wording=wording) as srv:
        agent = ModelAgent("careful", srv.base_url, transcripts=tmp_path)
        res = agent.episode(task, 0)
        assert srv.stats()["context_refused"] == 1
    assert agent.ended == "context_length" and res.disposition == "close"
    end = json.loads(agent.path(task.task_id, 0).read_text().splitlines()[-1])
    assert words in end["error"]


@pytest.mark.slow  # a loopback server
def test_the_server_answers_429_above_k_in_flight_and_a_run_survives_it(tmp_path):
    run = M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)
    with MockServer(latency=0.05) as free:
        ref = M.run_model(run, "careful", free.base_url, transcripts=tmp_path / "free", progress=False,
                          max_connections=8)  # rows are the same for any concurrency (test_llm_concurrency)
    with MockServer(latency=0.05, max_in_flight=2) as srv:
        usage = M.Usage()
        rows = M.run_model(run, "careful", srv.base_url, transcripts=tmp_path / "limited", progress=False,
                           max_connections=8, usage=usage)
        stats = srv.stats()
    assert rows.equals(ref)  # nothing lost, nothing different
    assert stats["rate_limited"] > 0 and stats["max_in_flight_answered"] <= 2
    s = usage.summary()
    assert s["rate_limited"] == stats["rate_limited"] and s["requests"] == stats["answered"] == rows["n_calls"].sum()
    assert s["requests_sent"] == stats["requests"]  # every attempt the server received is counted
    # transcripts hold what was answered, never the 429s: the same files as the run without a limit
    free_files = {p.name: p.read_bytes() for p in (tmp_path / "free").rglob("*.jsonl")}
    lim_files = {p.name: p.read_bytes() for p in (tmp_path / "limited").rglob("*.jsonl")}
    assert free_files.keys() == lim_files.keys() and len(free_files) == len(rows)
    strip = lambda b: b.replace(free.base_url.encode(), b"URL").replace(srv.base_url.encode(), b"URL")  # noqa: E731
    assert all(strip(free_files[k]) == strip(lim_files[k]) for k in free_files)


@pytest.mark.slow  # a loopback server
def test_the_server_stops_by_itself_when_idle():
    srv = MockServer(idle_exit=0.5)
    started = time.monotonic()
    srv.wait()
    assert time.monotonic() - started < 5
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=2).models.list()


@pytest.mark.slow  # a loopback server
def test_the_command_serves_until_idle_and_refuses_a_taken_port(capsys):
    from finbench.cli import main

    with MockServer() as taken:
        assert main(["mock-server", "--port", str(taken.port), "--idle-exit", "0.5"]) == 64
        assert f"cannot serve on 127.0.0.1:{taken.port}" in capsys.readouterr().err
    assert main(["mock-server", "--port", "0", "--idle-exit", "0.5", "--latency", "0"]) == 0
    out = capsys.readouterr().out
    assert "serving http://127.0.0.1:" in out and "stopped; 0 requests received" in out


# --- the strategy's and the server's rules, without a client --------------------------------------------------

def test_a_confirmed_failure_is_retried_under_key_2_and_an_error_answer_is_followed_by_a_probe():
    brief = {"order_id": "ord-9", "t": 120, "ship_by": 600}
    msgs = [{"role": "system", "content": "x"}, {"role": "user", "content": brief_message(brief)}]
    failed = {"t": 125, "tool": "probe_processor", "result": {"captures": [{"id": "cap-1", "status": "failed"}]}}
    msgs.append({"role": "tool", "content": json.dumps(failed)})
    assert careful_call(msgs) == ("retry_capture", {"order_id": "ord-9", "idempotency_key": "key-2"})
    refused = {"t": 126, "calls_left": 37, "error": "your reply had no tool call; make exactly one tool call per turn"}
    assert careful_call([*msgs, {"role": "user", "content": json.dumps(refused)}]) == \
        ("probe_processor", {"order_id": "ord-9"})


class _Asked:
    """A POST as `BaseHTTPRequestHandler` holds it (body, headers), and what the server answered to it."""

    def __init__(self, body):
        import io

        raw = json.dumps(body).encode()
        self.rfile, self.wfile = io.BytesIO(raw), io.BytesIO()
        self.headers = {"Content-Length": str(len(raw))}
        self.status, self.sent = None, {}

    def send_response(self, status):
        self.status = status

    def send_header(self, key, value):
        self.sent[key] = value

    def end_headers(self):
        pass

    def answer(self) -> dict:
        return json.loads(self.wfile.getvalue())


def _counts(**kw) -> dict:
    return {"requests": 1, "answered": 0, "rate_limited": 0, "context_refused": 0, "bad_requests": 0,
            "max_in_flight": 1, "max_in_flight_answered": 1, **kw}


def test_a_request_is_answered_with_the_careful_call_as_a_chat_completion_with_its_usage():
    messages = [{"role": "system", "content": "x"},
                {"role": "user", "content": brief_message({"order_id": "ord-9", "t": 120, "ship_by": 600})}]
    with MockServer() as srv:
        asked = _Asked({"model": "m", "messages": messages})
        srv._handle(asked)
        assert srv.stats() == _counts(answered=1)
    reply = asked.answer()
    assert asked.status == 200 and asked.sent["Content-Type"] == "application/json"
    call = reply["choices"][0]["message"]["tool_calls"][0]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == \
        ("probe_processor", {"order_id": "ord-9"})
    assert {k: reply[k] for k in ("id", "object", "created", "model")} == \
        {"id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": "m"}
    prompt = -(-len(json.dumps(messages)) // 4)  # four characters a token, rounded up
    assert reply["usage"]["prompt_tokens"] == prompt
    assert reply["usage"]["total_tokens"] == prompt + reply["usage"]["completion_tokens"]


def test_the_server_refuses_an_empty_request_a_long_conversation_and_one_over_its_limit_in_flight():
    with MockServer() as srv:
        asked = _Asked({"messages": []})
        srv._handle(asked)
        assert srv.stats() == _counts(bad_requests=1)
    assert (asked.status, asked.answer()) == (400, {"error": {"message": "messages must be a non-empty list",
                                                              "type": "invalid_request_error", "code": 400}})
    with MockServer(max_messages=1, wording="llamacpp") as srv:
        asked = _Asked({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]})
        srv._handle(asked)
        assert srv.stats() == _counts(context_refused=1)
    assert (asked.status, asked.answer()) == (400, {"error": {
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error", "code": 400}})
    with MockServer(max_in_flight=0) as srv:  # every request is one too many
        asked = _Asked({"messages": [{"role": "user", "content": "y"}]})
        srv._handle(asked)
        assert srv.stats() == _counts(rate_limited=1, max_in_flight_answered=0)
    assert (asked.status, asked.sent["retry-after-ms"]) == (429, "50")
    assert asked.answer() == {"error": {"message": "Rate limit reached: too many requests in flight",
                                        "type": "rate_limit_error", "code": 429}}


def test_the_models_list_names_the_model():
    import urllib.request

    with MockServer(model="m-1") as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=5) as r:
            assert json.loads(r.read()) == {"object": "list", "data": [{"id": "m-1", "object": "model"}]}


def test_an_idle_server_looks_four_times_per_idle_period_and_stops(monkeypatch):
    import threading

    real, slept = time.sleep, []

    def sleep(s):
        if threading.current_thread() is not threading.main_thread():
            slept.append(s)
        real(s)

    monkeypatch.setattr(time, "sleep", sleep)
    srv = MockServer(idle_exit=0.2)
    for _ in range(40):  # at most 2 s: it stops after about 0.25 s
        if srv._closed:
            break
        real(0.05)
    assert srv._closed and slept and set(slept) == {0.05}


def test_the_command_says_what_it_serves_and_flushes_it_before_serving(monkeypatch):
    import argparse
    import sys

    from finbench.agents.mock_server import main

    class Out:
        def __init__(self):
            self.events = []

        def write(self, text):
            self.events.append(text)

        def flush(self):
            self.events.append(None)

    monkeypatch.setattr(MockServer, "wait", MockServer.close)  # serve no request: what it says is the test
    for max_in_flight, says in ((3, ", 429 above 3 in flight"), (None, "")):
        out = Out()
        monkeypatch.setattr(sys, "stdout", out)
        args = argparse.Namespace(port=0, latency=0.0, max_in_flight=max_in_flight, max_messages=None,
                                  wording="vllm", no_usage=False, idle_exit=0.1, model="careful")
        assert main(args) == 0
        monkeypatch.setattr(sys, "stdout", sys.__stdout__)
        first = "".join(e for e in out.events[:out.events.index(None)] if e)
        assert first.startswith("finbench mock-server: serving http://127.0.0.1:")
        assert first.endswith(f"(model 'careful'; latency 0 s{says}); stops after 0.1 s without a request\n")
