"""A language-model agent: `FinalityEnv` driven through OpenAI-style chat completions with tool calls.

    agent = ModelAgent("qwen2.5-7b-instruct", base_url="http://127.0.0.1:8000/v1")
    res = agent.episode(task, seed=0)          # an EpisodeResult; transcript under data/model_runs/<model folder>/

The client is the `openai` package pointed at any `base_url` (hosted APIs,
vLLM, Ollama, llama.cpp servers all speak the protocol). The key is read from
an environment variable (`api_key_env`, default `OPENAI_API_KEY`; a
placeholder when it is unset, for local servers) and is never stored on the
agent; the key is scrubbed (replaced by `***`) from every record written and
from the client's error messages, however a server echoes it (the
`Authorization` header back, the key in another case, with separators put in
or reversed: `llm_reply.secret_pattern`).

Transcripts: one JSONL file per (model, task, seed, prompt hash), named
`<task>__seed<seed>__<prompt hash>.jsonl` under `<transcripts>/<model folder>/`,
where the model folder is a readable slug of the name plus a short hash of
the exact name (`model_dir_name`: `org/m` and `org_m` never share one). The
first record is a header (model, base_url, system prompt, tool schemas,
sampling parameters); then one `request` record per chat completion (the
messages added since the previous request; the full request is the header's
prompt and tools plus every message so far) and one `response` record: the
reply's JSON as the server sent it (`body`, key scrubbed), or, when the reply
is not JSON, too large or too deeply nested, `invalid` (why) and `text` (its
start). Last an `end` record with the episode's outcome. An episode whose
transcript has an `end` record is replayed from it without a request; an
unfinished one is resumed: the recorded responses are reused for as long as
the requests they answered are the same, then the model is asked again (the
transcript is cut there and appended to). A stored reply is read exactly as
the live run read it, so a resumed episode plays as the uninterrupted one.

One writer per transcript: `<transcript>.lock` (an `flock` held while an
episode is played; it holds the writer's pid, and a lock left by a dead
process is taken over). A second agent waits for it, or (`claim(...,
wait=False)`, as `model_arm.run_model` does) plays other episodes first.
A transcript that cannot be replayed (a record that is not one, a request
without its turn, a header without the model, lines out of order, not a
regular file) is set aside as `<name>.unreplayable-<n>.jsonl`, with a
`TranscriptWarning` naming it, and the episode is played afresh.

Faults: the client retries 408/409/429/5xx and timeouts with exponential
backoff (`max_retries`, honouring `retry-after`); `timeout` is a total deadline
per request attempt (connect, send and the whole reply), not a per-read one;
after the retries the error is raised (key scrubbed) and the run resumes later.
Every request asks for at most `max_tokens` (`MAX_TOKENS`, 1024, by default: a
local server's own limit is often none). A 4xx the server gives for the
conversation's size (a context length exceeded: `llm_reply.size_refusal`) ends
the episode: it is recorded as the response of its turn (`ended`, `status`,
`error`), the agent stops and the case is closed (`close`, as the budget
closes it), and the end record says why; a resume replays it, never asking
again. Refused at the first request (the prompt alone does not fit, or
`max_tokens` is over the context), it is `ModelUnavailable`: a configuration
to fix, not an episode.
Every reply is either a turn or a malformed call: a reply that is not a
chat completion (not JSON, not an object, no `choices`, no `message`,
`tool_calls` not a list of calls, over `MAX_REPLY_BYTES`, nested more than
`MAX_DEPTH` levels, an undecodable content encoding), a malformed tool call
(no tool call, an unknown tool, arguments that are not a JSON object, wrong
arguments, more than one call in a turn) is answered with an error
observation and counted (`malformed`); each costs a call of the budget like
any bad call, so a model that never disposes of the case runs out of its 40
calls and the environment closes it.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from finbench.agents.llm_reply import (MAX_CALLS, MAX_DEPTH, MAX_REPLY_BYTES, SCRUBBED, ask, checked_limits, clean,
                                       deadline_http_client, read_reply, scrub, tool_arguments)
from finbench.agents.llm_prompt import PROMPT_FILE, brief_message, canon, prompt_hash, system_prompt
from finbench.agents.llm_traffic import Usage, attempts, gate_for
from finbench.agents.llm_transcripts import (Transcript, TranscriptLock, TranscriptWarning, Unreplayable, adopt_legacy,
                                             header_model, is_transcript, load_transcript, model_dir_name,
                                             read_transcript, set_aside, transcript_path)
from finbench.errors import check_int, check_real
from finbench.files import at_root
from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.play import play
from finbench.sim.tools import TOOL_NAMES, tool_schemas, validate

TRANSCRIPTS_DIR = "data/model_runs"
KEY_PLACEHOLDER = "none"
NO_TOOL = "__no_tool_call__"
"""The tool name passed to the environment for a reply with no tool call (an unknown tool: an error, one call)."""
_BAD_JSON = "__arguments_not_json__"
MAX_TOOL_NAME = 100  # an unknown tool's name is cut to this before the environment echoes it
MAX_TOKENS = 1024
"""The reply limit sent by default: a tool call takes under 200 tokens; a thinking model may need more."""
TIMEOUT = 120.0
"""Seconds per request attempt by default."""
MODEL_CONNECTIONS = 8
"""Episodes of a model in flight at once by default (`run_model`, `finbench eval --model`): an episode is
nearly all waiting; local servers (vLLM, llama.cpp with parallel slots, Ollama) serve several requests at
once, one GPU batching 8 well, hosted APIs many; a server that says 429 or 503 gets fewer (`llm_traffic.Gate`)."""
__all__ = ["KEY_PLACEHOLDER", "MAX_CALLS", "MAX_DEPTH", "MAX_REPLY_BYTES", "MAX_TOKENS", "MODEL_CONNECTIONS", "NO_TOOL",
           "PROMPT_FILE",
           "SCRUBBED", "TIMEOUT", "TRANSCRIPTS_DIR", "ModelAgent", "ModelUnavailable", "TranscriptWarning",
           "checked_limits", "header_model", "is_transcript", "model_dir_name", "prompt_hash", "read_transcript",
           "system_prompt", "transcript_path"]


class ModelUnavailable(RuntimeError):
    """A response was needed but the agent has no endpoint (replay only) or the request failed."""


class ModelAgent:
    """A policy (`begin(brief)`, `act(observation)`) whose decisions come from a chat-completions model.

    Args:
        model: The model name the server knows.
        base_url: The endpoint, e.g. `"http://127.0.0.1:8000/v1"`; None or "" for replay only
            (every response must come from a transcript; transcripts are read, never written).
        api_key_env: The environment variable holding the key (read when needed, never stored);
            unset means the placeholder `"none"`, which local servers accept.
        transcripts: The folder of transcripts (`data/model_runs`); None for none (no resume).
        prompt_path: The system prompt file (default `finbench/agents/prompts/system.txt`).
        temperature: Sent with every request (None: not sent).
        max_tokens: Sent with every request (`MAX_TOKENS`, 1024; None: not sent, the server's limit).
        max_retries: The client's retries on 408/409/429/5xx, connection errors and timeouts,
            with exponential backoff.
        timeout: Seconds per request attempt, in total (connect, send, the whole reply); None for no
            limit.
        usage: The tally its episodes add to (`finbench.agents.llm_traffic.Usage`; default a new one).
            Every copy of an agent (a run plays one copy per episode) adds to the same tally.

    Attributes:
        malformed (int): Malformed calls in the current episode (replies that are not a chat
            completion, and malformed tool calls).
        requests (int): Requests sent to the endpoint in the current episode (not replayed ones).
        replayed (int): Responses taken from a transcript in the current episode.
        ended (str | None): Why the current episode ended early (`"context_length"`: the server
            refused the conversation as too long), None when the model or the environment ended it.
        usage (Usage): What its episodes asked and cost: requests, retries, tokens, latency, and
            where each episode came from (asked now, replayed from its transcript, or both).

    Concurrency: one agent plays one episode at a time; a runner that overlaps episodes
    (`max_connections`) plays each on a copy of its own. The copies share `usage`, and every agent of
    the process that talks to one endpoint shares its gate (`finbench.agents.llm_traffic.gate_for`),
    which lowers the requests in flight when the server answers 429 or 503.

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
                 temperature: float | None = 0.0, max_tokens: int | None = MAX_TOKENS, max_retries: int = 5,
                 timeout: float | None = TIMEOUT, usage: Usage | None = None):
        if not isinstance(model, str) or not model:
            raise ValueError(f"ModelAgent: model must be a non-empty string, got {model!r}")
        if clean(model) != model:
            raise ValueError(f"ModelAgent: model {model!r} holds a lone surrogate (not sendable as UTF-8)")
        timeout, max_tokens = checked_limits("ModelAgent", timeout, max_tokens)
        if temperature is not None:  # checked, but sent as given: 0 and 0.0 are different prompt hashes
            check_real("ModelAgent", "temperature", temperature, 0)
        max_retries = check_int("ModelAgent", "max_retries", max_retries, 0)
        self.model = model
        self.name = model
        self.base_url = base_url or None
        self.api_key_env = api_key_env
        self.transcripts = None if transcripts is None else at_root(transcripts)
        self.prompt = system_prompt(prompt_path)
        self.tools = tool_schemas()
        self.params = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens)) if v is not None}
        self.prompt_hash = prompt_hash(self.prompt, self.tools, self.params)
        self.max_retries = max_retries
        self.timeout = None if timeout is None else float(timeout)
        self._client = None
        self._key: tuple[str, int] | None = None
        self._lock: TranscriptLock | None = None
        self._file = None
        self._path = None
        self.usage = Usage() if usage is None else usage
        self.malformed = self.requests = self.replayed = 0
        self.ended, self._refusal = None, {}

    # --- the client -------------------------------------------------------------------
    def __getstate__(self):  # copies and pickles carry the configuration, never a client, file or lock
        state = dict(self.__dict__)
        state["_client"] = None
        state["_file"] = None
        state["_lock"] = None
        return state

    def _secret(self) -> str | None:
        """The key string to scrub (None when unset: the placeholder is no secret)."""
        key = os.environ.get(self.api_key_env) if isinstance(self.api_key_env, str) else None
        return key or None

    def client(self):
        """The `openai.OpenAI` client (made on first use; the key is read from the environment then)."""
        if self._client is None:
            if not self.base_url:
                raise ModelUnavailable(f"model {self.model!r}: no base_url, and the transcript does not hold "
                                       "this response (replay only)")
            import openai

            gate = gate_for(self.base_url)
            self._client = openai.OpenAI(base_url=self.base_url, max_retries=self.max_retries,
                                         timeout=self.timeout, http_client=deadline_http_client(self.timeout, gate),
                                         api_key=self._secret() or KEY_PLACEHOLDER)
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
        """Whether the transcript of (task, seed) can be replayed and ends with an `end` record (read only)."""
        p = self.path(task_id, seed)
        try:
            tx = None if p is None else load_transcript(p, self.model)
        except Unreplayable:
            return False
        return tx is not None and tx.finished

    def claim(self, task_id: str, seed: int, wait: bool = True) -> bool:
        """Take the lock of (task, seed)'s transcript: exclusive with an endpoint, shared for replay only.

        False when another process holds it and `wait` is False; True without a transcripts folder,
        or (replay only) when the folder cannot take a lock file. `begin` claims (waiting) if needed;
        `end` and `release` let go."""
        key = (task_id, int(seed))
        if self._lock is not None and self._lock.key == key:
            return True
        self.release()
        p = self.path(task_id, seed)
        if p is None:
            return True
        lock = TranscriptLock(p, key, shared=not self.base_url)
        try:
            if not lock.acquire(wait):
                return False
        except OSError:
            if self.base_url:
                raise
            return True  # a read-only folder: a reader needs no lock there
        self._lock = lock
        return True

    def release(self) -> None:
        """Close the transcript and let go of its lock (`end` does this; also after a failed episode)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def inspect(self, task_id: str, seed: int) -> str:
        """"finished", "partial" or "none": the state of (task, seed)'s transcript, after setting it aside
        (with a `TranscriptWarning`) if it cannot be replayed. Call it holding the claim."""
        p = self.path(task_id, seed)
        if p is None:
            return "none"
        tx = self._read(p)
        return "none" if tx is None else "finished" if tx.finished else "partial"

    def episode(self, task, seed: int = 0, profile=None, costs=None):
        """Play `task` under `seed` (replayed from its transcript if finished); the `EpisodeResult`."""
        self.bind(task.task_id, seed)
        try:
            env = play(FinalityEnv(task, seed, profile, costs), self)
            res = env.result(self.model, reference_position(task, env.costs))
            self.end({"position": res.position, "gap": res.gap, "exact": res.exact,
                      "disposition": res.disposition, "n_calls": res.n_calls})
        finally:
            self.release()
        return res

    def begin(self, brief: dict) -> None:
        task_id, seed = self._key if self._key is not None else (brief["order_id"], brief.get("seed", 0))
        self._key = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self.malformed = self.requests = self.replayed = 0
        self.ended, self._refusal, self._order = None, {}, brief["order_id"]
        self.messages: list[dict] = [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": brief_message(brief)},
        ]
        self._sent = 0
        self._pending: list[tuple[str, str | None]] = []  # (tool_call_id, error override) awaiting the observation
        self._task = (task_id, seed)
        self._path = self.path(task_id, seed)
        self._recorded: list[tuple[str, dict]] = []
        self._offsets: list[int] = []
        self._end_offset = 0
        self._on_disk = False  # a whole header is on disk: append to it, else start the file
        self._done_before = False
        if self._path is None:
            return
        self.claim(task_id, seed, wait=True)
        tx = self._read(self._path)
        if tx is not None:
            self._recorded = [(sha, resp) for sha, resp, _ in tx.pairs]
            self._offsets = [off for _, _, off in tx.pairs]
            self._end_offset = tx.end_offset
            self._on_disk = True
            self._done_before = tx.finished

    def act(self, observation: dict) -> tuple[str, dict]:
        if self._pending:
            self._answer(observation)
        rec = self._complete()
        if isinstance(rec.get("ended"), str):  # the server refused the conversation: the agent stops here
            self.ended, self._refusal = rec["ended"], {k: rec[k] for k in ("status", "error") if k in rec}
            self._pending = []
            return "close", {"order_id": self._order}
        assistant, calls, problem = read_reply(rec)
        self.messages.append(assistant)
        if problem is not None or not calls:
            self.malformed += 1
            why = problem or "your reply had no tool call"
            self._pending = [(None, f"{why}; make exactly one tool call per turn")]
            return NO_TOOL, {}
        (first_id, name, raw), extras = calls[0], calls[1:]
        for extra_id, _, _ in extras:  # answered, not executed
            self.malformed += 1
            self.messages.append({"role": "tool", "tool_call_id": extra_id,
                                  "content": json.dumps({"error": "not executed: make one tool call per turn"})})
        tool = name if name in TOOL_NAMES or len(name) <= MAX_TOOL_NAME else name[:MAX_TOOL_NAME] + "..."
        try:
            args = tool_arguments(raw)
        except (ValueError, TypeError) as e:
            self.malformed += 1
            self._pending = [(first_id, f"the arguments of {tool!r} are not a JSON object ({clean(str(e))[:200]})")]
            return tool if tool in TOOL_NAMES else NO_TOOL, {_BAD_JSON: True}
        if validate(tool, args) is not None:
            self.malformed += 1  # the environment answers with the error
        self._pending = [(first_id, None)]
        return tool, args

    def end(self, outcome: dict) -> None:
        """Close the transcript with an `end` record (after the environment ended the case), add the episode
        to `usage`, and let go of its lock. A finished transcript replayed whole, or a replay-only agent,
        writes nothing."""
        self.usage.episode(self.requests, self.replayed, self.malformed, self.ended)
        if self._path is not None and self.base_url and not (self._done_before and self.requests == 0):
            self._open_at(self.requests + self.replayed)
            stop = {"ended": self.ended, **self._refusal} if self.ended else {}
            self._write({"kind": "end", "malformed": self.malformed, "requests": self.requests, **outcome, **stop})
        self.release()

    episode_end = end
    """What a runner calls once the case has ended (`evaluate`, for any policy that has it)."""

    # --- internals --------------------------------------------------------------------
    def _read(self, path: Path) -> Transcript | None:
        """The transcript at `path` (moved from its pre-hash folder if it is there), set aside if it
        cannot be replayed."""
        if not os.path.lexists(path):
            adopt_legacy(path, self.model)
        try:
            return load_transcript(path, self.model)
        except Unreplayable as e:
            set_aside(path, str(e))
            return None

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

    def _open_at(self, turn: int) -> None:
        """Open the transcript for writing from `turn` on: the records before it are kept, the rest cut."""
        if self._file is not None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        if self._on_disk:
            pos = self._offsets[turn] if turn < len(self._offsets) else self._end_offset
            self._file = open(self._path, "r+b")
            self._file.truncate(pos)
            self._file.seek(pos)
        else:
            self._file = open(self._path, "wb")
            task_id, seed = self._task
            self._write({"kind": "header", "model": self.model, "base_url": self.base_url, "task_id": task_id,
                         "seed": seed, "prompt_hash": self.prompt_hash, "params": self.params,
                         "api_key_env": self.api_key_env, "system": self.prompt, "tools": self.tools})
            self._on_disk = True
        self._recorded, self._offsets = self._recorded[:turn], self._offsets[:turn]
        self._done_before = False

    def _write(self, rec: dict) -> dict:
        """Write a record (key scrubbed, ASCII JSON, one line) if a transcript is open; the record as it
        reads back, which is what the episode goes on with (so a replay reads exactly the same)."""
        line = json.dumps(scrub(rec, self._secret()), sort_keys=True, ensure_ascii=True)
        if self._file is not None:
            self._file.write(line.encode("ascii") + b"\n")
            self._file.flush()
        return json.loads(line)

    def _complete(self) -> dict:
        """The response record answering the conversation so far: the transcript's if it answered this
        same request, else the model's (recorded)."""
        turn = self.requests + self.replayed
        sha = hashlib.sha256(canon([self.model, self.params, self.prompt_hash, self.messages]).encode()).hexdigest()
        new = self.messages[self._sent:]
        self._sent = len(self.messages)
        if turn < len(self._recorded) and self._recorded[turn][0] == sha:
            self.replayed += 1
            return self._recorded[turn][1]
        client = self.client()  # replay only: raises here, before any transcript is touched
        if self._path is not None:
            self._open_at(turn)  # the conversation left the transcript (or ran past it): ask from here on
        self._recorded = self._recorded[:turn]
        started = time.perf_counter()
        with attempts() as tally:
            fields = ask(client, self.model, self.messages, self.tools, self.params, self._secret())
        seconds = round(time.perf_counter() - started, 3)
        if "ended" in fields and turn == 0:  # nothing the model did: the prompt alone is too long for the server
            raise ModelUnavailable(f"model {self.model!r}: the server refused the first request of the episode as "
                                   f"too long for its context; give it a larger context or a smaller max_tokens "
                                   f"(now {self.params.get('max_tokens')}): {fields['error']}")
        self.requests += 1
        self.usage.request(seconds, fields.get("body"), lambda: canon([self.messages, self.tools]), tally)
        self._write({"kind": "request", "turn": turn, "sha": sha, "messages": new})
        # the latency goes to `usage`, not the record: a transcript is the same however fast its server answered
        return self._write({"kind": "response", "turn": turn, **fields})
