"""One episode on one time axis: the hidden truth, the four systems' deliveries and the agent's calls.

    events = episode_timeline(task, "optimistic", seed=0)  # tidy frame, one row per event
    pair = pick_twin_pair(corpus)                           # an illustrative twin pair

What this module computes from an episode; `finbench.analysis.timeline_plot`
draws it (`draw_timeline`, `draw_row`, `timeline_figure`).

An episode is played exactly as `run_episode` plays it (same policy
reference, seed, profile, costs and probe mode), then read back from the
world it left behind: the canonical log, every delivery the fault pipeline
made (and every one it lost), the fault firings, and the agent's calls.
Nothing here changes a draw, a delivery or a result; the world is only read
(its delivery specs, deliveries and firings, and the pure stale-read draw `World.stale_draw`).

Lanes, top to bottom: `truth` (the canonical log: placed, authorised, each
capture submitted and settled or failed, the chargeback), `processor`,
`ledger`, `erp`, `bank` (each delivery at its arrival tick, marked with the
faults that hit it), and `agent` (each call at the tick it takes effect;
irreversible ones emphasised; the human clerk's actions after an escalation).
A fault is a *profile* fault (a family of `FaultProfile` fired) or an
*archetype* one (the task's own mechanism: the settlement lost by
`lost_settlement`, the replica lag of `stale_processor`, the second copy of
`duplicate_settlement`, the half-posted settlement of `partial_ledger`).
"""
from __future__ import annotations

import pandas as pd

from finbench.sim import constants as C
from finbench.sim.corpus import Corpus
from finbench.sim.task import Task
from finbench.sim.economics import Costs
from finbench.sim.env import IRREVERSIBLE, FinalityEnv
from finbench.sim.result import EpisodeResult
from finbench.running.episode import played
from finbench.sim.faults import FaultProfile
from finbench.agents.registry import as_ref
from finbench.sim.probe import ProbeMode
from finbench.sim.tools import DISPOSITIONS, READS
from finbench.sim.faults import copy_id, nominal_arrival, posted_at
from finbench.sim.world import capture_events

__all__ = ["COLUMNS", "DISPOSITIONS", "LANES", "episode_timeline", "pick_twin_pair"]

LANES = ("truth", "processor", "ledger", "erp", "bank", "agent")
"""The lanes, top to bottom."""
COLUMNS = ("lane", "t", "kind", "label", "fault", "source", "event_t", "due_t", "as_of_t", "delivery", "partner",
           "original", "capture", "irreversible", "terminal", "premature", "other_order", "error")
"""The columns of `episode_timeline`'s frame.

- `lane`: one of `LANES`. `t`: the tick (a delivery's arrival; a lost
  delivery's would-be arrival; a call's effect tick, for `wait` its end;
  the tick of an event of the canonical log).
- `kind`: the canonical event kind (`order_placed`, `auth_approved`,
  `capture_submitted`, `capture_settled`, `capture_failed`, `chargeback`, or
  `disposition` for the ERP's record of the agent's disposition); on the agent
  lane the tool name, or `human` for the clerk's actions after an escalation.
- `fault`: the families that hit this row, '+'-joined (`delay`, `duplicate`
  on the extra copy, `loss`, `reorder`, `partial_commit` on deliveries;
  `stale_read` on a read), '' if none. `source`: for each of them, in the same
  order, 'profile' or 'archetype' (see the module docstring).
- `event_t`: when the delivered event happened (on the agent lane: when the
  call was issued); `due_t`: when the delivery was due with no fault and no
  lag, the event's tick plus the system's latency, the bank's next batch (a
  delayed one's arrow starts there); `as_of_t`: the tick a stale read saw.
- `delivery`: the delivery id (a duplicate's copy ends in `#copy1`);
  `partner`: the other delivery of a reordered pair; `original`: a copy's original.
- `capture`: the capture an event concerns. `irreversible`: ship, refund,
  write_off or a fresh-key retry that took effect; `terminal`: the call that
  ended the case; `premature`: irreversible before the original capture was
  determined; `other_order`: a call naming another order than the case's (an
  effect on the customer's completed order is an unrelated-state violation).
  `error`: the error a call got, '' if none.
"""

_KIND_TEXT = {"order_placed": "placed", "auth_approved": "authorised", "capture_submitted": "submitted",
              "capture_settled": "settled", "capture_failed": "failed", "chargeback": "chargeback",
              "disposition": "disposition"}


# --- playing and reading one episode -------------------------------------------------------

def _play(task: Task, policy, seed: int, profile: FaultProfile | None, costs: Costs | None,
          probe: ProbeMode | None) -> tuple[FinalityEnv, EpisodeResult]:
    """`run_episode`, keeping the environment. A policy object is deep-copied (as `evaluate`
    does), so drawing an episode never changes the caller's policy."""
    ref = as_ref(policy)  # PolicyError for an unknown name, knob or object, before anything runs
    env = played(FinalityEnv(task, seed, profile, costs, probe=probe), ref.make())
    return env, env.result(ref.label)


