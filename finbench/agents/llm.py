"""A language-model agent: `FinalityEnv` driven through OpenAI-style chat completions with tool calls.

    agent = ModelAgent("qwen2.5-7b-instruct", base_url="http://127.0.0.1:8000/v1")
    res = agent.episode(task, seed=0)          # an EpisodeResult; transcript under data/model_runs/<model>/

The client is the `openai` package pointed at any `base_url` (hosted APIs,
vLLM, Ollama, llama.cpp servers all speak the protocol). The key is read from
an environment variable (`api_key_env`, default `OPENAI_API_KEY`; a
placeholder when it is unset, for local servers) and is never stored on the
agent, written to a transcript or printed.

Transcripts: one JSONL file per (model, task, seed, prompt hash), named
`<task>__seed<seed>__<prompt hash>.jsonl` under `<transcripts>/<model>/`. The
first record is a header (model, base_url, system prompt, tool schemas,
sampling parameters); then one `request` record per chat completion (the
messages added since the previous request; the full request is the header's
prompt and tools plus every message so far) and one `response` record (the
response as the server sent it); last an `end` record with the episode's
outcome. An episode whose transcript has an `end` record is replayed from it
without a request; an unfinished one is resumed: the recorded responses are
reused for as long as the requests they answered are the same, then the
model is asked again.

Faults: the client retries 408/409/429/5xx and timeouts with exponential
backoff (`max_retries`, honouring `retry-after`). A malformed tool call (no
tool call, an unknown tool, arguments that are not a JSON object, wrong
arguments, more than one call in a turn) is answered with an error
observation and counted (`malformed`); each costs a call of the budget like
any bad call, so a model that never disposes of the case runs out of its 40
calls and the environment closes it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.play import play
from finbench.sim.tools import TOOL_NAMES, tool_schemas, validate

PROMPT_FILE = Path(__file__).resolve().parent / "prompts" / "system.txt"
TRANSCRIPTS_DIR = "data/model_runs"
KEY_PLACEHOLDER = "none"
NO_TOOL = "__no_tool_call__"
"""The tool name passed to the environment for a reply with no tool call (an unknown tool: an error, one call)."""
_BAD_JSON = "__arguments_not_json__"


def system_prompt(path: str | Path | None = None) -> str:
    """The system prompt (one file, `finbench/agents/prompts/system.txt` unless `path`)."""
    return Path(path or PROMPT_FILE).read_text(encoding="utf-8").strip()


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prompt_hash(prompt: str, tools: list[dict], params: dict) -> str:
    """12 hex digits over the system prompt, the tool schemas and the sampling parameters."""
    return hashlib.sha256(_canon([prompt, tools, params]).encode()).hexdigest()[:12]


def model_dir_name(model: str) -> str:
    """A model name as a folder name ('org/model:tag' -> 'org_model_tag')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"


def transcript_path(root: str | Path, model: str, task_id: str, seed: int, phash: str) -> Path:
    """Where the transcript of (model, task, seed, prompt hash) lives."""
    return Path(root) / model_dir_name(model) / f"{task_id}__seed{seed}__{phash}.jsonl"


