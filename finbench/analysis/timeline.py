"""One episode on one time axis: the hidden truth, the four systems' deliveries and the agent's calls.

    events = episode_timeline(task, "optimistic", seed=0)  # tidy frame, one row per event
    drawn = draw_timeline(task, "finality_gate", seed=0)     # drawn: .ax, .events, .result
    drawn = draw_row(run.evaluate().iloc[0], run)            # the episode behind one row of a Run
    fig = timeline_figure(pick_twin_pair(corpus))            # a twin pair x (optimistic, finality_gate)

An episode is played exactly as `run_episode` plays it (same policy
reference, seed, profile, costs and probe mode), then read back from the
world it left behind: the canonical log, every delivery the fault pipeline
made (and every one it lost), the fault firings, and the agent's calls.
Nothing here changes a draw, a delivery or a result; the world is only read
(its deliveries and firings, and the pure stale-read draw `World._stale_draw`).

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

from dataclasses import dataclass, field

import pandas as pd

from finbench.sim import constants as C
from finbench.sim.corpus import Corpus, Event, Task
from finbench.sim.economics import Costs
from finbench.sim.env import IRREVERSIBLE, FinalityEnv
from finbench.sim.result import EpisodeResult
from finbench.sim.play import play
from finbench.sim.faults import FaultProfile
from finbench.agents.registry import as_ref
from finbench.sim.probe import ProbeMode
from finbench.sim.tools import READS
from finbench.sim.world import event_specs

__all__ = ["LANES", "Timeline", "draw_row", "draw_timeline", "episode_timeline", "pick_twin_pair",
           "plot_timeline", "timeline_figure"]

LANES = ("truth", "processor", "ledger", "erp", "bank", "agent")
"""The lanes, top to bottom."""
COLUMNS = ("lane", "t", "kind", "label", "fault", "source", "event_t", "due_t", "seen_t", "delivery", "partner",
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
  delayed one's arrow starts there); `seen_t`: the tick a stale read saw.
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
_DISPOSITIONS = ("ship", "refund", "write_off", "escalate", "close")


# --- playing and reading one episode -------------------------------------------------------

def _play(task: Task, policy, seed: int, profile: FaultProfile | None, costs: Costs | None,
          probe: ProbeMode | None) -> tuple[FinalityEnv, EpisodeResult]:
    """`run_episode`, keeping the environment. A policy object is deep-copied (as `evaluate`
    does), so drawing an episode never changes the caller's policy."""
    ref = as_ref(policy)  # PolicyError for an unknown name, knob or object, before anything runs
    env = FinalityEnv(task, seed, profile, costs, probe=probe)
    play(env, ref.make())
    return env, env.result(ref.label)


