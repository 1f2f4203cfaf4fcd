"""Tests for finbench.analysis.plotting: the figures regenerate byte-identically."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from finbench.analysis import plotting  # noqa: E402

# tests marked slow draw figures again in subprocesses (make test-fast leaves them out)

ROOT = Path(__file__).resolve().parents[2]

TABLE = pd.DataFrame(
    {"exact": [0.86, 0.35, 0.52, 0.10], "pass^5": [0.86, 0.08, 0.21, 0.0]},
    index=pd.Index(["finality_gate", "sop", "react", "eager"], name="policy"),
)
CURVE = pd.DataFrame(
    {1: [0.86, 0.35, 0.52], 2: [0.86, 0.2, 0.4], 3: [0.86, 0.15, 0.3], 4: [0.86, 0.1, 0.25], 5: [0.86, 0.08, 0.21]},
    index=pd.Index(["finality_gate", "sop", "react"], name="policy"),
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    # save() sets SOURCE_DATE_EPOCH; monkeypatch restores the environment.
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    with matplotlib.rc_context():
        plotting.apply_style()
        yield
    plt.close("all")


def _figure1():
    fig = plotting.plot_exact_vs_pass5(TABLE)
    plotting.caption(fig, "corpus 0123456789abcdef | seeds 0-4 | profile default | n_boot 2000")
    return fig


@pytest.mark.slow
def test_apply_style_sets_the_documented_rc():
    rc = matplotlib.rcParams
    assert rc["pdf.fonttype"] == 42
    assert rc["font.sans-serif"][0] == "DejaVu Sans"
    assert rc["svg.hashsalt"] == "finbench"


@pytest.mark.slow
def test_saving_the_same_figure_twice_is_byte_identical(tmp_path):
    fig = _figure1()
    first = plotting.save(fig, "fig1", tmp_path / "one")
    second = plotting.save(fig, "fig1", tmp_path / "two")
    assert [p.name for p in first] == ["fig1.png", "fig1.pdf"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name


@pytest.mark.slow
def test_rebuilding_the_figure_is_byte_identical(tmp_path):
    a = plotting.save(_figure1(), "fig1", tmp_path / "one")
    b = plotting.save(_figure1(), "fig1", tmp_path / "two")
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes(), x.name


def test_files_carry_no_timestamp_or_version(tmp_path):
    png, pdf = plotting.save(_figure1(), "fig1", tmp_path)
    assert png.read_bytes().startswith(b"\x89PNG")
    assert pdf.read_bytes().startswith(b"%PDF")
    assert b"CreationDate" not in pdf.read_bytes()
    assert b"ModDate" not in pdf.read_bytes()
    assert b"Matplotlib" not in pdf.read_bytes()
    assert b"Software" not in png.read_bytes()


@pytest.mark.slow
def test_figures_are_byte_identical_across_processes(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, matplotlib
        matplotlib.use("Agg")
        sys.path.insert(0, {str(ROOT)!r})
        import pandas as pd
        from finbench.analysis import plotting
        plotting.apply_style()
        curve = pd.DataFrame({CURVE.to_dict(orient="list")!r}, index={list(CURVE.index)!r})
        fig = plotting.plot_pass_k_curve(curve)
        plotting.caption(fig, "corpus 0123456789abcdef")
        plotting.save(fig, "curve", sys.argv[1])
        """
    )
    for name, hashseed in (("one", "0"), ("two", "12345")):
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / name)],
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hashseed, "MPLBACKEND": "Agg"},
        )
    for ext in ("png", "pdf"):
        assert (tmp_path / "one" / f"curve.{ext}").read_bytes() == (tmp_path / "two" / f"curve.{ext}").read_bytes()


def test_figure1_draws_every_policy_on_percent_axes():
    fig = plotting.plot_exact_vs_pass5(TABLE)
    ax = fig.axes[0]
    assert ax.get_xlim() == (0, 100) and ax.get_ylim() == (0, 100)
    offsets = ax.collections[0].get_offsets()
    assert offsets.ravel().tolist() == pytest.approx((TABLE[["exact", "pass^5"]].to_numpy() * 100).ravel().tolist())
    assert sorted(t.get_text() for t in ax.texts) == sorted(TABLE.index)
    diagonal = ax.lines[0].get_xydata().tolist()
    assert diagonal == [[0, 0], [100, 100]]


@pytest.mark.slow
def test_figure1_rejects_percentages():
    with pytest.raises(ValueError, match="fractions"):
        plotting.plot_exact_vs_pass5(TABLE * 100)


def test_pass_k_curve_has_one_line_per_policy():
    fig = plotting.plot_pass_k_curve(CURVE)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == list(CURVE.index)
    assert ax.lines[1].get_ydata().tolist() == pytest.approx([35, 20, 15, 10, 8])
    assert list(ax.lines[0].get_xdata()) == [1, 2, 3, 4, 5]


def test_caption_adds_a_footer_below_the_axes(tmp_path):
    fig = _figure1()
    footer = [t for t in fig.texts if "corpus" in t.get_text()]
    assert len(footer) == 1
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert footer[0].get_window_extent(renderer).y1 < fig.axes[0].get_tightbbox(renderer).y0
