"""A model's episodes overlap their waiting (issue 42): rows and transcripts the same for any number of
connections, an interrupted run resumes re-asking at most what was in flight, a server that is not running
fails the first request at once, and `finbench eval --model` writes a model's own card whose request count is
what the server received. Against loopback servers only (`finbench.agents.mock_server`, tests/agents/test_llm.py's
`Loopback`)."""
from __future__ import annotations

import json
import time

import openai
import pytest

import finbench as fb
from finbench.agents.llm import ModelAgent, model_dir_name
from finbench.agents.llm_traffic import Usage
from finbench.agents.mock_server import MockServer
from finbench.cli import main
from finbench.experiments import model_arm as M
from tests.agents.test_llm import KEY_ENV, MODEL, Loopback, _direct, _no_key_anywhere
from tests.agents.test_llm import key, run  # noqa: F401 - the shared fixtures (API key, the subset's Run)

# tests marked slow run loopback servers


def _files(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


@pytest.mark.slow
def test_rows_and_transcripts_are_the_same_for_any_number_of_connections(run, tmp_path):
    got = {}
    with MockServer(latency=0.02) as srv:
        for n in (1, 3, 16):
            got[n] = M.run_model(run, "careful", srv.base_url, transcripts=tmp_path / str(n), progress=False,
                                 max_connections=n)
        answered = srv.stats()["answered"]
    assert len(got[1]) == len(run.corpus) and got[1]["n_calls"].sum() * 3 == answered
    files = {n: _files(tmp_path / str(n)) for n in got}
    assert len(files[1]) == len(run.corpus)
    for n in (3, 16):
        assert got[n].equals(got[1]) and files[n] == files[1]


@pytest.mark.slow
def test_the_episodes_requests_overlap_up_to_the_connections(run, tmp_path):
    """How much faster that is, is measured by `make bench-model`, not here: here, that they overlap."""
    with MockServer(latency=0.05) as srv:
        M.run_model(run, "careful", srv.base_url, transcripts=tmp_path, progress=False, max_connections=6)
        assert srv.stats()["max_in_flight"] == 6
    with MockServer(latency=0.005) as srv:  # one at a time whatever the latency: a short one keeps the run short
        M.run_model(run, "careful", srv.base_url, transcripts=tmp_path / "one", progress=False, max_connections=1)
        assert srv.stats()["max_in_flight"] == 1


@pytest.mark.slow
def test_an_interrupted_run_resumes_re_asking_at_most_what_was_in_flight(run, tmp_path, key):
    runs = tmp_path / "runs"
    first = Loopback(kill_after=60)
    with pytest.raises(openai.APIConnectionError):
        M.run_model(run, MODEL, first.base_url, transcripts=runs, api_key_env=KEY_ENV, max_retries=0, timeout=5,
                    max_connections=8, progress=False)
    agent = ModelAgent(MODEL, None, transcripts=runs)
    done = {t.task_id for t in run.corpus.tasks if agent.finished(t.task_id, 0)}
    assert done and len(done) < len(run.corpus)
    second = Loopback()
    try:
        rows = M.run_model(run, MODEL, second.base_url, transcripts=runs, api_key_env=KEY_ENV, max_connections=8,
                           progress=False)
    finally:
        second.close()
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == _direct(run)
    # every answer the first server gave was kept: nothing it answered is asked again
    assert len(first.seen) + len(second.seen) == rows["n_calls"].sum()
    _no_key_anywhere(tmp_path)


def test_a_server_that_is_not_running_fails_the_first_request_at_once(run, tmp_path):
    with MockServer() as srv:
        dead = srv.base_url  # a port nothing listens on once it is closed
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError, match=r"no answer from http://127\.0\.0\.1:\d+/v1/? \(is the server "
                                                        r"running, and is base_url right\?\)"):
        M.run_model(run, "careful", dead, transcripts=tmp_path, progress=False, max_retries=5)
    assert time.monotonic() - started < 3  # not the client's retries with backoff (about 26 s)


