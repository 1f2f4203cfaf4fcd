"""Every notebook runs headless through papermill at a small size, writes what it must, and rewrites it
byte for byte; what it writes is then checked by content. One episode cache serves the whole session."""
from pathlib import Path

import pandas as pd
import pytest

import finbench as fb
from finbench.pipeline import notebooks, run_notebook
from finbench.analysis.tables import read_table

# tests marked slow execute notebooks (make test-fast leaves them out)

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
    "02_twins": (SMALL_RUN, ["tables/table4.csv", "tables/table4.md", "tables/claims_twins.csv",
                             "tables/claims_twins.md", "figures/figure2.png", "figures/figure2.pdf",
                             "figures/timeline.png", "figures/timeline.pdf"]),
    "03_model_arm": ({"n_tasks": 30, "subset_size": 12}, ["tables/table5.csv", "tables/table5.md",
                                                         "tables/claims_model_arm.csv", "tables/claims_model_arm.md"]),
    "04_ablation": (SMALL_RUN, ["tables/table6.csv", "tables/table6.md", "tables/table6_firings.csv",
                                "tables/table6_families.csv", "tables/table6_families.md", "tables/interaction.csv",
                                "tables/interaction.md", "tables/claims_ablation.csv", "figures/figure3.png",
                                "figures/figure3.pdf"]),
    # the grid and splits of tests/experiments/test_tuning.py, which reads this execution's tables
    "05_tuning": ({**SMALL_RUN, "n_splits": 2, "poll_intervals": [5, 15, 30, 60, 120],
                   "patiences": [60, 180, 300, 420, 480]},
                  ["tables/table7.csv", "tables/table7.md", "tables/tuning_grid.csv", "tables/tuning_grid.md",
                   "tables/tuning_splits.csv", "tables/tuning_splits.md", "tables/claims_tuning.csv",
                   "tables/claims_tuning.md"]),
    "06_cost_sweep": ({k: v for k, v in SMALL_RUN.items() if k != "n_boot"},
                      ["tables/cost_sweep.csv", "tables/cost_sweep.md", "tables/claims_cost_sweep.csv",
                       "figures/cost_sweep.png", "figures/cost_sweep.pdf"]),
    "07_plan_search": ({"n_tasks": 30, "n_sample": 12, "n_jobs": 1},
                       ["tables/plan_search.csv", "tables/plan_search.md", "tables/claims_plan_search.csv",
                        "tables/claims_plan_search.md"]),
    "09_probe_arms": (SMALL_RUN, ["tables/table8.csv", "tables/table8.md", "tables/table8_differences.csv",
                                  "tables/table8_archetypes.csv", "tables/claims_probe_arms.csv",
                                  "tables/claims_probe_arms.md", "figures/table8.png", "figures/table8.pdf"]),
    "11_exploits": ({**SMALL_RUN, "n_regen": 1}, ["tables/exploits.csv", "tables/exploits.md",
                    "tables/exploits_breakeven.csv", "tables/exploits_breakeven.md", "tables/exploits_splits.csv",
                    "tables/exploits_splits.md", "tables/claims_exploits.csv", "tables/claims_exploits.md",
                    "figures/exploits.png", "figures/exploits.pdf"]),
    "10_splits": ({**SMALL_RUN, "n_splits": 3}, ["tables/splits.csv", "tables/splits.md", "tables/splits_claims.csv",
                  "tables/splits_claims.md", "tables/splits_corpora.csv", "tables/splits_corpora.md",
                  "tables/splits_verdicts.csv", "tables/splits_verdicts.md", "tables/claims_splits.csv",
                  "tables/claims_splits.md", "figures/splits.png", "figures/splits.pdf"]),
    "08_effects": ({k: v for k, v in SMALL_RUN.items() if k != "n_boot"}, ["tables/effects.csv", "tables/effects.md", "data/traces/episode_example.jsonl"]),
    # reads the committed tables (its default sources_dir), writes the report into the test's folder
    "99_claims": ({}, ["tables/claims.csv", "tables/claims.md", "figures/claims.png", "figures/claims.pdf"]),
    # the default selection (arm, probe, policy, archetype, verdict, pick) on the small corpus;
    # writes nothing under tables/, figures/ or data/
    "explore": ({"n_tasks": 30, "n_seeds": 2, "n_jobs": 1}, []),
}


