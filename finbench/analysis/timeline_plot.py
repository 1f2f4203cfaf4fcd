"""Drawing one episode on one time axis (the frame `finbench.analysis.timeline` computes).

    drawn = draw_timeline(task, "finality_gate", seed=0)     # drawn: .ax, .events, .result
    drawn = draw_row(run.evaluate().iloc[0], run)            # the episode behind one row of a Run
    fig = timeline_figure(pick_twin_pair(corpus))            # a twin pair x (optimistic, finality_gate)

matplotlib is imported inside the drawing functions, so importing this module
(or `finbench`) stays light for runs that draw nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from finbench.analysis.labels import levels, merge_close, stack
from finbench.analysis.timeline import DISPOSITIONS, LANES, episode_timeline, pick_twin_pair
from finbench.sim import constants as C
from finbench.sim.corpus import Corpus
from finbench.sim.task import Task
from finbench.sim.economics import Costs
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode
from finbench.sim.result import EpisodeResult
from finbench.sim.tools import READS

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
    import matplotlib.pyplot as plt  # lazy: importing the package draws nothing

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    if ax is None:
        _, ax = plt.subplots(figsize=(9.0, 4.9), layout="constrained", dpi=PNG_DPI)
    p = _palette()
    lo, hi = xlim if xlim is not None else _extent(events)
    _draw_frame(ax, events, p, lo, hi)
    meta, events = events, events.copy(deep=False)
    events.attrs = {}  # pandas deep-copies attrs (the episode's result) into every slice and row
    # label geometry, from the axes' current width (a little under: layout may still shrink it)
    px_per_tick = max(ax.get_window_extent().width * 0.9 / (hi - lo), 1e-6)
    geometry = (px_per_tick, ax.figure.dpi, hi - 2 / px_per_tick)
    _draw_truth(ax, events[events.lane == "truth"], p, geometry)
    _draw_deliveries(ax, events[events.lane.isin(C.SYSTEMS)], p)
    agent = events[events.lane == "agent"]
    _draw_reads(ax, agent, p)
    _draw_calls(ax, agent, p, geometry)
    if title and meta.attrs:
        ax.set_title(_title(meta), fontsize=7.5, loc="left")
    if legend:
        hs, ls = legend_handles()
        ax.legend(hs, ls, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=6, frameon=False,
                  handlelength=2.2, columnspacing=1.2)
    return ax




def _draw_frame(ax, events: pd.DataFrame, p: dict, lo: float, hi: float) -> None:
    """Lanes, ticks, the hand-over and deadline lines and the determination tick."""
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


def _draw_truth(ax, truth: pd.DataFrame, p: dict, geometry: tuple) -> None:
    """The canonical log's events, labelled above their lane."""
    px_per_tick, dpi, edge = geometry
    yt = _Y["truth"]
    for r in truth.itertuples():
        ax.plot(r.t, yt, "o", color=p[r.kind], ms=6.5, mec="white", mew=0.5, zorder=4)
    labels = merge_close([(int(r.t), r.label) for r in truth.itertuples()], 30 / px_per_tick)
    for t, text, level, ha in stack([(t, s, 0) for t, s in labels], px_per_tick, _FONT, dpi, 2, edge):
        ax.annotate(text, (t, yt), xytext=(-2 if ha == "left" else 2, 5 + 8 * level), textcoords="offset points",
                    fontsize=_FONT, ha=ha, va="bottom", color="0.1", zorder=6)


def _draw_deliveries(ax, dels: pd.DataFrame, p: dict) -> None:
    """Each system's deliveries, marked with their faults: lost (crossed), delayed (an
    arrow from when it was due), duplicated (a diamond dotted to its original),
    reordered (a bracket), half-committed (half filled)."""
    pos = {r.delivery: r.t for r in dels.itertuples() if r.delivery and "loss" not in r.fault.split("+")}
    for system in C.SYSTEMS:
        y = _Y[system]
        mine = dels[dels.lane == system]
        delayed = [r for r in mine.itertuples() if "delay" in r.fault.split("+") and r.due_t != r.t]
        for r, level in zip(delayed, levels([(r.due_t, r.t) for r in delayed], 3)):
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


def _draw_reads(ax, agent: pd.DataFrame, p: dict) -> None:
    """The case order's reads, marked at the top of the lane each read."""
    # a read of the case order is also marked at the top of the lane it read; a stale one
    # with an arrow back to the tick it saw (arrows that would overlap take a lower level)
    reads = [r for r in agent.itertuples() if r.kind in READS and not r.other_order and not r.error]
    for system in C.SYSTEMS:
        mine = [r for r in reads if r.kind == f"read_{system}"]
        stale = [r for r in mine if r.fault == "stale_read"]
        y = _Y[system]
        for r in mine:
            ax.plot(r.t, y + 0.36, "|", color=p["stale"] if r.fault else "0.55", ms=5, mew=0.9, zorder=3)
        for r, level in zip(stale, levels([(r.as_of_t, r.t) for r in stale], 2)):
            ys = y + 0.36 - 0.14 * level
            ax.annotate("", (r.as_of_t, ys), xytext=(r.t, ys),
                        arrowprops=dict(arrowstyle="-|>", ls=(0, (1.5, 1.2)), lw=1.0, color=p["stale"],
                                        mutation_scale=6, shrinkA=0, shrinkB=0), zorder=3)


def _draw_calls(ax, agent: pd.DataFrame, p: dict, geometry: tuple) -> None:
    """The agent's calls on its lane, labelled below it (irreversible ones in bold)."""
    px_per_tick, dpi, edge = geometry
    ya = _Y["agent"]
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
            ax.plot(r.t, ya, "*" if r.terminal or r.kind in DISPOSITIONS else "x", color=color,
                    ms=12 if r.terminal else 7, mec="white", mew=0.4, zorder=6)
    items = [(t, text, 2 if (r.terminal or r.irreversible) else 0, r) for t, text, r in _bursts(agent)]
    items += [(r.t, r.label, 1, r) for r in agent.itertuples() if r.kind == "human"]
    rows = {(t, text): r for t, text, _, r in items}
    for t, text, level, ha in stack([i[:3] for i in items], px_per_tick, _FONT, dpi, 3, edge):
        r = rows[(t, text)]
        ax.annotate(text, (t, ya), xytext=(-3 if ha == "left" else 3, -9 - 8.5 * level), textcoords="offset points",
                    fontsize=_FONT, ha=ha, va="top", zorder=6, fontweight="bold" if r.irreversible else "normal",
                    color=p["premature"] if r.premature else ("0.05" if (r.irreversible or r.terminal) else "0.3"))


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
        >>> from finbench.analysis.timeline_plot import draw_timeline
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

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

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
