"""`verify` (issue 43, part 2): a sample of rows of every origin replayed alone with nothing reused; a
derivation broken on purpose is found, naming the row, its origin and the column."""
from __future__ import annotations

import pandas as pd
import pytest

import finbench as fb
from finbench.running import derivation as D
from finbench.running import evaluation as E
from finbench.running.verify import sample, verify

CORPUS = fb.make_corpus(n_tasks=30)


def _runs(tmp_path):
    """Runs whose rows hold every origin: played and both derivations, the disk cache, the memo, a cut of
    more seeds, and re-priced rows."""
    fb.clear_caches()
    base = fb.Run(CORPUS, seeds=(0, 1), cache=tmp_path)
    runs = [base, base.replace(profile=fb.FaultProfile.without("loss")), base.replace(seeds=(0,)),
            base.replace(costs=fb.Costs(dispute_fee=50.0)), base]
    out = [(r, r.evaluate()) for r in runs]
    fb.clear_caches()
    out.append((base, base.evaluate()))  # from the disk cache
    return out


def test_rows_of_every_origin_equal_their_replays(tmp_path):
    seen = set()
    for run, rows in _runs(tmp_path):
        seen |= set(rows["origin"])
        bad = verify(run, rows, per_origin=15)
        assert bad.empty, bad.to_string()
    assert seen == {"played", "derived_seed", "derived_reads", "cache", "memo", "cut", "repriced"}


def test_a_broken_derivation_is_named_by_row_origin_and_column(monkeypatch):
    real = D.derive_seed

    def broken(blind, task, seed, profile):  # the seed derivation forgets to move the firings
        row = real(blind, task, seed, profile)
        i = E.COLUMNS.index("fired_loss")
        return (*row[:i], row[i] + 1, *row[i + 1:])

    monkeypatch.setattr(D, "derive_seed", broken)
    fb.clear_caches()
    run = fb.Run(CORPUS, seeds=(0, 1), policies=["finality_gate", "sop"], cache=False)
    rows = run.evaluate()
    bad = verify(run, rows, per_origin=5)
    assert not bad.empty and set(bad["origin"]) == {"derived_seed"} and set(bad["column"]) == {"fired_loss"}
    first = bad.iloc[0]
    assert rows.iloc[first["row"]]["origin"] == "derived_seed" and first["row_value"] == first["replayed"] + 1


def test_the_sample_is_seeded_and_covers_each_origin():
    rows = pd.DataFrame({"origin": ["played"] * 50 + ["cache"] * 3 + ["repriced"] * 20})
    a, b = sample(rows, 10, 0), sample(rows, 10, 0)
    assert a == b and a != sample(rows, 10, 1) and a == sorted(a)
    assert [rows["origin"][i] for i in a].count("cache") == 3 and len(a) == 23


def test_rows_without_origin_are_checked_as_submitted_and_a_wrong_one_is_named():
    """Rows from a file that says no origin (a shared rows.csv of an older release): each sampled row is
    replayed all the same, as origin `submitted`."""
    run = fb.Run(CORPUS, seeds=(0,), policies=["sop"], cache=False)
    rows = run.evaluate().drop(columns="origin")
    assert verify(run, rows, per_origin=len(rows)).empty
    rows.loc[3, "gap"] += 1.0
    bad = verify(run, rows, per_origin=len(rows))
    assert bad[["row", "origin", "column"]].values.tolist() == [[3, "submitted", "gap"]]


def test_ten_rows_of_each_origin_are_replayed_by_default(monkeypatch):
    import finbench.running.verify as V

    run = fb.Run(CORPUS, seeds=(0,), policies=["sop"], cache=False)
    rows = run.evaluate()
    assert len(rows) == 30 and set(rows["origin"]) == {"played"}
    replays = []
    real = V.episode_row
    monkeypatch.setattr(V, "episode_row", lambda *a: replays.append(a) or real(*a))
    assert verify(run, rows).empty
    assert len(replays) == 10


def test_rows_without_origin_are_read_by_position_whatever_their_index():
    """A frame indexed by a column it also holds (`set_index("task_id", drop=False)`) is verified as it is."""
    run = fb.Run(CORPUS, seeds=(0,), policies=["sop"], cache=False)
    rows = run.evaluate().drop(columns="origin").set_index("task_id", drop=False)
    rows.iloc[3, rows.columns.get_loc("gap")] += 1.0
    bad = verify(run, rows, per_origin=len(rows))
    assert bad[["row", "origin", "column"]].values.tolist() == [[3, "submitted", "gap"]]


def test_the_command_covers_every_origin_and_exits_0(capsys):
    from finbench.cli import main

    fb.clear_caches()  # as the command starts in its own process: an earlier test's memo would serve a cut as a memo
    assert main(["verify", "--n-tasks", "30", "--seeds", "2", "--per-origin", "4"]) == 0
    out = capsys.readouterr().out
    for origin in ("played", "derived_seed", "derived_reads", "cut", "repriced", "memo", "cache"):
        assert f"{origin} " in out, origin
    assert out.strip().endswith("every replayed row equals its row")


def test_the_command_exits_1_naming_a_broken_derivation(monkeypatch, capsys):
    from finbench.cli import main

    real = D.same_reads

    def broken(*args):  # a same-reads derivation that loses the partial-commit firings
        row = real(*args)
        if row is None:
            return None
        i = E.COLUMNS.index("fired_partial_commit")
        return (*row[:i], row[i] + 7, *row[i + 1:])

    monkeypatch.setattr(D, "same_reads", broken)
    assert main(["verify", "--n-tasks", "30", "--seeds", "2", "--per-origin", "4"]) == 1
    err = capsys.readouterr().err
    assert "(derived_reads, " in err and ": fired_partial_commit is " in err


def test_rows_read_back_from_a_csv_without_origin_are_compared_as_written():
    """A shared rows.csv: its empty cells read back as missing and its numbers as written; compared as
    such, every row equals its replay."""
    import io

    run = fb.Run(fb.make_corpus(n_tasks=6), seeds=(0,), policies=["sop"], cache=False)
    rows = pd.read_csv(io.StringIO(run.evaluate().drop(columns="origin").to_csv(index=False)))
    assert rows["call_errors"].isna().any()  # an empty text, read back as missing
    assert verify(run, rows, per_origin=3).empty


def test_the_rows_replayed_are_the_seeded_sample(monkeypatch):
    import finbench.running.verify as V

    run = fb.Run(fb.make_corpus(n_tasks=12), seeds=(0,), policies=["sop"], cache=False)
    rows = run.evaluate()
    replayed = []
    real = V.episode_row
    monkeypatch.setattr(V, "episode_row", lambda task, *a: replayed.append(task.task_id) or real(task, *a))
    assert verify(run, rows, per_origin=4, seed=3).empty
    assert replayed == [rows["task_id"][i] for i in sample(rows, 4, 3)]


def test_verify_runs_replays_ten_rows_of_each_origin_of_each_run_under_seeds_0_1_and_so_on(monkeypatch, tmp_path):
    import finbench.running.verify as V

    small = fb.Run(fb.make_corpus(n_tasks=3), seeds=(0,), policies=["sop"])
    monkeypatch.setattr(V, "notebook_runs", lambda n_tasks, seeds: [("a", small), ("b", small)])
    asked = []
    monkeypatch.setattr(V, "verify", lambda run, rows, per_origin, seed: asked.append((per_origin, seed))
                        or pd.DataFrame(columns=["row"]))
    lines = []
    V.verify_runs(tmp_path, out=lines.append)
    assert asked == [(10, 0), (10, 1)] and len(lines) == 2
