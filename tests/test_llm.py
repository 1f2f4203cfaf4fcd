"""The model arm end to end through the real `openai` client against a loopback chat-completions server.

The server (stdlib `http.server` on 127.0.0.1, an ephemeral port) answers every
request with the tool call a scripted agent makes: it rebuilds the agent from
the conversation (the brief in the first user message, then every observation
returned to the model) and replays it, so the model's decisions are exactly the
script's. Faults are injected per request: status codes, malformed tool calls,
a server that dies.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

import finbench as fb
from finbench.experiments import model_arm as M
from finbench.agents.llm import ModelAgent, read_transcript, system_prompt

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
    `kill_after`: die (stop answering, close the socket) at that request index; `never`: always read."""

    def __init__(self, faults=None, kill_after=None, never=False):
        self.faults, self.kill_after, self.never = dict(faults or {}), kill_after, never
        self.seen: list[dict] = []  # per request: order_id, seed, turn, status
        self.auth: set[str] = set()
        self.dead = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
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
        self.seen.append({"order_id": brief["order_id"], "seed": brief["seed"], "turn": turn, "fault": fault})
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
        calls = [{"id": f"call-{i}", "type": "function", "function": {"name": tool, "arguments": raw}}]
        if fault == "bad_json":
            calls[0]["function"]["arguments"] = '{"order_id": "' + brief["order_id"]
        elif fault == "unknown_tool":
            calls[0]["function"]["name"] = "teleport"
        elif fault == "wrong_args":
            calls[0]["function"].update(name="wait", arguments=json.dumps({"order_id": brief["order_id"]}))
        elif fault == "two_calls":
            calls.append({"id": f"call-{i}b", "type": "function",
                          "function": {"name": "ship", "arguments": json.dumps({"order_id": brief["order_id"]})}})
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        if fault == "no_call":
            message = {"role": "assistant", "content": "I think we should wait and see."}
        self._send(h, 200, {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": 0, "model": body["model"],
                            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    @staticmethod
    def _send(h, status, payload, headers=None):
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client timed out and went away
            pass


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture(scope="module")
def run():
    return M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)


def _direct(run) -> dict:
    return {(t.task_id, s): fb.run_episode(t, Script(), s).position for t in run.corpus.tasks for s in run.seeds}


def _no_key_anywhere(root: Path, *texts: str):
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert KEY.encode() not in p.read_bytes(), p
    for t in texts:
        assert KEY not in t


def test_ten_plus_episodes_through_the_real_client(run, tmp_path, key, capfd):
    srv = Loopback()
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV)
    finally:
        srv.close()
    assert len(rows) == len(run.corpus) * len(run.seeds) >= 10
    assert srv.auth == {f"Bearer {key}"}  # the key was used ...
    # ... the scripted model decided exactly as the script run directly on FinalityEnv
    direct = _direct(run)
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == direct
    assert len(srv.seen) == rows["n_calls"].sum() and (rows["malformed"] == 0).all()
    # one transcript per (task, seed), keyed in its name, every request and response recorded
    files = sorted((tmp_path / "runs" / "loopback_scripted_v1").glob("*.jsonl"))
    assert len(files) == len(rows)
    recs = read_transcript(files[0])
    assert recs[0]["kind"] == "header" and recs[0]["system"] == system_prompt() and recs[-1]["kind"] == "end"
    assert files[0].name.startswith(f"{recs[0]['task_id']}__seed0__{recs[0]['prompt_hash']}")
    assert sum(r["kind"] == "response" for r in recs) == sum(r["kind"] == "request" for r in recs) == recs[-1]["n_calls"]
    # Table V from the transcripts alone: no server, no request
    replayed = M.model_episodes(run, tmp_path / "runs")
    assert {(r.task_id, r.seed): r.position for r in replayed.itertuples()} == direct
    t5 = M.table5(run.evaluate(), replayed).set_index("policy")
    assert list(t5.index) == ["finality_gate", MODEL]
    row = t5.loc[MODEL]
    assert row.episodes == len(rows) and row.gate_episodes == len(rows)
    assert row.exact_pct == pytest.approx(100 * replayed["exact"].mean())
    assert row.probe_use_pct == 100.0 and row.premature_pct == pytest.approx(100 * replayed.premature_irreversible.mean())
    assert row.gate_exact_pct == t5.loc["finality_gate", "exact_pct"]
    claims = {c.id: c for c in M.claims(t5.reset_index())}
    assert claims["model_exact"].verdict != "not run" and claims["model_exact"].ours == pytest.approx(row.exact_pct)
    fb.publish(t5.reset_index(), "table5", run, to=tmp_path / "tables", bootstrap=False)
    out = capfd.readouterr()
    _no_key_anywhere(tmp_path, out.out, out.err)


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
    assert recs[-1]["malformed"] == 5


def test_a_model_that_never_disposes_is_closed_by_the_budget(run, tmp_path, key):
    srv = Loopback(never=True)
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        res = agent.episode(run.corpus.tasks[1], 0)
    finally:
        srv.close()
    assert res.n_calls == 40 == len(srv.seen) and res.disposition == "close"