def _eval(tmp_path, base_url, *more):
    return main(["eval", "--model", "careful", "--base-url", base_url, "--task-ids", "ord-0001,ord-0002,ord-0005",
                 "--seeds", "2", "--n-jobs", "1", "--no-cache", "--transcripts", str(tmp_path / "runs"), *more])


@pytest.mark.slow
def test_eval_model_writes_a_card_whose_requests_are_what_the_server_received(tmp_path, capsys):
    with MockServer(latency=0.01) as srv:
        assert _eval(tmp_path, srv.base_url, "--out", str(tmp_path / "card")) == 0
        stats = srv.stats()
    out = capsys.readouterr().out
    card = json.loads((tmp_path / "card" / "card.json").read_text())
    m = card["model"]
    assert m["requests"] == stats["answered"] > 0 and m["requests_sent"] == stats["requests"]
    assert m["name"] == "careful" and m["endpoint"] == srv.base_url and m["max_connections"] == 8
    assert m["params"] == {"temperature": 0.0, "max_tokens": 1024} and len(m["prompt_hash"]) == 12
    n = card["source"]["episodes"]
    assert n == 3 * 2  # three tasks (no twin among them), two seeds
    assert m["episodes"] == {"asked_now": n, "resumed": 0, "replayed": 0} and not m["tokens_estimated"]
    assert m["latency_median_s"] >= 0.01 and m["transcripts"] == str(tmp_path / "runs")
    assert card["source"]["played_now"] == n and card["source"]["asked_now"] == n
    report = (tmp_path / "card" / "report.md").read_text()
    assert "## The model" in report and f"{m['requests']:,} answered" in report
    assert f"{n} asked now" in out and f"model: {m['requests']:,} requests" in out
    rows = (tmp_path / "card" / "rows.csv").read_text()
    # a second run replays every episode from its transcripts: 0 requests, and the card says so
    with MockServer() as again:
        assert _eval(tmp_path, again.base_url, "--out", str(tmp_path / "card2")) == 0
        assert again.stats()["requests"] == 0
    card2 = json.loads((tmp_path / "card2" / "card.json").read_text())
    assert card2["model"]["requests"] == 0 and card2["model"]["episodes"] == {"asked_now": 0, "resumed": 0,
                                                                              "replayed": n}
    assert card2["source"]["played_now"] == 0 and f"{n} replayed from transcripts (0 requests)" in \
        card2["source"]["text"] and "played now" not in card2["source"]["text"]
    assert (tmp_path / "card2" / "rows.csv").read_text() == rows
    # replay only (no endpoint): the same rows
    assert main(["eval", "--model", "careful", "--task-ids", "ord-0001,ord-0002,ord-0005", "--seeds", "2",
                 "--n-jobs", "1", "--no-cache", "--transcripts", str(tmp_path / "runs"), "--out",
                 str(tmp_path / "card3")]) == 0
    assert (tmp_path / "card3" / "rows.csv").read_text() == rows
    assert json.loads((tmp_path / "card3" / "card.json").read_text())["model"]["endpoint"] is None


@pytest.mark.slow
def test_eval_model_survives_a_rate_limit_and_counts_it(tmp_path, capsys):
    with MockServer(latency=0.02, max_in_flight=2) as srv:
        assert _eval(tmp_path, srv.base_url, "--out", str(tmp_path / "card"), "--max-connections", "6") == 0
        stats = srv.stats()
    m = json.loads((tmp_path / "card" / "card.json").read_text())["model"]
    assert stats["rate_limited"] > 0 and m["rate_limited"] == stats["rate_limited"]
    assert m["requests"] == stats["answered"] and m["requests_sent"] == stats["requests"]
    assert stats["max_in_flight_answered"] <= 2


