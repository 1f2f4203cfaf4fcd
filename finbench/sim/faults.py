"""Fault profiles and the delivery pipeline that applies them (SPEC §3).

A delivery is one canonical event on its way to one system. The pipeline runs
in SPEC's fixed order: loss, delay, duplicate (a copy draws nothing further),
the bank's batching, then bounded reorder; partial commit marks ledger
settlement postings. Every draw is addressed by (unit stream, seed, family,
delivery id), see `finbench.sim.rng`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from finbench.sim import constants as C
from finbench.errors import FinbenchError, bad, check_real, show
from finbench.sim.rng import Keyed


@dataclass(frozen=True)
class FaultProfile:
    """Which fault families are on, and how often each fires."""

    intensity: float = C.DEFAULT_INTENSITY
    families: frozenset = field(default_factory=lambda: frozenset(C.FAMILIES))

    def __post_init__(self):
        if isinstance(self.families, (str, bytes)) or not hasattr(self.families, "__iter__"):
            raise bad("FaultProfile", "families", self.families,
                      "a collection of family names, e.g. {'loss', 'delay'} (FaultProfile.only('loss') for one)")
        fams = frozenset(_check(self.families))
        object.__setattr__(self, "families", fams)
        object.__setattr__(self, "intensity", check_real("FaultProfile", "intensity", self.intensity, 0.0, 1.0))

    @classmethod
    def default(cls, intensity: float = C.DEFAULT_INTENSITY) -> FaultProfile:
        """All six families at `intensity` (SPEC's default: 0.30)."""
        if cls is FaultProfile and intensity.__class__ is float and intensity == C.DEFAULT_INTENSITY:
            return _DEFAULT  # made once: a profile is immutable, and every episode without one asks for it
        return cls(intensity, frozenset(C.FAMILIES))

    @classmethod
    def none(cls) -> FaultProfile:
        return _NONE if cls is FaultProfile else cls(C.DEFAULT_INTENSITY, frozenset())

    @classmethod
    def only(cls, *families: str, intensity: float = C.DEFAULT_INTENSITY) -> FaultProfile:
        _check(families)
        return cls(intensity, frozenset(families))

    @classmethod
    def without(cls, *families: str, intensity: float = C.DEFAULT_INTENSITY) -> FaultProfile:
        _check(families)
        return cls(intensity, frozenset(C.FAMILIES) - frozenset(families))

    def on(self, family: str) -> bool:
        return family in self.families

    @property
    def name(self) -> str:
        """A short stable label: 'all', 'none', 'only:loss', 'without:delay', ..."""
        fams = [f for f in C.FAMILIES if f in self.families]
        if len(fams) == len(C.FAMILIES):
            label = "all"
        elif not fams:
            label = "none"
        elif len(fams) <= 3:
            label = "only:" + "+".join(fams)
        else:
            label = "without:" + "+".join(f for f in C.FAMILIES if f not in self.families)
        return label if self.intensity == C.DEFAULT_INTENSITY or not fams else f"{label}@{self.intensity:g}"

    def key(self) -> str:
        """Canonical text for cache keys."""
        return f"{self.intensity!r}|" + ",".join(sorted(self.families))


def _check(families) -> list[str]:
    """The names, each checked: a string naming one of the six families."""
    names = list(families)
    for f in sorted(names, key=str):  # sorted: the error names the same family under any hash seed
        if not isinstance(f, str) or f not in C.FAMILIES:
            raise FinbenchError(f"FaultProfile: unknown fault family {show(f)}; valid families: "
                                f"{', '.join(C.FAMILIES)}")
    return names


_DEFAULT = FaultProfile(C.DEFAULT_INTENSITY, frozenset(C.FAMILIES))
_NONE = FaultProfile(C.DEFAULT_INTENSITY, frozenset())


class Delivery:
    """One arrival at one system. `seq` breaks ties in (arrival, seq) order."""

    __slots__ = ("id", "system", "event", "group", "arrival", "earliest", "seq", "partial")

    def __init__(self, id, system, event, group, arrival, earliest, seq, partial=False):
        self.id = id
        self.system = system
        self.event = event
        self.group = group
        self.arrival = arrival
        self.earliest = earliest
        self.seq = seq
        self.partial = partial

    def __repr__(self):
        return f"Delivery({self.id!r}, t={self.arrival}, event_t={self.event.t})"


@dataclass
class Spec:
    """What the world asks the pipeline to deliver: one event to one system."""

    id: str
    system: str
    event: object
    group: str
    arrival: int
    drop: bool = False  # archetype: the delivery is lost by construction
    copy_gap: int = 0  # archetype: a second copy this many ticks later
    lag: int = 0  # archetype: the replica's lag, already in `arrival` (stale_processor)
    partial: bool = False  # archetype: the ledger half-commits
    faultable: bool = True


arrival_seq = attrgetter("arrival", "seq")
"""A delivery's place in its lane: (arrival, seq)."""


def posted_at(system: str, arrival: int) -> int:
    """When a delivery arriving at `arrival` shows in `system`: the bank posts in batches,
    at the next `BANK_BATCH` boundary strictly after it (SPEC §2); the others at once.

    Example:
        >>> posted_at("bank", 300), posted_at("bank", 299), posted_at("ledger", 300)
        (360, 300, 300)
    """
    return (arrival // C.BANK_BATCH + 1) * C.BANK_BATCH if system == "bank" else arrival


def nominal_arrival(system: str, event_t: int) -> int:
    """When an event at `event_t` shows in `system` with no fault and no lag: its latency, then the batch."""
    return posted_at(system, event_t + C.LATENCY[system])


def copy_id(delivery_id: str, i: int) -> str:
    """The id of the i-th extra copy of a delivery (a duplicate), i >= 1."""
    return f"{delivery_id}#copy{i}"


def deliver(specs: list[Spec], draw: Keyed, profile: FaultProfile, firings: list,
            seq_start: int = 0) -> list[Delivery]:
    """Run the fault pipeline over `specs`; append (family, id) to `firings`.

    `draw` is the world's keyed stream, `Keyed(unit stream, seed)`: the draw of a family at a
    delivery is `draw.uniform(family, delivery id)`. One with a memo remembers them for callers
    that ask the same keys again (the worlds of one (task, seed), under any profile).
    """
    p = profile.intensity
    on = profile.families
    # each family's key text up to the delivery id (after the prefix): a fault world asks thousands of draws
    at = draw.at
    loss = "loss\x1f" if "loss" in on else None
    delay = "delay\x1f" if "delay" in on else None
    duplicate = "duplicate\x1f" if "duplicate" in on else None
    partial_commit = "partial_commit\x1f" if "partial_commit" in on else None
    delay_lo, delay_span = C.DELAY_RANGE[0], C.DELAY_RANGE[1] - C.DELAY_RANGE[0] + 1
    gap_lo, gap_span = C.DUPLICATE_GAP[0], C.DUPLICATE_GAP[1] - C.DUPLICATE_GAP[0] + 1
    out: list[Delivery] = []
    seq = seq_start
    for s in specs:
        if s.drop:
            continue
        sid, system, event = s.id, s.system, s.event
        arrival = s.arrival
        copies = None
        if s.faultable:
            if loss is not None and at(loss + sid) < p:
                firings.append(("loss", sid))
                continue
            if delay is not None and at(delay + sid) < p:
                firings.append(("delay", sid))
                arrival += delay_lo + int(at("delay-by\x1f" + sid) * delay_span)
            if duplicate is not None and at(duplicate + sid) < p:
                firings.append(("duplicate", sid))
                copies = [arrival + gap_lo + int(at("duplicate-gap\x1f" + sid) * gap_span)]
        if s.copy_gap:
            copies = [arrival + s.copy_gap] if copies is None else [*copies, arrival + s.copy_gap]
        partial = s.partial
        if (partial_commit is not None and s.faultable and not partial and system == "ledger"
                and event.kind == "capture_settled" and at(partial_commit + sid) < p):
            firings.append(("partial_commit", sid))
            partial = True
        bank = system == "bank"
        earliest = event.t + 1 if bank else event.t
        out.append(Delivery(sid, system, event, s.group, posted_at(system, arrival) if bank else arrival,
                            earliest, seq, partial))
        seq += 1
        if copies is not None:
            for i, t in enumerate(copies, start=1):
                out.append(Delivery(copy_id(sid, i), system, event, s.group, posted_at(system, t) if bank else t,
                                    earliest, seq, False))
                seq += 1
    if "reorder" in on:
        _reorder(out, draw, p, firings)
    return out


def _reorder(ds: list[Delivery], draw: Keyed, p: float, firings: list) -> None:
    """Exchange arrivals of adjacent deliveries of one system and one origin.

    A pair is adjacent in (arrival, seq) order, within REORDER_WINDOW ticks,
    and is swapped only if neither delivery would then arrive before the
    event it describes. Each delivery takes part in at most one swap, so no
    delivery moves more than the window.
    """
    lanes: dict[tuple, list[Delivery]] = {}
    for d in ds:
        lane = lanes.get((d.system, d.group))
        if lane is None:
            lanes[(d.system, d.group)] = [d]
        else:
            lane.append(d)
    at = draw.at
    for lane in lanes.values():
        if len(lane) < 2:
            continue
        lane.sort(key=arrival_seq)
        i = 0
        while i < len(lane) - 1:
            a, b = lane[i], lane[i + 1]
            gap = b.arrival - a.arrival
            if 0 < gap <= C.REORDER_WINDOW and a.arrival >= b.earliest:
                if at("reorder\x1f" + a.id + "\x1f" + b.id) < p:  # = draw.uniform("reorder", a.id, b.id)
                    a.arrival, b.arrival = b.arrival, a.arrival
                    firings.append(("reorder", (a.id, b.id)))
                    i += 2
                    continue
            i += 1
