"""The figures of the pages (`report.html`, `compare.html`, `leaderboard.html`), drawn from a card's numbers
(card.json's entries, never the rows again): what a page shows as a picture is what its tables print.

- `standing_figure`: exact % and mean gap with their intervals, one line a policy, the agents highlighted,
  the gate and the privileged oracle marked;
- `archetype_figure`: exact % and mean gap by archetype, the agent beside the gate;
- `usage_figure`: calls and ticks per episode (10th, 50th and 90th percentiles, extremes and mean), the agent
  beside the gate.
"""
from __future__ import annotations

import numpy as np

__all__ = ["archetype_figure", "standing_figure", "usage_figure"]

GATE = "finality_gate"
_AGENT, _NINE, _GATE = "#0072b2", "#8c8c8c", "#d55e00"


def _pyplot():
    import matplotlib.pyplot as plt  # the session's own backend: a Jupyter kernel keeps its inline one
    from finbench.analysis.plotting import apply_style  # lazy: matplotlib loads only to draw

    apply_style()
    return plt


def _ci(entry: dict, key: str) -> tuple[float, float]:
    lo, hi = entry.get(key) or (None, None)
    return (np.nan if lo is None else lo), (np.nan if hi is None else hi)


def standing_figure(table2: list[dict], agents: set[str]):
    """Two panels, exact % and mean gap $, each policy of `table2` (card.json's entries, in order) a point
    with its 95% interval; `agents` drawn in colour and bold, the gate in its own colour, the privileged
    oracle hollow and labelled so."""
    plt = _pyplot()
    n = len(table2)
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.42 * n + 1.4), sharey=True, layout="constrained")
    ys = np.arange(n)[::-1]
    labels = []
    for y, e in zip(ys, table2):
        p = e["policy"]
        colour = _AGENT if p in agents else _GATE if p == GATE else _NINE
        hollow = bool(e.get("privileged"))
        for ax, value, ci in ((axes[0], e["exact_pct"], "exact_ci"), (axes[1], e["mean_gap"], "gap_ci")):
            lo, hi = _ci(e, ci)
            ax.plot([lo, hi], [y, y], color=colour, lw=2.2 if p in agents else 1.4, solid_capstyle="butt")
            ax.plot([value], [y], "o", ms=7 if p in agents else 5.5, color=colour,
                    mfc="white" if hollow else colour, mew=1.6)
        labels.append(p + (" (privileged)" if hollow else " (gate)" if p == GATE else ""))
    axes[0].set_yticks(ys, labels)
    for tick, e in zip(axes[0].get_yticklabels(), table2):
        if e["policy"] in agents:
            tick.set_fontweight("bold")
            tick.set_color(_AGENT)
    axes[0].set_xlim(-2, 102)
    axes[0].set_xlabel("exact % (95% interval over units)")
    axes[1].set_xlabel("mean gap $ (95% interval; lower is better)")
    axes[1].set_xlim(left=min(0.0, *(_ci(e, "gap_ci")[0] for e in table2 if e.get("gap_ci"))) - 5)
    return fig


def archetype_figure(archetypes: list[dict], agent: str):
    """Exact % and mean gap $ by archetype (card.json's `archetypes`): the agent's bar beside the gate's."""
    plt = _pyplot()
    names = [a["archetype"] for a in archetypes]
    y = np.arange(len(names))[::-1]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.45 * len(names) + 1.4), sharey=True, layout="constrained")
    h = 0.38
    for ax, mine, gate, label in ((axes[0], "exact_pct", "gate_exact_pct", "exact % by archetype"),
                                  (axes[1], "mean_gap", "gate_mean_gap", "mean gap $ by archetype")):
        ax.barh(y + h / 2, [_num(a[mine]) for a in archetypes], h, color=_AGENT, label=agent)
        ax.barh(y - h / 2, [_num(a[gate]) for a in archetypes], h, color=_GATE, label=GATE)
        ax.set_xlabel(label)
    axes[0].set_yticks(y, names)
    axes[0].set_xlim(0, 100)
    axes[0].legend(loc="lower right", fontsize=8)
    return fig


def usage_figure(usage: dict, agent: str):
    """Calls and ticks per episode (card.json's `usage`): for the agent and the gate a bar from the 10th to
    the 90th percentile, a line at the median, whiskers to the extremes and a diamond at the mean."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.4), layout="constrained")
    for ax, what, label in ((axes[0], "calls", "calls per episode"), (axes[1], "ticks", "ticks per episode")):
        for y, (key, who, colour) in enumerate((("gate", GATE, _GATE), ("agent", agent, _AGENT))):
            s = usage[key][what]
            ax.plot([s["min"], s["max"]], [y, y], color=colour, lw=1)
            ax.barh(y, s["p90"] - s["p10"], 0.45, left=s["p10"], color=colour, alpha=0.35)
            ax.plot([s["median"]] * 2, [y - 0.22, y + 0.22], color=colour, lw=2.5)
            ax.plot([s["mean"]], [y], "D", color=colour, ms=6)
        ax.set_yticks([0, 1], [GATE, agent])
        ax.set_xlabel(label)
    return fig


def _num(value) -> float:
    return np.nan if value is None else float(value)
