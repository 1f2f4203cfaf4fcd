"""Agents the sharing tests make cards of: two versions of one agent (`V1`, `V2`, both labelled `mine`) and a
name that is markup."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.patient import PATIENT

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
