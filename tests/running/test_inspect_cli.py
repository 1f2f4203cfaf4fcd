"""The `inspect` command line itself, each run a subprocess with no network: docs/inspect.md's offline mock
line and its local-server recipe, run as the docs print them, and the exit status of a run in which no
sample completes.

No network: every proxy variable points at the discard port (127.0.0.1:9, where nothing listens, so any
attempt to reach the internet is refused at once), loopback alone bypasses it, and tiktoken's cache is an
empty folder (a download of its encoding would be the first thing to fail). The local server is
`tests/agents/test_llm.py`'s `Loopback` (the scripted agent answering chat completions on 127.0.0.1),
here also recording each request; it stops itself after `LIFETIME` seconds whatever happens.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from io import BytesIO
from pathlib import Path

import pytest

import finbench as fb
from tests.agents.test_llm import Loopback, Script

pytestmark = pytest.mark.slow  # runs the inspect command line in subprocesses (make test-fast leaves it out)



@pytest.fixture(autouse=True, scope="module")
def _inspect_installed():
    pytest.importorskip("inspect_ai")  # when the tests run, not at collection: the import costs seconds

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "inspect.md"
BIN = Path(sys.executable).parent  # `inspect` is installed beside the interpreter running the tests
TIMEOUT = 180  # s, one CLI run (about 5 s here)
LIFETIME = 240.0  # s, the loopback server's
DEAD = "http://127.0.0.1:9"


def doc_line(*markers: str) -> str:
    """The one shell line of docs/inspect.md that runs `inspect` and holds every marker (continuations
    joined), with `.venv/bin/` made this interpreter's folder."""
    text = DOCS.read_text().replace("\\\n", " ")
    lines = [" ".join(line.split()) for line in text.splitlines()
             if ".venv/bin/inspect" in line and all(m in line for m in markers)]
    assert len(lines) == 1, f"docs/inspect.md: {len(lines)} command lines hold {markers!r}"
    return lines[0].replace(".venv/bin/", f"{BIN}/")


