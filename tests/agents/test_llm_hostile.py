"""`ModelAgent` and the model arm against hostile servers: every reply shape is a turn or a counted malformed
call (never an exception), a stored hostile reply resumes as it played, a transcript that cannot replay is set
aside, one writer per transcript, a total deadline per request, the key scrubbed from everything written,
model folders injective.

The servers are tests/agents/test_llm.py's loopback (`Loopback`, the scripted agent as the model), here made
to send one hostile reply (`Hostile`), to drip (`Drip`) or to echo the `Authorization` header.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import socket
import threading
import time
import warnings
from pathlib import Path

import openai
import pytest

import finbench as fb
from finbench.agents import llm
from finbench.agents.llm import ModelAgent, TranscriptWarning, model_dir_name, read_transcript
from finbench.experiments import model_arm as M
from tests.agents.test_llm import KEY, KEY_ENV, MODEL, Loopback, _direct, _no_key_anywhere, _transcripts_of_a_healthy_run
from tests.agents.test_llm import key, run  # noqa: F401 - the shared fixtures (API key, the subset's Run)

# tests marked slow run loopback servers, worker processes and request deadlines (make test-fast leaves them out)


class Raw:
    """A reply sent as these bytes (with these headers), not as JSON."""

    def __init__(self, data: bytes, headers: dict | None = None, status: int = 200):
        self.data, self.headers, self.status = data, dict(headers or {}), status


class Hostile(Loopback):
    """The loopback server, whose reply to request `at` is `fault(completion, brief)`: a JSON value to send
    instead of the scripted completion, or `Raw` bytes."""

    def __init__(self, fault, at: int = 1, **kw):
        super().__init__(faults={at: fault}, **kw)

    def respond(self, h, i, fault, brief, completion):
        if not callable(fault):
            return super().respond(h, i, fault, brief, completion)
        out = fault(completion, brief)
        if not isinstance(out, Raw):
            out = Raw(json.dumps(out).encode(), {"Content-Type": "application/json"})
        try:
            h.send_response(out.status)
            for k, v in {"Content-Length": str(len(out.data)), **out.headers}.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(out.data)
        except OSError:
            pass


def _msg(c):
    return c["choices"][0]["message"]


def _call(c):
    return _msg(c)["tool_calls"][0]


def _with(path: str, value):
    """A fault setting one field of the scripted completion (path: dotted, `0` for a list index)."""
    def fault(c, brief):
        node, keys = c, path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        node[int(last) if last.isdigit() else last] = value(c, brief) if callable(value) else value
        return c
    return fault


def _args(text):
    return _with("choices.0.message.tool_calls.0.function.arguments", text)


def _nested(depth: int):
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def _gzip_garbage(c, brief):
    return Raw(b"\x1f\x8b this is not gzip at all", {"Content-Type": "application/json", "Content-Encoding": "gzip"})


# (name, fault, malformed calls it costs: 1 for a malformed call, 0 for a turn)
CASES = [
    ("arguments '[' * 100000 (RecursionError)", _args("[" * 100_000), 1),
    ("tool_calls 'ship'", _with("choices.0.message.tool_calls", "ship"), 1),
    ("tool_calls ['ship']", _with("choices.0.message.tool_calls", ["ship"]), 1),
    ("choices 'nope'", _with("choices", "nope"), 1),
    ("message null", _with("choices.0.message", None), 1),
    ("content lone surrogate, no call", _with("choices.0.message", {"role": "assistant", "content": "\ud800"}), 1),
    ("content lone surrogate and a call", _with("choices.0.message.content", "hm \ud800 \udfff"), 0),
    ("tool name with a lone surrogate", _with("choices.0.message.tool_calls.0.function.name", "ship\ud800"), 1),
    ("arguments with a lone surrogate", _args(lambda c, b: json.dumps({"order_id": b["order_id"], "x": "\ud800"})), 1),
    ("body not JSON", lambda c, b: Raw(b"<html>502 Bad Gateway</html>"), 1),
    ("body empty", lambda c, b: Raw(b""), 1),
    ("body invalid UTF-8 in a string", lambda c, b: Raw(json.dumps(c).replace('"chat.completion"', '"\xff"')
                                                       .encode("latin-1")), 0),
    ("body with a BOM", lambda c, b: Raw(b"\xef\xbb\xbf" + json.dumps(c).encode()), 0),
    ("body '[' * 100000 (RecursionError)", lambda c, b: Raw(b"[" * 100_000), 1),
    ("body nested 40 deep", _with("usage", _nested(40)), 1),
    ("body a JSON array", lambda c, b: [c], 1),
    ("body a JSON number", lambda c, b: 5, 1),
    ("body a JSON string", lambda c, b: "hello", 1),
    ("body JSON null", lambda c, b: None, 1),
    ("body NaN and Infinity in fields", lambda c, b: {**c, "created": float("nan"), "x": float("inf")}, 0),
    ("body duplicate keys", lambda c, b: Raw(('{"choices": "no", ' + json.dumps(c)[1:]).encode()), 0),
    ("body over the size limit", _with("choices.0.message.content", "x" * 1_100_000), 1),
    ("content 600 KB with a call", _with("choices.0.message.content", "y" * 600_000), 0),
    ("content a list with a call", _with("choices.0.message.content", [{"type": "text", "text": "hi"}]), 0),
    ("content gzip that does not decode", _gzip_garbage, 1),
    ("status 201 and text/html", lambda c, b: Raw(json.dumps(c).encode(), {"Content-Type": "text/html"}, 201), 0),
    ("no choices", lambda c, b: {k: v for k, v in c.items() if k != "choices"}, 1),
    ("choices []", _with("choices", []), 1),
    ("choices [5]", _with("choices", [5]), 1),
    ("message a string", _with("choices.0.message", "ship it"), 1),
    ("message {}", _with("choices.0.message", {}), 1),
    ("tool_calls {}", _with("choices.0.message.tool_calls", {}), 1),
    ("tool_calls null", _with("choices.0.message.tool_calls", None), 1),
    ("tool call function null", _with("choices.0.message.tool_calls.0.function", None), 1),
    ("tool call without function", _with("choices.0.message.tool_calls.0", {"id": "x", "type": "function"}), 1),
    ("tool name 5", _with("choices.0.message.tool_calls.0.function.name", 5), 1),
    ("tool name 50 KB", _with("choices.0.message.tool_calls.0.function.name", "n" * 50_000), 1),
    ("tool call id 7", _with("choices.0.message.tool_calls.0.id", 7), 0),
    ("tool call id missing", lambda c, b: (_call(c).pop("id"), c)[1], 0),
    ("20 tool calls", lambda c, b: (_msg(c).update(tool_calls=[_call(c)] * 20), c)[1], 1),
    ("arguments 5", _args(5), 1),
    ("arguments an object", _args(lambda c, b: json.loads(_call(c)["function"]["arguments"])), 0),
    ("arguments missing", lambda c, b: (_call(c)["function"].pop("arguments"), c)[1], 1),
    ("arguments 'null'", _args("null"), 1),
    ("arguments '[1]'", _args("[1]"), 1),
    ("arguments a 5000-digit number", _args('{"order_id": ' + "1" * 5000 + "}"), 1),
    ("arguments ticks NaN", lambda c, b: _args(json.dumps({"order_id": b["order_id"], "ticks": float("nan")}))(
        _with("choices.0.message.tool_calls.0.function.name", "wait")(c, b), b), 1),
    ("arguments nested 20 deep", _args(lambda c, b: json.dumps({"order_id": _nested(20)})), 1),
    ("arguments 500 KB string", _args(lambda c, b: json.dumps({"order_id": b["order_id"], "z": "z" * 500_000})), 1),
]


def _records(path: Path) -> list[dict]:
    return [r for r in read_transcript(path) if isinstance(r, dict)]


def _shas(path: Path) -> list[str]:
    return [r["sha"] for r in _records(path) if r.get("kind") == "request"]


@pytest.mark.slow
@pytest.mark.parametrize("fault,malformed", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_reply_is_a_turn_or_a_counted_malformed_call_and_resumes_as_it_played(
        run, tmp_path, key, fault, malformed):
    task = run.corpus.tasks[0]
    kw = dict(api_key_env=KEY_ENV, max_retries=0, timeout=10)
    # uninterrupted: the hostile reply at request 1, then a healthy server
    srv = Hostile(fault)
    try:
        whole = ModelAgent(MODEL, srv.base_url, transcripts=tmp_path / "whole", **kw)
        ref = whole.episode(task, 0)
    finally:
        srv.close()
    assert whole.malformed == malformed and whole.requests == ref.n_calls == len(srv.seen)
    # interrupted right after the hostile reply (the server dies at request 2) ...
    srv = Hostile(fault, kill_after=2)
    cut = ModelAgent(MODEL, srv.base_url, transcripts=tmp_path / "cut", **kw)
    with pytest.raises(openai.APIConnectionError):
        cut.episode(task, 0)
    srv.close()
    path = cut.path(task.task_id, 0)
    assert [r["kind"] for r in _records(path)] == ["header", "request", "response", "request", "response"]
    # ... resumed against a healthy server: the stored hostile reply plays as it did live
    healthy = Loopback()
    try:
        again = ModelAgent(MODEL, healthy.base_url, transcripts=tmp_path / "cut", **kw)
        res = again.episode(task, 0)
    finally:
        healthy.close()
    assert again.replayed == 2 and min(s["turn"] for s in healthy.seen) == 2  # nothing asked twice
    assert again.malformed == malformed and _records(path)[-1]["malformed"] == malformed
    assert (res.position, res.n_calls, res.disposition) == (ref.position, ref.n_calls, ref.disposition)
    assert _shas(path) == _shas(whole.path(task.task_id, 0))  # the same conversation, request for request
    # ... and replayed from the transcript alone, again the same
    replay = ModelAgent(MODEL, None, transcripts=tmp_path / "cut")
    again_res = replay.episode(task, 0)
    assert replay.requests == 0 and replay.malformed == malformed
    assert (again_res.position, again_res.n_calls) == (ref.position, ref.n_calls)
    _no_key_anywhere(tmp_path)


@pytest.mark.slow
def test_a_key_echoed_by_the_server_is_written_nowhere(run, tmp_path, key, capfd):
    echo = {}

    def fault(c, brief):  # the Authorization header everywhere a reply can hold it
        auth = echo["auth"]
        _msg(c)["content"] = f"you sent {auth}"
        _call(c)["id"] = auth
        c["model"], c[auth] = auth, [auth, {"k": auth}]
        return c

    class Echo(Hostile):
        def handle(self, h):
            echo["auth"] = h.headers.get("Authorization", "")
            return super().handle(h)

    srv = Echo(fault, at=0)
    bad = Echo(lambda c, b: Raw(f"not json {echo['auth']}".encode()), at=1)
    refusing = Echo(lambda c, b: Raw(json.dumps({"error": {"message": f"bad key {echo['auth']}"}}).encode(),
                                     {"Content-Type": "application/json"}, 401), at=0)
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV,
                           progress=False)
        agent = ModelAgent(MODEL, bad.base_url, api_key_env=KEY_ENV, transcripts=tmp_path / "bad")
        agent.episode(run.corpus.tasks[0], 0)
        with pytest.raises(openai.AuthenticationError) as err:
            ModelAgent(MODEL, refusing.base_url, api_key_env=KEY_ENV, transcripts=tmp_path / "refused",
                       max_retries=0).episode(run.corpus.tasks[0], 0)
    finally:
        for s in (srv, bad, refusing):
            s.close()
    assert echo["auth"] == f"Bearer {KEY}" and len(rows) == len(run.corpus)
    assert agent.malformed == 1 and "***" in (tmp_path / "bad").rglob("*.jsonl").__next__().read_text()
    assert KEY not in str(err.value) and KEY not in json.dumps(err.value.body) and "***" in str(err.value)
    written = "".join(p.read_text() for p in (tmp_path / "runs").rglob("*.jsonl"))
    assert "you sent Bearer ***" in written
    out = capfd.readouterr()
    _no_key_anywhere(tmp_path, out.out, out.err)


@pytest.mark.slow
def test_data_model_runs_is_ignored_by_git():
    root = Path(__file__).resolve().parents[2]
    lines = (root / ".gitignore").read_text().split()
    assert "data/model_runs/" in lines


class Drip:
    """A server that sends a valid reply one byte every `every` seconds (`headers_first`: the headers at
    once, then the body byte by byte)."""

    def __init__(self, every: float = 0.25, headers_first: bool = False):
        self.every, self.headers_first, self.connections = every, headers_first, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 200}}]}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        try:
            conn.recv(65536)
            if self.headers_first:
                conn.sendall(head)
            for b in (body if self.headers_first else head + body):
                if self.stop.is_set():
                    break
                conn.sendall(bytes([b]))
                time.sleep(self.every)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.slow
@pytest.mark.parametrize("headers_first", [False, True], ids=["status line drips", "body drips"])
def test_a_dripping_server_cannot_hold_a_request_past_the_timeout(run, tmp_path, key, headers_first):
    srv = Drip(headers_first=headers_first)
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path, max_retries=1,
                           timeout=1.0)
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            agent.episode(run.corpus.tasks[0], 0)
        took = time.monotonic() - started
    finally:
        srv.close()
    assert srv.connections == 2  # the try and one retry, each cut at its own deadline
    assert took < 2 * 1.0 + 2.0, took  # two deadlines and the client's backoff; a per-read timeout: ~100 s


@pytest.mark.slow
def test_model_names_map_to_folders_injectively(run, tmp_path, key):
    names = ["org/m", "org_m", "org:m", "ORG/m", "m" * 300, "ünïcode/m"]
    dirs = {model_dir_name(n) for n in names}
    assert len(dirs) == len(names) and all(len(d) <= 80 and "/" not in d for d in dirs)
    assert model_dir_name("org/m").startswith("org_m-") and model_dir_name("org/m") == model_dir_name("org/m")
    small = M.subset_run(fb.PUBLIC_SEED, 30, 4, 0, seeds=[0], cache=False)
    srv = Loopback()
    try:
        for name in names[:2]:
            M.run_model(small, name, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV,
                        progress=False)
    finally:
        srv.close()
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert folders == sorted(model_dir_name(n) for n in names[:2])
    assert M.transcript_models(tmp_path / "runs") == sorted(names[:2])
    rows = M.model_episodes(small, tmp_path / "runs")
    assert rows.groupby("policy").size().to_dict() == {n: len(small.corpus) for n in names[:2]}
    # a folder named the old way ('org_m' for both) is adopted by the model its headers name
    (tmp_path / "runs" / model_dir_name("org/m")).rename(tmp_path / "runs" / "org_m")
    rows = M.model_episodes(small, tmp_path / "runs")
    assert rows.groupby("policy").size().to_dict() == {n: len(small.corpus) for n in names[:2]}
    assert not list((tmp_path / "runs" / "org_m").glob("*.jsonl"))


def _corrupt(path: Path, how: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    if how == "line 5":
        lines.insert(3, "5\n")
    elif how == "request without turn":
        rec = json.loads(lines[3])
        del rec["turn"]
        lines[3] = json.dumps(rec) + "\n"
    elif how == "header without model":
        rec = json.loads(lines[0])
        del rec["model"]
        lines[0] = json.dumps(rec) + "\n"
    elif how == "response out of turn":
        rec = json.loads(lines[4])
        rec["turn"] = 7
        lines[4] = json.dumps(rec) + "\n"
    elif how == "a fifo":
        path.unlink()
        os.mkfifo(path)
        return
    elif how == "a directory":
        path.unlink()
        path.mkdir()
        return
    elif how == "a link to nothing":
        path.unlink()
        path.symlink_to(path.with_name("nowhere"))
        return
    elif how == "a link to /dev/zero":
        path.unlink()
        path.symlink_to("/dev/zero")
        return
    path.write_text("".join(lines))


BREAKS = ["line 5", "request without turn", "header without model", "response out of turn", "a fifo", "a directory",
          "a link to nothing", "a link to /dev/zero"]


@pytest.mark.slow
def test_a_transcript_that_cannot_replay_is_set_aside_and_the_episode_played_again(run, tmp_path, key):
    runs = tmp_path / "runs"
    files = _transcripts_of_a_healthy_run(run, runs)
    broken = dict(zip(BREAKS, files))
    for how, path in broken.items():
        _corrupt(path, how)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = M.model_episodes(run, runs)  # Table V from the transcripts alone: no abort
    said = "\n".join(str(w.message) for w in caught if issubclass(w.category, TranscriptWarning))
    assert len(rows) == len(run.corpus) - len(BREAKS)
    for how, path in broken.items():
        aside = path.with_name(path.name[:-len(".jsonl")] + ".unreplayable-1.jsonl")
        assert not os.path.lexists(path) and os.path.lexists(aside), how
        assert str(path) in said and aside.name in said, how
    t5 = M.table5(run.evaluate(), rows)
    assert t5.set_index("policy").loc[MODEL, "episodes"] == len(rows)
    srv = Loopback()  # the endpoint again: exactly those episodes are played afresh
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=runs, api_key_env=KEY_ENV, progress=False)
    finally:
        srv.close()
    again = {p.name.split("__")[0] for p in broken.values()}
    assert {s["order_id"] for s in srv.seen} == {t.order_id for t in run.corpus.tasks if t.task_id in again}
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == _direct(run)
    assert len(M.model_episodes(run, runs)) == len(run.corpus)


def _run_model_into(base_url: str, folder: str, out: str) -> None:
    os.environ[KEY_ENV] = KEY
    run = M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)
    rows = M.run_model(run, MODEL, base_url, transcripts=folder, api_key_env=KEY_ENV, progress=False)
    Path(out).write_bytes(pickle.dumps(rows))


@pytest.mark.slow
def test_two_processes_on_one_folder_leave_every_transcript_replayable(run, tmp_path, key):
    srv = Loopback()
    ctx = multiprocessing.get_context("fork")
    try:
        procs = [ctx.Process(target=_run_model_into, args=(srv.base_url, str(tmp_path / "runs"),
                                                           str(tmp_path / f"rows{i}.pkl"))) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
    finally:
        srv.close()
    assert [p.exitcode for p in procs] == [0, 0]
    direct = _direct(run)
    for i in range(2):
        rows = pickle.loads((tmp_path / f"rows{i}.pkl").read_bytes())
        assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == direct
    folder = tmp_path / "runs" / model_dir_name(MODEL)
    assert sorted(p.name for p in folder.iterdir() if not llm.is_transcript(p)) == []  # no lock, nothing set aside
    replayed = M.model_episodes(run, tmp_path / "runs")
    assert {(r.task_id, r.seed): r.position for r in replayed.itertuples()} == direct
    assert len(srv.seen) == replayed["n_calls"].sum()  # no episode was asked twice


def test_one_writer_per_transcript_and_a_dead_writers_lock_is_taken_over(run, tmp_path, key):
    task = run.corpus.tasks[0]
    srv = Loopback()
    try:
        mine = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        other = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        assert mine.claim(task.task_id, 0, wait=False)
        lock = Path(str(mine.path(task.task_id, 0)) + ".lock")
        assert lock.read_text().strip() == str(os.getpid())
        assert not other.claim(task.task_id, 0, wait=False)  # held: the other writer must wait
        assert other.claim(run.corpus.tasks[1].task_id, 0, wait=False)  # another episode is free
        other.release()
        mine.release()
        assert not lock.exists()
        # a lock file left by a process that died (the kernel lock went with it): taken over
        dead = multiprocessing.get_context("fork").Process(target=int)
        dead.start()
        dead.join()
        lock.write_text(f"{dead.pid}\n")
        res = other.episode(task, 0)
    finally:
        srv.close()
    assert res.n_calls == other.requests > 0 and not lock.exists()