def test_a_killed_server_and_a_resumed_run(run, tmp_path, key):
    runs = tmp_path / "runs"
    first = Loopback(kill_after=70)
    with pytest.raises(openai.APIConnectionError):
        M.run_model(run, MODEL, first.base_url, transcripts=runs, api_key_env=KEY_ENV, max_retries=1, timeout=5)
    agent = ModelAgent(MODEL, None, transcripts=runs)
    done = {t.task_id for t in run.corpus.tasks if agent.finished(t.task_id, 0)}
    started = {p.name.split("__")[0] for p in (runs / "loopback_scripted_v1").glob("*.jsonl")}
    assert done and started - done, "the kill should fall inside an episode"
    partial = (started - done).pop()
    second = Loopback()
    try:
        rows = M.run_model(run, MODEL, second.base_url, transcripts=runs, api_key_env=KEY_ENV)
    finally:
        second.close()
    asked = {s["order_id"] for s in second.seen}
    assert not asked & done  # finished episodes are not asked again
    assert min(s["turn"] for s in second.seen if s["order_id"] == partial) > 0  # the partial one resumed
    assert len(first.seen) + len(second.seen) == rows["n_calls"].sum()  # no request repeated
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == _direct(run)
    _no_key_anywhere(tmp_path)


def test_table5_without_endpoint_or_transcripts(run, tmp_path):
    models = M.model_episodes(run, tmp_path / "nothing")
    assert models.empty
    t5 = M.table5(run.evaluate(), models)
    assert list(t5["policy"]) == ["finality_gate"]
    claims = {c.id: c for c in M.claims(t5)}
    assert {claims[i].verdict for i in ("model_exact", "model_gap", "model_probe_use", "model_premature")} == {"not run"}
    assert claims["gate_subset_exact"].ours == pytest.approx(t5.loc[0, "exact_pct"])
    assert "No model row" in M.notes(t5, run)[0]


def test_stratified_subset_keeps_every_archetype_and_whole_pairs():
    corpus = fb.make_corpus()
    sub = M.stratified_subset(corpus, 60, 0)
    assert 50 <= len(sub) <= 70
    assert {t.archetype for t in sub.tasks} == {t.archetype for t in corpus.tasks}
    twins = [t for t in sub.tasks if t.twin_id]
    assert twins and len(twins) == 2 * len(sub.twin_pairs)
    assert sub.fingerprint == M.stratified_subset(corpus, 60, 0).fingerprint
    assert sub.fingerprint != M.stratified_subset(corpus, 60, 1).fingerprint


def test_notebook_without_network_or_transcripts_shows_the_gate_row_and_a_note(tmp_path, monkeypatch):
    from finbench.pipeline import ROOT, run_notebook
    from finbench.analysis.tables import read_table

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    params = {"n_tasks": 30, "subset_size": 12, "tables_dir": str(tmp_path / "tables"),
              "data_dir": str(tmp_path / "data"), "cache_dir": str(tmp_path / "cache")}
    run_notebook(ROOT / "notebooks" / "03_model_arm.ipynb", params, out_dir=tmp_path / "nb")
    t5 = read_table(tmp_path / "tables" / "table5.csv")
    assert list(t5["policy"]) == ["finality_gate"]
    md = (tmp_path / "tables" / "table5.md").read_text()
    assert "**No model row: no model was run.**" in md and fb.make_corpus(n_tasks=30).fingerprint in md
    claims = read_table(tmp_path / "tables" / "claims_model_arm.csv").set_index("id")
    assert (claims.loc[["model_exact", "model_gap", "model_probe_use", "model_premature"], "verdict"] == "not run").all()
    assert claims.loc["gate_subset_exact", "ours"] == pytest.approx(t5.loc[0, "exact_pct"])
    assert not (tmp_path / "data" / "model_runs").exists()  # nothing was asked, nothing recorded


def test_notebook_builds_table5_from_transcripts_on_disk(tmp_path, key):
    from finbench.pipeline import ROOT, run_notebook
    from finbench.analysis.tables import read_table

    run = M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)
    srv = Loopback()
    try:
        M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "data" / "model_runs", api_key_env=KEY_ENV,
                    progress=False)
    finally:
        srv.close()
    params = {"n_tasks": 30, "subset_size": 12, "tables_dir": str(tmp_path / "tables"),
              "data_dir": str(tmp_path / "data"), "cache_dir": str(tmp_path / "cache")}
    run_notebook(ROOT / "notebooks" / "03_model_arm.ipynb", params, out_dir=tmp_path / "nb")  # no endpoint
    t5 = read_table(tmp_path / "tables" / "table5.csv").set_index("policy")
    assert list(t5.index) == ["finality_gate", MODEL] and t5.loc[MODEL, "episodes"] == len(run.corpus)
    assert "No model row" not in (tmp_path / "tables" / "table5.md").read_text()
    _no_key_anywhere(tmp_path)


def test_a_transcript_that_no_longer_replays_is_left_alone_and_not_a_row(run, tmp_path, key, capfd):
    runs = tmp_path / "runs"
    srv = Loopback()
    try:
        M.run_model(run, MODEL, srv.base_url, transcripts=runs, api_key_env=KEY_ENV, progress=False)
    finally:
        srv.close()
    path = sorted((runs / "loopback_scripted_v1").glob("*.jsonl"))[0]
    recs = read_transcript(path)
    recs[-2]["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "read_bank"  # last answer
    recs[3]["sha"] = "0" * 64  # the second request no longer matches the conversation
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = path.read_bytes()
    rows = M.model_episodes(run, runs)
    assert len(rows) == len(run.corpus) - 1 and path.name.split("__")[0] not in set(rows["task_id"])
    assert path.read_bytes() == before and "does not replay" in capfd.readouterr().err
