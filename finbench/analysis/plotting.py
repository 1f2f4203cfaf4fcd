"""One figure style for every notebook, and figures that do not churn.

Call :func:`apply_style` once per notebook, draw, put the corpus fingerprint
and parameters on the figure with :func:`caption`, and write it with
:func:`save`. Saving strips the timestamps and version strings that make
regenerated PNG and PDF files differ (as matplotlib's own
``test_determinism.py`` does), so re-running a notebook gives byte-identical
files.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from finbench.files import atomic_path

PNG_DPI = 150
PNG_METADATA = {"Software": None}
PDF_METADATA = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}
CAPTION_FONTSIZE = 6.0

_RC = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    # TrueType (42) rather than Type 3 fonts: editable text in the PDF.
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    # SVG ids are random unless salted.
    "svg.hashsalt": "finbench",
    "savefig.dpi": PNG_DPI,
}


def apply_style() -> None:
    """Set the project's figure style (seaborn paper context, DejaVu Sans)."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font="DejaVu Sans", rc=_RC)


def caption(fig: Figure, text: str) -> Figure:
    """Put a small grey footer on the figure, e.g. the corpus fingerprint and parameters.

    Room is made below the axes so the footer never overlaps them. Explicit
    newlines are kept; long lines are wrapped to the figure's width.

    Args:
        fig: The figure.
        text: The footer text.

    Returns:
        The same figure.
    """
    width_chars = max(20, int(fig.get_figwidth() * 72 / (CAPTION_FONTSIZE * 0.6)))
    lines = [w for line in str(text).splitlines() for w in (textwrap.wrap(line, width_chars) or [""])]
    fig.text(
        0.01, 0.01, "\n".join(lines), ha="left", va="bottom", fontsize=CAPTION_FONTSIZE, color="0.35"
    )
    # Reserve the footer's height (plus a little) as a share of the figure.
    frac = min(0.4, (len(lines) * 1.3 + 1.0) * CAPTION_FONTSIZE / 72 / fig.get_figheight())
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0, frac, 1, 1 - frac))
    else:
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, frac + 0.08))
    return fig


def save(fig: Figure, stem: str, outdir: str | os.PathLike = "figures") -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` reproducibly.

    Sets ``SOURCE_DATE_EPOCH=0`` and drops the PNG ``Software`` and PDF
    creator, producer and date entries, so the same figure saved twice, in
    any process, gives the same bytes.

    Args:
        fig: The figure.
        stem: File name without extension.
        outdir: Directory to write into (created if missing).

    Returns:
        The paths written, PNG first.
    """
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    png, pdf = out / f"{stem}.png", out / f"{stem}.pdf"
    engine = _freeze_layout(fig)
    try:
        with atomic_path(png) as tmp:
            fig.savefig(tmp, format="png", dpi=PNG_DPI, metadata=PNG_METADATA)
        with atomic_path(pdf) as tmp:
            fig.savefig(tmp, format="pdf", metadata=PDF_METADATA)
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
    return [png, pdf]


def _freeze_layout(fig: Figure) -> ConstrainedLayoutEngine | None:
    """Lay the figure out once from scratch and switch the layout engine off.

    Constrained layout starts from the axes' current positions, so each draw
    (an inline display, the PNG pass at one dpi, the PDF pass at another)
    nudges them again and the files would depend on the figure's history.
    Resetting every axes to its grid slot and running the engine exactly once
    makes the layout a function of the figure alone. Returns the engine to
    restore afterwards, or None if there was nothing to freeze.
    """
    engine = fig.get_layout_engine()
    if not isinstance(engine, ConstrainedLayoutEngine):
        return None
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is not None:
            ax.set_position(spec.get_position(fig), which="both")
            ax.set_in_layout(True)  # set_position takes the axes out of the layout
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    return engine


def _as_percent(values: pd.Series, what: str) -> np.ndarray:
    arr = values.to_numpy(dtype=float)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{what} must be fractions in [0, 1] (metrics' convention), got {arr}")
    return 100 * arr


def plot_exact_vs_pass5(table: pd.DataFrame, x: str = "exact", y: str = "pass^5") -> Figure:
    """Figure 1: single-seed exact % against pass^5 % per policy.

    A policy on the diagonal is as reliable under five seeds as under one;
    the further below it, the more its single-seed accuracy rests on luck.

    Args:
        table: Indexed by policy (e.g. ``metrics.summary_table``), with
            fractions in columns ``x`` and ``y``.
        x: Column of the single-seed exact rate (pass^1 equals it).
        y: Column of pass^5.

    Returns:
        The figure.
    """
    for col in (x, y):
        if col not in table.columns:
            raise KeyError(f"table lacks column {col!r}; it has {list(table.columns)}")
    xs, ys = _as_percent(table[x], x), _as_percent(table[y], y)
    fig, ax = plt.subplots(figsize=(4.2, 4.0), layout="constrained")
    ax.plot([0, 100], [0, 100], ls="--", lw=0.8, color="0.5", zorder=1)
    ax.scatter(xs, ys, s=22, color=sns.color_palette()[0], zorder=3)
    placed: list[tuple[float, float]] = []
    for name, xi, yi in sorted(zip(table.index, xs, ys), key=lambda p: (-p[2], p[1])):
        # Labels near the right edge go to the left of their point, inside the axes;
        # a label that would sit on an earlier one moves below its point instead.
        right = xi > 70
        dy = 3
        if any(abs(xi - px) < 14 and abs(yi - py) < 4 for px, py in placed):
            dy = -9
        placed.append((xi, yi + (dy / 3)))
        ax.annotate(str(name), (xi, yi), xytext=(-4 if right else 4, dy), textcoords="offset points",
                    ha="right" if right else "left", fontsize=7)
    ax.set(xlim=(0, 100), ylim=(0, 100), xlabel="single-seed exact (%)", ylabel="pass^5 (%)")
    ax.set_aspect("equal")
    return fig


def plot_pass_k_curve(curve_df: pd.DataFrame) -> Figure:
    """pass^k against k, one line per policy.

    Args:
        curve_df: Indexed by policy, one column per k (``metrics.pass_k_curve``),
            values as fractions.

    Returns:
        The figure.
    """
    ks = [int(k) for k in curve_df.columns]
    fig, ax = plt.subplots(figsize=(5.2, 3.4), layout="constrained")
    colors = sns.color_palette("colorblind", n_colors=max(len(curve_df), 1))
    markers = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">"]
    for i, (name, row) in enumerate(curve_df.iterrows()):
        ax.plot(ks, _as_percent(row, f"pass^k of {name}"), marker=markers[i % len(markers)],
                ms=4, lw=1.2, color=colors[i % len(colors)], label=str(name))
    ax.set(xticks=ks, ylim=(0, 100), xlabel="k (seeds that must all be exact)", ylabel="pass^k (%)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=7)
    return fig
