"""Every notebook runs headless through papermill at a small size; the tables it writes are checked."""
from pathlib import Path

import pytest

import finbench as fb
from finbench.pipeline import notebooks, run_notebook
from finbench.reporting import read_table

ROOT = Path(__file__).resolve().parent.parent


def test_every_notebook_is_covered():
    assert {p.stem for p in notebooks()} <= set(SMALL), "add the new notebook to SMALL below"


def _run(stem, tmp_path, **params):
    tables, figures, data = tmp_path / "tables", tmp_path / "figures", tmp_path / "data"
    run_notebook(ROOT / "notebooks" / f"{stem}.ipynb",
                 {"tables_dir": str(tables), "data_dir": str(data), **params}, out_dir=tmp_path / "nb")
    return tables, figures, data


def test_00_corpus(tmp_path):
    tables, _, data = _run("00_corpus", tmp_path, **SMALL["00_corpus"])
    # full size is cheap: the table must regenerate to the committed bytes
    assert (tables / "corpus.md").read_bytes() == (ROOT / "tables" / "corpus.md").read_bytes()
    assert (tables / "corpus.csv").read_bytes() == (ROOT / "tables" / "corpus.csv").read_bytes()
    df = read_table(tables / "corpus.csv")
    total = df.set_index("archetype").loc["total"]
    assert total["tasks"] == 321 and total["twin_tasks"] == 90
    assert fb.make_corpus().fingerprint in (tables / "corpus.md").read_text()
    assert fb.load_corpus(data / "corpus_public.jsonl").fingerprint == fb.make_corpus().fingerprint


def test_01_headline(tmp_path):
    tables, figures, _ = _run("01_headline", tmp_path, figures_dir=str(tmp_path / "figures"),
                              cache_dir=str(tmp_path / "cache"), **SMALL["01_headline"])
    t2 = read_table(tables / "table2.csv").set_index("policy")
    assert list(t2.index) == list(fb.POLICIES)
    assert (t2.episodes == 30 * 2).all()
    assert t2.loc["finality_oracle", "exact_pct"] == 100.0 and t2.loc["finality_oracle", "mean_gap"] == 0.0
    assert (t2.exact_lo <= t2.exact_pct + 1e-9).all() and (t2.exact_pct <= t2.exact_hi + 1e-9).all()
    assert t2.loc["finality_gate", "diff_to_gate"] == 0.0
    # the gate is fault-invariant: its pass^k equals its exact rate at any size
    assert t2.loc["finality_gate", "pass2_pct"] == t2.loc["finality_gate", "exact_pct"]
    md = (tables / "table2.md").read_text()
    assert fb.make_corpus(n_tasks=30).fingerprint in md and "Claims of the paper" in md
    t3 = read_table(tables / "table3.csv").set_index("archetype")
    assert (t3["finality_oracle"] == 100.0).all()
    for stem in ("figure1", "figure1_passk"):
        assert (figures / f"{stem}.png").stat().st_size > 10_000
    # the same run again (episodes now cached) writes the same bytes
    first = {p.name: p.read_bytes() for p in list(tables.iterdir()) + list(figures.iterdir())}
    _run("01_headline", tmp_path, figures_dir=str(figures), cache_dir=str(tmp_path / "cache"), **SMALL["01_headline"])
    assert first == {p.name: p.read_bytes() for p in list(tables.iterdir()) + list(figures.iterdir())}


def test_08_effects(tmp_path):
    from finbench.grading import load_trace

    tables, _, data = _run("08_effects", tmp_path, cache_dir=str(tmp_path / "cache"), **SMALL["08_effects"])
    eff = read_table(tables / "effects.csv").set_index("policy")
    assert list(eff.index) == list(fb.POLICIES)
    assert (eff.episodes == 30 * 2).all()
    assert (eff["pass"] + eff.violation + eff.unscorable == eff.episodes).all()
    oracle = eff.loc["finality_oracle"]
    assert oracle.captured_twice_pct == 0 and oracle.zero_recoverable_pct == 0
    assert oracle.zero_lost_pct > 0  # the zero-effect caveat: capturing nothing is right there
    assert oracle.fail_exactly_one_effect_pct == pytest.approx(oracle.zero_lost_pct)
    assert eff.loc["random", "captured_twice_pct"] > 0
    md = (tables / "effects.md").read_text()
    assert fb.make_corpus(n_tasks=30).fingerprint in md
    assert "Captured twice" in md and "the oracle included" in md
    example = load_trace(data / "traces" / "episode_example.jsonl")
    assert sum(r.get("op") == "capture" and r.get("new_effect") is True for r in example) >= 2
    # the same run again (episodes now cached) writes the same bytes
    first = {p.name: p.read_bytes() for p in tables.iterdir()}
    _run("08_effects", tmp_path, cache_dir=str(tmp_path / "cache"), **SMALL["08_effects"])
    assert first == {p.name: p.read_bytes() for p in tables.iterdir()}


SMALL = {
    "00_corpus": {},
    "01_headline": {"n_tasks": 30, "n_seeds": 2, "n_boot": 50, "n_jobs": 1},
    "08_effects": {"n_tasks": 30, "n_seeds": 2, "n_jobs": 1},
}
