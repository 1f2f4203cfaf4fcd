"""Agents the sharing tests make cards of: two versions of one agent (`V1`, `V2`, both labelled `mine`) and a
name that is markup."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from finbench.cli import main
from tests.patient import PATIENT

N_TASKS, SEEDS = 16, 2  # 16 tasks hold twin pairs and every archetype but one: enough for each door

AGENTS = PATIENT + '''
class V1(Patient):
    name = "mine"

class V2(V1):
    """As V1, but waits between probes and refunds a capture that failed."""
    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return "ship", {"order_id": self.order}
        if caps and all(c["status"] == "failed" for c in caps):
            return "refund", {"order_id": self.order}
        if obs["t"] > 590:
            return "escalate", {"order_id": self.order}
        if obs.get("tool") == "probe_processor":
            return "wait", {"order_id": self.order, "ticks": 30}
        return "probe_processor", {"order_id": self.order}

class Markup(V1):
    name = "<script>alert(1)</script>"
'''


@pytest.fixture(scope="session")
def agents_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sharing_agents") / "mine.py"
    path.write_text(AGENTS)
    return path


def run(*args) -> tuple[int, str, str]:
    """`finbench ARGS` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


CARDS = {"v1": ("V1", SEEDS), "v2": ("V2", SEEDS), "markup": ("Markup", SEEDS), "v2_one_seed": ("V2", 1)}


class _Cards(dict):
    """Each card made when a test first asks for it (a card costs seconds, mostly its figures): a worker makes
    only those its tests read."""

    def __init__(self, base: Path, agents: Path):
        super().__init__()
        self.base, self.agents = base, agents

    def __missing__(self, name: str) -> Path:
        cls, seeds = CARDS[name]
        code, _, err = run("eval", f"{self.agents}:{cls}", "--n-tasks", N_TASKS, "--seeds", seeds, "--no-cache",
                           "--out", self.base / name)
        assert code == 0, err
        self[name] = self.base / name
        return self[name]


@pytest.fixture(scope="session")
def cards(tmp_path_factory, agents_file) -> dict:
    """Cards of V1, V2 and a name that is markup on one run, and V2's under one seed (another run), by name;
    each made at its first use."""
    return _Cards(tmp_path_factory.mktemp("cards"), agents_file)
