"""A scripted model server: an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that plays a careful
strategy from the conversation alone, for trying the model path offline (as Inspect ships `mockllm`).

    finbench mock-server --port 8765 --latency 0.25          # serves http://127.0.0.1:8765/v1 until idle
    finbench eval --model careful --base-url http://127.0.0.1:8765/v1 --task-ids ord-0001,ord-0005

    with MockServer(latency=0.25, max_in_flight=4) as srv:     # from Python (tests, `make bench-model`)
        run_model(run, "careful", srv.base_url)
        srv.stats()                                            # requests, 429s, most in flight, ...

The strategy (`careful_call`) reads only the messages it is sent: the brief in the first user message, then
every tool result. It probes the processor; while the outcome is unknown it waits (45 ticks, never past the
ship-by time) and probes again; it ships as soon as a capture has settled (refunds if the ship-by time has
passed); after a confirmed failure of every capture it retries once under a fresh idempotency key, and after
a second confirmed failure writes the payment off; with the ship-by time close and nothing settled, it
escalates. An answer with an error (a malformed call) is followed by a probe. It is a fixed function of the
conversation, so any number of connections and any order of answers gives the same episodes.

Knobs: `latency` (seconds before each answer), `max_in_flight` (a request arriving while that many are being
answered gets 429 with a `retry-after-ms` header, as a rate-limited API does), `max_messages` (a conversation
longer than that gets the 400 a server gives a request over its context, in vLLM's or llama.cpp's words:
`wording`), `usage` (each answer carries token counts, estimated from the characters, or none), and
`idle_exit` (the server stops by itself after that many seconds without a request). Every answer is counted
(`stats`): a test or a card can compare what a client says it sent with what the server received.
"""
from __future__ import annotations

import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["MODEL", "MockServer", "careful_call", "main", "send_json"]

MODEL = "careful"
"""The model name the server answers to by default (any name is accepted and echoed)."""
WAIT = 45
"""Ticks the careful strategy waits between probes."""
NEAR = 40
"""With fewer ticks than this left before the ship-by time and nothing settled, it escalates."""
REFUSALS = {
    "vllm": ("This model's maximum context length is {n} tokens. However, you requested {m} tokens. Please reduce "
             "the length of the messages or completion.", "BadRequestError"),
    "llamacpp": ("the request exceeds the available context size, try increasing it", "exceed_context_size_error"),
}


