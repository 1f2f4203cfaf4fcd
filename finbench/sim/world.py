"""One task's world for one seed and fault profile: the canonical log, the
delivery streams to the four systems, reads, and the authoritative probe."""
from __future__ import annotations

import marshal
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

from finbench.memo import memoised
from finbench.sim import constants as C
from finbench.sim.task import Event, Task
from finbench.sim.faults import Delivery, FaultProfile, Spec, arrival_seq, deliver
from finbench.sim.rng import Keyed, key_prefix
from finbench.sim.systems import RECEIVES, completed_order_views, fold_bank, fold_erp, fold_ledger, fold_processor


@dataclass
class Capture:
    """A capture in the canonical log (the original, or one the agent created)."""

    id: str
    key: str
    amount: float
    submitted_at: int
    terminal_at: int
    outcome: str

    def status(self, t: int) -> str:
        return self.outcome if self.terminal_at <= t else "unknown"


def capture_id(n: int) -> str:
    """The receipt of the n-th capture of the case order (`cap-1` is the original)."""
    return f"cap-{n}"


def original_capture(task: Task) -> Capture:
    """The capture submitted at `CAPTURE_AT`, resolved at the task's determination time."""
    return Capture(C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, task.order_value, C.CAPTURE_AT, task.determined_at,
                   task.outcome)


def agent_capture(task: Task, n: int, key: str, t: int) -> Capture:
    """The n-th capture (n >= 2), submitted by the agent at t under a fresh `key`: resolved by
    the task's retry draw (`retry_outcome`) after `retry_delay` (SPEC §4)."""
    return Capture(capture_id(n), key, task.order_value, t, t + task.retry_delay, task.retry_outcome)


def capture_events(cap: Capture) -> list[Event]:
    """The canonical events of a capture the agent created: its submission and, if
    it falls before `HORIZON`, its terminal event."""
    events = [Event(cap.submitted_at, "capture_submitted", cap.id, cap.key, cap.amount),
              Event(cap.terminal_at, f"capture_{cap.outcome}", cap.id, cap.key, cap.amount)]
    return [e for e in events if e.t <= C.HORIZON]


def _stage(kind: str) -> str:
    return "terminal" if kind in ("capture_settled", "capture_failed") else kind


def event_specs(task: Task, events, group: str) -> list[Spec]:
    """Delivery specs for canonical events, with the archetype's built-in perturbations.

    Delivery ids do not say whether a terminal event settled or failed, so the
    two twins of a pair draw identical faults on every delivery they share.
    """
    specs = []
    for e in events:
        for system in RECEIVES[e.kind]:
            did = f"{e.capture or 'order'}:{_stage(e.kind)}:{system}"
            arrival = e.t + C.LATENCY[system]
            spec = Spec(did, system, e, group, arrival)
            terminal = e.kind in ("capture_settled", "capture_failed")
            original = e.capture == C.ORIGINAL_CAPTURE
            a = task.archetype
            if terminal and system == "processor" and a == "stale_processor":
                spec.lag = task.processor_lag
                spec.arrival += spec.lag
            if terminal and original and e.kind == "capture_settled":
                if a == "lost_settlement" and system in ("processor", "erp"):
                    spec.drop = True
                elif a == "duplicate_settlement" and system in ("ledger", "bank"):
                    spec.copy_gap = task.duplicate_gap
                elif a == "partial_ledger" and system == "ledger":
                    spec.partial = True
            specs.append(spec)
    return specs