@pytest.mark.slow
@pytest.mark.parametrize("args,says", [
    ([], "give AGENT (PATH.py:NAME or module:NAME) or --model NAME"),
    (["x.py:A", "--model", "m"], "give AGENT or --model, not both"),
    (["--model", "finality_gate"], "reads as 'finality_gate', one of the nine"),
    (["--model", "m", "--max-connections", "0"], "--max-connections: must be a positive integer"),
])
def test_eval_model_refuses_what_it_cannot_run(args, says, tmp_path, capsys):
    code = main(["eval", *args, "--out", str(tmp_path / "card")])
    err = capsys.readouterr().err
    assert code in (64, 65) and says in err and not (tmp_path / "card").exists()


def test_eval_model_against_a_server_that_is_not_running_says_so_at_once(tmp_path, capsys):
    with MockServer() as srv:
        dead = srv.base_url
    started = time.monotonic()
    assert _eval(tmp_path, dead, "--out", str(tmp_path / "card")) == 70
    err = capsys.readouterr().err
    assert "no answer from" in err and "is the server running" in err and time.monotonic() - started < 10
    assert not (tmp_path / "card").exists()


@pytest.mark.slow
def test_usage_is_shared_by_every_copy_of_an_agent(run, tmp_path):
    usage = Usage()
    with MockServer() as srv:
        rows = M.run_model(run, "careful", srv.base_url, transcripts=tmp_path, progress=False, max_connections=4,
                           usage=usage)
    assert usage.requests == rows["n_calls"].sum() and usage.asked == len(rows)
    assert (tmp_path / model_dir_name("careful")).is_dir()


@pytest.mark.slow
def test_a_thread_deadline_stops_a_slow_agent_on_threads(tmp_path, capsys):
    """On threads no alarm reaches the agent: its next call after the limit ends the run (the first episode,
    played alone beforehand, is quick)."""
    fast = tmp_path / "later.py"
    fast.write_text("import time\nclass Later:\n    name = 'later'\n    def begin(self, brief):\n"
                    "        self.order = brief['order_id']\n    def act(self, obs):\n"
                    "        if self.order != 'ord-0001':\n            time.sleep(0.1)\n"
                    "        return 'probe_processor', {'order_id': self.order}\n")
    started = time.monotonic()
    code = main(["eval", f"{fast}:Later", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1", "--no-cache",
                 "--max-connections", "4", "--episode-timeout", "1", "--out", str(tmp_path / "card")])
    err = capsys.readouterr().err
    assert code == 70 and "ran over the limit of 1 s per episode" in err, err
    assert time.monotonic() - started < 20


@pytest.mark.slow
@pytest.mark.parametrize("connections", ["1", "4"])
def test_a_twin_pairs_halves_keep_transcripts_of_their_own(tmp_path, capsys, connections):
    """The halves of a twin pair share their order id and their brief: `evaluate` tells a `ModelAgent` which
    task it plays, so each half is asked, and transcribed, as itself (never replayed from its twin's)."""
    pair = [t for t in fb.make_corpus().tasks if t.order_id == "ord-0014"]
    assert [t.twin_side for t in pair] == ["settle", "fail"]
    with MockServer() as srv:
        assert main(["eval", "--model", "careful", "--base-url", srv.base_url, "--task-ids", "ord-0014",
                     "--seeds", "2", "--n-jobs", "1", "--no-cache", "--transcripts", str(tmp_path / "runs"),
                     "--max-connections", connections, "--out", str(tmp_path / "card")]) == 0
        answered = srv.stats()["answered"]
    m = json.loads((tmp_path / "card" / "card.json").read_text())["model"]
    assert m["episodes"] == {"asked_now": 4, "resumed": 0, "replayed": 0}
    # the card's timelines of the pair replay its transcripts: the server was asked for the card's episodes only
    assert (tmp_path / "card" / "worst_twin_pair.png").exists() and m["requests"] == answered
    assert "afresh (not cached)" not in capsys.readouterr().err  # a model replays from its transcripts
    names = sorted(p.name.split("__")[0] for p in (tmp_path / "runs").rglob("*.jsonl"))
    assert names == sorted(t.task_id for t in pair for _ in range(2)) and len(set(names)) == 2