def _row(**values) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(fault="", source="", partner="", original="", delivery="", capture="", error="", irreversible=False,
               terminal=False, premature=False, other_order=False)
    row.update(values)
    return row


def _truth_rows(env: FinalityEnv) -> list[dict]:
    task, rows = env.task, []
    # the canonical log up to HORIZON with the agent's captures before its chargeback
    # (the order equal ticks are listed in)
    log = [e for e in task.log if e.t <= C.HORIZON]
    events = [e for e in log if e.kind != "chargeback"]
    for cap in env.world.captures[1:]:
        events += capture_events(cap)
    events += [e for e in log if e.kind == "chargeback"]
    for e in sorted(events, key=lambda e: e.t):
        text = _KIND_TEXT[e.kind]
        label = f"{e.capture} {text}" if e.kind.startswith("capture_") else text
        rows.append(_row(lane="truth", t=e.t, kind=e.kind, label=label, event_t=e.t, due_t=e.t,
                         capture=e.capture or ""))
    return rows


def _delivery_rows(env: FinalityEnv) -> list[dict]:
    """One row per delivery that arrived and per delivery that was lost, with the faults on it."""
    w = env.world
    fired: dict[str, set] = {}
    partner: dict[str, str] = {}
    for fam, key in w.firings:
        if fam == "reorder":
            a, b = key
            partner[a], partner[b] = b, a
        elif fam != "stale_read":
            fired.setdefault(key, set()).add(fam)
    by_id = {d.id: d for d in w.deliveries}
    seen: set[str] = set()
    rows = []
    for s in w.specs:
        e = s.event
        due = nominal_arrival(s.system, e.t)
        base = dict(lane=s.system, kind=e.kind, label=f"{e.capture + ' ' if e.capture else ''}{_KIND_TEXT[e.kind]}",
                    event_t=e.t, capture=e.capture or "")
        hit = fired.get(s.id, set())
        if s.drop or "loss" in hit:
            would = posted_at(s.system, s.arrival)
            rows.append(_row(**base, t=would, fault="loss", source="archetype" if s.drop else "profile", due_t=due,
                             delivery=s.id))
            continue
        # the copies `deliver` made, in its order: the profile's duplicate, then the archetype's
        copies = (["profile"] if "duplicate" in hit else []) + (["archetype"] if s.copy_gap else [])
        for i, copy_source in enumerate([None, *copies]):
            did = s.id if i == 0 else copy_id(s.id, i)
            d = by_id.get(did)
            if d is None:
                raise RuntimeError(f"timeline: the world has no delivery {did!r}; the engine changed, "
                                   "update finbench/timeline.py")
            seen.add(did)
            marks = []  # (family, source)
            if i == 0:
                if "delay" in hit:
                    marks.append(("delay", "profile"))
                if s.lag:  # the stale_processor replica's lag
                    marks.append(("delay", "archetype"))
            else:
                marks.append(("duplicate", copy_source))
            if did in partner:
                marks.append(("reorder", "profile"))
            if d.partial:
                marks.append(("partial_commit", "profile" if "partial_commit" in hit else "archetype"))
            rows.append(_row(**base, t=d.arrival, fault="+".join(f for f, _ in marks),
                             source="+".join(src for _, src in marks), due_t=due, delivery=did,
                             partner=partner.get(did, ""), original=s.id if i else ""))
    for d in w.deliveries:  # the ERP's record of the agent's own disposition (not faultable)
        if d.id not in seen:
            if d.event.kind != "disposition":
                raise RuntimeError(f"timeline: delivery {d.id!r} has no spec; update finbench/timeline.py")
            rows.append(_row(lane=d.system, t=d.arrival, kind="disposition", label=f"records {d.event.key}",
                             event_t=d.event.t, due_t=d.arrival, delivery=d.id))
    return rows


def _agent_rows(env: FinalityEnv) -> list[dict]:
    task, w = env.task, env.world
    stale = {key for fam, key in w.firings if fam == "stale_read"}
    n_reads = dict.fromkeys(C.SYSTEMS, 0)
    rows = []
    for issued, tool, args, obs in env.actions:
        t = obs["t"]
        mine = args.get("order_id") == task.order_id
        label = str(tool) if mine else f"{tool} (order {args.get('order_id')})"
        row = _row(lane="agent", t=t, kind=tool, label=label, event_t=issued, due_t=issued,
                   error=str(obs.get("error", "")), other_order=not mine)
        result = obs.get("result") or {}
        if "result" in obs and mine:
            if tool in READS:
                system = tool[len("read_"):]
                n = n_reads[system]
                n_reads[system] += 1
                if f"{system}#{n}" in stale:
                    # the lag of the n-th read is a pure function of (unit, seed, system, n)
                    lag, _ = w.stale_draw(system, n)
                    row.update(fault="stale_read", source="profile", as_of_t=t - lag)
            elif tool == "retry_capture":
                row["label"] = f"retry {args.get('idempotency_key')}"
                row["capture"] = result.get("receipt", "")
                row["irreversible"] = bool(result.get("new_capture"))
            elif tool in DISPOSITIONS:
                row["irreversible"] = tool in IRREVERSIBLE
                row["terminal"] = True
        row["premature"] = row["irreversible"] and t < task.determined_at
        rows.append(row)
        if "note" in obs:  # the case closed itself: budget exhausted or horizon reached
            rows.append(_row(lane="agent", t=t, kind="close", label=f"close ({obs['note']})", event_t=t, due_t=t,
                             terminal=True))
    if n_reads != w.reads:
        raise RuntimeError(f"timeline: counted reads {n_reads} but the world served {w.reads}")
    out = env.outcome()
    if out.human_action is not None:
        rows.append(_row(lane="agent", t=out.human_t, kind="human", label=f"clerk: {out.human_action}",
                         event_t=out.human_t, due_t=out.human_t))
        if out.human_action == "ship" and out.refunded > 0:
            rows.append(_row(lane="agent", t=out.human_refund_t, kind="human", label="clerk: refund excess",
                             event_t=out.human_refund_t, due_t=out.human_refund_t))
    return rows


