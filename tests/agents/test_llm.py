"""`ModelAgent` through the real `openai` client against a loopback chat-completions server: retries,
timeouts, malformed tool calls, the call budget, a killed server and a resumed run (the model arm built on it:
tests/experiments/test_model_arm.py).

The server (stdlib `http.server` on 127.0.0.1, an ephemeral port) answers every
request with the tool call a scripted agent makes: it rebuilds the agent from
the conversation (the brief in the first user message, then every observation
returned to the model) and replays it, so the model's decisions are exactly the
script's. Faults are injected per request: status codes, malformed tool calls,
a server that dies.
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

import finbench as fb
from finbench.experiments import model_arm as M
from finbench.agents.mock_server import send_json
from finbench.agents.llm import ModelAgent, model_dir_name, read_transcript

MODEL = "loopback/scripted:v1"
KEY_ENV = "FINBENCH_TEST_MODEL_KEY"
KEY = "sk-loopback-7f3c9a1e5b2d4c6f8e0a"


class Script:
    """A small finality-checking agent: probe, wait while unknown, ship if settled, write off if failed."""

    name = "script"

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures") or []
        status = {c["id"]: c.get("status") for c in caps}
        args = {"order_id": self.order}
        if status.get("cap-1") == "settled":
            return ("ship" if obs["t"] < 599 else "refund"), args
        if status.get("cap-1") == "failed":
            return "write_off", args
        if obs.get("tool") == "probe_processor":
            return ("escalate", args) if obs["t"] > 560 else ("wait", {**args, "ticks": 45})
        return "probe_processor", args


def _observations(messages: list[dict]) -> tuple[dict, list[dict]]:
    brief = json.loads(messages[1]["content"].split("\n", 1)[1])
    obs = [json.loads(m["content"]) for m in messages[2:] if m["role"] in ("tool", "user")]
    return brief, obs


class Loopback:
    """A chat-completions server in a thread. `faults`: request index -> a fault:
    an int (that HTTP status), "bad_json", "unknown_tool", "wrong_args", "no_call", "two_calls";
    `kill_after`: die (stop answering, close the socket) at that request index; `never`: always read;
    `max_messages`: a conversation longer than that is refused as a real server refuses one over its
    context (400, `refusal(i)` the message)."""

    def __init__(self, faults=None, kill_after=None, never=False, max_messages=None):
        self.faults, self.kill_after, self.never = dict(faults or {}), kill_after, never
        self.max_messages = max_messages
        self.seen: list[dict] = []  # per request: order_id, seed, turn, fault, max_tokens
        self.auth: set[str] = set()
        self.dead = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def kill(self):
        self.dead = True
        threading.Thread(target=lambda: (self.server.shutdown(), self.server.server_close()), daemon=True).start()

    def close(self):
        if not self.dead:
            self.dead = True
            self.server.shutdown()
            self.server.server_close()

    def handle(self, h):
        body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
        i = len(self.seen)
        if self.dead or (self.kill_after is not None and i >= self.kill_after):
            self.kill()
            h.close_connection = True
            return  # no response: the connection drops
        self.auth.add(h.headers.get("Authorization", ""))
        brief, obs = _observations(body["messages"])
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        fault = self.faults.get(i)
        if self.max_messages is not None and len(body["messages"]) > self.max_messages:
            fault = "context"
        self.seen.append({"order_id": brief["order_id"], "seed": brief["seed"], "turn": turn, "fault": fault,
                          "max_tokens": body.get("max_tokens")})
        if fault == "context":  # vLLM's words; llama.cpp says "the request exceeds the available context size"
            return self._send(h, 400, {"error": {"message": self.refusal(i), "type": "BadRequestError",
                                                 "param": None, "code": 400}})
        if fault == "slow":  # longer than the client's timeout: the client gives up and retries
            time.sleep(1.0)
        if isinstance(fault, int):
            return self._send(h, fault, {"error": {"message": "try again", "type": "rate_limit"}},
                              {"retry-after-ms": "1"})
        s = Script()
        s.begin(brief)
        for o in [brief, *obs]:
            tool, args = s.act(o)
        if self.never:
            tool, args = "read_ledger", {"order_id": brief["order_id"]}
        raw = json.dumps(args)
        calls = [{"id": f"call-{turn}", "type": "function", "function": {"name": tool, "arguments": raw}}]
        if fault == "bad_json":
            calls[0]["function"]["arguments"] = '{"order_id": "' + brief["order_id"]
        elif fault == "unknown_tool":
            calls[0]["function"]["name"] = "teleport"
        elif fault == "wrong_args":
            calls[0]["function"].update(name="wait", arguments=json.dumps({"order_id": brief["order_id"]}))
        elif fault == "two_calls":
            calls.append({"id": f"call-{turn}b", "type": "function",
                          "function": {"name": "ship", "arguments": json.dumps({"order_id": brief["order_id"]})}})
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        if fault == "no_call":
            message = {"role": "assistant", "content": "I think we should wait and see."}
        self.respond(h, i, fault, brief, {
            "id": f"chatcmpl-{i}", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def refusal(self, i: int) -> str:
        """The message of a refused conversation (a subclass may echo something in it)."""
        return ("This model's maximum context length is 4096 tokens. However, you requested 4113 tokens "
                "(3089 in the messages, 1024 in the completion). Please reduce the length of the messages "
                "or completion.")

    def respond(self, h, i, fault, brief, completion):
        """Send the scripted completion (a subclass may send something else: tests/agents/test_llm_hostile.py)."""
        self._send(h, 200, completion)

    _send = staticmethod(send_json)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture(scope="module")
def run():
    return M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)


def _direct(run) -> dict:
    return {(t.task_id, s): fb.run_episode(t, Script(), s).position for t in run.corpus.tasks for s in run.seeds}


def _transcripts_of_a_healthy_run(run, runs: Path) -> list[Path]:
    """Play the subset through a well-behaved loopback server; the transcripts it leaves, sorted."""
    from finbench.agents.llm import model_dir_name
    from finbench.experiments import model_arm

    srv = Loopback()
    try:
        model_arm.run_model(run, MODEL, srv.base_url, transcripts=runs, api_key_env=KEY_ENV, progress=False)
    finally:
        srv.close()
    return sorted((runs / model_dir_name(MODEL)).glob("*.jsonl"))


def _bare(text: str) -> str:
    """`text` in lower case without separators: the key in it whatever case and separators a server echoed."""
    return re.sub(r"[\s._\-:/|,]", "", text).lower()


def _no_key_anywhere(root: Path, *texts: str):
    """The key is in no file under `root` nor in `texts`: not as sent, nor in another case, with separators
    inserted or reversed."""
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    bare = _bare(KEY)
    for t in [*(p.read_bytes().decode("utf-8", "replace") for p in files), *texts]:
        assert KEY not in t and bare not in _bare(t) and bare[::-1] not in _bare(t), t[:200]


def test_rate_limit_and_server_errors_are_retried(run, tmp_path, key):
    task = run.corpus.tasks[0]
    srv = Loopback(faults={0: 429, 1: 503, 5: 500})
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path, max_retries=3)
        res = agent.episode(task, 0)
    finally:
        srv.close()
    assert [s["fault"] for s in srv.seen[:2]] == [429, 503] and srv.seen[5]["fault"] == 500
    assert res.position == fb.run_episode(task, Script(), 0).position
    assert agent.requests == res.n_calls == len(srv.seen) - 3
    _no_key_anywhere(tmp_path)


def test_a_timeout_is_retried(run, tmp_path, key):
    task = run.corpus.tasks[2]
    srv = Loopback(faults={1: "slow"})
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path, max_retries=2,
                           timeout=0.3)
        res = agent.episode(task, 0)
    finally:
        srv.close()
    assert srv.seen[1]["fault"] == "slow" and srv.seen[2]["turn"] == srv.seen[1]["turn"]  # the same turn again
    assert res.position == fb.run_episode(task, Script(), 0).position and agent.requests == len(srv.seen) - 1


def test_retries_give_up_with_the_clients_error(run, tmp_path, key):
    srv = Loopback(faults={i: 429 for i in range(10)})
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path, max_retries=2)
        with pytest.raises(openai.RateLimitError):
            agent.episode(run.corpus.tasks[0], 0)
    finally:
        srv.close()
    assert len(srv.seen) == 3  # the first try and two retries


def test_malformed_tool_calls_are_answered_and_counted(run, tmp_path, key):
    task = run.corpus.tasks[0]
    srv = Loopback(faults={0: "bad_json", 1: "unknown_tool", 2: "wrong_args", 3: "no_call", 4: "two_calls"})
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        res = agent.episode(task, 0)
    finally:
        srv.close()
    assert agent.malformed == 5 and res.disposition in ("ship", "write_off", "escalate", "refund")
    recs = read_transcript(agent.path(task.task_id, 0))
    sent = [m for r in recs if r["kind"] == "request" for m in r["messages"]]
    errors = [json.loads(m["content"]).get("error", "") for m in sent[2:] if m["role"] in ("tool", "user")]
    assert "not a JSON object" in errors[0] and "unknown tool 'teleport'" in errors[1]
    assert "missing argument(s) ticks" in errors[2] and "no tool call" in errors[3]
    assert "one tool call per turn" in errors[4]  # the second call of turn 4, not executed
    # every malformed call cost a call of the budget, like any bad call
    assert res.actions[0][1] == "probe_processor" and "error" in res.actions[0][3]
    assert recs[-1] == {"kind": "end", "malformed": 5, "requests": agent.requests, "position": res.position,
                        "gap": res.gap, "exact": res.exact, "disposition": res.disposition, "n_calls": res.n_calls}


def test_a_model_that_never_disposes_is_closed_by_the_budget(run, tmp_path, key):
    srv = Loopback(never=True)
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        res = agent.episode(run.corpus.tasks[1], 0)
    finally:
        srv.close()
    assert res.n_calls == 40 == len(srv.seen) and res.disposition == "close"


def test_a_killed_server_and_a_resumed_run(run, tmp_path, key):
    """One connection: the kill falls inside one episode, which the second run resumes."""
    runs = tmp_path / "runs"
    first = Loopback(kill_after=70)
    with pytest.raises(openai.APIConnectionError):
        M.run_model(run, MODEL, first.base_url, transcripts=runs, api_key_env=KEY_ENV, max_retries=1, timeout=5,
                    max_connections=1)
    agent = ModelAgent(MODEL, None, transcripts=runs)
    done = {t.task_id for t in run.corpus.tasks if agent.finished(t.task_id, 0)}
    started = {p.name.split("__")[0] for p in (runs / model_dir_name(MODEL)).glob("*.jsonl")}
    assert done and started - done, "the kill should fall inside an episode"
    partial = (started - done).pop()
    second = Loopback()
    try:
        rows = M.run_model(run, MODEL, second.base_url, transcripts=runs, api_key_env=KEY_ENV, max_connections=1)
    finally:
        second.close()
    asked = {s["order_id"] for s in second.seen}
    assert not asked & done  # finished episodes are not asked again
    assert min(s["turn"] for s in second.seen if s["order_id"] == partial) > 0  # the partial one resumed
    assert len(first.seen) + len(second.seen) == rows["n_calls"].sum()  # no request repeated
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == _direct(run)
    _no_key_anywhere(tmp_path)


@pytest.mark.parametrize("short", ["1", "a", "e", "ord", "ship"])
def test_a_short_key_is_not_scrubbed_into_the_play(run, tmp_path, monkeypatch, short):
    """A one-letter key scrubbed from every record changed what the episode played and replayed."""
    monkeypatch.setenv(KEY_ENV, short)
    task = run.corpus.tasks[0]
    srv = Loopback()
    try:
        res = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path).episode(task, 0)
    finally:
        srv.close()
    assert res.position == fb.run_episode(task, Script(), 0).position
    replay = ModelAgent(MODEL, None, api_key_env=KEY_ENV, transcripts=tmp_path).episode(task, 0)
    assert replay.position == res.position and replay.n_calls == res.n_calls


def test_a_prompt_is_named_by_a_hash_of_its_canonical_json():
    """`llm_prompt.canon`: sorted keys, no spaces, characters kept as they are (what the prompt hash and a
    request's sha are taken of)."""
    import hashlib

    from finbench.agents.llm_prompt import canon, prompt_hash

    assert canon({"b": [1, "é"], "a": {"d": None, "c": 2.5}}) == '{"a":{"c":2.5,"d":null},"b":[1,"é"]}'
    expected = hashlib.sha256('["système",[{"name":"wait"}],{"max_tokens":64,"temperature":0}]'.encode())
    assert prompt_hash("système", [{"name": "wait"}], {"temperature": 0, "max_tokens": 64}) == \
        expected.hexdigest()[:12]


def test_a_prompt_file_is_read_as_utf8_whatever_the_locale(tmp_path, monkeypatch):
    """`system_prompt` reads UTF-8 under any locale: here a Latin-1 one stands for the locale's default."""
    import io

    from finbench.agents.llm_prompt import PROMPT_FILE, system_prompt

    path = tmp_path / "prompt.txt"
    path.write_bytes("  Vérifiez l’état du paiement.\n".encode("utf-8"))
    monkeypatch.setattr(io, "text_encoding", lambda encoding, stacklevel=2: encoding or "latin-1")
    assert system_prompt(path) == "Vérifiez l’état du paiement."
    assert system_prompt() == PROMPT_FILE.read_bytes().decode("utf-8").strip()


def test_the_lock_without_flock_is_a_file_holding_its_pid_taken_over_from_a_dead_holder(tmp_path):
    """`TranscriptLock._acquire_excl`, the lock of platforms without `fcntl`: the file is created exclusively with
    the holder's pid; a second lock does not get it (without waiting); a file left by a dead process is taken."""
    import os

    from finbench.agents.llm_transcripts import TranscriptLock

    transcript = tmp_path / "m" / "ord-0001__seed0__0123456789ab.jsonl"
    transcript.parent.mkdir()
    first = TranscriptLock(transcript, ("ord-0001", 0), shared=False)
    assert first._acquire_excl(wait=False)
    assert first.path.read_text() == f"{os.getpid()}\n"
    other = []  # on a thread: a lock that waited although told not to would hang the test
    waiter = threading.Thread(target=lambda: other.append(
        TranscriptLock(transcript, ("ord-0001", 0), shared=False)._acquire_excl(wait=False)), daemon=True)
    waiter.start()
    waiter.join(5)
    assert other == [False]
    os.close(first.fd)
    first.path.write_text(f"{2**22 + 1}\n")  # above any Linux pid: no such process
    second = TranscriptLock(transcript, ("ord-0001", 0), shared=False)
    assert second._acquire_excl(wait=False) and second.path.read_text() == f"{os.getpid()}\n"
    os.close(second.fd)


def test_a_transcript_in_the_folder_named_the_old_way_is_adopted_by_the_model_its_header_names(tmp_path):
    from finbench.agents.llm_transcripts import adopt_legacy, transcript_path

    mine = transcript_path(tmp_path, "org/m", "ord-0001", 0, "0123456789ab")
    theirs = transcript_path(tmp_path, "org/m", "ord-0002", 0, "0123456789ab")
    (tmp_path / "org_m").mkdir()  # 'org/m' and 'org_m' shared this folder before names carried a hash
    (tmp_path / "org_m" / mine.name).write_text(json.dumps({"kind": "header", "model": "org/m"}) + "\n")
    (tmp_path / "org_m" / theirs.name).write_text(json.dumps({"kind": "header", "model": "org_m"}) + "\n")
    adopt_legacy(mine, "org/m")
    adopt_legacy(theirs, "org/m")
    assert json.loads(mine.read_text())["model"] == "org/m" and not (tmp_path / "org_m" / mine.name).exists()
    assert not theirs.exists() and (tmp_path / "org_m" / theirs.name).exists()


def test_a_lock_file_unlinked_between_its_open_and_its_lock_is_opened_again(tmp_path, monkeypatch):
    """The last holder may unlink the lock file after this process opened it and before it locked it: the lock
    taken is then on a file no one else will open, so it starts over (here the first look finds it gone)."""
    import os

    from finbench.agents.llm_transcripts import TranscriptLock

    lock = TranscriptLock(tmp_path / "ord-0001__seed0__0123456789ab.jsonl", ("ord-0001", 0), shared=False)
    real, looks = os.stat, []

    def stat(path, *a, **k):
        if str(path) == str(lock.path):
            looks.append(path)
            if len(looks) == 1:
                raise FileNotFoundError(path)
        return real(path, *a, **k)

    monkeypatch.setattr(os, "stat", stat)
    assert lock.acquire(wait=False) is True and len(looks) == 2
    monkeypatch.undo()
    assert lock.path.read_text() == f"{os.getpid()}\n"
    lock.release()


def test_a_transcript_out_of_order_is_unreplayable_naming_the_line_and_what_it_holds(tmp_path):
    from finbench.agents.llm_transcripts import Unreplayable, load_transcript

    path = tmp_path / "ord-0001__seed0__0123456789ab.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ({"kind": "header", "model": "m"},
                                                       {"kind": "response", "turn": 0})) + "\n")
    with pytest.raises(Unreplayable) as caught:
        load_transcript(path, "m")
    assert str(caught.value) == "line 2: not the request of turn 0 (kind 'response', turn 0)"