class Base:
    """The part of a world fixed before the agent acts; shared by every policy.

    It also memoises what every policy of one (task, seed) would otherwise
    recompute: the folds of the delivery streams (`folds`, and `blobs`, their
    marshalled copies), the stale-read draw of the n-th read of each system
    (`stale`) and the fault draws (`draw`, a memoised `Keyed`); the last two are shared with the bases of other
    fault profiles of the same (task, seed), whose draws are the same numbers.
    """

    def __init__(self, task: Task, seed: int, profile: FaultProfile):
        self.firings: list = []
        # the draws are keyed by (stream, seed, family, delivery): the same numbers under every profile
        prefix = key_prefix(task.stream, seed)  # the memos of this (task, seed)'s draws are keyed by it
        self.draw = _draws(prefix)
        self.deliveries = deliver(_log_specs(task), self.draw, profile, self.firings)
        self.counts = dict.fromkeys(C.FAMILIES, 0)  # firings by family, for `World.fired`
        for fam, _ in self.firings:
            self.counts[fam] += 1
        self._key = (task.stream, seed)
        self.stale_intensity = profile.intensity if profile.on("stale_read") else None
        self.folds: dict = {}
        self.blobs: dict = {}
        self.stale = {} if self.stale_intensity is None else _stale_draws(prefix, self.stale_intensity)
        self._delivered: dict = {}
        self._lags: dict = {}

    @cached_property
    def lanes(self) -> dict[str, tuple[list[Delivery], list[int]]]:
        """Each system's deliveries in (arrival, seq) order, and their arrivals: made at the first read
        (an episode that only probes never needs them)."""
        return _lanes(self.deliveries)

    @cached_property
    def stale_draw(self) -> Keyed:
        """The keyed stream of the stale-read draws: (unit stream, seed, "stale_read")."""
        return Keyed(*self._key, "stale_read")

    def delivered_by(self, until: tuple) -> tuple:
        """What reads up to `until` ((system, tick) pairs) can see of this base: each system's deliveries
        (id, arrival, partial: all a fold reads) that arrived by its tick, in the order its lane holds
        them. Two bases that agree on it answer every such read with the same payload."""
        return _delivered_by(self.lanes, until, self._delivered)

    def stale_hit(self, system: str, n: int) -> tuple[int, tuple | None]:
        """(lag, firing) of the n-th read of `system` (`stale_draw`), remembered for every policy."""
        hit = self.stale.get((system, n))
        if hit is None:
            hit = self.stale[(system, n)] = stale_draw(self.stale_draw, self.stale_intensity, system, n)
        return hit

    def stale_lags(self, reads) -> tuple:
        """The (system, n, lag) of every read that would be stale among the first `reads[i]` reads of
        each system (`C.SYSTEMS` order): () when none would, or stale reads are off."""
        if self.stale_intensity is None:
            return ()
        reads = tuple(reads)  # (a tuple is not copied)
        hit = self._lags.get(reads)  # asked once per earlier arm's episode: many share their read counts
        if hit is not None:
            return hit
        out = []
        for system, k in zip(C.SYSTEMS, reads):
            for n in range(k):
                lag = self.stale_hit(system, n)[0]
                if lag:
                    out.append((system, n, lag))
        hit = self._lags[reads] = tuple(out)
        return hit


def _delivered_by(lanes: dict, until: tuple, keys: dict) -> tuple:
    """`Base.delivered_by` over `lanes`; `keys` remembers each lane's (id, arrival, partial) tuple."""
    out = []
    for system, t in until:
        ds, arrivals = lanes[system]
        lane = keys.get(system)
        if lane is None:
            lane = keys[system] = tuple([(d.id, d.arrival, d.partial) for d in ds])
        out.append(lane[:bisect_right(arrivals, t)])
    return tuple(out)


def stale_draw(draw: Keyed, intensity: float, system: str, n: int) -> tuple[int, tuple | None]:
    """(lag, firing) for the n-th read of `system` under stale reads at `intensity`; lag 0 when the
    family does not fire. `draw`: the base's keyed stream (unit stream, seed, "stale_read")."""
    key = f"{system}\x1f{n}"  # = draw.pair(system, str(n)); the lag = draw.integer(*C.STALE_RANGE, system, n, "lag")
    if draw.at(key) < intensity:
        lo, hi = C.STALE_RANGE
        return lo + int(draw.at(key + "\x1flag") * (hi - lo + 1)), ("stale_read", f"{system}#{n}")
    return 0, None


