"""Headline results: Table II, Table III (with the gap by archetype), Figure 1, and their claims (SPEC §10).

Notebook `01_headline`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), n_boot=n_boot, ...)
    rows = headline.episodes(run)
    tables = headline.tables(rows, run)                  # table2, table3, table3_gap
    claims = headline.claims(tables)
    figures = headline.figures(rows, run, tables)        # figure1, figure1_passk
    publish_experiment(headline, run, tables, claims, figures)
"""
from __future__ import annotations

import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.claims import DOLLAR_REL_TOL, RATE_TOL, claims_notes, from_tables, numeric, qualitative
from finbench.analysis.publish import TableSpec
from finbench.agents.policies import UNGATED
from finbench.agents.registry import policy_order

GATE = "finality_gate"
ORACLE = "finality_oracle"
NAME = "headline"
SECTION = "Headline: Tables II and III, Figure 1"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
TABLES = ("table2", "table3", "table3_gap")
"""The tables this experiment writes and its claims read, by stem."""
__all__ = ["PUBLISH", "TABLES", "claims", "claims_from_tables", "claims_notes", "episodes", "figure1", "figures",
           "table2", "table2_markdown", "table2_notes", "table3", "table3_gap", "tables"]


def episodes(run):
    """The episode rows: the run's policies over its corpus and seeds."""
    return run.evaluate()


def tables(rows: pd.DataFrame, run=None) -> dict[str, pd.DataFrame]:
    """Table II, Table III and the gap by archetype, by stem (`TABLES`)."""
    return {"table2": table2(rows, run), "table3": table3(rows), "table3_gap": table3_gap(rows)}


def table2(df: pd.DataFrame, run=None) -> pd.DataFrame:
    """Per policy: exact % [CI], mean gap $ [CI], pass^k %, premature-irreversible %,
    and the mean-gap difference to the finality gate [CI] on a shared resample.

    Args:
        df: episode rows (`evaluate`, `Run.evaluate`).
        run: the `Run` behind them, for k and the bootstrap; None: k = min(5, seeds in
            `df`), 2,000 replicates, seed 0.
    """
    if run is not None:
        k, n_boot, seed = run.k, run.n_boot, run.boot_seed
    else:
        k, n_boot, seed = min(5, df["seed"].nunique()), 2000, 0
    order = policy_order(df["policy"])
    s = M.summary_table(df, k=k).reindex(order)
    ex = M.bootstrap_ci(df, "exact", order, n_boot, seed)
    gap = M.bootstrap_ci(df, "gap", order, n_boot, seed)
    out = pd.DataFrame({
        "policy": order,
        "episodes": s["n_episodes"].to_numpy(),
        "exact_pct": 100 * s["exact"].to_numpy(),
        "exact_lo": 100 * ex["lo"].to_numpy(), "exact_hi": 100 * ex["hi"].to_numpy(),
        "mean_gap": s["mean_gap"].to_numpy(),
        "gap_lo": gap["lo"].to_numpy(), "gap_hi": gap["hi"].to_numpy(),
        f"pass{k}_pct": 100 * s[f"pass^{k}"].to_numpy(),
        "premature_pct": 100 * s["premature_irreversible"].to_numpy(),
        "privileged": M.privileged(df, order),
    })
    if "verdict" in df.columns:  # effect-level correctness beside the money (the grader's verdicts)
        for verdict in ("violation", "unscorable"):
            out[f"{verdict}_pct"] = 100 * M.verdict_rate(df, verdict).reindex(order).to_numpy()
    if GATE in order:
        d = M.bootstrap_diff_table(df, GATE, "gap", order, n_boot, seed)
        out["diff_to_gate"] = d["estimate"].to_numpy()
        out["diff_lo"], out["diff_hi"] = d["lo"].to_numpy(), d["hi"].to_numpy()
    return out


def _ci(x, lo, hi, fmt="{:.1f}") -> str:
    return f"{fmt.format(x)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _k(t2: pd.DataFrame) -> int:
    return int(next(c for c in t2.columns if c.startswith("pass") and c.endswith("_pct"))[4:-4])


