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