def read_transcript(path: str | Path) -> list[dict]:
    """The records of a transcript; a torn last line (a run killed mid-write) is dropped."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return out


class ModelUnavailable(RuntimeError):
    """A response was needed but the agent has no endpoint (replay only) or the request failed."""


class ModelAgent:
    """A policy (`begin(brief)`, `act(observation)`) whose decisions come from a chat-completions model.

    Args:
        model: The model name the server knows.
        base_url: The endpoint, e.g. `"http://127.0.0.1:8000/v1"`; None or "" for replay only
            (every response must come from a transcript).
        api_key_env: The environment variable holding the key (read at each client creation,
            never stored); unset means the placeholder `"none"`, which local servers accept.
        transcripts: The folder of transcripts (`data/model_runs`); None for none (no resume).
        prompt_path: The system prompt file (default `finbench/agents/prompts/system.txt`).
        temperature: Sent with every request (None: not sent).
        max_tokens: Sent with every request (None: not sent).
        max_retries: The client's retries on 408/409/429/5xx, connection errors and timeouts,
            with exponential backoff.
        timeout: Seconds per request.

    Attributes:
        malformed (int): Malformed tool calls in the current episode.
        requests (int): Requests sent to the endpoint in the current episode (not replayed ones).
        replayed (int): Responses taken from a transcript in the current episode.

    Example:
        Making the agent sends nothing; the client is made, and the server asked, on the first
        request of an episode (skipped here: it needs a server at `base_url`).

        >>> import finbench as fb
        >>> agent = ModelAgent("llama3.1", base_url="http://127.0.0.1:11434/v1")
        >>> agent.name, agent.requests, agent.malformed
        ('llama3.1', 0, 0)
        >>> res = agent.episode(fb.make_corpus().tasks[0], seed=0)   # doctest: +SKIP
        >>> res.position, agent.malformed                            # doctest: +SKIP
    """

    cache_id = None  # episodes come from transcripts, never from the episode cache

    def __init__(self, model: str, base_url: str | None = None, *, api_key_env: str = "OPENAI_API_KEY",
                 transcripts: str | Path | None = TRANSCRIPTS_DIR, prompt_path: str | Path | None = None,
                 temperature: float | None = 0.0, max_tokens: int | None = None, max_retries: int = 5,
                 timeout: float = 120.0):
        if not isinstance(model, str) or not model:
            raise ValueError(f"ModelAgent: model must be a non-empty string, got {model!r}")
        self.model = model
        self.name = model
        self.base_url = base_url or None
        self.api_key_env = api_key_env
        self.transcripts = None if transcripts is None else Path(transcripts)
        self.prompt = system_prompt(prompt_path)
        self.tools = tool_schemas()
        self.params = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens)) if v is not None}
        self.prompt_hash = prompt_hash(self.prompt, self.tools, self.params)
        self.max_retries = max_retries
        self.timeout = timeout
        self._client = None
        self._key: tuple[str, int] | None = None
        self.malformed = self.requests = self.replayed = 0

    # --- the client -------------------------------------------------------------------
    def __getstate__(self):  # copies and pickles carry the configuration, never a client
        state = dict(self.__dict__)
        state["_client"] = None
        state["_file"] = None
        return state

    def client(self):
        """The `openai.OpenAI` client (made on first use; the key is read from the environment then)."""
        if self._client is None:
            if not self.base_url:
                raise ModelUnavailable(f"model {self.model!r}: no base_url, and the transcript does not hold "
                                       "this response (replay only)")
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, max_retries=self.max_retries,
                                         timeout=self.timeout,
                                         api_key=os.environ.get(self.api_key_env) or KEY_PLACEHOLDER)
        return self._client

    # --- one episode ------------------------------------------------------------------
    def bind(self, task_id: str, seed: int) -> None:
        """Name the next episode's transcript (`episode` does this; `play` alone keys by order id)."""
        self._key = (task_id, int(seed))

    def path(self, task_id: str, seed: int) -> Path | None:
        """The transcript of (task, seed) under this agent's prompt hash (None without a folder)."""
        if self.transcripts is None:
            return None
        return transcript_path(self.transcripts, self.model, task_id, seed, self.prompt_hash)

    def finished(self, task_id: str, seed: int) -> bool:
        """Whether the transcript of (task, seed) ends with an `end` record."""
        p = self.path(task_id, seed)
        return p is not None and p.exists() and any(r.get("kind") == "end" for r in read_transcript(p))

    def episode(self, task, seed: int = 0, profile=None, costs=None):
        """Play `task` under `seed` (replayed from its transcript if finished); the `EpisodeResult`."""
        self.bind(task.task_id, seed)
        env = play(FinalityEnv(task, seed, profile, costs), self)
        res = env.result(self.model, reference_position(task, env.costs))
        self.end({"position": res.position, "gap": res.gap, "exact": res.exact, "disposition": res.disposition,
                  "n_calls": res.n_calls})
        return res

    def begin(self, brief: dict) -> None:
        task_id, seed = self._key if self._key is not None else (brief["order_id"], brief.get("seed", 0))
        self._key = None
        self.malformed = self.requests = self.replayed = 0
        self.messages: list[dict] = [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": "A new case. The brief:\n" + json.dumps(brief, sort_keys=True)},
        ]
        self._sent = 0
        self._pending: list[tuple[str, str | None]] = []  # (tool_call_id, error override) awaiting the observation
        self._path = self.path(task_id, seed)
        self._recorded: list[tuple[str, dict]] = []
        self._done_before = False
        self._file = None
        if self._path is not None and self._path.exists():
            recs = read_transcript(self._path)
            self._done_before = any(r.get("kind") == "end" for r in recs)
            reqs = [r for r in recs if r.get("kind") == "request"]
            resps = {r["turn"]: r for r in recs if r.get("kind") == "response"}
            self._recorded = [(q["sha"], resps[q["turn"]]["body"]) for q in reqs if q["turn"] in resps]
        if self._path is not None and not self._done_before:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self._path, "w", encoding="utf-8")
            self._write({"kind": "header", "model": self.model, "base_url": self.base_url, "task_id": task_id,
                         "seed": seed, "prompt_hash": self.prompt_hash, "params": self.params,
                         "api_key_env": self.api_key_env, "system": self.prompt, "tools": self.tools})

    def act(self, observation: dict) -> tuple[str, dict]:
        if self._pending:
            self._answer(observation)
        body = self._complete()
        msg = ((body.get("choices") or [{}])[0].get("message")) or {}
        calls = msg.get("tool_calls") or []
        assistant = {"role": "assistant", "content": msg.get("content")}
        if calls:
            assistant["tool_calls"] = [{"id": c.get("id") or f"call-{i}", "type": "function",
                                        "function": {"name": (c.get("function") or {}).get("name"),
                                                     "arguments": (c.get("function") or {}).get("arguments")}}
                                       for i, c in enumerate(calls)]
        self.messages.append(assistant)
        if not calls:
            self.malformed += 1
            self._pending = [(None, "your reply had no tool call; make exactly one tool call per turn")]
            return NO_TOOL, {}
        first = assistant["tool_calls"][0]
        for extra in assistant["tool_calls"][1:]:  # answered, not executed
            self.malformed += 1
            self.messages.append({"role": "tool", "tool_call_id": extra["id"],
                                  "content": json.dumps({"error": "not executed: make one tool call per turn"})})
        name, raw = first["function"]["name"], first["function"]["arguments"]
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
            if args is None:
                args = {}
            if not isinstance(args, dict):
                raise ValueError("not a JSON object")
        except (ValueError, TypeError) as e:
            self.malformed += 1
            self._pending = [(first["id"], f"the arguments of {name!r} are not a JSON object ({e})")]
            return name if name in TOOL_NAMES else NO_TOOL, {_BAD_JSON: True}
        if validate(name, args) is not None:
            self.malformed += 1  # the environment answers with the error
        self._pending = [(first["id"], None)]
        return name if isinstance(name, str) else NO_TOOL, args

    def end(self, outcome: dict) -> None:
        """Close the transcript with an `end` record (after the environment ended the case)."""
        if self._file is not None:
            self._write({"kind": "end", "malformed": self.malformed, "requests": self.requests, **outcome})
            self._file.close()
            self._file = None

    # --- internals --------------------------------------------------------------------
    def _answer(self, obs: dict) -> None:
        call_id, override = self._pending[0]
        self._pending = []
        content = dict(obs)
        if override is not None:
            content.pop("result", None)
            content["error"] = override
        text = json.dumps(content, sort_keys=True)
        if call_id is None:
            self.messages.append({"role": "user", "content": text})
        else:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def _write(self, rec: dict) -> None:
        self._file.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
        self._file.flush()

    def _complete(self) -> dict:
        turn = self.requests + self.replayed
        sha = hashlib.sha256(_canon([self.model, self.params, self.prompt_hash, self.messages]).encode()).hexdigest()
        new = self.messages[self._sent:]
        self._sent = len(self.messages)
        if turn < len(self._recorded) and self._recorded[turn][0] == sha:
            body = self._recorded[turn][1]
            self.replayed += 1
        else:
            self._recorded = self._recorded[:turn]  # the conversation left the transcript: ask from here on
            client = self.client()  # replay only: raises here, before any transcript is touched
            if self._done_before:  # a finished transcript that no longer matches: start it again
                self._done_before = False
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self._path, "w", encoding="utf-8")
                self._write({"kind": "header", "model": self.model, "base_url": self.base_url,
                             "prompt_hash": self.prompt_hash, "params": self.params, "api_key_env": self.api_key_env,
                             "system": self.prompt, "tools": self.tools, "restarted": True})
                new = self.messages
            started = time.perf_counter()
            resp = client.chat.completions.create(model=self.model, messages=self.messages,
                                                         tools=self.tools, **self.params)
            body = resp.model_dump(mode="json", exclude_none=True)
            self.requests += 1
            if self._file is not None:
                self._write({"kind": "request", "turn": turn, "sha": sha, "messages": new})
                self._write({"kind": "response", "turn": turn, "seconds": round(time.perf_counter() - started, 3),
                             "body": body})
            return body
        if self._file is not None:
            self._write({"kind": "request", "turn": turn, "sha": sha, "messages": new})
            self._write({"kind": "response", "turn": turn, "replayed": True, "body": body})
        return body
