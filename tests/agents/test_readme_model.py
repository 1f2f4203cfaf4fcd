"""The README's "Running a language model" section as a user meets it (issue 42): its shell lines (the
scripted server started, `finbench eval --model` against it, from a folder outside the repository) and its
Python block, run as printed against loopback servers, with what the section claims of them."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finbench.agents.mock_server import MockServer

pytestmark = pytest.mark.slow  # servers, subprocesses and a model's episodes

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SECTION = (ROOT / "README.md").read_text().split("## Running a language model\n")[1].split("\n## ")[0]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", SECTION, flags=re.S | re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_shell_lines_run_offline_from_another_folder(tmp_path):
    lines = [ln.split("#")[0].strip() for ln in _blocks("sh")[0].splitlines() if ln.split("#")[0].strip()]
    serve, play = lines
    assert serve.endswith("&") and "8765" in play
    port = str(_free_port())  # the README's 8765 may be taken on a test machine
    serve = serve.rstrip("&").strip().replace(".venv/bin/", f"{BIN}/")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    srv = subprocess.Popen([*serve.split(), "--port", port, "--idle-exit", "60"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert "serving http://127.0.0.1:" + port in srv.stdout.readline()
        cmd = [*play.replace(".venv/bin/", f"{BIN}/").replace("8765", port).split(), "--no-cache",
               "--transcripts", str(tmp_path / "runs"), "--out", str(tmp_path / "card")]
        started = time.monotonic()
        res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - started
    finally:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(timeout=30)
    assert res.returncode == 0, res.stderr
    card = json.loads((tmp_path / "card" / "card.json").read_text())
    m = card["model"]
    assert m["name"] == "careful" and m["episodes"]["asked_now"] == card["source"]["episodes"] == 30
    # what the section says of this run: 30 episodes, about 300 requests, about 20 s
    assert 200 <= m["requests"] <= 450 and m["latency_median_s"] >= 0.25
    assert "30 episodes, about 300 requests, 20 s" in SECTION and wall < 300
    assert (tmp_path / "card" / "report.md").exists() and "## The model" in (tmp_path / "card" / "report.md").read_text()


def test_the_python_block_runs_against_the_scripted_server(tmp_path, monkeypatch):
    (block,) = _blocks("python")
    monkeypatch.setenv("FINBENCH_ROOT", str(tmp_path))  # its transcripts go to <root>/data/model_runs
    with MockServer() as srv:
        monkeypatch.setenv("FINBENCH_BASE_URL", srv.base_url)
        ns: dict = {}
        exec(compile(block, "README.md", "exec"), ns)
        answered = srv.stats()["answered"]
    run, df, res, agent = ns["run"], ns["df"], ns["res"], ns["agent"]
    assert len(run.corpus) == 61 and res.gap >= 0
    assert set(df["policy"]) == {"careful", "finality_gate"} and len(df) == 2 * 61
    names = {f.name.split("__")[0] for f in (tmp_path / "data" / "model_runs").rglob("*.jsonl")}
    assert names == {t.task_id for t in run.corpus.tasks} | {"ord-0001"} and answered > 0
    # `evaluate` replayed what `run_model` asked: every episode from its transcript, the same rows
    assert agent.usage.summary()["episodes"] == {"asked_now": 1, "resumed": 0, "replayed": 61}
    assert "# replayed" in block
