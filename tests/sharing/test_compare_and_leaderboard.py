"""`finbench compare` and `finbench leaderboard` (issue 44, points 2 and 3), and `finbench verify --card`:
the paired difference of two versions of one agent equals the package's own bootstrap on `evaluate`'s rows;
results of different runs are refused, naming what differs; a leaderboard ranks cards by mean gap, the
oracle unranked, and never mixes engine versions or cards whose nine differ."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import finbench as fb
from finbench.agents.loading import policy_ref
from finbench.analysis import metrics as M
from finbench.errors import FinbenchError
from finbench.sharing.compare import compare
from finbench.sharing.leaderboard import leaderboard
from finbench.sharing.submitted import read_submitted
from tests.sharing.conftest import N_TASKS, SEEDS, run as _run

# on one worker: the cards these modules read are made once (each costs seconds), not on both
pytestmark = pytest.mark.xdist_group("sharing_cards")


def _subs(*paths):
    return [s for p in paths for s in read_submitted(p)]


def test_the_paired_difference_is_the_package_s_bootstrap_on_evaluate_s_rows(cards, agents_file):
    c = compare(_subs(cards["v1"], cards["v2"]))
    assert c.names == ["mine (v1)", "mine (v2)"] and c.episodes == N_TASKS * SEEDS
    # independently: both versions evaluated together, relabelled, through the package's own bootstrap
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    a, b = (policy_ref(f"{agents_file}:{v}") for v in ("V1", "V2"))
    rows = pd.concat([fb.evaluate(corpus, [ref], seeds=range(SEEDS), cache=False).assign(policy=label)
                      for ref, label in ((a, "a"), (b, "b"))], ignore_index=True)
    gap, exact = M.bootstrap_diff(rows, "a", "b", "gap"), M.bootstrap_diff(rows, "a", "b", "exact")
    p = c.pairs.iloc[0]
    assert (p["gap_diff"], p["gap_lo"], p["gap_hi"]) == pytest.approx(
        (gap["estimate"], gap["lo"], gap["hi"]), abs=1e-6)
    assert (p["exact_diff_pct"], p["exact_lo"], p["exact_hi"]) == pytest.approx(
        (100 * exact["estimate"], 100 * exact["lo"], 100 * exact["hi"]), abs=1e-9)
    assert p["gap_lo"] < p["gap_hi"] and p["gap_diff"] != 0  # the two versions do differ
    wide = rows.pivot_table(index=["task_id", "seed"], columns="policy", values="gap")
    assert p["a_better"] == int((wide["a"] < wide["b"] - 0.005).sum()) > 0
    assert p["b_better"] == int((wide["b"] < wide["a"] - 0.005).sum()) > 0
    per = c.archetypes.set_index("archetype")
    kind = rows["archetype"].iloc[0]
    one = M.bootstrap_diff(rows[rows["archetype"] == kind], "a", "b", "gap")
    assert per.loc[kind, "gap_diff"] == pytest.approx(one["estimate"], abs=1e-6)


def test_compare_writes_three_files_and_prints_each_pair(cards, tmp_path):
    code, printed, err = _run("compare", cards["v1"], cards["v2"] / "rows.csv", "--out", tmp_path)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html", "compare.json", "compare.md"]
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["pairs"][0]["a"] == "mine (v1)" and f"{doc['pairs'][0]['gap_diff']:+.2f}" in printed
    wins = doc["wins"][0]
    assert wins["a_wins"] and all("timeline_figure" in e["draw"] for e in wins["a_wins"] + wins["b_wins"])


def test_results_of_different_runs_are_refused_naming_what_differs(cards, tmp_path):
    with pytest.raises(FinbenchError, match=r"not comparable.*seeds \(mine \(v1\): '0,1'; mine \(v2_one_seed\): '0'\)"):
        compare(_subs(cards["v1"], cards["v2_one_seed"]))
    code, _, err = _run("compare", cards["v1"], cards["v2_one_seed"], "--out", tmp_path / "x")
    assert code == 64 and "not comparable" in err and "seeds" in err
    assert not (tmp_path / "x").exists()
    with pytest.raises(FinbenchError, match="at least two"):
        compare(_subs(cards["v1"]))


def _other_engine(card, to):
    shutil.copytree(card, to)
    rows = (to / "rows.csv").read_text().replace("# engine: ", "# engine: 0")
    (to / "rows.csv").write_text(rows)
    return to


def test_a_leaderboard_ranks_cards_by_mean_gap_beside_the_nine(cards, tmp_path):
    board = leaderboard(_subs(cards["v1"], cards["v2"]))
    t = board.table
    assert len(t) == 11 and set(t["kind"]) == {"agent", "built-in", "reference"}
    ranked = t[t["kind"] != "reference"]
    assert list(ranked["rank"]) == sorted(ranked["rank"]) and ranked["mean_gap"].is_monotonic_increasing
    assert t.loc[t["kind"] == "reference", "policy"].tolist() == ["finality_oracle"]
    assert t["rank"].isna().sum() == 1 and t.iloc[-1]["policy"] == "finality_oracle"
    for name, folder in (("mine (v1)", cards["v1"]), ("mine (v2)", cards["v2"])):
        own = next(e for e in json.loads((folder / "card.json").read_text())["table2"] if e["policy"] == "mine")
        mine = t[t["policy"] == name].iloc[0]
        assert (mine["mean_gap"], mine["exact_pct"], list(mine["gap_ci"])) == (own["mean_gap"], own["exact_pct"],
                                                                             own["gap_ci"])
    assert cards["v2_one_seed"].parent == cards["v1"].parent  # made now if no test made it before
    code, printed, err = _run("leaderboard", cards["v1"].parent, "--out", tmp_path)  # a folder of cards
    assert code == 64 and "seeds" in err  # v2_one_seed lies there too: another run, never mixed in
    code, printed, err = _run("leaderboard", cards["v1"], cards["v2"], "--out", tmp_path)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leaderboard.csv", "leaderboard.html", "leaderboard.md"]
    assert (tmp_path / "leaderboard.csv").read_text().startswith("# engine: ")


def test_a_leaderboard_never_mixes_engine_versions_nor_cards_whose_nine_differ(cards, tmp_path):
    old = _other_engine(cards["v2"], tmp_path / "old")
    code, _, err = _run("leaderboard", cards["v1"], old, "--out", tmp_path / "out")
    assert code == 64 and "engine" in err and not (tmp_path / "out").exists()
    forged = tmp_path / "forged"
    shutil.copytree(cards["v2"], forged)
    doc = json.loads((forged / "card.json").read_text())
    next(e for e in doc["table2"] if e["policy"] == "sop")["mean_gap"] += 1.0
    (forged / "card.json").write_text(json.dumps(doc))
    with pytest.raises(FinbenchError, match=r"the nine's rows differ .*\(sop\)"):
        leaderboard(_subs(cards["v1"], forged))
    with pytest.raises(FinbenchError, match="rows.csv alone"):
        leaderboard(_subs(cards["v1"] / "rows.csv"))


def test_verify_replays_a_shared_card_with_its_agent(cards, agents_file):
    code, printed, err = _run("verify", "--card", cards["v2"], "--agent", f"{agents_file}:V2", "--per-origin", 5)
    assert code == 0 and "every replayed row equals its row" in printed, err
    code, printed, err = _run("verify", "--card", cards["v2"], "--agent", f"{agents_file}:V1", "--per-origin", 5)
    assert code == 1 and "gap is" in err  # another agent under the same label: its replays differ
    code, _, err = _run("verify", "--card", cards["v2"])
    assert code == 64 and "give --agent" in err