@memoised("sim.world.draws", keys="the key prefix (unit stream, seed): the fault draws of every profile's bases "
          "and captures", bound=4096)
def _draws(prefix: str) -> Keyed:
    """The keyed fault draws under a key prefix (`rng.key_prefix(stream, seed)`), remembered by the text after
    it (`Keyed`'s memo) and shared by every fault profile's base: the ablation's arms ask the same keys. Keyed by
    the prefix's text, not (stream, seed): seeds 1 and 1.0 are equal but draw different numbers."""
    return Keyed.after(prefix, memo={})


@memoised("sim.world.stale_draws", keys="(the key prefix (unit stream, seed), intensity): (lag, firing) of each "
          "(system, n)", bound=4096)
def _stale_draws(prefix: str, intensity: float) -> dict:
    """The stale-read draws of each (system, n-th read) under a key prefix (`rng.key_prefix(stream, seed)`) at
    `intensity`, shared by every profile's base with stale reads at that intensity."""
    return {}


@memoised("sim.world.capture_deliveries", keys="(task, seed, fault profile, the capture's number, key and tick, "
          "the deliveries before it): frozen values", bound=16384)
def _capture_deliveries(task: Task, seed: int, profile: FaultProfile, n: int, key: str, t: int,
                        seq_start: int) -> tuple[tuple, tuple, tuple]:
    """The delivery specs, deliveries and firings of the agent's n-th capture (key, tick) in a world of
    (task, seed, profile) holding `seq_start` deliveries before it: the same in every episode that makes
    it (the exploit search's plans make the same capture at the same tick, episode after episode).
    Read-only downstream: a batch's deliveries are changed (reordered) only while `deliver` makes them."""
    cap = agent_capture(task, n, key, t)
    specs = event_specs(task, capture_events(cap), cap.id)
    firings: list = []
    new = deliver(specs, _draws(key_prefix(task.stream, seed)), profile, firings, seq_start=seq_start)
    return tuple(specs), tuple(new), tuple(firings)


@memoised("sim.world.log_specs", keys="the task (a frozen value)", bound=1024)
def _log_specs(task: Task) -> tuple[Spec, ...]:
    """The canonical log's delivery specs: the same under every seed (read-only downstream)."""
    return tuple(event_specs(task, task.log, "base"))


@memoised("sim.world.base_world", keys="(task, seed, fault profile): frozen values", bound=4096)
def base_world(task: Task, seed: int, profile: FaultProfile) -> Base:
    return Base(task, seed, profile)


def _lanes(deliveries) -> dict[str, tuple[list[Delivery], list[int]]]:
    lanes = {s: [] for s in C.SYSTEMS}
    for d in deliveries:
        lanes[d.system].append(d)
    out = {}
    for s, ds in lanes.items():
        ds.sort(key=arrival_seq)
        out[s] = (ds, [d.arrival for d in ds])
    return out


