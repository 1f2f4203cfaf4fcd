"""What comes over the wire from a chat-completions server, made safe for `finbench.agents.llm`.

- `deadline_http_client`: an `httpx2` client for `openai.OpenAI` whose every request attempt must
  be complete within a total deadline (connect, send, the whole reply), and whose replies stop at
  `MAX_REPLY_BYTES`: a server that drips one byte at a time cannot hold a request.
- `reply_fields`: a reply body as a transcript's response record holds it: its JSON (`body`, the
  API key scrubbed), or `invalid` (why) and `text` (its start) when it is not JSON, too large or
  nested too deeply.
- `read_reply`: what a response record says (the assistant message to send back, its tool calls,
  what is wrong with it), for any JSON value at all: never an exception.
- `scrub`, `scrub_error`: the key replaced by `***` in records and in the client's errors, however a
  server echoes it (case, separators, reversed: `secret_pattern`); `clean`: lone surrogates replaced,
  so every string can be sent and written as UTF-8.
- `size_refusal`: a 4xx the server gave for the conversation's size, as a response record's fields
  (the episode ends there; `finbench.agents.llm`).
- `ask`: one chat completion as a response record's fields; `checked_limits`: a request's `timeout`
  and `max_tokens`, checked.
"""
from __future__ import annotations

import json
import re
import threading
import time
from functools import lru_cache
from typing import Any

from finbench.errors import FinbenchError, bad, check_int, check_real, warn_caller
from finbench.agents.llm_traffic import GatedTransport

SCRUBBED = "***"
"""What the API key string is replaced with in everything written."""
MAX_REPLY_BYTES = 1_000_000
"""A reply larger than this (body) is a malformed call, read no further."""
MAX_DEPTH = 32
"""A reply nested deeper than this is a malformed call (a chat completion is about 7 levels deep)."""
MAX_CALLS = 16
"""A reply with more tool calls than this is one malformed call (none is executed)."""
MAX_ARGS_DEPTH = 8
TEXT_KEPT = 2000  # characters of an unreadable reply kept in its record


MIN_SECRET = 8
"""Shorter "keys" (a local server's `x`, `1`, `none`) are not scrubbed: a one-letter key would be
replaced in every word of every record, changing what a replay reads back."""
SEPARATORS = " \t\r\n._-:/|,"
"""What a server may put between a key's characters when it echoes it (or take out of it)."""
_SEP = "[" + re.escape(SEPARATORS) + "]{0,3}"


@lru_cache(maxsize=8)
def secret_pattern(secret: str) -> re.Pattern:
    """The key however a server echoes it: in any case, with separators (`SEPARATORS`, up to 3 at a time)
    put between its characters or taken out of its own, or reversed. One pattern from the key's
    characters, not a list of transformations. A key with fewer than `MIN_SECRET` characters besides
    separators is matched as it is (loosened, it would match ordinary words)."""
    core = [c for c in secret if c not in SEPARATORS]
    if len(core) < MIN_SECRET:
        return re.compile(re.escape(secret))
    spelled = [_SEP.join(map(re.escape, chars)) for chars in (core, core[::-1])]
    return re.compile("|".join(spelled), re.IGNORECASE)


def scrub(obj: Any, secret: str | None) -> Any:
    """`obj` with the key `secret` (of at least `MIN_SECRET` characters) replaced by `***` in its strings
    (keys too), however it was echoed (`secret_pattern`)."""
    if not secret or len(secret) < MIN_SECRET:
        return obj
    sub = secret_pattern(secret).sub

    def walk(o):
        if isinstance(o, str):
            return sub(SCRUBBED, o)
        if isinstance(o, list):
            return [walk(v) for v in o]
        if isinstance(o, dict):
            return {walk(k): walk(v) for k, v in o.items()}
        return o

    return walk(obj)


