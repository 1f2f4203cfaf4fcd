"""Probe modes: what `probe_processor` answers, chosen like a fault profile (issue 12, Table VIII).

The paper's probe goes straight to the canonical log (`full`). The other arms
take that away, in part or whole, so that gating on finality and reasoning
across the four replicas can be told apart:

| kind | what `probe_processor` answers |
|---|---|
| `full` | today's probe: each capture's terminal status if determined at t, else "unknown" |
| `none` | `{"unavailable": ...}` with no captures; the call still costs its ticks and one call |
| `delayed` | the probe as of t - `delay` (default 120): captures submitted by then, statuses as of then, and `as_of` |
| `rate_limited` | the full probe for the first `limit` (default 3) calls of an episode, then as `none` |
| `identity_only` | each capture's `id`, `key` and `amount`, never a `status` |

Every mode costs the same ticks per call (`Costs.probe_ticks`). The default,
`ProbeMode.full()`, is exactly the probe of SPEC §4, so nothing changes unless
a mode is chosen.
"""
from __future__ import annotations

from dataclasses import dataclass

from finbench.errors import bad, check_choice, check_int

KINDS = ("full", "none", "delayed", "rate_limited", "identity_only")
DEFAULT_DELAY = 120
"""D of `delayed`: the probe answers as of t - D (ticks)."""
DEFAULT_LIMIT = 3
"""N of `rate_limited`: at most N answers per episode, then unavailable."""


@dataclass(frozen=True)
class ProbeMode:
    """What the authoritative probe answers in an episode.

    Attributes:
        kind: one of `KINDS`.
        delay: D, for `delayed` (ticks, 1..1800); 0 for every other kind.
        limit: N, for `rate_limited` (answers per episode, 0..40); 0 for every other kind.
    """

    kind: str = "full"
    delay: int = 0
    limit: int = 0

    def __post_init__(self):
        check_choice("ProbeMode", "kind", self.kind, KINDS)
        delay = check_int("ProbeMode", "delay", self.delay, 0, 1800)
        limit = check_int("ProbeMode", "limit", self.limit, 0, 40)
        if self.kind == "delayed" and delay < 1:
            raise bad("ProbeMode", "delay", self.delay, "an integer in 1..1800 for a delayed probe")
        if self.kind != "delayed" and delay:
            raise bad("ProbeMode", "delay", self.delay, "0 unless kind='delayed'")
        if self.kind != "rate_limited" and limit:
            raise bad("ProbeMode", "limit", self.limit, "0 unless kind='rate_limited'")
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "limit", limit)

    @classmethod
    def full(cls) -> ProbeMode:
        """SPEC §4's probe (the default)."""
        return cls("full")

    @classmethod
    def none(cls) -> ProbeMode:
        return cls("none")

    @classmethod
    def delayed(cls, delay: int = DEFAULT_DELAY) -> ProbeMode:
        return cls("delayed", delay=delay)

    @classmethod
    def rate_limited(cls, limit: int = DEFAULT_LIMIT) -> ProbeMode:
        return cls("rate_limited", limit=limit)

    @classmethod
    def identity_only(cls) -> ProbeMode:
        return cls("identity_only")

    @classmethod
    def all(cls) -> tuple[ProbeMode, ...]:
        """The five arms of Table VIII, with the default D and N."""
        return (cls.full(), cls.none(), cls.delayed(), cls.rate_limited(), cls.identity_only())

    @property
    def is_full(self) -> bool:
        return self.kind == "full"

    @property
    def name(self) -> str:
        """'full', 'none', 'delayed[D=120]', 'rate_limited[N=3]', 'identity_only'."""
        if self.kind == "delayed":
            return f"delayed[D={self.delay}]"
        if self.kind == "rate_limited":
            return f"rate_limited[N={self.limit}]"
        return self.kind

    def key(self) -> list:
        return [self.kind, self.delay, self.limit]

    def answer(self, world, t: int, answered: int) -> tuple[dict, bool]:
        """(the probe's result at t, whether it counts as an answer) given `answered` earlier answers."""
        order = world.task.order_id
        if self.kind == "full":
            return world.probe(t), True
        if self.kind == "none" or (self.kind == "rate_limited" and answered >= self.limit):
            why = "no probe in this arm" if self.kind == "none" else \
                f"rate limit reached ({self.limit} answers per episode)"
            return {"order_id": order, "unavailable": why, "captures": []}, False
        if self.kind == "rate_limited":
            return world.probe(t), True
        if self.kind == "delayed":
            as_of = max(0, t - self.delay)
            return {**world.probe(as_of), "as_of": as_of}, True
        # identity_only
        return {"order_id": order, "captures": [{"id": c.id, "key": c.key, "amount": c.amount}
                                                for c in world.captures if c.submitted_at <= t]}, True


_FULL = ProbeMode.full()  # the default, made once: a ProbeMode is immutable and checks itself on creation


def check_probe(where: str, probe) -> ProbeMode:
    """`probe`, or the default for None; an error for anything but a ProbeMode."""
    if probe is None:
        return _FULL
    if not isinstance(probe, ProbeMode):
        raise bad(where, "probe", probe, "a ProbeMode (ProbeMode.full(), .none(), .delayed(120), "
                                         ".rate_limited(3), .identity_only())")
    return probe