# xdist groups (tests/conftest.py): a notebook's tests share its first execution, so they run together
# (tests/experiments/test_splits.py, test_tuning.py and test_model_arm.py read the executions of 10, 05 and
# 03 through the same session fixture, `executed` in tests/conftest.py, and mark their tests with these groups)
NOTEBOOK_GROUPS = {stem: f"notebook-{stem}" for stem in NOTEBOOKS}
NOTEBOOK_GROUPS.update({
    "test_00_corpus_matches_the_committed_table": "notebook-00_corpus",
    "test_01_headline_content": "notebook-01_headline", "test_notebooks_share_one_session_cache": "notebook-01_headline",
    "test_02_twins_content": "notebook-02_twins", "test_07_plan_search_content": "notebook-07_plan_search", "test_04_ablation_content": "notebook-04_ablation",
    "test_08_effects_content": "notebook-01_headline", "test_11_exploits_content": "notebook-11_exploits",
})
NOTEBOOK_GROUPS["08_effects"] = "notebook-01_headline"  # shares the session cache test with 01


def test_every_notebook_is_covered():
    assert {p.stem for p in notebooks()} == set(NOTEBOOKS), "add the notebook to NOTEBOOKS"


def _execute(stem: str, out: Path, cache: Path) -> Path:
    import papermill  # here: its import (nbformat's schemas) costs each test worker's collection seconds

    path = ROOT / "notebooks" / f"{stem}.ipynb"
    declared = set(papermill.inspect_notebook(str(path)))
    params = {**NOTEBOOKS[stem][0], "tables_dir": str(out / "tables"), "figures_dir": str(out / "figures"),
              "data_dir": str(out / "data"), "cache_dir": str(cache), "readme_path": str(out / "README.md")}
    if "readme_path" in declared:  # the claims report rewrites a copy of the README, never the repository's
        (out / "README.md").write_text((ROOT / "README.md").read_text(encoding="utf-8"), encoding="utf-8")
    unknown = set(NOTEBOOKS[stem][0]) - declared
    assert not unknown, f"{stem} has no parameter(s) {unknown}"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)  # no notebook asks a model here (03 shows its gate row alone)
        run_notebook(path, {k: v for k, v in params.items() if k in declared}, out_dir=out / "nb")
    return out


def _written(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.parts[len(folder.parts)] in ("tables", "figures", "data")}


@pytest.mark.slow
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


@pytest.mark.slow
def test_00_corpus_matches_the_committed_table(executed):
    out = executed("00_corpus")
    # full size is cheap: the table must regenerate to the committed bytes
    for name in ("corpus.md", "corpus.csv"):
        assert (out / "tables" / name).read_bytes() == (ROOT / "tables" / name).read_bytes()
    total = read_table(out / "tables" / "corpus.csv").set_index("archetype").loc["total"]
    assert total["tasks"] == 321 and total["twin_tasks"] == 90
    assert fb.load_corpus(out / "data" / "corpus_public.jsonl").fingerprint == fb.make_corpus().fingerprint


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_notebooks_share_one_session_cache(executed):
    executed("01_headline"), executed("08_effects")
    files = list(executed.cache.rglob("*.json"))
    assert set(fb.POLICIES) <= {f.parent.name for f in files}
    # the default-profile run of 01 and 08 is one set of files: 30 tasks at 2 seeds = 1 chunk per policy
    from finbench.running import cache as K
    from finbench.running.evaluation import chunk_tasks
    from finbench.running.run import Run

    run = Run.make(n_tasks=30, seeds=range(2))
    size = chunk_tasks(len(run.seeds))
    chunks = [[t.task_id for t in run.corpus.tasks[i:i + size]] for i in range(0, 30, size)]
    assert len(chunks) == 1
    for ref in run.policies:
        for ids in chunks:
            key = K.chunk_key(run.corpus.fingerprint, ids, ref.cache_id, run.seeds, run.profile, run.costs)
            assert K.chunk_path(executed.cache, ref.label, key).exists()