def scrub_error(exc: BaseException, secret: str | None) -> None:
    """Scrub `secret` from an exception's message, arguments and body (in place)."""
    if not secret or len(secret) < MIN_SECRET:
        return
    try:
        exc.args = tuple(scrub(a, secret) if isinstance(a, str) else a for a in exc.args)
        for attr in ("message", "body"):
            if hasattr(exc, attr):
                setattr(exc, attr, scrub(getattr(exc, attr), secret))
    except (RecursionError, AttributeError, TypeError):
        try:
            exc.body = None
        except AttributeError:
            pass


# --- a conversation the server refuses as too long ---------------------------------------------

CONTEXT_LENGTH = "context_length"
"""Why an episode ended early, in its records, when the server refused the conversation as too long."""
NOT_SIZE = (401, 403, 404, 408, 409, 429)  # the key, the model's name, and the statuses the client retries
_SIZE_WORDS = re.compile(r"context|too (?:long|large)|exceed|n_ctx|\btokens\b", re.IGNORECASE)


def size_refusal(exc: BaseException, secret: str | None) -> dict | None:
    """A response record's fields for a 4xx the server gave for the conversation's size (413, or a 4xx
    whose words say context, too long or large, exceeds, n_ctx, tokens): `ended`, `status` and `error`
    (the client's message, key scrubbed, cut). None for any other error (raised as before)."""
    status = getattr(exc, "status_code", None)
    if type(status) is not int or not 400 <= status < 500 or status in NOT_SIZE:
        return None
    message = getattr(exc, "message", None)
    message = message if isinstance(message, str) else str(exc)
    words = " ".join(str(w) for w in (message, getattr(exc, "code", None), getattr(exc, "type", None)) if w)
    if status != 413 and not _SIZE_WORDS.search(words):
        return None
    return {"ended": CONTEXT_LENGTH, "status": status, "error": clean(scrub(message, secret))[:TEXT_KEPT]}


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(s: str) -> str:
    """`s` encodable as UTF-8: each lone surrogate replaced by one U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", s)


def clean_json(obj: Any) -> Any:
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, list):
        return [clean_json(v) for v in obj]
    if isinstance(obj, dict):
        return {clean(k): clean_json(v) for k, v in obj.items()}
    return obj


def too_deep(obj: Any, limit: int) -> bool:
    """Whether `obj` nests lists and objects more than `limit` levels deep (no recursion)."""
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            if d > limit:
                return True
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return False


def reply_fields(data: bytes, secret: str | None) -> dict:
    """A response record's fields from a reply body: `body` (its JSON) or `invalid` and `text`."""
    if len(data) > MAX_REPLY_BYTES:
        return {"invalid": f"the reply is {len(data)} bytes, over the limit of {MAX_REPLY_BYTES}"}
    text = data.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    kept = clean(scrub(text, secret))[:TEXT_KEPT]
    try:
        body = json.loads(text)
    except RecursionError:
        return {"invalid": "the reply is not JSON (nested too deeply to read)", "text": kept}
    except ValueError as e:
        return {"invalid": f"the reply is not JSON ({clean(str(e))[:200]})", "text": kept}
    if too_deep(body, MAX_DEPTH):
        return {"invalid": f"the reply is nested more than {MAX_DEPTH} levels deep", "text": kept}
    return {"body": scrub(body, secret)}


