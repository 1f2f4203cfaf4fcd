"""Agents compared on the same episodes (`finbench compare`): is v2 better than v1?

    subs = [s for path in ("build/eval/v1", "build/eval/v2") for s in read_submitted(path)]
    c = compare(subs)            # refuses results of different runs, naming what differs
    c.pairs                      # per pair: the paired difference in mean gap and exact %, with intervals
    c.write("build/compare")     # compare.md, compare.html, compare.json

Every difference is paired: on the episodes all of them played (same task, same seed), mean(a) - mean(b)
with a percentile interval from the package's cluster bootstrap over units (`analysis.metrics.bootstrap_diff`:
twin pairs resampled together, the run's resamples and seed), so it equals what `evaluate` and the
package's own bootstrap give on the same rows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.card_tables import draw_command, json_ready, png_name
from finbench.errors import FinbenchError
from finbench.files import atomic_write
from finbench.sharing.submitted import Submitted, at, distinct, named, same_run, stamp_run

__all__ = ["Comparison", "compare"]

TOL = 0.005
"""A gap lower by more than half a cent wins the episode (the exactness tolerance)."""
WINS_SHOWN = 3
KEY = ["task_id", "seed"]


@dataclass(frozen=True)
class Comparison:
    """What `compare` finds: `names` (in the order given), the `stamp` they share, `episodes` (how many
    episodes all of them played), `headline` (per name: exact % and mean gap with intervals), `pairs`,
    `archetypes` (per pair and archetype), `pass_k`, `verdicts` and `wins` (per pair, the episodes where
    each decided better, with the command that draws them)."""

    names: list
    stamp: dict
    episodes: int
    headline: pd.DataFrame
    pairs: pd.DataFrame
    archetypes: pd.DataFrame
    pass_k: pd.DataFrame
    verdicts: pd.DataFrame
    wins: list

    def as_json(self) -> dict:
        frames = {k: getattr(self, k).to_dict("records") for k in ("headline", "pairs", "archetypes", "pass_k",
                                                                    "verdicts")}
        return json_ready({"schema": "finbench-compare/1", "names": self.names, "stamp": self.stamp,
                       "episodes": self.episodes, **frames, "wins": self.wins})

    def write(self, out) -> list[Path]:
        """compare.md, compare.html and compare.json into `out`; the paths written."""
        from finbench.sharing.compare_page import compare_html, compare_markdown  # lazy: matplotlib to draw

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.as_json(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        return [atomic_write(out / "compare.md", compare_markdown(self)),
                atomic_write(out / "compare.html", compare_html(self)), atomic_write(out / "compare.json", text)]


def compare(subs: list[Submitted], where: str = "compare") -> Comparison:
    """The paired comparison of two or more results of one run (`same_run`)."""
    subs = distinct(subs, where)
    if len(subs) < 2:
        raise FinbenchError(f"{at(where)}give at least two results to compare, got {len(subs)}")
    subs = named(subs)
    stamp = same_run(subs, where)
    n_boot, seed = int(stamp.get("n_boot", 2000)), int(stamp.get("boot_seed", 0))
    shared = subs[0].rows[KEY]
    for s in subs[1:]:
        shared = shared.merge(s.rows[KEY], on=KEY)
    if shared.empty:
        raise FinbenchError(f"{at(where)}the results share no episode (task and seed)")
    rows = pd.concat([s.rows.merge(shared, on=KEY).assign(policy=s.name) for s in subs], ignore_index=True)
    names = [s.name for s in subs]
    exact = M.bootstrap_ci(rows, "exact", names, n_boot, seed)
    gap = M.bootstrap_ci(rows, "gap", names, n_boot, seed)
    headline = pd.DataFrame({"name": names, "agent": [s.agent for s in subs], "path": [str(s.path) for s in subs],
                             "episodes": [int((rows["policy"] == n).sum()) for n in names],
                             "exact_pct": 100 * exact["estimate"].to_numpy(), "exact_lo": 100 * exact["lo"].to_numpy(),
                             "exact_hi": 100 * exact["hi"].to_numpy(), "mean_gap": gap["estimate"].to_numpy(),
                             "gap_lo": gap["lo"].to_numpy(), "gap_hi": gap["hi"].to_numpy()})
    pairs, arche, wins = [], [], []
    for a, b in combinations(subs, 2):
        both = a.rows.merge(b.rows, on=KEY, suffixes=("_a", "_b"))
        pairs.append({"a": a.name, "b": b.name, **_diffs(rows, a.name, b.name, n_boot, seed), **_split(both)})
        for kind, part in rows.groupby("archetype", sort=True):
            if part["policy"].eq(a.name).any():
                arche.append({"a": a.name, "b": b.name, "archetype": kind,
                              "episodes": int((part["policy"] == a.name).sum()),
                              **_diffs(part, a.name, b.name, n_boot, seed)})
        wins.append(_wins(a, b, both, stamp))
    ks = range(1, min(5, rows["seed"].nunique()) + 1)
    curve = M.pass_k_curve(rows, ks)
    pass_k = pd.DataFrame([{"k": k, **{n: 100 * float(curve.loc[n, k]) for n in names}} for k in ks])
    checks = [c for c in rows.columns if c.startswith("check_")]
    verdicts = pd.DataFrame([{"name": n, **{f"{v}_pct": 100 * float((mine["verdict"] == v).mean())
                                            for v in ("pass", "violation", "unscorable")},
                              **{f"{c[len('check_'):]}_fail_pct": 100 * float((mine[c] == "fail").mean())
                                 for c in checks}}
                             for n in names for mine in [rows[rows["policy"] == n]]])
    return Comparison(names, stamp, len(shared), headline, pd.DataFrame(pairs), pd.DataFrame(arche), pass_k,
                      verdicts, wins)


def _diffs(rows: pd.DataFrame, a: str, b: str, n_boot: int, seed: int) -> dict:
    gap = M.bootstrap_diff(rows, a, b, "gap", n_boot, seed)
    exact = M.bootstrap_diff(rows, a, b, "exact", n_boot, seed)
    return {"gap_diff": gap["estimate"], "gap_lo": gap["lo"], "gap_hi": gap["hi"],
            "exact_diff_pct": 100 * exact["estimate"], "exact_lo": 100 * exact["lo"], "exact_hi": 100 * exact["hi"]}


def _split(both: pd.DataFrame) -> dict:
    differ = (both["calls_a"] != both["calls_b"]) | (both["disposition_a"] != both["disposition_b"])
    return {"episodes": len(both), "decided_differently": int(differ.sum()),
            "a_better": int((both["gap_a"] < both["gap_b"] - TOL).sum()),
            "b_better": int((both["gap_b"] < both["gap_a"] - TOL).sum())}


def _expr(s: Submitted, placeholder: str) -> str:
    card = s.card or {}
    return card.get("agent_expr") or placeholder


def _wins(a: Submitted, b: Submitted, both: pd.DataFrame, stamp: dict) -> dict:
    """Per side, up to `WINS_SHOWN` episodes (distinct tasks, largest margin first; ties: corpus order) where
    it left a lower gap than the other, each with the command that draws both (left: a, right: b)."""
    try:
        run = stamp_run(a.stamp, pd.concat([a.rows, b.rows]))
    except FinbenchError as e:
        run, why = None, str(e)
    ea, eb = _expr(a, "AGENT_A"), _expr(b, "AGENT_B")
    out = {"a": a.name, "b": b.name, "a_expr": ea, "b_expr": eb}
    for side, mine, theirs in (("a", "gap_a", "gap_b"), ("b", "gap_b", "gap_a")):
        margin = both[theirs] - both[mine]
        best = both.assign(margin=margin)[margin > TOL].sort_values("margin", ascending=False, kind="mergesort")
        shown = []
        for r in best.drop_duplicates("task_id").head(WINS_SHOWN).itertuples():
            e = {"task_id": r.task_id, "archetype": r.archetype_a, "seed": int(r.seed), "gap_a": float(r.gap_a),
                 "gap_b": float(r.gap_b), "ended_a": r.disposition_a, "ended_b": r.disposition_b}
            e["draw"] = (draw_command(run, [r.task_id], int(r.seed), ea, "", png_name([r.task_id], int(r.seed)), eb)
                         if run is not None else f"(cannot be drawn: {why})")
            shown.append(e)
        out[f"{side}_wins"] = shown
    return out