def _due(system: str, t: int) -> int:
    """When a delivery of an event at t reaches `system` with no fault and no lag (SPEC §2)."""
    if system == "bank":
        return (t // C.BANK_BATCH + 1) * C.BANK_BATCH
    return t + C.LATENCY[system]


def _specs(env: FinalityEnv) -> list:
    """Every delivery spec of the episode's world: the canonical log's, then each agent capture's.

    Built afresh with `world.event_specs` (the world's memoised specs are not touched),
    in the order the world asked the pipeline for them.
    """
    task, w = env.task, env.world
    specs = list(event_specs(task, task.log, "base"))
    for cap in w.captures[1:]:
        events = [Event(cap.submitted_at, "capture_submitted", cap.id, cap.key, cap.amount),
                  Event(cap.terminal_at, f"capture_{cap.outcome}", cap.id, cap.key, cap.amount)]
        specs += event_specs(task, [e for e in events if e.t <= C.HORIZON], cap.id)
    return specs


def _row(**values) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(fault="", source="", partner="", original="", delivery="", capture="", error="", irreversible=False,
               terminal=False, premature=False, other_order=False)
    row.update(values)
    return row


def _truth_rows(env: FinalityEnv) -> list[dict]:
    task, rows = env.task, []
    events = list(task.log[:3])  # placed, authorised, cap-1 submitted
    for cap in env.world.captures:
        if cap.id != C.ORIGINAL_CAPTURE:
            events.append(Event(cap.submitted_at, "capture_submitted", cap.id, cap.key, cap.amount))
        if cap.terminal_at <= C.HORIZON:
            events.append(Event(cap.terminal_at, f"capture_{cap.outcome}", cap.id, cap.key, cap.amount))
    if task.chargeback_at is not None and task.chargeback_at <= C.HORIZON:
        events.append(Event(task.chargeback_at, "chargeback", C.ORIGINAL_CAPTURE, C.ORIGINAL_KEY, task.order_value))
    for e in sorted(events, key=lambda e: e.t):
        text = _KIND_TEXT[e.kind]
        label = f"{e.capture} {text}" if e.kind.startswith("capture_") else text
        rows.append(_row(lane="truth", t=e.t, kind=e.kind, label=label, event_t=e.t, due_t=e.t,
                         capture=e.capture or ""))
    return rows


def _delivery_rows(env: FinalityEnv) -> list[dict]:
    """One row per delivery that arrived and per delivery that was lost, with the faults on it."""
    task, w = env.task, env.world
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
    for s in _specs(env):
        e = s.event
        due = _due(s.system, e.t)
        base = dict(lane=s.system, kind=e.kind, label=f"{e.capture + ' ' if e.capture else ''}{_KIND_TEXT[e.kind]}",
                    event_t=e.t, capture=e.capture or "")
        hit = fired.get(s.id, set())
        if s.drop or "loss" in hit:
            would = _due(s.system, s.arrival) if s.system == "bank" else s.arrival
            rows.append(_row(**base, t=would, fault="loss", source="archetype" if s.drop else "profile", due_t=due,
                             delivery=s.id))
            continue
        # the copies `deliver` made, in its order: the profile's duplicate, then the archetype's
        copies = (["profile"] if "duplicate" in hit else []) + (["archetype"] if s.copy_gap else [])
        for i, copy_source in enumerate([None, *copies]):
            did = s.id if i == 0 else f"{s.id}#copy{i}"
            d = by_id.get(did)
            if d is None:
                raise RuntimeError(f"timeline: the world has no delivery {did!r}; the engine changed, "
                                   "update finbench/timeline.py")
            seen.add(did)
            marks = []  # (family, source)
            if i == 0:
                if "delay" in hit:
                    marks.append(("delay", "profile"))
                if s.arrival != e.t + C.LATENCY[s.system]:  # the stale_processor replica's lag
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
                    lag, _ = w._stale_draw(system, n)
                    row.update(fault="stale_read", source="profile", seen_t=t - lag)
            elif tool == "retry_capture":
                row["label"] = f"retry {args.get('idempotency_key')}"
                row["capture"] = result.get("receipt", "")
                row["irreversible"] = bool(result.get("new_capture"))
            elif tool in _DISPOSITIONS:
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


# --- drawing ------------------------------------------------------------------------------

_LANE_TEXT = {"truth": "hidden truth\n(canonical log)", "processor": "processor", "ledger": "ledger",
              "erp": "ERP", "bank": "bank", "agent": "agent calls"}
_Y = {lane: len(LANES) - 1 - i for i, lane in enumerate(LANES)}
_FONT = 6.5


def _palette() -> dict:
    import seaborn as sns

    c = sns.color_palette("colorblind")
    # settle blue and fail vermillion, as in Figure 2 (`twins.figure2`)
    return {"order_placed": "0.55", "auth_approved": c[2], "capture_submitted": c[4], "capture_settled": c[0],
            "capture_failed": c[3], "chargeback": c[5], "disposition": "0.15", "premature": c[3], "act": "black",
            "fault": "0.2", "stale": c[1], "probe": c[2], "retry": c[4]}


_EVENT_LEGEND = (("order_placed", "order placed"), ("auth_approved", "authorised"),
                 ("capture_submitted", "capture submitted"), ("capture_settled", "capture settled"),
                 ("capture_failed", "capture failed"), ("chargeback", "chargeback"),
                 ("disposition", "agent's disposition (ERP record)"))


def _text_px(text: str, fontsize: float, dpi: float) -> float:
    """A generous estimate of a label's width in pixels (DejaVu Sans averages ~0.55 em a character)."""
    return len(text) * fontsize * 0.58 * dpi / 72 + 4


def _stack(items, px_per_tick: float, fontsize: float, dpi: float, levels: int, right_edge: float) -> list[tuple]:
    """Greedy label placement.

    Each (t, text, priority) takes the first level where it overlaps no label placed
    before it (higher priority first, then by tick); a label that would run past
    `right_edge` ends at its tick instead. Labels with no free level are left out.
    Returns (t, text, level, ha).
    """
    placed: list[list[tuple[float, float]]] = [[] for _ in range(levels)]
    out = []
    for t, text, prio in sorted(items, key=lambda x: (-x[2], x[0])):
        w = _text_px(text, fontsize, dpi) / px_per_tick
        ha = "right" if t + w > right_edge else "left"
        lo, hi = (t - w, t + 3 / px_per_tick) if ha == "right" else (t - 3 / px_per_tick, t + w)
        for level in range(levels):
            if all(hi < a or lo > b for a, b in placed[level]):
                placed[level].append((lo, hi))
                out.append((t, text, level, ha))
                break
    return out


def _merge_close(items: list[tuple[int, str]], gap: float) -> list[tuple[int, str]]:
    """Events closer than `gap` ticks share one label ('placed, authorised, cap-1 submitted')."""
    out: list[tuple[int, list[str]]] = []
    for t, text in sorted(items):
        if out and t - out[-1][0] < gap and len(out[-1][1]) < 3:
            out[-1][1].append(text)
        else:
            out.append((t, [text]))
    return [(t, ", ".join(texts)) for t, texts in out]


def _bursts(agent: pd.DataFrame) -> list[tuple[float, str, object]]:
    """The agent's calls as labels: calls between two waits form a burst ('read all four'); a run of
    identical bursts is one label ('read_ledger ×16'); an irreversible or terminal call stands alone."""
    bursts: list[list] = []
    cur: list = []
    for r in agent.itertuples():
        if r.kind in ("wait", "human"):
            if cur:
                bursts.append(cur)
                cur = []
            continue
        if r.irreversible or r.terminal:
            if cur:
                bursts.append(cur)
                cur = []
            bursts.append([r])
            continue
        cur.append(r)
    if cur:
        bursts.append(cur)
    runs: list[list] = []
    for b in bursts:
        names = list(dict.fromkeys(r.label + (" (error)" if r.error else "") for r in b))
        reads = [r.kind[len("read_"):] for r in b if r.kind in READS and not r.error and not r.other_order]
        if len(b) > 1 and len(reads) == len(b):
            systems = list(dict.fromkeys(reads))
            text = "read all four" if len(systems) == 4 else "read " + "+".join(systems)
        else:
            text = ", ".join(names)
        if runs and runs[-1][1] == text and not (b[0].irreversible or b[0].terminal):
            runs[-1][3] += 1
        else:
            runs.append([b[0].t, text, b[0], 1])
    return [(t, text + (f" ×{n}" if n > 1 else ""), r) for t, text, r, n in runs]


def _extent(events: pd.DataFrame) -> tuple[float, float]:
    """The ticks worth showing: from 0 to the last event (at least past the ship-by deadline)."""
    last = max(float(events["t"].max()), float(events["due_t"].max()), C.SHIP_BY + 40)
    hi = min(C.HORIZON, last)
    return -12.0, hi + 0.04 * hi


def _money(x: float) -> str:
    """'\\$1,299.00' (escaped: two dollar signs in one text would be read as mathtext)."""
    return ("\u2212" if x < 0 else "") + f"\\${abs(x):,.2f}"


def _title(events: pd.DataFrame) -> str:
    a = events.attrs
    res: EpisodeResult = a["result"]
    extra = "" if a.get("profile", "all") == "all" else f" · profile {a['profile']}"
    extra += "" if a.get("probe", "full") == "full" else f" · probe {a['probe']}"
    return (f"{a['task_id']} ({a['archetype']}) · {a['policy']} · seed {a['seed']}{extra}\n"
            f"{res.disposition} at t={res.end_t} · position {_money(res.position)} · gap {_money(res.gap)}"
            + (" · irreversible before determination" if res.premature_irreversible else ""))


def legend_handles() -> tuple[list, list[str]]:
    """The legend every timeline shares: event colours, fault marks, call marks, the vertical lines."""
    from matplotlib.lines import Line2D

    p = _palette()
    hs, ls = [], []

    def add(label, **kw):
        kw.setdefault("linestyle", "none")
        hs.append(Line2D([], [], **kw))
        ls.append(label)

    for kind, text in _EVENT_LEGEND:
        add(text, marker="o", color=p[kind], markersize=5, markeredgecolor="white", markeredgewidth=0.4)
    add("delayed: arrow from when it was due", marker=">", color=p["fault"], markersize=4, linestyle="-",
        linewidth=0.8)
    add("duplicate: the extra copy, dotted to it", marker="D", color="0.6", markersize=4.5,
        markeredgecolor="black", markeredgewidth=0.6)
    add("lost: crossed, where it was due", marker="X", color="none", markeredgecolor="0.1", markersize=6,
        markeredgewidth=0.9)
    add("reordered pair: ringed, bracketed", marker="o", color="0.6", markersize=5.5, markeredgecolor="black",
        markeredgewidth=1.4)
    add("partial commit: half-filled", marker="o", color="0.45", fillstyle="left", markersize=6.5,
        markerfacecoloralt="white", markeredgecolor="black", markeredgewidth=0.6)
    add("the agent read this lane (top)", marker="|", color="0.55", markersize=5, markeredgewidth=0.9)
    add("stale read: arrow back to what it saw", marker="<", color=p["stale"], markersize=4, linestyle=":",
        linewidth=1.0)
    add("read (orange: stale)", marker="|", color="0.3", markersize=7, markeredgewidth=1.1)
    add("probe_processor", marker="d", color=p["probe"], markersize=5)
    add("wait", color="0.65", linewidth=2.2, linestyle="-", solid_capstyle="butt")
    add("retry_capture (big: a fresh key)", marker="^", color=p["retry"], markersize=6)
    add("disposition (bold: irreversible)", marker="*", color=p["act"], markersize=9)
    add("irreversible before determination", marker="*", color=p["premature"], markersize=9)
    add("the clerk, after an escalation", marker="P", color="0.45", markersize=6)
    add(f"handover: the brief (t={C.HANDOVER})", color="0.3", linestyle="--", linewidth=0.9)
    add(f"ship-by deadline (t={C.SHIP_BY})", color=p["capture_failed"], linestyle="-", linewidth=1.1)
    add("original capture determined", color="0.6", linestyle=":", linewidth=0.9)
    return hs, ls


def _levels(intervals: list[tuple[float, float]], n: int) -> list[int]:
    """A level in 0..n-1 per interval (in the order given) so that intervals on one level do not overlap."""
    ends: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    out = []
    for a, b in intervals:
        for level in range(n):
            if all(b < x or a > y for x, y in ends[level]):
                break
        ends[level].append((a, b))
        out.append(level)
    return out


def plot_timeline(events: pd.DataFrame, ax=None, *, legend: bool = True, title: bool = True,
                  xlim: tuple[float, float] | None = None):
    """Draw `episode_timeline`'s frame on one axes.

    Args:
        events: The frame (its `attrs` name the episode for the title).
        ax: The axes; None makes a figure (constrained layout, the PNG's dpi).
        legend: Put the legend under the axes.
        title: Put the episode (task, archetype, policy, seed, disposition,
            position, gap) in the axes title.
        xlim: The tick range (default: from 0 to the last event).

    Returns:
        The axes.
    """
    import matplotlib.pyplot as plt

    from finbench.analysis.plotting import PNG_DPI

    if ax is None:
        _, ax = plt.subplots(figsize=(9.0, 4.9), layout="constrained", dpi=PNG_DPI)
    fig = ax.figure
    p = _palette()
    lo, hi = xlim if xlim is not None else _extent(events)
    ax.set_xlim(lo, hi)
    ax.set_ylim(_Y["agent"] - 1.15, _Y["truth"] + 0.75)
    ax.grid(False)
    for lane in ("processor", "erp"):  # alternate bands
        ax.axhspan(_Y[lane] - 0.5, _Y[lane] + 0.5, color="0.965", zorder=0, lw=0)
    ax.axhline(_Y["agent"] + 0.5, color="0.6", lw=0.8, zorder=1)
    ax.axhline(_Y["truth"] - 0.5, color="0.6", lw=0.8, zorder=1)
    ax.set_yticks([_Y[lane] for lane in LANES], [_LANE_TEXT[lane] for lane in LANES], fontsize=7)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("tick (seconds since the order was placed)", fontsize=7)
    ax.axvline(C.HANDOVER, color="0.3", ls="--", lw=0.9, zorder=1)
    ax.axvline(C.SHIP_BY, color=p["capture_failed"], ls="-", lw=1.1, zorder=1)
    det = events.attrs.get("determined_at")
    if det is not None and lo <= det <= hi:
        ax.axvline(det, color="0.6", ls=":", lw=0.9, zorder=1)

    # label geometry, from the axes' current width (a little under: layout may still shrink it)
    px_per_tick = max(ax.get_window_extent().width * 0.9 / (hi - lo), 1e-6)
    dpi = fig.dpi
    edge = hi - 2 / px_per_tick

    # --- the hidden truth ---
    yt = _Y["truth"]
    truth = events[events.lane == "truth"]
    for r in truth.itertuples():
        ax.plot(r.t, yt, "o", color=p[r.kind], ms=6.5, mec="white", mew=0.5, zorder=4)
    labels = _merge_close([(int(r.t), r.label) for r in truth.itertuples()], 30 / px_per_tick)
    for t, text, level, ha in _stack([(t, s, 0) for t, s in labels], px_per_tick, _FONT, dpi, 2, edge):
        ax.annotate(text, (t, yt), xytext=(-2 if ha == "left" else 2, 5 + 8 * level), textcoords="offset points",
                    fontsize=_FONT, ha=ha, va="bottom", color="0.1", zorder=6)

    # --- deliveries ---
    dels = events[events.lane.isin(C.SYSTEMS)]
    pos = {r.delivery: r.t for r in dels.itertuples() if r.delivery and "loss" not in r.fault.split("+")}
    for system in C.SYSTEMS:
        y = _Y[system]
        mine = dels[dels.lane == system]
        delayed = [r for r in mine.itertuples() if "delay" in r.fault.split("+") and r.due_t != r.t]
        for r, level in zip(delayed, _levels([(r.due_t, r.t) for r in delayed], 3)):
            yy = y + (0.0, -0.2, 0.2)[level]
            ax.annotate("", (r.t, yy), xytext=(r.due_t, yy),
                        arrowprops=dict(arrowstyle="-|>", lw=0.8, color=p["fault"], mutation_scale=6, shrinkA=0,
                                        shrinkB=3.5 if level == 0 else 0), zorder=3)
            ax.plot(r.due_t, yy, "|", color=p["fault"], ms=5, mew=0.8, zorder=3)
        for r in mine.itertuples():
            color = p[r.kind]
            faults = set(r.fault.split("+")) if r.fault else set()
            if "loss" in faults:
                ax.plot(r.t, y, "o", mfc="white", mec=color, ms=7.5, mew=1.1, zorder=4)
                ax.plot(r.t, y, "X", mfc="none", mec="0.1", ms=6, mew=0.9, zorder=5)
                continue
            kw = dict(color=color, ms=6.5, mec="white", mew=0.5, zorder=4)
            marker, yy = "o", y
            if "duplicate" in faults:
                marker, yy = "D", y + 0.2
                kw.update(ms=5, mec="black", mew=0.6, zorder=5)
                orig = pos.get(r.original)
                if orig is not None:
                    ax.plot([orig, r.t], [y, yy], ls=":", lw=0.9, color="0.25", zorder=2)
            if "partial_commit" in faults:
                kw.update(fillstyle="left", markerfacecoloralt="white", mec="black", mew=0.6, ms=7.5)
            if "reorder" in faults:
                kw.update(mec="black", mew=1.4)
                other = pos.get(r.partner)
                if other is not None and r.delivery < r.partner:  # one bracket per pair
                    ax.plot([r.t, r.t, other, other], [y - 0.2, y - 0.34, y - 0.34, y - 0.2], color="0.1", lw=0.8,
                            zorder=2)
            ax.plot(r.t, yy, marker, **kw)

    # --- the agent ---
    ya = _Y["agent"]
    agent = events[events.lane == "agent"]
    # a read of the case order is also marked at the top of the lane it read; a stale one
    # with an arrow back to the tick it saw (arrows that would overlap take a lower level)
    reads = [r for r in agent.itertuples() if r.kind in READS and not r.other_order and not r.error]
    for system in C.SYSTEMS:
        mine = [r for r in reads if r.kind == f"read_{system}"]
        stale = [r for r in mine if r.fault == "stale_read"]
        y = _Y[system]
        for r in mine:
            ax.plot(r.t, y + 0.36, "|", color=p["stale"] if r.fault else "0.55", ms=5, mew=0.9, zorder=3)
        for r, level in zip(stale, _levels([(r.seen_t, r.t) for r in stale], 2)):
            ys = y + 0.36 - 0.14 * level
            ax.annotate("", (r.seen_t, ys), xytext=(r.t, ys),
                        arrowprops=dict(arrowstyle="-|>", ls=(0, (1.5, 1.2)), lw=1.0, color=p["stale"],
                                        mutation_scale=6, shrinkA=0, shrinkB=0), zorder=3)
    for r in agent.itertuples():
        if r.kind == "wait":
            ax.plot([r.event_t, r.t], [ya, ya], color="0.65", lw=2.2, solid_capstyle="butt", zorder=2)
        elif r.kind in READS:
            ax.plot(r.t, ya, "|", color=p["stale"] if r.fault == "stale_read" else "0.3", ms=7, mew=1.1, zorder=4)
        elif r.kind == "probe_processor":
            ax.plot(r.t, ya, "d", color=p["probe"], ms=5.5, zorder=4)
        elif r.kind == "retry_capture":
            ax.plot(r.t, ya, "^", color=p["premature"] if r.premature else p["retry"], ms=8 if r.irreversible else 5,
                    mec="white", mew=0.5, zorder=5)
        elif r.kind == "human":
            ax.plot(r.t, ya, "P", color="0.45", ms=6.5, zorder=5)
        else:  # a disposition (or a call of an unknown tool)
            color = p["premature"] if r.premature else p["act"]
            ax.plot(r.t, ya, "*" if r.terminal or r.kind in _DISPOSITIONS else "x", color=color,
                    ms=12 if r.terminal else 7, mec="white", mew=0.4, zorder=6)
    items = [(t, text, 2 if (r.terminal or r.irreversible) else 0, r) for t, text, r in _bursts(agent)]
    items += [(r.t, r.label, 1, r) for r in agent.itertuples() if r.kind == "human"]
    rows = {(t, text): r for t, text, _, r in items}
    for t, text, level, ha in _stack([i[:3] for i in items], px_per_tick, _FONT, dpi, 3, edge):
        r = rows[(t, text)]
        ax.annotate(text, (t, ya), xytext=(-3 if ha == "left" else 3, -9 - 8.5 * level), textcoords="offset points",
                    fontsize=_FONT, ha=ha, va="top", zorder=6, fontweight="bold" if r.irreversible else "normal",
                    color=p["premature"] if r.premature else ("0.05" if (r.irreversible or r.terminal) else "0.3"))

    if title and events.attrs:
        ax.set_title(_title(events), fontsize=7.5, loc="left")
    if legend:
        hs, ls = legend_handles()
        ax.legend(hs, ls, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=6, frameon=False,
                  handlelength=2.2, columnspacing=1.2)
    return ax


@dataclass(frozen=True)
class Timeline:
    """One drawn episode: the axes, the events drawn (`episode_timeline`) and the episode's result."""

    ax: object = field(repr=False)
    events: pd.DataFrame = field(repr=False)
    result: EpisodeResult

    @property
    def figure(self):
        return self.ax.figure


def draw_timeline(task: Task, policy, seed: int = 0, profile: FaultProfile | None = None, *, ax=None,
                  costs: Costs | None = None, probe: ProbeMode | None = None, legend: bool = True) -> Timeline:
    """Play one episode and draw it on one time axis: truth, the four systems, the agent.

    Args:
        task, policy, seed, profile, costs, probe: as `episode_timeline` (and `run_episode`).
        ax: The axes to draw on; None makes a new figure.
        legend: Put the legend under the axes.

    Returns:
        A `Timeline`: `.ax`, `.figure`, `.events` (the frame drawn) and `.result`
        (the `EpisodeResult`, equal to `run_episode`'s for the same inputs).

    Raises:
        PolicyError: an unknown policy or knob.

    Example:
        >>> import finbench as fb
        >>> from finbench.analysis.timeline import draw_timeline
        >>> drawn = draw_timeline(fb.make_corpus(n_tasks=9).tasks[0], "optimistic", seed=0)
        >>> drawn.result.gap == fb.run_episode(fb.make_corpus(n_tasks=9).tasks[0], "optimistic", 0).gap
        True
    """
    events = episode_timeline(task, policy, seed, profile, costs=costs, probe=probe)
    ax = plot_timeline(events, ax, legend=legend)
    return Timeline(ax, events, events.attrs["result"])


def draw_row(row, run, *, ax=None, legend: bool = True) -> Timeline:
    """Draw the episode behind one row of `run.evaluate()` (its task, policy, seed, profile,
    costs and probe mode), checking that the replay gives the row's gap.

    Raises:
        KeyError: the row's task or policy is not in the run.
        RuntimeError: the replay does not reproduce the row (episodes are deterministic).
    """
    task = run.corpus[row["task_id"]]
    ref = next((r for r in run.policies if r.label == row["policy"]), None)
    if ref is None:
        raise KeyError(f"policy {row['policy']!r} is not one of the run's: {', '.join(run.labels)}")
    drawn = draw_timeline(task, ref, int(row["seed"]), run.profile, ax=ax, costs=run.costs, probe=run.probe,
                          legend=legend)
    if abs(drawn.result.gap - float(row["gap"])) > 1e-6 or drawn.result.disposition != row["disposition"]:
        raise RuntimeError(f"replay of {row['policy']} on {row['task_id']} seed {row['seed']} gave gap "
                           f"{drawn.result.gap} ({drawn.result.disposition}); the row says {row['gap']} "
                           f"({row['disposition']})")
    return drawn


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


def timeline_figure(pair_or_tasks, policies=("optimistic", "finality_gate"), seed: int = 0,
                    profile: FaultProfile | None = None, *, costs: Costs | None = None,
                    probe: ProbeMode | None = None):
    """A grid of timelines: rows = tasks (a twin pair: settle half, fail half), columns = policies.

    Args:
        pair_or_tasks: A `Corpus` (its pair is `pick_twin_pair(corpus, policies, seed, profile)`),
            a `(settle, fail)` pair of tasks, or any sequence of tasks.
        policies: The columns, any policy references.
        seed, profile, costs, probe: The episodes drawn.

    Returns:
        The figure (constrained layout, at the PNG's dpi), one shared tick axis and legend.

    Raises:
        PolicyError: an unknown policy.
        ValueError: no tasks, or a corpus without twin pairs.
    """
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    from finbench.analysis.plotting import PNG_DPI

    if isinstance(pair_or_tasks, Corpus):
        tasks = list(pick_twin_pair(pair_or_tasks, policies, seed, profile, costs=costs, probe=probe))
    else:
        tasks = list(pair_or_tasks)
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise ValueError("timeline_figure: give a Corpus, a (settle, fail) pair or a sequence of Tasks")
    policies = list(policies)
    frames = [[episode_timeline(t, pol, seed, profile, costs=costs, probe=probe) for pol in policies] for t in tasks]
    ext = [_extent(f) for row in frames for f in row]
    xlim = (min(e[0] for e in ext), max(e[1] for e in ext))
    nr, nc = len(tasks), len(policies)
    fig = plt.figure(figsize=(6.2 * nc, 3.3 * nr + 1.2), layout="constrained", dpi=PNG_DPI)
    # the legend gets a row of its own: the caption `publish` adds below it then cannot overlap it
    grid = fig.add_gridspec(nr + 1, nc, height_ratios=[1.0] * nr + [0.3])
    axes = [[fig.add_subplot(grid[i, j]) for j in range(nc)] for i in range(nr)]
    for i, row in enumerate(frames):
        for j, events in enumerate(row):
            ax = axes[i][j]
            plot_timeline(events, ax, legend=False, xlim=xlim)
            if i < nr - 1:
                ax.set_xlabel("")
                ax.tick_params(axis="x", labelbottom=False)
            if j > 0:
                ax.tick_params(axis="y", labelleft=False)
    key = fig.add_subplot(grid[nr, :])
    key.axis("off")
    hs, ls = legend_handles()
    # out of the layout and centred on the figure: as wide as the figure, it must not squeeze the
    # panels (its row is sized for its height)
    key.legend(hs, ls, loc="center", ncol=5, fontsize=6.5, frameon=False, handlelength=2.2, columnspacing=1.6,
               bbox_to_anchor=(0.5, 0.5), bbox_transform=blended_transform_factory(fig.transFigure, key.transAxes)
               ).set_in_layout(False)
    first = tasks[0]
    if first.twin_id and len(tasks) == 2 and tasks[0].twin_id == tasks[1].twin_id:
        head = (f"Twin pair {first.unit}: identical until t={first.determined_at}, when the capture settles "
                f"(top) or fails (bottom); order value {_money(first.order_value)}")
    else:
        head = f"{len(tasks)} task(s) × {len(policies)} policies"
    fig.suptitle(f"{head} · seed {seed}", fontsize=8.5)
    return fig