def table2_markdown(t2: pd.DataFrame) -> pd.DataFrame:
    """The human rendering of Table II: point estimates with their intervals."""
    k = _k(t2)
    rows = []
    for r in t2.itertuples(index=False):
        row = {"policy": r.policy, "exact %": _ci(r.exact_pct, r.exact_lo, r.exact_hi),
               "mean gap $": _ci(r.mean_gap, r.gap_lo, r.gap_hi, "{:.2f}"),
               f"pass^{k} %": f"{getattr(r, f'pass{k}_pct'):.1f}",
               "premature-irreversible %": f"{r.premature_pct:.1f}"}
        if hasattr(r, "violation_pct"):
            row["violation %"], row["unscorable %"] = f"{r.violation_pct:.1f}", f"{r.unscorable_pct:.1f}"
        if hasattr(r, "diff_to_gate"):
            row["gap - gate $"] = _ci(r.diff_to_gate, r.diff_lo, r.diff_hi, "{:.2f}")
        rows.append(row)
    return pd.DataFrame(rows)


def table2_notes(t2: pd.DataFrame) -> list[str]:
    """A note for every policy whose mean gap is below the gate's while its effect violations are
    above the gate's: money alone would rank it ahead of a policy that breaks fewer contracts."""
    if GATE not in set(t2["policy"]) or "violation_pct" not in t2.columns:
        return []
    t = t2.set_index("policy")
    g = t.loc[GATE]
    lines = []
    for p, r in t.iterrows():
        if p != GATE and r.mean_gap < g.mean_gap and r.violation_pct > g.violation_pct:
            lines.append(f"- Note: {p}'s mean gap (${r.mean_gap:.2f}) is below the gate's (${g.mean_gap:.2f}) while "
                         f"its effect violations ({r.violation_pct:.1f}% of episodes) are above the gate's "
                         f"({g.violation_pct:.1f}%).")
    return [*lines, ""] if lines else []


def table3(df: pd.DataFrame) -> pd.DataFrame:
    """Exact % by archetype (rows) x policy (columns)."""
    t = 100 * M.exact_by_archetype(df)
    return t[policy_order(df["policy"])].reset_index()


def table3_gap(df: pd.DataFrame) -> pd.DataFrame:
    """Mean gap $ by archetype (rows) x policy (columns): where each policy's loss lies."""
    t = M.mean_gap(df, by=["archetype", "policy"]).unstack("policy")
    return t[policy_order(df["policy"])].reset_index()