def offline_env(tmp_path: Path, **extra: str) -> dict:
    """This environment without Inspect's, OpenAI's or the recipe's variables, and with no way out but
    loopback."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("INSPECT_", "OPENAI_", "LOCAL_", "OLLAMA_"))
           and k.lower() not in ("https_proxy", "http_proxy", "all_proxy", "no_proxy")}
    (tmp_path / "tiktoken").mkdir(exist_ok=True)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = DEAD
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def run_cli(cmd: str, env: dict) -> subprocess.CompletedProcess:
    """`cmd` under bash in the repository root; past `TIMEOUT` its whole process group is killed (bash and
    the `inspect` it started) and the test fails."""
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cmd!r} ran past {TIMEOUT} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def with_logs(cmd: str, logs: Path) -> str:
    """`cmd` writing its log as JSON under `logs` (replacing any `--log-dir` it names), without a live display."""
    cmd = re.sub(r" --log-dir \S+", "", cmd)
    return f"{cmd} --log-dir {logs} --log-format json --display plain"


def only_log(logs: Path) -> dict:
    files = sorted(logs.glob("*.json"))
    files = [f for f in files if not f.name.startswith(("eval-set", "logs"))]  # eval-set's own records
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


class Recorder(Loopback):
    """`Loopback`, recording each request's path and body; a path other than /v1/chat/completions (the
    Responses API's /v1/responses), or every path when `refuse`, is answered 404 as a local server does
    (Ollama's words for a model it has not pulled)."""

    def __init__(self, refuse: bool = False):
        self.requests: list[tuple[str, dict]] = []
        self.refuse = refuse
        super().__init__()
        self.timer = threading.Timer(LIFETIME, self.close)  # bounded: stops even if a test hangs
        self.timer.daemon = True
        self.timer.start()

    def handle(self, h):
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        self.requests.append((h.path, json.loads(raw or b"{}")))
        if self.refuse or h.path != "/v1/chat/completions":
            return self._send(h, 404, {"error": {"message": 'model "llama3.1" not found, try pulling it first',
                                                 "type": "not_found_error"}})
        h.rfile = BytesIO(raw)
        super().handle(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        self.close()


def test_the_mock_line_runs_offline(tmp_path):
    """docs' `--model mockllm/model` line: the mock's replies carry no token usage, which Inspect would
    count with tiktoken (a download); every sample completes, closed (the mock never calls a tool)."""
    res = run_cli(with_logs(doc_line("--model mockllm/model"), tmp_path / "logs"), offline_env(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    log = only_log(tmp_path / "logs")
    assert log["status"] == "success", log.get("error")
    assert log["results"]["completed_samples"] == log["results"]["total_samples"] == len(log["samples"]) > 0
    assert all(s["scores"]["finbench"]["answer"] == "close" for s in log["samples"])
    assert not any((tmp_path / "tiktoken").iterdir())


@pytest.mark.parametrize("markers,env", [
    (("--model openai-api/local/",), lambda url: {"LOCAL_BASE_URL": url, "LOCAL_API_KEY": "none"}),
    (("--model ollama/",), lambda url: {"OLLAMA_BASE_URL": url}),
], ids=["openai-api", "ollama"])
def test_the_local_server_recipe_keeps_the_tasks_generation_config(tmp_path, markers, env):
    """docs' local-server lines against a loopback server: chat completions (never /responses), the task's
    temperature 0 and one tool call per turn in every request, every sample completed and scored as the
    scripted agent plays directly."""
    docs = DOCS.read_text()
    assert "export LOCAL_BASE_URL=" in docs and "export LOCAL_API_KEY=" in docs
    with Recorder() as srv:
        res = run_cli(with_logs(doc_line("inspect eval ", *markers), tmp_path / "logs"),
                      offline_env(tmp_path, **env(srv.base_url)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert srv.requests and {path for path, _ in srv.requests} == {"/v1/chat/completions"}
    assert all(body["temperature"] == 0 and body["parallel_tool_calls"] is False and body["tools"]
               for _, body in srv.requests)
    log = only_log(tmp_path / "logs")
    assert log["status"] == "success", log.get("error")
    assert log["results"]["completed_samples"] == log["results"]["total_samples"] == len(log["samples"]) > 0
    by_id = {t.task_id: t for t in fb.make_corpus(n_tasks=log["eval"]["task_args"].get("n_tasks") or 321)}
    for s in log["samples"]:
        task_id, seed = s["id"].split("__seed")
        played = fb.run_episode(by_id[task_id], Script(), int(seed))
        score = s["scores"]["finbench"]
        assert score["answer"] == played.disposition and score["value"]["gap"] == pytest.approx(played.gap)
        assert score["metadata"]["ended"] == "case ended"


@pytest.mark.parametrize("args,path", [("", "/v1/responses"),
                                       (" -M responses_api=false --temperature 0", "/v1/chat/completions")],
                         ids=["responses", "chat-completions"])
def test_the_openai_provider_at_a_local_server(tmp_path, args, path):
    """The pitfalls the docs warn of (they hold for the pinned inspect-ai): `--model openai/<name>` asks
    /v1/responses (404), no sample completes, and `inspect eval` exits 0 all the same, the log saying
    "error"; with `-M responses_api=false` it asks chat completions but sends no temperature, even given
    `--temperature 0`."""
    cmd = (f"PYTHONPATH=. {BIN}/inspect eval finbench/running/inspect_task.py@finbench --model openai/llama3.1"
           f"{args} -T n_tasks=9 --limit 1")
    with Recorder() as srv:
        res = run_cli(with_logs(cmd, tmp_path / "logs"),
                      offline_env(tmp_path, OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY="none"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert srv.requests and {p for p, _ in srv.requests} == {path}
    log = only_log(tmp_path / "logs")
    if path == "/v1/responses":
        assert log["status"] == "error" and not (log.get("results") or {}).get("completed_samples")
    else:
        assert log["status"] == "success" and all("temperature" not in body for _, body in srv.requests)


def test_eval_set_exits_non_zero_when_no_sample_completes(tmp_path):
    """docs' `inspect eval-set` line against a server that refuses the model: exit status 1, and docs'
    `inspect log list --status error` names the log."""
    logs = tmp_path / "logs"
    with Recorder(refuse=True) as srv:
        env = offline_env(tmp_path, LOCAL_BASE_URL=srv.base_url, LOCAL_API_KEY="none")
        res = run_cli(with_logs(doc_line("inspect eval-set"), logs), env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert srv.requests and all(path == "/v1/chat/completions" for path, _ in srv.requests)
    assert only_log(logs)["status"] == "error"
    check = re.sub(r" --log-dir \S+", f" --log-dir {logs}", doc_line("inspect log list"))
    listed = run_cli(check, env)
    assert listed.returncode == 0 and ".json" in listed.stdout, listed.stdout + listed.stderr