def episode_timeline(task: Task, policy, seed: int = 0, profile: FaultProfile | None = None, *,
                     costs: Costs | None = None, probe: ProbeMode | None = None) -> pd.DataFrame:
    """Play one episode and return its events on one time axis, one row per event.

    Args:
        task: The task (`make_task`, or a corpus's tasks).
        policy: Anything `run_episode` and `evaluate` accept: a name (`"optimistic"`),
            a label with knobs (`"sop[patience=60]"`), a `(name, knobs)` pair, a policy
            class, factory or object (an object is deep-copied, never played itself).
        seed: The fault seed.
        profile: The fault profile (default: `FaultProfile.default()`).
        costs: The economics (default: `Costs()`).
        probe: The probe mode (default: SPEC's full probe).

    Returns:
        A DataFrame with the columns of `COLUMNS`, ordered by lane (`LANES`) then
        tick. `frame.attrs` holds `result` (the `EpisodeResult`, equal to
        `run_episode(task, policy, seed, profile, costs, probe)`), `policy` (its
        label), `task_id`, `archetype`, `seed`, `profile` (its name) and `probe`.

    Raises:
        PolicyError: an unknown policy or knob, or a policy answering badly.
        FinbenchError: a bad task, seed, profile, costs or probe.

    Example:
        >>> import finbench as fb
        >>> from finbench.analysis.timeline import episode_timeline
        >>> ev = episode_timeline(fb.make_corpus(n_tasks=9).tasks[0], "finality_gate", seed=0)
        >>> sorted(ev.lane.unique()) == sorted(LANES)
        True
    """
    env, res = _play(task, policy, seed, profile, costs, probe)
    rows = _truth_rows(env) + _delivery_rows(env) + _agent_rows(env)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["lane_order"] = frame["lane"].map({lane: i for i, lane in enumerate(LANES)})
    frame = frame.sort_values(["lane_order", "t"], kind="stable").drop(columns="lane_order").reset_index(drop=True)
    frame.attrs.update(result=res, policy=res.policy, task_id=task.task_id, archetype=task.archetype, seed=res.seed,
                       profile=env.profile.name, probe=env.probe.name, determined_at=task.determined_at)
    return frame


# --- twin pairs -----------------------------------------------------------------------------

def pick_twin_pair(corpus: Corpus, policies=("optimistic", "finality_gate"), seed: int = 0,
                   profile: FaultProfile | None = None, *, costs: Costs | None = None,
                   probe: ProbeMode | None = None) -> tuple[Task, Task]:
    """An illustrative twin pair, picked deterministically: the first in corpus order (`Corpus.twin_pairs`)
    on which the first policy bets and the second waits.

    Preference, first match wins: (1) the first policy acts irreversibly before determination on
    both halves, is exact on the settle half and not on the fail half, and the second policy is
    exact on both; (2) the first policy's gap differs between the halves and the second is exact on
    both; (3) the first pair.

    Args:
        corpus: The corpus to pick from.
        policies: (the bettor, the gate): any two policy references.
        seed, profile, costs, probe: The episodes judged.

    Returns:
        (settle half, fail half).

    Raises:
        ValueError: the corpus holds no twin pair.
    """
    pairs = corpus.twin_pairs
    if not pairs:
        raise ValueError(f"pick_twin_pair: corpus {corpus.fingerprint} holds no twin pair")
    bettor, gate = policies
    fallback = None
    for settle, fail in pairs:
        bs, bf = (_play(t, bettor, seed, profile, costs, probe)[1] for t in (settle, fail))
        if bs.gap == bf.gap:
            continue
        gs, gf = (_play(t, gate, seed, profile, costs, probe)[1] for t in (settle, fail))
        if not (gs.exact and gf.exact):
            continue
        if bs.premature_irreversible and bf.premature_irreversible and bs.exact and not bf.exact:
            return settle, fail
        fallback = fallback or (settle, fail)
    return fallback or pairs[0]
