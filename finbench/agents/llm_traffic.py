"""The traffic to a model endpoint: how many requests may be in flight, and what a run's requests cost.

- `Gate`: an adaptive limit on the request attempts in flight to one endpoint, shared by every
  `ModelAgent` of the process that talks to it (`gate_for`). A rate limit (429) or an overloaded
  server (503) halves the limit, once per burst, and remembers the level that was refused; each answer
  in time grows it again, by one per round of answers, up to that level, and past it only after a long
  run of answers (the server may have grown). Episodes overlap their waiting up to the run's own number
  of connections; the gate only ever lowers what is in flight.
- `GatedTransport`: the `httpx2` transport that takes a slot of the gate for every attempt (the
  client's own retries included), so what is in flight at the server is what the gate allows.
- `Usage`: what a run's model episodes asked and cost, tallied by every copy of an agent (copies share
  it): requests, tokens (the server's `usage`, or an estimate marked as one), latency, malformed calls,
  episodes the server ended for the context length, and where each episode came from (asked now,
  replayed from its transcript, or both).

None of this decides a row: what a model answers is recorded in its transcript and read back from the
record, so rows and transcripts are the same for any number of connections and any order of answers.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["GROW_PAST_AFTER", "LIMITED", "Gate", "GatedTransport", "Usage", "attempts", "gate_for"]

LIMITED = (429, 503)
"""The statuses that mean "too much at once": the gate lowers its limit on them."""
GROW_PAST_AFTER = 50
"""Answers in a row before the gate tries one more request in flight than the level last refused."""


class Gate:
    """An adaptive limit on the requests in flight to one endpoint (additive increase, halving on a refusal).

    Attributes (read them under no lock: they are for reports):
        limit: the attempts allowed in flight now (at least 1).
        in_flight, peak: attempts in flight now, and the most there have been.
        sent, limited: attempts sent, and answered 429 or 503.
    """

    def __init__(self, ceiling: int = 1024):
        self._cond = threading.Condition()
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.refused_at: int | None = None  # the lowest level refused in the last burst: grown past slowly
        self.in_flight = self.peak = self.sent = self.limited = 0
        self.reached = False  # the endpoint answered once: from then on a refused connection is retried
        self._streak = 0  # answers in time since the limit last moved
        self._epoch = 0  # bumped at each halving: one burst's refusals halve once

    def acquire(self) -> tuple[int, int]:
        """Wait for a slot; (the level this attempt is sent at, the current burst), for `release`."""
        with self._cond:
            while self.in_flight >= max(1, int(self.limit)):
                self._cond.wait()
            self.in_flight += 1
            self.sent += 1
            self.peak = max(self.peak, self.in_flight)
            return self.in_flight, self._epoch

    def release(self, ticket: tuple[int, int], refused: bool) -> None:
        """Give the slot back; `refused`: the server answered 429 or 503."""
        level, epoch = ticket
        with self._cond:
            self.in_flight -= 1
            if refused:
                self.limited += 1
                if epoch == self._epoch:  # the first refusal of this burst
                    self._epoch += 1
                    self.refused_at = level
                    self.limit = max(1.0, math.floor(min(self.limit, level) / 2))
                    self._streak = 0
                else:
                    self.refused_at = min(self.refused_at or level, level)
            else:
                self._streak += 1
                cap = self.ceiling if self.refused_at is None else self.refused_at - 1
                if self.limit < cap and self._streak >= self.limit:
                    self.limit, self._streak = self.limit + 1, 0
                elif self.limit >= cap and self._streak >= GROW_PAST_AFTER and self.limit < self.ceiling:
                    self.refused_at = None if self.refused_at is None else self.refused_at + 1
                    self.limit, self._streak = self.limit + 1, 0
            self._cond.notify_all()


_GATES: dict[str, Gate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(base_url: str) -> Gate:
    """The process's gate for the endpoint `base_url` (one per endpoint, made on first use)."""
    with _GATES_LOCK:
        gate = _GATES.get(base_url)
        if gate is None:
            gate = _GATES[base_url] = Gate()
        return gate


_THREAD = threading.local()  # the attempts of the request this thread is making (`attempts`)


@contextmanager
def attempts():
    """Count the attempts (and the 429/503 answers among them) of the requests made inside, in this thread:
    yields a dict `{"sent": n, "limited": n}` filled in as they go."""
    tally = {"sent": 0, "limited": 0}
    _THREAD.tally = tally
    try:
        yield tally
    finally:
        _THREAD.tally = None


