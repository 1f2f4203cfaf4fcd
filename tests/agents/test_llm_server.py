"""The model arm against real servers (issue 29, part 6): a conversation the server refuses as too long ends
its episode and the run goes on, `timeout` and `max_tokens` reach the request, the key is scrubbed however
a server echoes it.

The server is tests/agents/test_llm.py's loopback (`Loopback`, the scripted agent as the model), here told to
refuse a conversation over `max_messages` as vLLM and llama.cpp refuse one over their context (400).
"""
from __future__ import annotations

import json

import openai
import pytest

import finbench as fb
from finbench.agents.llm import MAX_TOKENS, ModelAgent, ModelUnavailable, model_dir_name, read_transcript
from finbench.agents.llm_reply import SCRUBBED, scrub, scrub_error
from finbench.errors import FinbenchError
from finbench.experiments import model_arm as M
from tests.agents.test_llm import KEY, KEY_ENV, MODEL, Loopback, Script, _bare, _direct, _no_key_anywhere
from tests.agents.test_llm import key, run  # noqa: F401 - the shared fixtures (API key, the subset's Run)

# tests marked slow wait on request deadlines (make test-fast leaves them out)

# 2 + 2 * turn messages at a turn: turn 18 (38 messages) is refused, so the subset's two 20-call episodes
# (the unresolvable twins) end there and every other (at most 18 calls) finishes
MAX_MESSAGES = 36


def _echoes(key: str) -> list[str]:
    """The key as servers echo it: another case, separators every 4 characters, reversed."""
    groups = [key[i:i + 4] for i in range(0, len(key), 4)]
    return [key.upper(), key.lower(), key.swapcase(), *(sep.join(groups) for sep in "- _."),
            "-".join(groups).upper(), " ".join(g.upper() for g in groups), key[::-1]]


class Echo(Loopback):
    """The loopback server echoing the key transformed, in every reply's content and in its refusals."""

    def respond(self, h, i, fault, brief, completion):
        completion["choices"][0]["message"]["content"] = f"you sent {_echoes(KEY)[i % len(_echoes(KEY))]}"
        super().respond(h, i, fault, brief, completion)

    def refusal(self, i):
        return f"{super().refusal(i)} (key {_echoes(KEY)[i % len(_echoes(KEY))]})"


class Closing(Script):
    """The script for `turns` calls, then a close: what the agent does when the server refuses the next turn."""

    def __init__(self, turns: int):
        self.turns, self.n = turns, 0

    def act(self, obs):
        self.n += 1
        return ("close", {"order_id": self.order}) if self.n > self.turns else super().act(obs)


def _ends(runs) -> dict:
    """task id -> the end record of its transcript."""
    return {p.name.split("__")[0]: read_transcript(p)[-1] for p in (runs / model_dir_name(MODEL)).glob("*.jsonl")}