# About 70 lines on purpose: one record per claim of the section, in the paper's order.
def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about Tables II and III, each beside ours computed from the tables."""
    t2, t3, t3_gap = (tables[stem] for stem in TABLES)
    k = _k(t2)
    pk = f"pass{k}_pct"
    t = t2.set_index("policy")
    a3, g3 = t3.set_index("archetype"), t3_gap.set_index("archetype")
    ungated = [p for p in UNGATED if p in t.index]
    unpriv = [p for p in t.index if not t.loc[p, "privileged"]]
    by_exact = list(t.loc[unpriv].sort_values("exact_pct", ascending=False, kind="mergesort").index)
    out = []

    def num(id, text, paper, ours, src="table2", **kw):
        out.append(numeric(NAME, id, text, paper, ours, source=f"tables/{src}.csv", **kw))

    def qual(id, text, holds, measured, src="table2"):
        out.append(qualitative(NAME, id, text, holds, measured, source=f"tables/{src}.csv"))

    if GATE not in t.index:
        return out
    g = t.loc[GATE]
    best_exact = by_exact[0] == GATE
    num("gate_exact", "finality gate exact %", 85.4, g.exact_pct, ci=(79.9, 90.2), unit="%",
        direction=best_exact, direction_text="the gate has the highest exact rate of the unprivileged policies")
    lowest_gap = all(g.mean_gap < t.loc[p, "mean_gap"] for p in unpriv if p != GATE)
    num("gate_gap", "finality gate mean gap $", 31.37, g.mean_gap, ci=(16.28, 48.27),
        direction=lowest_gap, direction_text="the gate has the lowest mean gap of the unprivileged policies")
    num("gate_passk", f"finality gate pass^{k} %", 85.4, g[pk], tol=RATE_TOL, unit="%",
        direction=abs(g[pk] - g.exact_pct) < 1e-9, direction_text="pass^k equals its exact rate")
    qual("gate_passk_flat", f"the gate's pass^{k} equals its single-seed exact rate",
         abs(g[pk] - g.exact_pct) < 1e-9, f"{g.exact_pct:.1f}% -> {g[pk]:.1f}%")
    if "react" in t.index and "diff_to_gate" in t.columns:
        r = t.loc["react"]
        # the paper reports gate - react; the table holds react - gate
        num("gate_minus_react", "gate mean gap minus ReAct's $ (shared resample)", -96.81, -r.diff_to_gate,
            ci=(-118.46, -77.91), direction=r.diff_lo > 0,
            direction_text="the gate is below ReAct with an interval excluding zero")
    if ungated and "diff_lo" in t.columns:
        ahead = all(t.loc[p, "diff_lo"] > 0 for p in ungated)
        qual("gate_below_every_ungated", "the gate's mean gap is below every ungated policy's, each paired "
             "interval excluding zero", ahead,
             "; ".join(f"{p} {t.loc[p, 'diff_to_gate']:+.2f} [{t.loc[p, 'diff_lo']:.2f}, {t.loc[p, 'diff_hi']:.2f}]"
                       for p in ungated))
    if "optimistic" in t.index:
        second = by_exact[:2] == [GATE, "optimistic"]
        num("optimistic_exact", "optimistic exact %", 65.7, t.loc["optimistic", "exact_pct"], tol=RATE_TOL,
            unit="%", direction=second, direction_text="second by accuracy, behind the gate")
        qual("optimistic_second", "optimistic is second by accuracy (behind the gate)", second,
             f"order by exact: {', '.join(by_exact)}")
    for p, exact, passk in (("react", 54.0, 17.4), ("sop", 34.0, 6.9)):
        if p not in t.index:
            continue
        collapses = t.loc[p, pk] < 0.5 * t.loc[p, "exact_pct"]
        num(f"{p}_exact", f"{p} exact %", exact, t.loc[p, "exact_pct"], tol=RATE_TOL, unit="%",
            direction=collapses, direction_text="it loses more than half under pass^k")
        num(f"{p}_passk", f"{p} pass^{k} %", passk, t.loc[p, pk], tol=RATE_TOL, unit="%",
            direction=collapses, direction_text="it loses more than half under pass^k")
        qual(f"{p}_collapse", f"{p} collapses under pass^{k} (loses more than half its exact rate)", collapses,
             f"{t.loc[p, 'exact_pct']:.1f}% -> {t.loc[p, pk]:.1f}%")
    if ORACLE in t.index:
        num("reference_premature", "the reference acts before determination, % of episodes", 86.0,
            t.loc[ORACLE, "premature_pct"], tol=0.5, unit="%")
    if GATE in a3.columns:
        exact_on = int((a3[GATE] >= 100 - 1e-9).sum())
        num("gate_exact_archetypes", "archetypes on which the gate is always exact", 6, exact_on,
            src="table3", direction=exact_on >= 6, direction_text="at least six")
    if GATE in g3.columns and "unresolvable" in g3.index:
        loss = g3.loc["unresolvable", GATE]
        others = [a for a in g3.index if a != "unresolvable"]
        worst = all(loss > g3.loc[a, GATE] for a in others)
        num("gate_unresolvable_loss", "the gate's mean gap per unresolvable case $", 245.16, loss,
            tol=DOLLAR_REL_TOL * 245.16, src="table3_gap", direction=worst,
            direction_text="unresolvable is where the gate loses most")
    return out


def figure1(df: pd.DataFrame, run):
    """Figure 1: exact vs pass^k per policy, and the pass^k curve. Returns two figures."""
    from finbench.analysis.plotting import plot_exact_vs_pass5, plot_pass_k_curve  # lazy: matplotlib loads only to draw

    k = run.k
    order = policy_order(df["policy"])
    s = M.summary_table(df, k=k).reindex(order)
    curve = M.pass_k_curve(df, ks=range(1, k + 1)).reindex(order)
    return plot_exact_vs_pass5(s, y=f"pass^{k}"), plot_pass_k_curve(curve)


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """Figure 1 (exact vs pass^k) and the pass^k curve, by stem."""
    exact_vs_passk, curve = figure1(rows, run)
    return {"figure1": exact_vs_passk, "figure1_passk": curve}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "table2": TableSpec("Table II: headline results", markdown=lambda t: table2_markdown(t["table2"]),
                        notes=lambda t, claims: table2_notes(t["table2"]) + claims_notes(claims)),
    "table3": TableSpec("Table III: exact % by archetype x policy", floatfmt=".1f"),
    "table3_gap": TableSpec("Mean gap $ by archetype x policy"),
}
"""How each table is written (`publish_experiment`)."""