def read_reply(rec: dict) -> tuple[dict, list[tuple[str, str, Any]], str | None]:
    """What a response record says: the assistant message to send back, its tool calls `(id, name,
    raw arguments)`, and what is wrong with it (None: a well-formed reply, with or without a call)."""
    silent = {"role": "assistant", "content": None}
    if "body" not in rec:
        why = rec.get("invalid")
        return silent, [], f"your reply could not be read ({why if isinstance(why, str) else 'no body'})"
    body = rec["body"]

    def bad(why: str):
        return silent, [], f"your reply was not a chat completion ({why})"

    if not isinstance(body, dict):
        return bad(f"a JSON {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return bad("no list of choices")
    if not isinstance(choices[0], dict):
        return bad("choices[0] is not an object")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        return bad("choices[0] has no message object")
    content = msg.get("content")
    assistant = {"role": "assistant", "content": clean(content) if isinstance(content, str) else None}
    calls = msg.get("tool_calls")
    if calls is None:
        calls = []
    if not isinstance(calls, list):
        return assistant, [], f"your reply's tool_calls is not a list but a JSON {type(calls).__name__}"
    if len(calls) > MAX_CALLS:
        return assistant, [], f"your reply made {len(calls)} tool calls"
    out = []
    for i, c in enumerate(calls):
        f = c.get("function") if isinstance(c, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            return assistant, [], f"your reply's tool call {i} is not an object with a function name"
        cid = c.get("id")
        out.append((clean(cid) if isinstance(cid, str) and cid else f"call-{i}", clean(f["name"]),
                    f.get("arguments")))
    if out:
        assistant["tool_calls"] = [{"id": cid, "type": "function",
                                    "function": {"name": name, "arguments": echo_arguments(raw)}}
                                   for cid, name, raw in out]
    return assistant, out, None


def echo_arguments(raw: Any) -> str:
    """A tool call's arguments as sent back to the model: always a string."""
    if isinstance(raw, str):
        return clean(raw)
    if raw is None:
        return "{}"
    return clean(json.dumps(raw, sort_keys=True))


def tool_arguments(raw: Any) -> dict:
    """A tool call's arguments as a dict; ValueError when they are not a JSON object."""
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValueError("not a JSON object")
    if too_deep(args, MAX_ARGS_DEPTH):
        raise ValueError(f"nested more than {MAX_ARGS_DEPTH} levels deep")
    return clean_json(args)


# --- the request -------------------------------------------------------------------------

def checked_limits(where: str, timeout, max_tokens) -> tuple[float | None, int | None]:
    """`timeout` (seconds > 0) and `max_tokens` (an integer >= 1), each or None (no limit, not sent);
    a `FinbenchError` naming the parameter otherwise."""
    try:
        max_tokens = None if max_tokens is None else check_int(where, "max_tokens", max_tokens, 1)
    except FinbenchError:
        raise bad(where, "max_tokens", max_tokens, "an integer >= 1 or None") from None
    try:
        timeout = None if timeout is None else check_real(where, "timeout", timeout, 0, lo_open=True)
    except FinbenchError:
        raise bad(where, "timeout", timeout, "a finite number of seconds > 0 or None") from None
    return timeout, max_tokens


def ask(client, model: str, messages: list, tools: list, params: dict, secret: str | None) -> dict:
    """One chat completion through `client`: a response record's fields, `body` or `invalid` (and `text`)
    for a reply that cannot be read (`reply_fields`), or `ended` (`size_refusal`) for a conversation the
    server refuses as too long. Other transport and status errors (after the client's retries) are
    raised, key scrubbed."""
    import openai

    try:
        raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, tools=tools,
                                                               **params)
        data = raw.http_response.content
    except ReplyTooLarge as e:
        return {"invalid": str(e)}
    except openai.APIConnectionError as e:
        cause = next((c for c in causes(e) if type(c).__name__ == "DecodingError"), None)
        if cause is not None:  # a body whose content encoding does not decode
            return {"invalid": f"the reply's content encoding does not decode ({clean(str(cause))[:200]})"}
        if isinstance(e, openai.APITimeoutError):  # it answered too slowly: the timeout's own error says so
            scrub_error(e, secret)
            raise
        # the client's own words ("Connection error.") name no server: say which one did not answer
        named = openai.APIConnectionError(message=f"Connection error: no answer from {client.base_url} (is the "
                                          "server running, and is base_url right?)", request=e.request)
        scrub_error(named, secret)
        raise named from e
    except openai.OpenAIError as e:
        refused = size_refusal(e, secret)
        if refused is not None:
            return refused
        scrub_error(e, secret)
        raise
    return reply_fields(data, secret)


# --- the HTTP client: a total deadline per request ------------------------------------------

class ReplyTooLarge(Exception):
    """A reply over `MAX_REPLY_BYTES`, cut off while reading (a malformed call, not a transport error)."""


_DEADLINE_BACKEND = None


def _deadline_backend():
    """A network backend for `httpcore2` whose every connect, read and write is bounded by the time left
    before the current request's deadline (so a server that drips cannot hold a request), and whose
    reads stop at `MAX_REPLY_BYTES` (plus room for the headers)."""
    global _DEADLINE_BACKEND
    if _DEADLINE_BACKEND is not None:
        return _DEADLINE_BACKEND
    import httpcore2

    def left(state, timeout, exc):
        deadline = getattr(state, "deadline", None)
        if deadline is None:
            return timeout
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise exc(f"no complete reply within the {state.seconds} s deadline")
        return rest if timeout is None else min(timeout, rest)

    class Stream(httpcore2.NetworkStream):
        def __init__(self, inner, state):
            self._inner, self._state = inner, state

        def read(self, max_bytes, timeout=None):
            data = self._inner.read(max_bytes, left(self._state, timeout, httpcore2.ReadTimeout))
            if getattr(self._state, "received", None) is not None:
                self._state.received += len(data)
                if self._state.received > MAX_REPLY_BYTES + 2**16:
                    raise ReplyTooLarge(f"the reply is over {MAX_REPLY_BYTES} bytes")
            return data

        def write(self, buffer, timeout=None):
            return self._inner.write(buffer, left(self._state, timeout, httpcore2.WriteTimeout))

        def close(self):
            return self._inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return Stream(self._inner.start_tls(ssl_context, server_hostname,
                                                left(self._state, timeout, httpcore2.ConnectTimeout)), self._state)

        def get_extra_info(self, info):
            return self._inner.get_extra_info(info)

    class Backend(httpcore2.NetworkBackend):
        def __init__(self, inner, state):
            self._inner, self._state = inner, state

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            t = left(self._state, timeout, httpcore2.ConnectTimeout)
            return Stream(self._inner.connect_tcp(host, port, t, local_address, socket_options), self._state)

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            t = left(self._state, timeout, httpcore2.ConnectTimeout)
            return Stream(self._inner.connect_unix_socket(path, t, socket_options), self._state)

        def sleep(self, seconds):
            return self._inner.sleep(seconds)

    _DEADLINE_BACKEND = Backend
    return Backend


def deadline_http_client(seconds: float | None, gate=None):
    """An `httpx2` client for `openai.OpenAI` whose every request attempt (each retry its own) must be
    complete within `seconds`: connect, send, and read the whole reply; with a `gate`
    (`finbench.agents.llm_traffic.Gate`), each attempt holds one of its slots while in flight."""
    import openai

    state = threading.local()

    def start(request):  # an event hook: runs before every attempt, in the thread that sends it
        state.seconds = seconds
        state.deadline = None if seconds is None else time.monotonic() + seconds
        state.received = 0

    http = openai.DefaultHttpxClient(event_hooks={"request": [start]})
    backend = _deadline_backend()
    pools = [getattr(t, "_pool", None) for t in (http._transport, *http._mounts.values()) if t is not None]
    pools = [p for p in pools if p is not None and hasattr(p, "_network_backend")]
    if not pools:  # pragma: no cover - another httpx2 layout: per-read timeouts only
        warn_caller("ModelAgent: cannot bound requests by a total deadline with this httpx2; "
                    "the timeout applies per read", RuntimeWarning)
    for pool in pools:
        pool._network_backend = backend(pool._network_backend, state)
    if gate is not None:
        http._transport = GatedTransport(http._transport, gate)
        http._mounts = {k: t if t is None else GatedTransport(t, gate) for k, t in http._mounts.items()}
    return http


def causes(exc: BaseException):
    """`exc`, then what caused it, and so on."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
