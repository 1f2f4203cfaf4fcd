"""What comes over the wire from a chat-completions server, made safe for `finbench.agents.llm`.

- `deadline_http_client`: an `httpx2` client for `openai.OpenAI` whose every request attempt must
  be complete within a total deadline (connect, send, the whole reply), and whose replies stop at
  `MAX_REPLY_BYTES`: a server that drips one byte at a time cannot hold a request.
- `reply_fields`: a reply body as a transcript's response record holds it: its JSON (`body`, the
  API key scrubbed), or `invalid` (why) and `text` (its start) when it is not JSON, too large or
  nested too deeply.
- `read_reply`: what a response record says (the assistant message to send back, its tool calls,
  what is wrong with it), for any JSON value at all: never an exception.
- `scrub`, `scrub_error`: the key string replaced by `***` in records and in the client's errors;
  `clean`: lone surrogates replaced, so every string can be sent and written as UTF-8.
"""
from __future__ import annotations

import json
import threading
import time
import warnings
from typing import Any

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


def scrub(obj: Any, secret: str | None) -> Any:
    """`obj` with every occurrence of `secret` (of at least `MIN_SECRET` characters) in its strings
    (keys too) replaced by `***`."""
    if not secret or len(secret) < MIN_SECRET:
        return obj
    if isinstance(obj, str):
        return obj.replace(secret, SCRUBBED) if secret in obj else obj
    if isinstance(obj, list):
        return [scrub(v, secret) for v in obj]
    if isinstance(obj, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in obj.items()}
    return obj


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


def clean(s: str) -> str:
    """`s` encodable as UTF-8: lone surrogates replaced by U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


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


def deadline_http_client(seconds: float | None):
    """An `httpx2` client for `openai.OpenAI` whose every request attempt (each retry its own) must be
    complete within `seconds`: connect, send, and read the whole reply."""
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
        warnings.warn("ModelAgent: cannot bound requests by a total deadline with this httpx2; "
                      "the timeout applies per read", RuntimeWarning, stacklevel=3)
    for pool in pools:
        pool._network_backend = backend(pool._network_backend, state)
    return http


def causes(exc: BaseException):
    """`exc`, then what caused it, and so on."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