class World:
    """The evolving world of one episode (the default profile: `FaultProfile.default()`)."""

    def __init__(self, task: Task, seed: int, profile: FaultProfile | None = None):
        self.task = task
        self.seed = seed
        self.profile = profile if profile is not None else FaultProfile.default()
        self._base = base = base_world(task, seed, self.profile)
        # until the agent adds deliveries the world is its base: lanes (`_lanes` None: the base's, made at the
        # first read) and folds are shared
        self._lanes = None
        self._folds, self._blobs = base.folds, base.blobs
        self._stale = base.stale if self.profile.on("stale_read") else None
        self.extra: list[Delivery] = []
        self.extra_firings: list = []
        self.reads = dict.fromkeys(C.SYSTEMS, 0)
        self.read_as_of = dict.fromkeys(C.SYSTEMS, -1)  # the latest tick each system was read as of
        self.captures = [original_capture(task)]
        self.extra_specs: list[Spec] = []  # the delivery specs of the agent's captures, in order

    # --- deliveries ---------------------------------------------------------
    @property
    def deliveries(self) -> list[Delivery]:
        return self._base.deliveries + self.extra

    @property
    def specs(self) -> list[Spec]:
        """Every delivery spec the world gave the fault pipeline: the canonical log's, then the
        agent's captures' (the ERP's record of a disposition is not faultable and has none)."""
        return [*_log_specs(self.task), *self.extra_specs]

    @property
    def firings(self) -> list:
        return self._base.firings + self.extra_firings

    # --- agent effects on the canonical log ----------------------------------
    def add_capture(self, key: str, t: int) -> Capture:
        """A new capture submitted at t under a fresh key; resolved by the task's retry draw."""
        n = len(self.captures) + 1
        cap = agent_capture(self.task, n, key, t)
        self.captures.append(cap)
        specs, new, fired = _capture_deliveries(self.task, self.seed, self.profile, n, key, t,
                                                len(self._base.deliveries) + len(self.extra))
        self.extra_specs += specs
        self.extra += new
        self.extra_firings += fired
        # rebuilt on the next read only: the disposition's delivery ends the episode unread
        self._lanes = None
        self._folds, self._blobs = {}, {}
        return cap

    def record_disposition(self, kind: str, t: int) -> None:
        """The ERP's record of the agent's own disposition (not faultable).

        What `deliver` makes of one unfaultable ERP spec, built directly: no draw,
        no copy, nothing to reorder it with (it is alone in its lane).
        """
        e = Event(t, "disposition", None, kind)
        seq = len(self._base.deliveries) + len(self.extra)
        self.extra.append(Delivery(f"order:disposition:{kind}", "erp", e, "agent", t + C.LATENCY["erp"],
                                   t, seq))
        self._lanes = None
        self._folds, self._blobs = {}, {}

    # --- observation -----------------------------------------------------------
    def read(self, system: str, t: int, copy: bool = True) -> dict:
        """The system's view at t, as of t minus a stale-read lag if that family fires.

        `copy=False` returns the memoised fold itself, shared with other reads
        and episodes: only for callers that never mutate it (see `view`).
        """
        n = self.reads[system]
        self.reads[system] = n + 1
        as_of = t
        if self._stale is not None:
            # the n-th read of a system draws the same keys under every policy of this (task, seed)
            hit = self._stale.get((system, n))
            if hit is None:
                hit = self._base.stale_hit(system, n)
            lag, firing = hit
            if lag:
                self.extra_firings.append(firing)
                as_of = t - lag
        if as_of > self.read_as_of[system]:
            self.read_as_of[system] = as_of
        return self.view(system, as_of, copy)

    def delivered_by(self, until: tuple) -> tuple:
        """`Base.delivered_by` of this world's lanes (the agent's captures' deliveries among them)."""
        return _delivered_by(self._own_lanes(), until, {})

    def stale_draw(self, system: str, n: int) -> tuple[int, tuple | None]:
        """(lag, firing) for the n-th read of `system`; lag 0 when the family does not fire.

        Pure: a function of (unit, seed, system, n), the same for every policy and whether
        or not the read happened, so the timeline can ask it after the episode.

        Keyed (unit stream, seed, "stale_read", system, n), see `finbench.sim.rng`.
        """
        return stale_draw(self._base.stale_draw, self.profile.intensity, system, n)

    def view(self, system: str, t: int, copy: bool = True) -> dict:
        """The fold of every delivery that arrived at or before t (no faults of the read itself).

        Folds are memoised per (system, deliveries arrived). By default every call
        gets its own copy, so an agent that edits an observation cannot change a
        later read or episode; `copy=False` hands out the memoised object itself.
        """
        ds, arrivals = (self._lanes or self._own_lanes())[system]
        n = bisect_right(arrivals, t)
        key = (system, n)
        fold = self._folds.get(key)
        if fold is None:
            fold = self._folds[key] = _FOLDS[system](self.task, ds[:n])
        if not copy:
            return fold
        blob = self._blobs.get(key)
        if blob is None:
            blob = self._blobs[key] = marshal.dumps(fold)
        return marshal.loads(blob)

    def _own_lanes(self) -> dict:
        """The lanes of this world's deliveries: the base's while the agent has added none."""
        if self._lanes is None:
            self._lanes = _lanes(self.deliveries) if self.extra else self._base.lanes
        return self._lanes

    def probe(self, t: int) -> dict:
        """The authoritative finality query: the canonical log itself."""
        captures = []  # a loop, not a comprehension: the probe is the most frequent call, with one capture
        for c in self.captures:
            if c.submitted_at <= t:
                captures.append({"id": c.id, "key": c.key, "status": c.outcome if c.terminal_at <= t else "unknown"})
        return {"order_id": self.task.order_id, "captures": captures}

    def other_view(self, system: str) -> dict:
        return completed_order_views(self.task.other_order_id, self.task.other_order_value)[system]

    def reads_record(self) -> tuple[tuple, tuple, tuple]:
        """What decides what this episode's reads saw (`reads_signature`): the agent's captures ((key, tick)
        each), each read system's last read tick, and the reads per system."""
        return (tuple((c.key, c.submitted_at) for c in self.captures[1:]),
                tuple((s, t) for s, t in self.read_as_of.items() if t >= 0), tuple(self.reads[s] for s in C.SYSTEMS))

    def fired(self) -> dict[str, int]:
        """Firings by family over the whole world (the base's counted once per base)."""
        counts = dict(self._base.counts)
        for fam, _ in self.extra_firings:
            counts[fam] += 1
        return counts


