"""What a language model is given: the system prompt (one file), the brief as the first user message, and
the hash that names a prompt, its tools and sampling parameters in a transcript (`finbench.agents.llm`)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["PROMPT_FILE", "brief_message", "canon", "prompt_hash", "system_prompt"]

PROMPT_FILE = Path(__file__).resolve().parent / "prompts" / "system.txt"


def system_prompt(path: str | Path | None = None) -> str:
    """The system prompt (one file, `finbench/agents/prompts/system.txt` unless `path`)."""
    return Path(path or PROMPT_FILE).read_text(encoding="utf-8").strip()


def canon(obj: Any) -> str:
    """`obj` as canonical JSON (sorted keys, no spaces): what a hash is taken of."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prompt_hash(prompt: str, tools: list[dict], params: dict) -> str:
    """12 hex digits over the system prompt, the tool schemas and the sampling parameters."""
    return hashlib.sha256(canon([prompt, tools, params]).encode()).hexdigest()[:12]


def brief_message(brief: dict) -> str:
    """The first user message of a case: the brief, as every model agent is given it."""
    return "A new case. The brief:\n" + json.dumps(brief, sort_keys=True)
