"""Every notebook runs headless through papermill at a small size, writes what it must, and rewrites it
byte for byte; what it writes is then checked by content. One episode cache serves the whole session."""
from pathlib import Path

import pandas as pd
import papermill
import pytest

import finbench as fb
from finbench.pipeline import notebooks, run_notebook
from finbench.reporting import read_table

ROOT = Path(__file__).resolve().parent.parent
SMALL_RUN = {"n_tasks": 30, "n_seeds": 2, "n_boot": 50, "n_jobs": 1}

# notebook -> (small parameters, files it must write under its output folders)
NOTEBOOKS = {
    "00_corpus": ({}, ["tables/corpus.csv", "tables/corpus.md", "data/corpus_public.jsonl",
                       "data/corpus_regen.jsonl"]),
    "01_headline": (SMALL_RUN, ["tables/table2.csv", "tables/table2.md", "tables/table3.csv", "tables/table3.md",
                                "tables/table3_gap.csv", "tables/claims_headline.csv", "tables/claims_headline.md",
                                "figures/figure1.png", "figures/figure1.pdf", "figures/figure1_passk.png",
                                "figures/figure1_passk.pdf"]),
    "08_effects": ({k: v for k, v in SMALL_RUN.items() if k != "n_boot"}, ["tables/effects.csv", "tables/effects.md", "data/traces/episode_example.jsonl"]),
}


def test_every_notebook_is_covered():
    assert {p.stem for p in notebooks()} == set(NOTEBOOKS), "add the notebook to NOTEBOOKS"


def _execute(stem: str, out: Path, cache: Path) -> Path:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    declared = set(papermill.inspect_notebook(str(path)))
    params = {**NOTEBOOKS[stem][0], "tables_dir": str(out / "tables"), "figures_dir": str(out / "figures"),
              "data_dir": str(out / "data"), "cache_dir": str(cache)}
    unknown = set(NOTEBOOKS[stem][0]) - declared
    assert not unknown, f"{stem} has no parameter(s) {unknown}"
    run_notebook(path, {k: v for k, v in params.items() if k in declared}, out_dir=out / "nb")
    return out


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """stem -> the folder its first execution wrote into (each notebook runs once per session here)."""
    cache = tmp_path_factory.mktemp("episode-cache")
    done: dict[str, Path] = {}

    def get(stem: str) -> Path:
        if stem not in done:
            done[stem] = _execute(stem, tmp_path_factory.mktemp(stem), cache)
        return done[stem]

    get.cache = cache
    return get


def _written(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.parts[len(folder.parts)] in ("tables", "figures", "data")}


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_notebook_writes_its_files_and_rewrites_them_identically(stem, executed, tmp_path):
    first = executed(stem)
    files = _written(first)
    for rel in NOTEBOOKS[stem][1]:
        assert rel in files, f"{stem} did not write {rel}"
        assert len(files[rel]) > 200, f"{stem} wrote a near-empty {rel}"
        if rel.endswith((".csv", ".md")) and rel.startswith("tables/"):
            assert fb.make_corpus(n_tasks=NOTEBOOKS[stem][0].get("n_tasks", 321)).fingerprint.encode() in files[rel]
    again = _execute(stem, tmp_path, executed.cache)  # episodes now cached: the same bytes
    assert _written(again) == files


def test_00_corpus_matches_the_committed_table(executed):
    out = executed("00_corpus")
    # full size is cheap: the table must regenerate to the committed bytes
    for name in ("corpus.md", "corpus.csv"):
        assert (out / "tables" / name).read_bytes() == (ROOT / "tables" / name).read_bytes()
    total = read_table(out / "tables" / "corpus.csv").set_index("archetype").loc["total"]
    assert total["tasks"] == 321 and total["twin_tasks"] == 90
    assert fb.load_corpus(out / "data" / "corpus_public.jsonl").fingerprint == fb.make_corpus().fingerprint


def test_01_headline_content(executed):
    out = executed("01_headline")
    t2 = read_table(out / "tables" / "table2.csv").set_index("policy")
    assert list(t2.index) == list(fb.POLICIES)
    assert (t2.episodes == 30 * 2).all()
    assert t2.loc["finality_oracle", "exact_pct"] == 100.0 and t2.loc["finality_oracle", "mean_gap"] == 0.0
    assert (t2.exact_lo <= t2.exact_pct + 1e-9).all() and (t2.exact_pct <= t2.exact_hi + 1e-9).all()
    assert t2.loc["finality_gate", "diff_to_gate"] == 0.0
    # the gate is fault-invariant: its pass^k equals its exact rate at any size
    assert t2.loc["finality_gate", "pass2_pct"] == t2.loc["finality_gate", "exact_pct"]
    assert "Claims of the paper" in (out / "tables" / "table2.md").read_text()
    t3 = read_table(out / "tables" / "table3.csv").set_index("archetype")
    assert (t3["finality_oracle"] == 100.0).all()
    claims = read_table(out / "tables" / "claims_headline.csv")
    assert claims.id.is_unique and set(claims.verdict) <= {"reproduced", "same direction", "differs", "not run"}
    gate_exact = claims.set_index("id").loc["gate_exact", "ours"]
    assert gate_exact == pytest.approx(t2.loc["finality_gate", "exact_pct"])  # ours comes from the table


def test_08_effects_content(executed):
    from finbench.grading import load_trace

    out = executed("08_effects")
    eff = read_table(out / "tables" / "effects.csv").set_index("policy")
    assert list(eff.index) == list(fb.POLICIES)
    assert (eff.episodes == 30 * 2).all()
    assert (eff["pass"] + eff.violation + eff.unscorable == eff.episodes).all()
    oracle = eff.loc["finality_oracle"]
    assert oracle.captured_twice_pct == 0 and oracle.zero_recoverable_pct == 0
    assert oracle.zero_lost_pct > 0  # the zero-effect caveat: capturing nothing is right there
    assert oracle.fail_exactly_one_effect_pct == pytest.approx(oracle.zero_lost_pct)
    assert eff.loc["random", "captured_twice_pct"] > 0
    md = (out / "tables" / "effects.md").read_text()
    assert "Captured twice" in md and "the oracle included" in md
    example = load_trace(out / "data" / "traces" / "episode_example.jsonl")
    assert sum(r.get("op") == "capture" and r.get("new_effect") is True for r in example) >= 2


def test_notebooks_share_one_session_cache(executed):
    executed("01_headline"), executed("08_effects")
    files = list(executed.cache.rglob("*.json"))
    assert files and {f.parent.name for f in files} == set(fb.POLICIES)
    assert len(files) == 2 * len(fb.POLICIES)  # 30 tasks = 2 chunks per policy, written once, shared
