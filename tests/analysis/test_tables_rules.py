"""The rules of `finbench.analysis.tables`, one by one, on small hand-made frames and corpora.

- `corpus_table`: one row per archetype present, in `C.ARCHETYPES` order (absent ones left out), then a
  "total" row; columns archetype, tasks, twin_tasks, settle, fail, value_min, value_max, value_mean (rounded
  to 2 places), determined_min, determined_max; rows numbered 0.. through the total. The total row counts all tasks, sums the counts, takes the
  extremes, and averages the order value over all tasks (not over the per-archetype means).
- `corpus_meta`: exactly corpus, master_seed, tasks, units, twin_pairs, engine, the caller's parameters,
  then made_by = "finbench.analysis.tables.corpus_table", in that order.
- `write_table`: `<stem>.csv` is one "# key: value" comment line per metadata entry (a line break inside a
  value folded into a space) followed by the data without the index, floats at "%.10g"; `<stem>.md` is
  "# <title, default the stem>", a blank line, "- key: value" lines, a blank line, the table (the `markdown`
  frame if given, else df; no index; `floatfmt`, default ".2f"), a line break, then the notes (after a blank
  line) if any. The directory is made (with parents, fine if it exists; default "tables"), [csv, md] returned.
- `read_table`: reads such a CSV back, the comment lines skipped.

Expected values are written by hand, or (for the 12-task corpus) computed here by looping over its tasks."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis.tables import corpus_meta, corpus_table, read_table, write_table
from finbench.sim import constants as C

COLUMNS = ["archetype", "tasks", "twin_tasks", "settle", "fail", "value_min", "value_max", "value_mean",
           "determined_min", "determined_max"]


@pytest.fixture(scope="module")
def corpus12():
    return fb.make_corpus(n_tasks=12)


@pytest.fixture(scope="module")
def hand_corpus():
    """Six tasks in an order unlike `C.ARCHETYPES`, five archetypes absent, no twins."""
    mk = fb.make_task
    return fb.Corpus((
        mk("late_chargeback", seed=4, order_value=100.0, determined_at=200),
        mk("unresolvable", seed=6, order_value=3.0, determined_at=700, outcome="failed"),
        mk("pending_fail", seed=5, order_value=0.5, determined_at=300),
        mk("settled_clean", seed=1, order_value=10.0, determined_at=30),
        mk("settled_clean", seed=2, order_value=10.01, determined_at=110),
        mk("settled_clean", seed=3, order_value=10.0, determined_at=50),
    ))


def records(df: pd.DataFrame) -> list[dict]:
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in df.to_dict("records")]


# --------------------------------------------------------------------------- corpus_table

def test_corpus_table_hand_corpus_every_cell(hand_corpus):
    t = corpus_table(hand_corpus)
    assert list(t.columns) == COLUMNS
    assert records(t) == [
        # 30.01 / 3 = 10.00333.. -> 10.0 at two places
        {"archetype": "settled_clean", "tasks": 3, "twin_tasks": 0, "settle": 3, "fail": 0, "value_min": 10.0,
         "value_max": 10.01, "value_mean": 10.0, "determined_min": 30, "determined_max": 110},
        {"archetype": "pending_fail", "tasks": 1, "twin_tasks": 0, "settle": 0, "fail": 1, "value_min": 0.5,
         "value_max": 0.5, "value_mean": 0.5, "determined_min": 300, "determined_max": 300},
        {"archetype": "unresolvable", "tasks": 1, "twin_tasks": 0, "settle": 0, "fail": 1, "value_min": 3.0,
         "value_max": 3.0, "value_mean": 3.0, "determined_min": 700, "determined_max": 700},
        {"archetype": "late_chargeback", "tasks": 1, "twin_tasks": 0, "settle": 1, "fail": 0, "value_min": 100.0,
         "value_max": 100.0, "value_mean": 100.0, "determined_min": 200, "determined_max": 200},
        # 133.51 / 6 = 22.2516.. -> 22.25 (the mean of the four archetype means would be 28.375)
        {"archetype": "total", "tasks": 6, "twin_tasks": 0, "settle": 4, "fail": 2, "value_min": 0.5,
         "value_max": 100.0, "value_mean": 22.25, "determined_min": 30, "determined_max": 700},
    ]


def test_corpus_table_rows_follow_archetype_order_and_skip_absent(hand_corpus):
    t = corpus_table(hand_corpus)
    assert list(t.archetype) == ["settled_clean", "pending_fail", "unresolvable", "late_chargeback", "total"]
    assert list(t.index) == [0, 1, 2, 3, 4]  # the total row numbered on, not restarting at 0


def test_corpus_table_value_mean_rounded_to_two_places(hand_corpus):
    t = corpus_table(hand_corpus).set_index("archetype")
    assert t.loc["settled_clean", "value_mean"] == 10.0  # not 10.003
    assert t.loc["total", "value_mean"] == 22.25  # not 22.252, not 22


def _expected_row(name, ts):
    values = [t.order_value for t in ts]
    times = [t.determined_at for t in ts]
    return {"archetype": name, "tasks": len(ts), "twin_tasks": len([t for t in ts if t.twin_id is not None]),
            "settle": len([t for t in ts if t.outcome == "settled"]),
            "fail": len([t for t in ts if t.outcome == "failed"]),
            "value_min": min(values), "value_max": max(values), "value_mean": math.fsum(values) / len(values),
            "determined_min": min(times), "determined_max": max(times)}


def _check_row(got: dict, want: dict):
    assert list(got) == COLUMNS
    for k in COLUMNS:
        if k == "value_mean":
            assert got[k] == pytest.approx(want[k], abs=0.005 + 1e-9), k
            assert round(got[k], 2) == got[k], k  # two places at most
        else:
            assert got[k] == want[k], k


def test_corpus_table_per_archetype_rows_of_a_made_corpus(corpus12):
    tasks = list(corpus12.tasks)
    present = [a for a in C.ARCHETYPES if any(t.archetype == a for t in tasks)]
    t = corpus_table(corpus12)
    got = records(t)
    assert [r["archetype"] for r in got] == present + ["total"]
    assert len(present) >= 2
    for row, a in zip(got[:-1], present):
        _check_row(row, _expected_row(a, [x for x in tasks if x.archetype == a]))


def test_corpus_table_total_row_of_a_made_corpus(corpus12):
    tasks = list(corpus12.tasks)
    twins = [t for t in tasks if t.twin_id is not None]
    assert twins, "the corpus must hold a twin pair for this test to mean anything"
    total = records(corpus_table(corpus12))[-1]
    _check_row(total, _expected_row("total", tasks))
    assert total["twin_tasks"] == len(twins)
    assert total["settle"] + total["fail"] == len(tasks) == 12


def test_corpus_table_twin_halves_counted_under_their_archetypes(corpus12):
    twins = [t for t in corpus12.tasks if t.twin_id is not None]
    assert twins
    t = corpus_table(corpus12).set_index("archetype")
    for a in {x.archetype for x in twins}:
        assert t.loc[a, "twin_tasks"] == len([x for x in twins if x.archetype == a])


# --------------------------------------------------------------------------- corpus_meta

def test_corpus_meta_exact_keys_values_and_order(corpus12):
    tasks = list(corpus12.tasks)
    meta = corpus_meta(corpus12, policy="finality_gate", k=5)
    assert list(meta.items()) == [
        ("corpus", corpus12.fingerprint),
        ("master_seed", C.PUBLIC_SEED),
        ("tasks", 12),
        ("units", len({t.unit for t in tasks})),
        ("twin_pairs", len({t.twin_id for t in tasks if t.twin_id is not None})),
        ("engine", C.ENGINE_VERSION),
        ("policy", "finality_gate"),
        ("k", 5),
        ("made_by", "finbench.analysis.tables.corpus_table"),
    ]
    assert meta["twin_pairs"] >= 1 and meta["units"] < 12  # twins share a unit


def test_corpus_meta_without_params(hand_corpus):
    assert corpus_meta(hand_corpus) == {
        "corpus": hand_corpus.fingerprint, "master_seed": None, "tasks": 6, "units": 6, "twin_pairs": 0,
        "engine": C.ENGINE_VERSION, "made_by": "finbench.analysis.tables.corpus_table"}


# --------------------------------------------------------------------------- write_table / read_table

FRAME = pd.DataFrame({"name": ["a", "b", "c"], "n": [1, 2, 3], "x": [1 / 3, 1.5e-12, math.inf]})
META = {"corpus": "abc123", "note": "first line\nsecond line", "seed": 7}
STAMP_CSV = "# corpus: abc123\n# note: first line second line\n# seed: 7\n"
STAMP_MD = "- corpus: abc123\n- note: first line second line\n- seed: 7\n"
TABLE_2F = ("| name   |   n |      x |\n"
            "|:-------|----:|-------:|\n"
            "| a      |   1 |   0.33 |\n"
            "| b      |   2 |   0.00 |\n"
            "| c      |   3 | inf    |")


def test_write_table_csv_exact(tmp_path):
    write_table(FRAME, "tbl", META, tmp_path)
    assert (tmp_path / "tbl.csv").read_text() == STAMP_CSV + "name,n,x\na,1,0.3333333333\nb,2,1.5e-12\nc,3,inf\n"


def test_write_table_markdown_exact_with_stem_as_title(tmp_path):
    write_table(FRAME, "tbl", META, tmp_path)
    assert (tmp_path / "tbl.md").read_text() == "# tbl\n\n" + STAMP_MD + "\n" + TABLE_2F + "\n"


def test_write_table_title_and_floatfmt(tmp_path):
    write_table(FRAME, "tbl", {"corpus": "c"}, tmp_path, title="Table 9: mix", floatfmt=".4f")
    assert (tmp_path / "tbl.md").read_text() == (
        "# Table 9: mix\n\n- corpus: c\n\n"
        "| name   |   n |        x |\n"
        "|:-------|----:|---------:|\n"
        "| a      |   1 |   0.3333 |\n"
        "| b      |   2 |   0.0000 |\n"
        "| c      |   3 | inf      |\n")


def test_write_table_notes_after_a_blank_line(tmp_path):
    write_table(FRAME, "tbl", META, tmp_path, notes=["Note one.", "Note two."])
    assert (tmp_path / "tbl.md").read_text() == (
        "# tbl\n\n" + STAMP_MD + "\n" + TABLE_2F + "\n\nNote one.\nNote two.\n")


def test_write_table_empty_notes_add_nothing(tmp_path):
    write_table(FRAME, "tbl", META, tmp_path, notes=[])
    assert (tmp_path / "tbl.md").read_text() == "# tbl\n\n" + STAMP_MD + "\n" + TABLE_2F + "\n"


def test_write_table_markdown_frame_shown_instead_of_df(tmp_path):
    write_table(FRAME, "tbl", {"corpus": "c"}, tmp_path, markdown=pd.DataFrame({"shown": ["yes"]}))
    assert (tmp_path / "tbl.md").read_text() == "# tbl\n\n- corpus: c\n\n| shown   |\n|:--------|\n| yes     |\n"
    # the CSV still holds df
    assert (tmp_path / "tbl.csv").read_text() == "# corpus: c\nname,n,x\na,1,0.3333333333\nb,2,1.5e-12\nc,3,inf\n"


def test_write_table_folds_every_line_break_of_a_stamp(tmp_path):
    write_table(pd.DataFrame({"v": [1]}), "t", {"k": "a\r\nb\nc", "two\nlines": 1}, tmp_path)
    assert (tmp_path / "t.csv").read_text() == "# k: a b c\n# two lines: 1\nv\n1\n"
    assert (tmp_path / "t.md").read_text().startswith("# t\n\n- k: a b c\n- two lines: 1\n\n")


def test_write_table_floats_at_ten_significant_digits(tmp_path):
    df = pd.DataFrame({"x": [0.1 + 0.2, 12345678901.0, 2.5, 1e-20]})
    write_table(df, "f", {}, tmp_path)
    assert (tmp_path / "f.csv").read_text() == "x\n0.3\n1.23456789e+10\n2.5\n1e-20\n"


def test_write_table_index_not_written(tmp_path):
    df = pd.DataFrame({"v": [1.5, 2.5]}, index=["r1", "r2"])
    write_table(df, "i", {}, tmp_path)
    assert (tmp_path / "i.csv").read_text() == "v\n1.5\n2.5\n"
    assert (tmp_path / "i.md").read_text() == "# i\n\n\n|    v |\n|-----:|\n| 1.50 |\n| 2.50 |\n"


def test_write_table_returns_paths_and_makes_nested_dir(tmp_path):
    out = tmp_path / "a" / "b"
    paths = write_table(FRAME, "tbl", META, str(out))
    assert paths == [out / "tbl.csv", out / "tbl.md"]
    assert all(p.is_file() for p in paths)
    # again into the existing directory: overwritten, no error
    write_table(FRAME.head(1), "tbl", {"corpus": "c"}, out)
    assert (out / "tbl.csv").read_text() == "# corpus: c\nname,n,x\na,1,0.3333333333\n"


def test_write_table_default_dir_is_tables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = write_table(FRAME, "tbl", META)
    assert [p.resolve() for p in paths] == [tmp_path / "tables" / "tbl.csv", tmp_path / "tables" / "tbl.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tables"]


def test_read_table_skips_the_stamp(tmp_path):
    write_table(FRAME, "tbl", META, tmp_path)
    back = read_table(tmp_path / "tbl.csv")
    assert list(back.columns) == ["name", "n", "x"]
    assert back.name.tolist() == ["a", "b", "c"] and back.n.tolist() == [1, 2, 3]
    assert back.x.tolist() == [0.3333333333, 1.5e-12, math.inf]
    assert read_table(str(tmp_path / "tbl.csv")).equals(back)


def test_read_table_keeps_a_cell_that_holds_a_hash(tmp_path):
    """Only the leading `# key: value` lines are the stamp: a `#` inside a cell is data."""
    df = pd.DataFrame({"label": ["order #3", "x"], "n": [1, 2]})
    write_table(df, "t", {"corpus": "c", "note": "a # in the stamp"}, tmp_path)
    back = read_table(tmp_path / "t.csv")
    pd.testing.assert_frame_equal(back, df)


def test_corpus_table_of_an_empty_corpus_is_refused_clearly():
    from finbench.errors import FinbenchError
    with pytest.raises(FinbenchError, match="corpus_table: corpus must be a corpus with at least one task"):
        corpus_table(fb.Corpus(()))