@pytest.mark.slow
def test_a_conversation_too_long_for_the_server_ends_its_episode_and_the_run_goes_on(run, tmp_path, key):
    runs = tmp_path / "runs"
    srv = Echo(max_messages=MAX_MESSAGES)
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=runs, api_key_env=KEY_ENV, progress=False)
    finally:
        srv.close()
    # every episode has its row; the refused ones are closed at the refused turn, the others play as the script
    assert len(rows) == len(run.corpus) * len(run.seeds)
    long = rows[rows["ended"] == "context_length"]
    assert set(long["task_id"]) == {t.task_id for t in run.corpus.tasks
                                    if fb.run_episode(t, Script(), 0).n_calls > MAX_MESSAGES // 2}
    assert 0 < len(long) < len(rows) and (long["disposition"] == "close").all()
    assert (long["n_calls"] == MAX_MESSAGES // 2 + 1).all()  # 18 turns played, the refused one answered by a close
    # counted as the environment makes of the script's 18 calls and a close: the settle twin failed (a
    # close with its capture settled, goods never shipped); closing the fail twin is what the reference does
    for r in long.itertuples():
        task = next(t for t in run.corpus.tasks if t.task_id == r.task_id)
        cut = fb.run_episode(task, Closing(MAX_MESSAGES // 2), r.seed)
        assert (r.position, r.exact, r.gap, r.n_calls) == (cut.position, cut.exact, cut.gap, cut.n_calls)
    assert not long["exact"].all()  # at least one counts as failed
    direct = _direct(run)
    rest = rows[rows["ended"] == ""]
    assert {(r.task_id, r.seed): r.position for r in rest.itertuples()} == {k: direct[k] for k in
                                                                           zip(rest.task_id, rest.seed)}
    refused = [s for s in srv.seen if s["fault"] == "context"]
    assert len(refused) == len(long) and len(srv.seen) == rows["n_calls"].sum()  # one request per call, none again
    # the end record says why, with the server's words (the key it echoed scrubbed)
    ends = _ends(runs)
    for task_id in long["task_id"]:
        end = ends[task_id]
        assert end["ended"] == "context_length" and end["status"] == 400 and end["disposition"] == "close"
        assert "maximum context length is 4096 tokens" in end["error"] and f"key {SCRUBBED}" in end["error"]
    assert all("ended" not in ends[t] for t in rest["task_id"])
    # Table V counts them: attempted, and what the environment made of the close
    replayed = M.model_episodes(run, runs)
    t5 = M.table5(run.evaluate(), replayed).set_index("policy")
    assert t5.loc[MODEL, "episodes"] == len(rows) and t5.loc[MODEL, "exact_pct"] == pytest.approx(
        100 * rows["exact"].mean())
    assert sorted(replayed.loc[replayed["ended"] == "context_length", "task_id"]) == sorted(long["task_id"])
    # a second run resumes from the transcripts: nothing is asked again, the refused request least of all
    again = Loopback(max_messages=MAX_MESSAGES)
    try:
        rows2 = M.run_model(run, MODEL, again.base_url, transcripts=runs, api_key_env=KEY_ENV, progress=False)
    finally:
        again.close()
    assert again.seen == [] and rows2.drop(columns="ended").equals(rows.drop(columns="ended"))
    assert list(rows2["ended"]) == list(rows["ended"])
    _no_key_anywhere(tmp_path)


def test_a_run_killed_after_the_refusal_resumes_without_asking_again(run, tmp_path, key):
    task = next(t for t in run.corpus.tasks if fb.run_episode(t, Script(), 0).n_calls > MAX_MESSAGES // 2)
    srv = Loopback(max_messages=MAX_MESSAGES)
    try:
        first = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        res = first.episode(task, 0)
    finally:
        srv.close()
    assert first.ended == "context_length" and res.disposition == "close"
    path = first.path(task.task_id, 0)
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-2])["ended"] == "context_length"  # the refusal is the last response
    path.write_bytes(b"".join(lines[:-1]))  # killed before the end record was written
    again = Loopback(max_messages=MAX_MESSAGES)
    try:
        agent = ModelAgent(MODEL, again.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        res2 = agent.episode(task, 0)
    finally:
        again.close()
    assert again.seen == [] and agent.requests == 0 and agent.ended == "context_length"
    assert (res2.position, res2.n_calls, res2.disposition) == (res.position, res.n_calls, res.disposition)
    assert read_transcript(path)[-1]["ended"] == "context_length"


def test_a_refused_first_request_is_a_configuration_error_not_an_episode(run, tmp_path, key):
    """The system prompt and the brief alone do not fit (or max_tokens is over the context): no episode."""
    srv = Loopback(max_messages=1)
    try:
        agent = ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=tmp_path)
        with pytest.raises(ModelUnavailable, match="first request.*context.*max_tokens"):
            agent.episode(run.corpus.tasks[0], 0)
        with pytest.raises(ModelUnavailable):
            M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path, api_key_env=KEY_ENV, progress=False)
    finally:
        srv.close()
    assert not agent.finished(run.corpus.tasks[0].task_id, 0)


@pytest.mark.parametrize("status,message,error", [
    (400, "tools[3].function.parameters: invalid schema", openai.BadRequestError),
    (404, "model 'nope' not found", openai.NotFoundError),
    (401, "invalid api key", openai.AuthenticationError),
])
def test_other_client_errors_still_stop_the_run(run, tmp_path, key, status, message, error):
    class Refusing(Loopback):
        def respond(self, h, i, fault, brief, completion):
            self._send(h, status, {"error": {"message": f"{message} ({KEY.upper()})"}})

    srv = Refusing()
    try:
        with pytest.raises(error) as err:
            M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV,
                        progress=False, max_retries=0)
    finally:
        srv.close()
    # one request per connection at most (they went out together), none after the error
    assert 1 <= len(srv.seen) <= M.MODEL_CONNECTIONS and message in str(err.value) and _bare(KEY) not in _bare(str(err.value))
    assert SCRUBBED in str(err.value) and _bare(KEY) not in _bare(json.dumps(err.value.body))


@pytest.mark.slow
def test_the_key_echoed_in_another_case_or_with_separators_is_scrubbed():
    for echoed in _echoes(KEY):
        assert scrub({"a": [f"x {echoed} y"], echoed: 1}, KEY) == {"a": [f"x {SCRUBBED} y"], SCRUBBED: 1}, echoed
    # the key's own separators may be dropped or changed too; text that is not the key is left alone
    assert scrub("SKLOOPBACK7F3C9A1E5B2D4C6F8E0A!", KEY) == SCRUBBED + "!"
    assert scrub("sk_loopback_7f3c9a1e5b2d4c6f8e0a", KEY) == SCRUBBED
    assert scrub("sk-loopback-7f3c9a1e5b2d4c6f8e0b", KEY) == "sk-loopback-7f3c9a1e5b2d4c6f8e0b"
    assert scrub("a plain record: ship, refund, wait", KEY) == "a plain record: ship, refund, wait"
    err = openai.OpenAIError(f"denied for {KEY.upper()[::-1]}")
    scrub_error(err, KEY)
    assert str(err) == f"denied for {SCRUBBED}"
    # a key too short to tell from words is left in place (scrubbed, "ship" would rename the tool)
    assert scrub("ship it", "ship") == "ship it"


@pytest.mark.slow
def test_the_key_echoed_transformed_is_written_nowhere(run, tmp_path, key, capfd):
    srv = Echo(max_messages=MAX_MESSAGES)
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV,
                           progress=False)
    finally:
        srv.close()
    written = "".join(p.read_text() for p in (tmp_path / "runs").rglob("*.jsonl"))
    assert f"you sent {SCRUBBED}" in written and f"(key {SCRUBBED})" in written and (rows["ended"] != "").any()
    out = capfd.readouterr()
    _no_key_anywhere(tmp_path, out.out, out.err)