def test_an_agent_tallies_its_requests_in_the_usage_it_is_given(run, tmp_path, key):
    from finbench.agents.llm_traffic import Usage

    task, usage = run.corpus.tasks[0], Usage()
    srv = Loopback()  # every reply says 1 prompt token and 1 completion token
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path, usage=usage)
        res = agent.episode(task, 0)
    finally:
        srv.close()
    assert agent.usage is usage
    assert (usage.requests, usage.input_tokens, usage.output_tokens, usage.estimated_requests) == \
        (res.n_calls, res.n_calls, res.n_calls, 0)
    assert len(usage.seconds) == res.n_calls and all(round(s, 3) == s for s in usage.seconds)  # to the ms
    first = read_transcript(agent.path(task.task_id, 0))[1]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]


def test_replies_without_a_usage_are_estimated_from_the_whole_conversation_and_its_tools(run, tmp_path):
    from finbench.agents.mock_server import MockServer

    with MockServer(usage=False) as srv:
        agent = ModelAgent("careful", srv.base_url, transcripts=None)
        res = agent.episode(run.corpus.tasks[0], 0)
    u = agent.usage
    assert u.requests == res.n_calls == u.estimated_requests
    assert u.input_tokens >= u.requests * len(json.dumps(agent.tools)) // 4  # the schemas alone, each request


def test_a_shared_lock_file_is_unlinked_by_its_last_holder_only(tmp_path):
    from finbench.agents.llm_transcripts import TranscriptLock

    transcript = tmp_path / "ord-0001__seed0__0123456789ab.jsonl"
    a, b = (TranscriptLock(transcript, ("ord-0001", 0), shared=True) for _ in range(2))
    assert a.acquire(wait=False) and b.acquire(wait=False)  # two readers at once
    a.release()
    assert a.path.exists()  # b still holds it
    b.release()
    assert not a.path.exists()
