"""Shared results a hostile or careless hand edited, and the commands' other doors (issue 44): each refused
with one line naming the file and what is wrong (exit 64), never a wrong number or an internal error."""
from __future__ import annotations

import io
import json
import shutil
import sys

import pytest

from finbench.errors import FinbenchError
from finbench.sharing.compare import compare
from finbench.sharing.leaderboard import leaderboard
from finbench.sharing.submitted import read_submitted
from tests.sharing.conftest import run

# on one worker: the cards these modules read are made once (each costs seconds), not on both
pytestmark = pytest.mark.xdist_group("sharing_cards")


def _edited(card, to, edit_rows=None, edit_card=None):
    shutil.copytree(card, to)
    if edit_rows is not None:
        lines = (to / "rows.csv").read_text().splitlines(keepends=True)
        (to / "rows.csv").write_text("".join(edit_rows(lines)))
    if edit_card is not None:
        doc = json.loads((to / "card.json").read_text())
        edit_card(doc)
        (to / "card.json").write_text(json.dumps(doc))
    return to


def _cell(lines, column, value, row=0):
    """The rows.csv lines with `column` of data row `row` set to `value` (the stamp lines kept)."""
    top = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    head = lines[top].rstrip("\n").split(",")
    i = top + 1 + row
    cells = lines[i].rstrip("\n").split(",")
    assert len(cells) == len(head)  # no quoted comma in the row this test edits
    cells[head.index(column)] = value
    return [*lines[:i], ",".join(cells) + "\n", *lines[i + 1:]]


@pytest.mark.parametrize("edit, why", [
    (lambda ls: _cell(ls, "gap", ""), "gap is empty, not a number"),
    (lambda ls: _cell(ls, "gap", "abc"), "gap is 'abc', not a number"),
    (lambda ls: _cell(ls, "exact", "yes"), "exact holds 'yes', not True or False"),
    (lambda ls: _cell(ls, "verdict", "banana"), "a verdict is 'banana'"),
    (lambda ls: [*ls, ls[-1]], "is there twice"),
    (lambda ls: ls[:-3], "not every one of the stamp's 16 tasks x 2 seeds"),
    (lambda ls: _cell(ls, "seed", "7"), "the rows' seeds (0,1,7) are not their stamp's (0,1)"),
], ids=["blank-gap", "text-gap", "exact-yes", "verdict", "duplicate", "missing-episodes", "other-seed"])
def test_rows_that_would_be_misread_are_refused(cards, tmp_path, edit, why):
    bad = _edited(cards["v2"], tmp_path / "bad", edit_rows=edit)
    with pytest.raises(FinbenchError, match="rows.csv: .*" + why.replace("(", r"\(").replace(")", r"\)")):
        read_submitted(bad)
    code, _, err = run("compare", cards["v1"], bad, "--out", tmp_path / "out")
    assert code == 64 and why in err and "internal error" not in err and not (tmp_path / "out").exists()


def test_a_card_json_that_is_not_its_rows_card_is_refused(cards, tmp_path):
    fake = _edited(cards["v2"], tmp_path / "fake", edit_card=lambda d: next(
        e for e in d["table2"] if e["policy"] == d["agent"]).update(mean_gap=1.0, exact_pct=99.0))
    code, _, err = run("leaderboard", cards["v1"], fake, "--out", tmp_path / "out")
    assert code == 64 and "the card is not its rows'" in err
    nine = _edited(cards["v2"], tmp_path / "nine", edit_card=lambda d: d.update(agent="finality_gate"),
                   edit_rows=lambda ls: [line.replace(",mine,", ",finality_gate,") for line in ls])
    with pytest.raises(FinbenchError, match="one of the nine"):
        read_submitted(nine)
    bare = _edited(cards["v2"], tmp_path / "bare", edit_card=lambda d: d.pop("table2"))
    with pytest.raises(FinbenchError, match="card.json lacks table2"):
        read_submitted(bare)


def test_the_same_result_twice_is_refused(cards, tmp_path):
    code, _, err = run("compare", cards["v1"], cards["v1"] / "card.json", "--out", tmp_path)
    assert code == 64 and "given twice" in err
    subs = read_submitted(cards["v1"])
    with pytest.raises(FinbenchError, match="given twice"):
        leaderboard(subs * 3)


@pytest.mark.parametrize("given", ["build/eval/v1", None, 3, "x"], ids=["a-path", "none", "int", "a-str"])
def test_the_python_doors_refuse_what_is_not_a_list_of_results(given):
    with pytest.raises(FinbenchError, match="results must be"):
        compare(given)
    with pytest.raises(FinbenchError, match="results must be"):
        leaderboard([given])


def test_compare_md_writes_a_name_as_text(cards, tmp_path):
    code, _, err = run("compare", cards["v1"], cards["markup"], "--out", tmp_path / "out")
    assert code == 0, err
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "<script>" not in md and r"\<script\>" in md


def test_verify_without_a_card_refuses_agent_and_reads_a_card_json(cards, agents_file):
    code, _, err = run("verify", "--agent", f"{agents_file}:V2")
    assert code == 64 and "--agent goes with --card" in err and "internal error" not in err
    code, printed, err = run("verify", "--card", cards["v2"] / "card.json", "--agent", f"{agents_file}:V2",
                             "--per-origin", 3)
    assert code == 0 and "every replayed row equals its row" in printed, err


def test_a_card_of_chosen_tasks_replays(tmp_path, agents_file):
    out = tmp_path / "ids"
    code, _, err = run("eval", f"{agents_file}:V1", "--task-ids", "ord-0007,ord-0014", "--seeds", 1, "--no-cache",
                       "--out", out)
    assert code == 0, err
    code, printed, err = run("verify", "--card", out, "--agent", f"{agents_file}:V1")
    assert code == 0 and "every replayed row equals its row" in printed, err


class _PipeGone(io.TextIOWrapper):
    """A stdout whose reader has left (`| head`): every write raises BrokenPipeError."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_that_leaves_stops_the_command_quietly(cards, tmp_path, monkeypatch):
    sink = open(tmp_path / "sink", "w+b")
    monkeypatch.setattr(sys, "stdout", _PipeGone(sink))
    code, err = None, io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    from finbench.cli import main

    code = main(["leaderboard", str(cards["v1"]), str(cards["v2"]), "--out", str(tmp_path / "lb")])
    assert code == 141 and "internal error" not in err.getvalue()


def test_an_unwritable_default_folder_is_refused(cards, monkeypatch):
    monkeypatch.chdir("/proc")
    code, _, err = run("compare", cards["v1"], cards["v2"])
    assert code == 64 and "give --out DIR" in err and "internal error" not in err


def test_a_card_without_twin_pairs_leaves_no_earlier_timeline_behind(tmp_path, agents_file):
    out = tmp_path / "card"
    out.mkdir()
    for suffix in ("png", "pdf"):
        (out / f"worst_twin_pair.{suffix}").write_bytes(b"an earlier card's")
    code, _, err = run("eval", f"{agents_file}:V1", "--task-ids", "ord-0007", "--seeds", 1, "--no-cache", "--out", out)
    assert code == 0, err
    assert not list(out.glob("worst_twin_pair.*")) and (out / "report.html").is_file()
