"""The splits figure: per policy, the spread of the headline's numbers over regenerated corpora
(`finbench.experiments.splits` computes the spread; this module only draws it)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from finbench.agents.registry import policy_order


def figure(sp: pd.DataFrame, values: pd.DataFrame, k: int | None = None):
    """Per policy, the spread over the regenerated corpora of exact %, pass^k % and mean gap $.

    Each regenerated corpus is a grey dot, the median a black bar; the public split is a
    blue diamond; the paper's value a red cross with its interval where it gives one.

    Returns:
        The figure (constrained layout, at the PNG's dpi).
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    order = policy_order(values["policy"])
    panels = [("exact_pct", "exact % (higher is better)"),
              ("passk_pct", f"pass^{k if k else 'k'} % (higher is better)"),
              ("mean_gap", "mean gap $ (lower is better)")]
    colors = sns.color_palette("colorblind")
    pub_c, paper_c = colors[0], colors[3]
    y = np.arange(len(order))
    reg = values[values["split"] > 0]
    n = reg["split"].nunique()
    # deterministic vertical offsets, one per corpus, so equal values do not hide each other
    offs = (np.arange(n) - (n - 1) / 2) / max(n, 1) * 0.5
    fig, axes = plt.subplots(1, 3, figsize=(11, 0.42 * len(order) + 1.9), layout="constrained", sharey=True,
                             dpi=PNG_DPI)
    s = sp.set_index(["policy", "metric"])
    for ax, (col, title) in zip(axes, panels):
        for i, p in enumerate(order):
            v = reg.loc[reg["policy"] == p].sort_values("split")[col].to_numpy(dtype=float)
            ax.scatter(v, np.full(len(v), i) + offs[:len(v)], s=7, color="0.55", alpha=0.8, lw=0, zorder=2,
                       label=f"regenerated corpora ({n})" if i == 0 else None)
            med = s.loc[(p, col), "median"]
            ax.plot([med, med], [i - 0.3, i + 0.3], color="black", lw=1.4, zorder=3,
                    label="median over regenerated" if i == 0 else None)
            ax.plot([s.loc[(p, col), "public"]], [i], "D", color=pub_c, ms=5, zorder=4, clip_on=False,
                    label="public split" if i == 0 else None)
        have = [(i, p) for i, p in enumerate(order) if not math.isnan(s.loc[(p, col), "paper"])]
        for j, (i, p) in enumerate(have):
            r = s.loc[(p, col)]
            if not math.isnan(r["paper_lo"]):
                ax.plot([r["paper_lo"], r["paper_hi"]], [i + 0.3, i + 0.3], color=paper_c, lw=1.2, zorder=4)
            ax.plot([r["paper"]], [i + 0.3], "X", color=paper_c, ms=6, zorder=5, clip_on=False,
                    label="paper (with its interval)" if j == 0 else None)
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="both", labelsize=8)
        ax.grid(axis="y", visible=False)
        for i in y[1::2]:
            ax.axhspan(i - 0.5, i + 0.5, color="0.95", zorder=0)
    axes[0].set_yticks(y, order)
    axes[0].set_ylim(len(order) - 0.5, -0.5)
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="outside upper center", ncol=len(labels), fontsize=8, frameon=False,
               title="The headline across corpora: each policy on the public split and on regenerated corpora",
               title_fontsize=10)
    return fig