class GatedTransport:
    """An `httpx2` transport that sends each attempt through `inner` holding a slot of `gate`."""

    def __init__(self, inner, gate: Gate):
        self._inner, self._gate = inner, gate

    def handle_request(self, request):
        ticket = self._gate.acquire()
        refused = False
        tally = getattr(_THREAD, "tally", None)
        try:
            try:
                response = self._inner.handle_request(request)
            except Exception as exc:
                if not self._gate.reached and _not_listening(exc):
                    # nothing ever answered there: the server is not running (or the URL is wrong), and retrying
                    # would only wait; an OpenAIError is raised by the client as it is, without its retries
                    import openai

                    raise openai.APIConnectionError(request=request) from exc
                raise
            self._gate.reached = True
            refused = response.status_code in LIMITED
            return response
        finally:
            self._gate.release(ticket, refused)
            if tally is not None:
                tally["sent"] += 1
                tally["limited"] += refused

    def close(self) -> None:
        self._inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _not_listening(exc: BaseException) -> bool:
    """Whether `exc` (a transport error) says the host refused the connection or does not exist."""
    import socket

    seen, e = set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, socket.gaierror)):
            return True
        if type(e).__name__ == "ConnectError" and any(w in str(e) for w in ("refused", "not known", "nodename")):
            return True
        e = e.__cause__ or e.__context__
    return False


def _estimate(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _median_p90(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    s = sorted(values)
    rank = lambda q: s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]  # noqa: E731 - nearest rank
    mid = len(s) // 2
    return (s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2), rank(0.9)


@dataclass
class Usage:
    """What a run's model episodes asked and cost; every copy of one agent adds to the same tally."""

    requests: int = 0
    retries: int = 0  # attempts sent again (after a 429, 503, 5xx, timeout or dropped connection)
    rate_limited: int = 0  # attempts answered 429 or 503
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_requests: int = 0  # requests whose reply gave no usage: their tokens are estimated
    malformed: int = 0
    context_ended: int = 0
    asked: int = 0  # episodes every response of which was asked now
    replayed: int = 0  # episodes replayed whole from their transcripts
    both: int = 0  # episodes resumed: replayed up to where they stopped, then asked
    seconds: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __deepcopy__(self, memo):  # an agent's copies (one per episode) share their run's tally
        return self

    def __getstate__(self):  # pickled (a worker process): a tally of its own there, without the lock
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())

    def request(self, seconds: float, body, sent: Callable[[], str], tally: dict | None = None) -> None:
        """Tally one request asked now: its latency, its tokens (`body["usage"]`, else estimated from the
        text `sent()` gives and the reply), and its attempts (`tally`, from `attempts`)."""
        usage = body.get("usage") if isinstance(body, dict) else None
        got = usage if isinstance(usage, dict) else {}
        tin, tout = got.get("prompt_tokens"), got.get("completion_tokens")
        real = type(tin) is int and type(tout) is int and tin >= 0 and tout >= 0
        if not real:
            tin = _estimate(sent())
            choices = body.get("choices") if isinstance(body, dict) else None
            tout = _estimate(str(choices[0].get("message")) if isinstance(choices, list) and choices
                             and isinstance(choices[0], dict) else "")
        with self._lock:
            self.requests += 1
            if tally is not None:
                self.retries += max(0, tally["sent"] - 1)
                self.rate_limited += tally["limited"]
            self.input_tokens += tin
            self.output_tokens += tout
            self.estimated_requests += 0 if real else 1
            self.seconds.append(seconds)

    def episode(self, requests: int, replayed: int, malformed: int, ended: str | None) -> None:
        """Tally one finished episode: how many of its responses were asked now and replayed."""
        with self._lock:
            self.malformed += malformed
            self.context_ended += ended == "context_length"
            if requests and replayed:
                self.both += 1
            elif requests:
                self.asked += 1
            else:
                self.replayed += 1

    def source_text(self) -> str:
        """Where the episodes came from, in words: "61 asked now", "61 replayed from transcripts", or both."""
        parts = [f"{self.asked:,} asked now" if self.asked else "",
                 f"{self.both:,} resumed (replayed, then asked)" if self.both else "",
                 f"{self.replayed:,} replayed from transcripts (0 requests)" if self.replayed else ""]
        return ", ".join(p for p in parts if p) or "none played"

    def summary(self) -> dict:
        """The tally as plain JSON (card.json's `model` fields that come from the run)."""
        median, p90 = _median_p90(self.seconds)
        return {"requests": self.requests, "requests_sent": self.requests + self.retries, "retries": self.retries,
                "rate_limited": self.rate_limited, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "tokens_estimated": self.estimated_requests > 0, "estimated_requests": self.estimated_requests,
                "latency_median_s": None if median is None else round(median, 3),
                "latency_p90_s": None if p90 is None else round(p90, 3),
                "malformed_calls": self.malformed, "context_length_episodes": self.context_ended,
                "episodes": {"asked_now": self.asked, "resumed": self.both, "replayed": self.replayed},
                "source": self.source_text()}