@pytest.mark.slow
def test_04_ablation_content(executed):
    out = executed("04_ablation")
    t6 = read_table(out / "tables" / "table6.csv")
    assert t6.arm.nunique() == 15 and (t6.episodes == 30 * 2).all()
    gate = t6[t6.policy == "finality_gate"]
    assert gate.mean_gap.nunique() == 1  # fault-invariant in every arm
    inter = read_table(out / "tables" / "interaction.csv").set_index("policy")
    assert "sop[fallback=refund]" in inter.index
    claims = read_table(out / "tables" / "claims_ablation.csv").set_index("id")
    assert claims.loc["sop_interaction", "ours"] == pytest.approx(inter.loc["sop", "interaction"])


@pytest.mark.slow
def test_02_twins_content(executed):
    out = executed("02_twins")
    t4 = read_table(out / "tables" / "table4.csv").set_index("policy")
    assert list(t4.index) == list(fb.POLICIES)
    assert (t4.n_pairs == len(fb.make_corpus(n_tasks=30).twin_pairs)).all()
    assert t4.loc["finality_oracle", "paired_loss"] == 0.0 and t4.loc["finality_gate", "premature_pct"] == 0.0
    md = (out / "tables" / "table4.md").read_text()
    assert f"disagree in {int(t4.rank_differs.sum())} of 9 places" in md and "Claims of the paper" in md
    claims = read_table(out / "tables" / "claims_twins.csv").set_index("id")
    assert claims.index.is_unique and set(claims.verdict) <= {"reproduced", "same direction", "differs", "not run"}
    assert claims.loc["optimistic_paired_loss", "ours"] == pytest.approx(t4.loc["optimistic", "paired_loss"])


@pytest.mark.slow
def test_07_plan_search_content(executed):
    out = executed("07_plan_search")
    t = read_table(out / "tables" / "plan_search.csv")
    assert len(t) == 12 and (t.plans == 1215).all()
    assert set(t.archetype) == {x.archetype for x in fb.make_corpus(n_tasks=30).tasks}
    assert set(t.archetype[t.beaten]) == {"late_chargeback"} and not t.double_charge.any()
    claims = read_table(out / "tables" / "claims_plan_search.csv").set_index("id")
    assert claims.loc["reference_beaten", "ours"] == t.beaten.sum()


@pytest.mark.slow
def test_11_exploits_content(executed):
    out = executed("11_exploits")
    t = read_table(out / "tables" / "exploits.csv")
    assert len(t) == 100 and t.plan.is_unique and (t.episodes == 30 * 2).all()
    assert list(t["rank"]) == list(range(1, 101))
    assert (t.diff_to_gate - (t.mean_gap - t.gate_mean_gap)).abs().max() < 1e-6
    be = read_table(out / "tables" / "exploits_breakeven.csv")
    assert be.plan.iloc[0] == "finality_gate" and (be.gap_fee_25 - be.mean_gap).abs().max() < 1e-6
    splits = read_table(out / "tables" / "exploits_splits.csv")
    assert list(splits.public) == [True, False] and list(splits.seeds) == [2, 1]
    claims = read_table(out / "tables" / "claims_exploits.csv").set_index("id")
    assert claims.index.is_unique and (claims.scope == "beyond the paper").all() and claims.loc["search_at_least_named", "holds"]
    assert "The issue's named exploits" in (out / "tables" / "exploits.md").read_text()
