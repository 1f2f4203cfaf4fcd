"""Inspect against a server that refuses long conversations (issue 42, part 6): a context-length refusal, in
llama.cpp's or vLLM's words, closes and scores its sample as `ModelAgent` closes its episode; `finbench inspect`
exits 1 when a sample is left unscored; and the package's tasks are registered with Inspect, so that
`inspect eval finbench/finbench` runs from any folder. The server is `finbench.agents.mock_server` on 127.0.0.1."""
from __future__ import annotations

import json
import subprocess

import pytest

import finbench as fb
from finbench.agents.mock_server import MockServer
from finbench.cli import main
from finbench.running.inspect_task import context_refusal, unscored

# tests marked slow start loopback servers and Inspect runs

inspect_ai = pytest.importorskip("inspect_ai")

MODEL = "openai-api/local/careful"


@pytest.fixture
def local(monkeypatch):
    def point(srv):
        monkeypatch.setenv("LOCAL_BASE_URL", srv.base_url)
        monkeypatch.setenv("LOCAL_API_KEY", "none")
    return point


@pytest.mark.slow
@pytest.mark.parametrize("wording", ["llamacpp", "vllm"])
def test_a_context_length_refusal_closes_and_scores_the_sample(local, tmp_path, wording):
    task = fb.inspect_task(n_tasks=30, subset_size=12)
    with MockServer(max_messages=12, wording=wording) as srv:
        local(srv)
        # a model name per server: Inspect keeps a model, and the base URL it was made with, per name
        logs = inspect_ai.eval(task, model=f"{MODEL}-{wording}", display="none", log_dir=str(tmp_path), max_connections=4)
        refused = srv.stats()["context_refused"]
    assert unscored(logs) == [] and logs[0].status == "success"
    samples = logs[0].samples
    ended = [s.scores["finbench"].metadata["ended"] for s in samples]
    long = [e for e in ended if e.startswith("context_length")]
    assert len(samples) == len(task.dataset) and long and len(long) == refused < len(samples)
    for s in samples:
        ep = s.scores["finbench"].metadata
        if ep["ended"].startswith("context_length"):
            assert ep["disposition"] == "close" and ep["turns"] == 6  # the 7th request has 14 messages: refused


@pytest.mark.slow
def test_finbench_inspect_exits_1_when_a_sample_is_unscored_and_0_when_all_are(local, tmp_path, capsys):
    args = ["inspect", "--model", MODEL, "-T", "n_tasks=30", "-T", "subset_size=12", "--limit", "3",
            "--max-connections", "3", "--log-dir", str(tmp_path)]
    with MockServer(max_messages=1) as srv:  # the first request is refused: the prompt alone does not fit
        local(srv)
        assert main(args) == 1
    err = capsys.readouterr().err
    assert "finbench inspect: 3 unscored (0 samples scored): sample ord-0010__seed0:" in err
    assert "maximum context length" in err
    with MockServer() as srv:  # another model name: Inspect keeps a model (and its base URL) per name
        local(srv)
        assert main([*args[:2], MODEL + "-again", *args[3:]]) == 0
    assert "every sample scored (3)" in capsys.readouterr().out


def test_context_refusal_reads_the_provider_and_its_cause():
    class Provider(Exception):
        status_code = 400
        message = "the request exceeds the available context size, try increasing it"

    class Wrapped(RuntimeError):
        status_code = 400
        provider_message = "Error code: 400 - the request exceeds the available context size"

    assert "exceeds the available" in context_refusal(Provider())
    assert "exceeds the available" in context_refusal(Wrapped("\nRequest: {... max_tokens ...}"))
    try:
        raise RuntimeError("wrapper") from Provider()
    except RuntimeError as e:
        assert "exceeds" in context_refusal(e)

    class Other(Exception):
        status_code = 400
        message = "tools[3].function.parameters: invalid schema"

    assert context_refusal(Other()) is None and context_refusal(ValueError("x")) is None


@pytest.mark.slow
def test_the_registered_task_runs_from_any_folder(tmp_path):
    from tests.running.test_inspect_cli import BIN, offline_env

    with MockServer() as srv:
        env = offline_env(tmp_path, LOCAL_BASE_URL=srv.base_url, LOCAL_API_KEY="none")
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([str(BIN / "inspect"), "eval", "finbench/finbench", "--model", MODEL, "-T", "n_tasks=9",
                               "--limit", "2", "--max-connections", "2", "--log-dir", str(tmp_path / "logs"),
                               "--log-format", "json", "--display", "none"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=180)
        answered = srv.stats()["answered"]
    assert proc.returncode == 0, proc.stderr
    log = json.loads(next((tmp_path / "logs").glob("*.json")).read_text())
    assert log["status"] == "success" and log["eval"]["task_registry_name"] == "finbench/finbench"
    assert len(log["samples"]) == 2 and all(s["scores"]["finbench"] for s in log["samples"]) and answered > 0
