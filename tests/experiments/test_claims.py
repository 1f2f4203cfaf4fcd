"""The claims report (issue 13): every claim's "ours" is recomputed from the files under tables/."""
import shutil
from pathlib import Path

import pandas as pd
import pytest

from finbench.experiments import claims as R
from finbench.analysis.tables import read_table

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "tables"


@pytest.fixture(scope="module")
def rows():
    return R.collect(TABLES)


def test_every_experiment_with_claims_is_in_the_report():
    assert set(R.modules()) == {*R.EXPERIMENTS, R.ACROSS}


def test_the_report_covers_the_papers_claims(rows):
    assert len(rows) >= 40
    assert not rows.duplicated(["experiment", "id"]).any()
    assert set(rows.verdict) <= {"reproduced", "same direction", "differs", "not run"}
    measured = rows[rows.verdict != "not run"]
    assert len(measured) > 40 and all((ROOT / s).is_file() for s in measured.source)
    assert all((ROOT / s).is_file() for s in rows.source if s)
    assert rows.scope.isin(["paper", "by construction", "beyond the paper"]).all() and (rows.scope == "paper").sum() >= 45
    # the headline's and the twins' claims carry their counts over the regenerated corpora
    across = rows[rows.corpora_n > 0]
    assert set(across.experiment) == {"headline", "twins", "ablation", "cost_sweep"}
    assert (across.corpora_holds <= across.corpora_direction).all() and (across.corpora_direction <= across.corpora_n).all()
    single = rows.loc[rows.corpora_n == 0, "corpora_verdict"]
    assert len(single) > 0
    assert (single == "").all()


def test_committed_claims_files_match_their_tables_and_the_report(rows):
    assert R.stale(TABLES) == []
    written = read_table(TABLES / "claims.csv")
    pd.testing.assert_frame_equal(written, R.as_written(rows), check_dtype=False)


def test_changing_a_table_changes_its_claim_rows(tmp_path, rows):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    text = (tables / "table2.csv").read_text()
    t2 = read_table(tables / "table2.csv")
    head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    t2.loc[t2.policy == "finality_gate", "exact_pct"] = 50.0
    (tables / "table2.csv").write_text(head + t2.to_csv(index=False, lineterminator="\n", float_format="%.10g"))
    changed = R.collect(tables).set_index(["experiment", "id"])
    before = rows.set_index(["experiment", "id"])
    assert before.loc[("headline", "gate_exact"), "verdict"] == "reproduced"
    assert changed.loc[("headline", "gate_exact"), "ours"] == 50.0
    assert changed.loc[("headline", "gate_exact"), "verdict"] == "differs"
    # a row that does not read that cell is unchanged, and the experiment's own claims file is now stale
    assert changed.loc[("twins", "gate_paired_loss"), "ours"] == before.loc[("twins", "gate_paired_loss"), "ours"]
    assert R.stale(tables) == [str(tables / "claims_headline.csv")]


def test_a_missing_table_is_named(tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    (tables / "table4.csv").unlink()
    with pytest.raises(FileNotFoundError, match="table4.csv"):
        R.collect(tables)


def test_counts_add_up(rows):
    c = R.counts(rows).set_index("section")  # the paper's own claims: the others are listed apart
    paper = rows[rows.scope == "paper"]
    assert 0 < len(paper) < len(rows)
    assert c.loc["all", "total"] == len(paper)
    assert c.drop("all")["total"].sum() == len(paper)
    assert list(c.index[:-1]) == list(dict.fromkeys(paper.section))
    s = R.summary(rows)
    assert s["paper"] + s["by construction"] + s["beyond the paper"] == len(rows)
    assert sum(s[v] for v in ("reproduced", "same direction", "differs", "not run")) == s["paper"]


def test_every_differing_claim_of_the_paper_is_explained_in_results(rows):
    """docs/RESULTS.md names the cause of each claim of the paper that differs (issue 31), by its id."""
    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    differing = rows[(rows.scope == "paper") & (rows.verdict == "differs")]
    missing = [f"{r.experiment}.{r.id}" for r in differing.itertuples() if f"`{r.experiment}.{r.id}`" not in text]
    assert not missing, missing