# --- what an episode's reads saw, compared across fault profiles (the runner's same-reads derivation) ------

def _reads_delivered(task: Task, seed: int, profile: FaultProfile, captures: tuple, until: tuple, base=None):
    """What reads up to `until` see of the world under `profile` once the agent made `captures` ((key, tick)
    each), and that world (None when it is the profile's base)."""
    if not captures:
        return (base or base_world(task, seed, profile)).delivered_by(until), None
    world = World(task, seed, profile)
    for key, t in captures:
        world.add_capture(key, t)
    return world.delivered_by(until), world


def reads_signature(task: Task, seed: int, profile: FaultProfile, record: tuple) -> tuple[tuple, tuple]:
    """What an episode's reads saw under `profile`: the lane prefixes each system held up to its last read,
    and the stale lags of its reads. `record` is the episode's `World.reads_record()`."""
    captures, until, reads = record
    return _reads_delivered(task, seed, profile, captures, until)[0], base_world(task, seed, profile).stale_lags(reads)


def same_reads_firings(task: Task, seed: int, profile: FaultProfile, record: tuple,
                       signature: tuple) -> dict[str, int] | None:
    """The firings by family of (task, seed, `profile`) for an episode whose reads (`record`) had `signature`
    under another profile, if every read would return the same payload here (each as stale, each system
    holding the same deliveries up to its last read tick); else None."""
    captures, until, reads = record
    delivered, lags = signature
    base = base_world(task, seed, profile)
    if base.stale_lags(reads) != lags:
        return None
    now, world = _reads_delivered(task, seed, profile, captures, until, base)
    if now != delivered:
        return None
    fired = dict(base.counts) if world is None else world.fired()
    fired["stale_read"] += len(lags)
    return fired


def replayed_firings(task: Task, seed: int, profile: FaultProfile, captures) -> dict[str, int]:
    """`World.fired()` of an episode under `seed` in which the agent read no system and created
    `captures[1:]` (at their submission ticks, under their keys), as `add_capture` made them."""
    w = World(task, seed, profile)
    for cap in captures[1:]:
        w.add_capture(cap.key, cap.submitted_at)
    return w.fired()


_FOLDS = {
    "processor": lambda task, ds: fold_processor(task.order_id, ds),
    "ledger": lambda task, ds: fold_ledger(task.order_id, ds),
    "erp": lambda task, ds: fold_erp(task.order_id, ds, task.order_value),
    "bank": lambda task, ds: fold_bank(task.order_id, ds),
}