def _json(text) -> dict:
    try:
        out = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def careful_call(messages: list) -> tuple[str, dict]:
    """The careful strategy's next call (tool, arguments), from a chat's messages alone (module docstring)."""
    brief: dict = {}
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str) and \
                "{" in m["content"]:
            brief = _json(m["content"][m["content"].index("{"):])
            if brief:
                break
    order = brief.get("order_id", "")
    ship_by = brief.get("ship_by", 600) if isinstance(brief.get("ship_by"), int) else 600
    args = {"order_id": order}
    t, last, statuses, retried = brief.get("t", 0), None, {}, False
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("tool", "user") or m is messages[0]:
            continue
        obs = _json(m.get("content"))
        if not obs or "tool" not in obs and "error" not in obs:
            continue
        t = obs.get("t", t) if isinstance(obs.get("t"), int) else t
        last = obs
        result = obs.get("result") if isinstance(obs.get("result"), dict) else {}
        if obs.get("tool") == "probe_processor" and isinstance(result.get("captures"), list):
            statuses = {c.get("id"): c.get("status") for c in result["captures"] if isinstance(c, dict)}
        if obs.get("tool") == "retry_capture" and result.get("new_capture"):
            retried = True
    if last is None or "error" in last:
        return "probe_processor", args
    if "settled" in statuses.values():
        return ("ship" if t < ship_by else "refund"), args
    if last.get("tool") == "retry_capture":  # the new capture: ask for its outcome
        return "probe_processor", args
    if statuses and all(s == "failed" for s in statuses.values()):
        if not retried and t < ship_by - 2 * WAIT:
            return "retry_capture", {**args, "idempotency_key": f"key-{len(statuses) + 1}"}
        return "write_off", args
    if last.get("tool") == "probe_processor":
        left = ship_by - t
        if left < NEAR:
            return "escalate", args
        return "wait", {**args, "ticks": max(1, min(WAIT, left - NEAR // 2))}
    return "probe_processor", args


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


class MockServer:
    """The scripted server in a thread of this process (`start` is called on construction; `close`, or the
    `with` block's end, stops it). `base_url` is `http://127.0.0.1:<port>/v1`."""

    def __init__(self, port: int = 0, *, latency: float = 0.0, max_in_flight: int | None = None,
                 max_messages: int | None = None, wording: str = "vllm", usage: bool = True,
                 idle_exit: float | None = None, model: str = MODEL):
        if wording not in REFUSALS:
            raise ValueError(f"MockServer: wording must be one of {', '.join(REFUSALS)}, got {wording!r}")
        self.latency, self.max_in_flight, self.max_messages = float(latency), max_in_flight, max_messages
        self.wording, self.usage, self.idle_exit, self.model = wording, usage, idle_exit, model
        self._lock = threading.Lock()
        self._counts = {"requests": 0, "answered": 0, "rate_limited": 0, "context_refused": 0, "bad_requests": 0,
                        "in_flight": 0, "max_in_flight": 0, "max_in_flight_answered": 0}
        self._last = time.monotonic()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in separate writes: no 40 ms delayed-ACK stall

            def log_message(self, *a):
                pass

            def do_POST(self):
                outer._handle(self)

            def do_GET(self):  # /v1/models, as clients probe it
                send_json(self, 200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self._closed = False
        if idle_exit:
            threading.Thread(target=self._watch, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Stop serving (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._server.shutdown()
        self._server.server_close()

    def wait(self) -> None:
        """Block until the server stops (`idle_exit`, or `close` from another thread)."""
        while not self._closed:
            time.sleep(0.2)

    def stats(self) -> dict:
        """What it received: `requests` (every POST), `answered` (completions), `rate_limited` (429s),
        `context_refused` (400s for the context), `bad_requests`, `max_in_flight` (most requests being
        answered at once, refused ones included) and `max_in_flight_answered` (the same, at the moment a
        request was accepted for an answer)."""
        with self._lock:
            return {k: v for k, v in self._counts.items() if k != "in_flight"}

    def _watch(self) -> None:
        while not self._closed:
            time.sleep(min(1.0, self.idle_exit / 4))
            with self._lock:
                idle = self._counts["in_flight"] == 0 and time.monotonic() - self._last > self.idle_exit
            if idle:
                self.close()

    def _handle(self, h) -> None:
        with self._lock:
            c = self._counts
            c["requests"] += 1
            c["in_flight"] += 1
            c["max_in_flight"] = max(c["max_in_flight"], c["in_flight"])
            over = self.max_in_flight is not None and c["in_flight"] > self.max_in_flight
            if not over:
                c["max_in_flight_answered"] = max(c["max_in_flight_answered"], c["in_flight"])
            self._last = time.monotonic()
        try:
            raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
            if over:
                with self._lock:
                    self._counts["rate_limited"] += 1
                return send_json(h, 429, {"error": {"message": "Rate limit reached: too many requests in flight",
                                                     "type": "rate_limit_error", "code": 429}},
                                  {"retry-after-ms": "50"})
            body = _json(raw.decode("utf-8", "replace"))
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                with self._lock:
                    self._counts["bad_requests"] += 1
                return send_json(h, 400, {"error": {"message": "messages must be a non-empty list",
                                                     "type": "invalid_request_error", "code": 400}})
            if self.latency:
                time.sleep(self.latency)
            sent = json.dumps(messages)
            if self.max_messages is not None and len(messages) > self.max_messages:
                with self._lock:
                    self._counts["context_refused"] += 1
                words, kind = REFUSALS[self.wording]
                return send_json(h, 400, {"error": {"message": words.format(n=4096, m=_tokens(sent) + 4096),
                                                     "type": kind, "code": 400}})
            tool, args = careful_call(messages)
            turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
            call = {"id": f"call-{turn}", "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(args, sort_keys=True)}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            reply = {"id": f"chatcmpl-{turn}", "object": "chat.completion", "created": 0,
                     "model": body.get("model", self.model),
                     "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}
            if self.usage:
                prompt, completion = _tokens(sent), _tokens(json.dumps(message))
                reply["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                  "total_tokens": prompt + completion}
            with self._lock:
                self._counts["answered"] += 1
            send_json(h, 200, reply)
        finally:
            with self._lock:
                self._counts["in_flight"] -= 1
                self._last = time.monotonic()



def send_json(h, status: int, payload: dict, headers: dict | None = None) -> None:
    """Answer the request `h` (a `BaseHTTPRequestHandler`) with `payload` as JSON; a client that went away
    is let go."""
    data = json.dumps(payload).encode()
    try:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
    except OSError:  # the client gave up and went away
        pass


def main(args) -> int:
    """`finbench mock-server`: serve until idle for `--idle-exit` seconds (or Ctrl-C)."""
    try:
        srv = MockServer(args.port, latency=args.latency, max_in_flight=args.max_in_flight,
                         max_messages=args.max_messages, wording=args.wording, usage=not args.no_usage,
                         idle_exit=args.idle_exit, model=args.model)
    except OSError as exc:  # the port is taken (or not ours to take): one line, as for any bad option
        print(f"finbench mock-server: cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}"
              " (another port: --port N, or --port 0 for any free one)", file=sys.stderr)
        return 64
    print(f"finbench mock-server: serving {srv.base_url} (model {srv.model!r}; latency {srv.latency:g} s"
          + (f", 429 above {srv.max_in_flight} in flight" if srv.max_in_flight else "")
          + (f", context refused above {srv.max_messages} messages" if srv.max_messages else "")
          + f"); stops after {args.idle_exit:g} s without a request", flush=True)
    try:
        srv.wait()
    except KeyboardInterrupt:
        srv.close()
    s = srv.stats()
    print(f"finbench mock-server: stopped; {s['requests']} requests received, {s['answered']} answered, "
          f"{s['rate_limited']} answered 429, {s['context_refused']} refused for the context", flush=True)
    return 0
