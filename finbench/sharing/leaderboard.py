"""One ranked table of agents from their report cards, beside the nine (`finbench leaderboard`).

    board = leaderboard([s for p in paths for s in read_submitted(p)])   # cards of one run, else refused
    board.write("build/leaderboard")      # leaderboard.md, leaderboard.html, leaderboard.csv

The cards must be of one run (`submitted.same_run`: the same engine, corpus, seeds, fault profile, costs,
probe mode and bootstrap), and the nine's rows they carry must agree: the nine played the same episodes on
every card, so a card whose nine differ was not made by this benchmark's run and is refused, never mixed in.
Agents are ranked by mean gap (the money they leave on the table, lower is better; ties share a rank); the
privileged oracle, told how each capture resolves, is shown as the reference and not ranked. Each number is
its card's (`card.json`'s `table2` and `table4`), with the interval printed there.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from finbench.analysis.tables import write_table
from finbench.errors import FinbenchError
from finbench.files import atomic_write
from finbench.sharing.report_page import MONEY, PCT, interval
from finbench.sharing.submitted import Submitted, at, distinct, named, same_run

__all__ = ["Leaderboard", "leaderboard"]

NUMBERS = ("exact_pct", "exact_ci", "mean_gap", "gap_ci", "diff_to_gate", "diff_ci", "pass_k_pct", "premature_pct",
           "violation_pct", "unscorable_pct")


@dataclass(frozen=True)
class Leaderboard:
    """`table`: one row a policy, ranked (`rank` None for the privileged reference); `stamp`: the run's;
    `k`: the k of pass^k; `cards`: the folders the agents came from."""

    table: pd.DataFrame
    stamp: dict
    k: int
    cards: list

    def shown(self) -> pd.DataFrame:
        """The table as the pages print it."""
        t, k = self.table, self.k
        return pd.DataFrame({
            "rank": ["–" if pd.isna(r) else str(int(r)) for r in t["rank"]], "policy": t["policy"], "kind": t["kind"],
            "exact %": [PCT.format(v) for v in t["exact_pct"]], "exact interval": t["exact_ci"].map(
                lambda ci: interval(ci, PCT)), "mean gap $": [MONEY.format(v) for v in t["mean_gap"]],
            "gap interval": t["gap_ci"].map(lambda ci: interval(ci, MONEY)),
            "paired loss $": ["–" if pd.isna(v) else MONEY.format(v) for v in t["paired_loss"]],
            "paired interval": t["paired_ci"].map(lambda ci: interval(ci, MONEY)),
            f"pass^{k} %": [PCT.format(v) for v in t["pass_k_pct"]],
            "premature %": [PCT.format(v) for v in t["premature_pct"]],
            "violation %": [PCT.format(v) for v in t["violation_pct"]], "card": t["card"]})

    def write(self, out) -> list[Path]:
        """leaderboard.csv and leaderboard.md (stamped), and leaderboard.html, into `out`; the paths written."""
        from finbench.sharing.figures import standing_figure  # lazy: matplotlib loads only to draw
        from finbench.sharing.page import figure_html, md_text, page, section, table_html  # lazy: as above

        out = Path(out)
        flat = self.table.assign(**{f"{c}_{end}": self.table[c].map(lambda ci, i=i: None if ci is None else ci[i])
                                    for c in ("exact_ci", "gap_ci", "diff_ci", "paired_ci")
                                    for i, end in enumerate(("lo", "hi"))}).drop(
            columns=["exact_ci", "gap_ci", "diff_ci", "paired_ci"])
        shown = self.shown()
        md = shown.assign(policy=shown["policy"].map(md_text), card=shown["card"].map(md_text))
        paths = write_table(flat, "leaderboard", self.stamp, out, title="Leaderboard", markdown=md, notes=[NOTE])
        agents = set(self.table.loc[self.table["kind"] == "agent", "policy"])
        ranked = [{**r, "privileged": r["kind"] == "reference"} for r in self.table.to_dict("records")]
        html = page("Leaderboard", [
            f"<p>{NOTE}</p>",
            section("Standing", figure_html(standing_figure(ranked, agents), "exact % and mean gap per policy",
                                            "Agents in blue, the gate in orange, the privileged oracle hollow."),
                    table_html(shown, key="leaderboard"))], self.stamp)
        return [*paths, atomic_write(out / "leaderboard.html", html)]


NOTE = ("Ranked by mean gap, the dollars left on the table against the privileged reference (lower is better; "
        "ties share a rank); 95% bootstrap intervals over units; paired loss: the mean gap over both halves of "
        "the twin pairs; the oracle is told how each capture resolves, so it is the reference, not ranked.")


def leaderboard(subs: list[Submitted], where: str = "leaderboard") -> Leaderboard:
    """The ranked table of the agents of `subs` (cards of one run) and the nine."""
    subs = distinct(subs, where)
    if not subs:
        raise FinbenchError(f"{at(where)}no card given")
    lacking = [str(s.path) for s in subs if s.card is None]
    if lacking:
        raise FinbenchError(f"{at(where)}{', '.join(lacking)}: a rows.csv alone holds no numbers of the nine; give "
                            "card folders (card.json beside rows.csv), as finbench eval writes them")
    subs = named(subs)
    stamp = same_run(subs, where)
    nine = {e["policy"]: e for e in subs[0].card["table2"] if e["policy"] != subs[0].agent}
    twins = {e["policy"]: e for e in subs[0].card.get("table4") or [] if e["policy"] != subs[0].agent}
    rows = [_row(e, twins.get(p), "reference" if e.get("privileged") else "built-in", "") for p, e in nine.items()]
    for s in subs:
        own = {e["policy"]: e for e in s.card["table2"]}
        for p, e in nine.items():
            theirs = own.get(p)
            if theirs is None or any(theirs.get(f) != e.get(f) for f in NUMBERS):
                raise FinbenchError(f"{at(where)}{s.path}: the nine's rows differ from {subs[0].path}'s ({p}); the "
                                    "cards were not made by one run of this benchmark, so they are not ranked together")
        t4 = {e["policy"]: e for e in s.card.get("table4") or []}
        rows.append(_row(own[s.agent], t4.get(s.agent), "agent", str(s.path), s.name))
    table = pd.DataFrame(rows)
    ranked = table["kind"] != "reference"
    table["rank"] = table["mean_gap"].where(ranked).rank(method="min")
    table = table.assign(_r=table["rank"].fillna(len(table) + 1)).sort_values(["_r", "policy"], kind="mergesort")
    table = table.drop(columns="_r").reset_index(drop=True)
    cols = ["rank", "policy", "kind", *NUMBERS, "paired_loss", "paired_ci", "card"]
    return Leaderboard(table[cols], stamp, subs[0].card["headline"]["k"], [str(s.path) for s in subs])


def _row(e: dict, twin: dict | None, kind: str, card: str, name: str | None = None) -> dict:
    return {"policy": name or e["policy"], "kind": kind, **{f: e.get(f) for f in NUMBERS},
            "paired_loss": None if twin is None else twin["paired_loss"],
            "paired_ci": None if twin is None else twin["paired_ci"], "card": card}