@pytest.mark.slow
def test_timeout_and_max_tokens_reach_the_request(run, tmp_path, key):
    srv = Loopback(faults={1: "slow"})  # one reply slower than the timeout: the client gives up and retries
    try:
        rows = M.episodes(run, tmp_path / "runs", MODEL, srv.base_url, KEY_ENV, timeout=0.5, max_tokens=77,
                          max_connections=1)  # one at a time: the slow reply is the second request
    finally:
        srv.close()
    assert {s["max_tokens"] for s in srv.seen} == {77}
    assert srv.seen[2]["turn"] == srv.seen[1]["turn"]  # the slow turn asked again: the 0.5 s timeout was used
    assert len(rows["models"]) == len(run.corpus)  # the episodes under max_tokens=77 are the ones replayed
    header = read_transcript(next((tmp_path / "runs").rglob("*.jsonl")))[0]
    assert header["params"] == {"temperature": 0.0, "max_tokens": 77}
    # the default: a bounded reply, sent with every request; None sends none
    srv = Loopback()
    try:
        ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=None).episode(run.corpus.tasks[0], 0)
        n = len(srv.seen)
        ModelAgent(MODEL, srv.base_url, api_key_env=KEY_ENV, transcripts=None, max_tokens=None).episode(
            run.corpus.tasks[0], 0)
    finally:
        srv.close()
    assert MAX_TOKENS == 1024 and {s["max_tokens"] for s in srv.seen[:n]} == {1024}
    assert {s["max_tokens"] for s in srv.seen[n:]} == {None}


@pytest.mark.slow
@pytest.mark.parametrize("kw,name", [
    ({"max_tokens": "1024"}, "max_tokens"), ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": 512.0}, "max_tokens"), ({"timeout": "120"}, "timeout"), ({"timeout": 0}, "timeout"),
    ({"timeout": float("inf")}, "timeout"), ({"timeout": True}, "timeout"), ({"max_retries": -1}, "max_retries"),
    ({"max_retries": 2.5}, "max_retries"), ({"temperature": "0"}, "temperature"),
])
def test_bad_timeout_or_max_tokens_are_refused_by_name(run, tmp_path, kw, name):
    with pytest.raises(FinbenchError, match=f"ModelAgent: {name} must be"):
        ModelAgent(MODEL, "http://127.0.0.1:9/v1", transcripts=None, **kw)
    if name in ("timeout", "max_tokens"):  # before anything is played or asked
        with pytest.raises(FinbenchError, match=f"{name} must be"):
            M.episodes(run, tmp_path / "runs", MODEL, "http://127.0.0.1:9/v1", **kw)
        assert not (tmp_path / "runs").exists()


def test_no_server_names_the_url_it_tried():
    import openai

    from finbench.agents.llm import ModelAgent

    agent = ModelAgent("m", base_url="http://127.0.0.1:9/v1", transcripts=None, max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError, match=r"no answer from http://127\.0\.0\.1:9/v1"):
        fb.run_episode(fb.make_corpus(n_tasks=9).tasks[0], agent)
