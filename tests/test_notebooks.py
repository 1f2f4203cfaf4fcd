"""Every notebook runs headless through papermill at a small size; the tables it writes are checked."""
from pathlib import Path

import pandas as pd
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


SMALL = {
    "00_corpus": {},
}
