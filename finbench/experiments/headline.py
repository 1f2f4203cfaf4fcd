"""Headline results: Table II, Table III (with the gap by archetype), Figure 1, and their claims (SPEC §10).

Notebook `01_headline`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), n_boot=n_boot, ...)
    rows = headline.episodes(run)
    tables = headline.tables(rows, run)                  # table2, table3, table3_gap, table2_pairs, table3_counts
    claims = headline.claims(tables)
    figures = headline.figures(rows, run, tables)        # figure1, figure1_passk
    publish_experiment(headline, run, tables, claims, figures)
"""
from __future__ import annotations

import pandas as pd

from finbench.sim import constants as C
from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure
from finbench.analysis.verdicts import claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.agents.policies import UNGATED
from finbench.agents.registry import policy_order
from finbench.running.run import Run
from finbench.sim.corpus import corpus_for
from finbench.sim.tools import TOOL_NAMES

GATE = "finality_gate"
ORACLE = "finality_oracle"
NAME = "headline"
SECTION = "Headline: Tables II and III, Figure 1"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
TABLES = ("table2", "table3", "table3_gap", "table2_pairs", "table3_counts")
"""The tables this experiment writes and its claims read, by stem."""
__all__ = ["PAIRS", "PUBLISH", "TABLES", "claims", "claims_from_tables", "claims_notes", "episodes", "figure1",
           "figures", "measures", "table2", "table2_markdown", "table2_notes", "table2_pairs", "table3", "table3_counts",
           "table3_gap", "tables"]


def episodes(run):
    """The episode rows: the run's policies over its corpus and seeds."""
    return run.evaluate()


def tables(rows: pd.DataFrame, run=None) -> dict[str, pd.DataFrame]:
    """Table II, Table III, the gap by archetype, the pairs and the episode counts by archetype, by stem (`TABLES`)."""
    return {"table2": table2(rows, run), "table3": table3(rows), "table3_gap": table3_gap(rows),
            "table2_pairs": table2_pairs(rows, run), "table3_counts": table3_counts(rows)}


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


def table3_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Episodes by archetype x policy (long form): `episodes`, `exact`, `exact_by_ship` (exact episodes that
    ended in a shipment: on an unresolvable task, a gamble on the outcome that won) and `negative_gap`
    (episodes whose gap is below -`MONEY_TOL`: the policy ended above the reference)."""
    cols = ["archetype", "policy", "episodes", "exact", "exact_by_ship", "negative_gap"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    exact = df["exact"].astype(bool)
    d = pd.DataFrame({"archetype": df["archetype"], "policy": df["policy"], "episodes": 1, "exact": exact,
                      "exact_by_ship": exact & (df["disposition"] == "ship"),
                      "negative_gap": df["gap"].astype(float) < -C.MONEY_TOL})
    g = d.groupby(["archetype", "policy"]).sum()
    order = policy_order(df["policy"])
    idx = pd.MultiIndex.from_product([sorted(set(df["archetype"])), order], names=["archetype", "policy"])
    return g.reindex(idx, fill_value=0).astype(int).reset_index()[cols]


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the headline's claims (`data/paper_claims.csv`, experiment "headline"), from the
    tables: Table II's cells, Table III's archetype counts, the reflection - ReAct pairs."""
    t2, t3, t3_gap, pairs, counts = (tables[stem] for stem in TABLES)
    k = _k(t2)
    t = t2.set_index("policy")
    a3, g3 = t3.set_index("archetype"), t3_gap.set_index("archetype")
    unpriv = [p for p in t.index if not t.loc[p, "privileged"]]
    by_exact = list(t.loc[unpriv].sort_values("exact_pct", ascending=False, kind="mergesort").index)
    ungated = [p for p in UNGATED if p in t.index]
    src2, src3, src3g, srcp, srcc = (f"tables/{stem}.csv" for stem in TABLES)

    def best(col, among, lowest=False):
        """The best value of `col` among the policies `among` (highest, or lowest) and whose it is."""
        among = [p for p in among if p in t.index]
        if not among:
            return None, ""
        s = t.loc[among, col].astype(float)
        p = s.idxmin() if lowest else s.idxmax()
        return float(s[p]), p

    def cell(policy, col, src=src2, unit="%", versus=None):
        """Table II's cell; `versus`: (the other side of the row's comparison, whose it is)."""
        if policy not in t.index:
            return None
        x = float(t.loc[policy, col])
        shown = f"{x:.1f}%" if unit == "%" else f"{x:.2f}"
        lo_hi = {"exact_pct": ("exact_lo", "exact_hi"), "mean_gap": ("gap_lo", "gap_hi")}.get(col)
        if lo_hi:
            shown += f" [{t.loc[policy, lo_hi[0]]:.{1 if unit == '%' else 2}f}, {t.loc[policy, lo_hi[1]]:.{1 if unit == '%' else 2}f}]"
        other = None
        if versus is not None:
            other, whose = versus
            if other is not None:
                shown += f" ({whose} {other:.{1 if unit == '%' else 2}f})"
        return Measure(x, shown=shown, source=src, versus=other)

    others = [p for p in unpriv if p != GATE]
    gate_ratio = None
    if GATE in t.index:
        lo, hi = float(t.loc[GATE, "gap_lo"]), float(t.loc[GATE, "gap_hi"])
        gate_ratio = Measure(hi / lo if lo > 0 else None, source=src2,
                        shown=f"{hi / lo:.2f}x: [{lo:.2f}, {hi:.2f}]" if lo > 0 else f"[{lo:.2f}, {hi:.2f}]: no ratio")
    gate_flat = None
    if GATE in t.index:
        ex, pk = float(t.loc[GATE, "exact_pct"]), float(t.loc[GATE, f"pass{k}_pct"])
        gate_flat = Measure(pk - ex, shown=f"{ex:.1f}% -> {pk:.1f}% (pass^{k} - exact = {pk - ex:+.1f} pp)", source=src2)

    def collapse(p):
        if p not in t.index:
            return None
        ratio = float(t.loc[p, f"pass{k}_pct"] / t.loc[p, "exact_pct"])
        return Measure(ratio, shown=f"{t.loc[p, 'exact_pct']:.1f}% -> {t.loc[p, f'pass{k}_pct']:.1f}% (kept {ratio:.1%})",
                  source=src2)

    gate = GATE in t.index
    out = {
        "episodes": Measure(int(t2["episodes"].sum()), shown=f"{int(t2['episodes'].sum()):,}", source=src2),
        **_design(),
        "gate_exact": cell(GATE, "exact_pct", versus=best("exact_pct", others)),
        "gate_gap": cell(GATE, "mean_gap", unit="$", versus=best("mean_gap", others, lowest=True)),
        "gate_interval_threefold": gate_ratio,
        "gate_passk": gate_flat,
        "react_exact": cell("react", "exact_pct"), "react_passk": cell("react", f"pass{k}_pct"),
        "react_collapse": collapse("react"),
        "sop_exact": cell("sop", "exact_pct"), "sop_passk": cell("sop", f"pass{k}_pct"), "sop_collapse": collapse("sop"),
        "optimistic_exact": cell("optimistic", "exact_pct",
                                 versus=best("exact_pct", [p for p in others if p != "optimistic"])),
        "optimistic_second": (Measure(by_exact.index("optimistic") + 1, shown="by exact: " + ", ".join(by_exact),
                                 source=src2) if "optimistic" in by_exact else None),
        "gate_minus_react": (Measure(-float(t.loc["react", "diff_to_gate"]), -float(t.loc["react", "diff_hi"]),
                                -float(t.loc["react", "diff_lo"]),
                                shown=_ci(-t.loc["react", "diff_to_gate"], -t.loc["react", "diff_hi"],
                                          -t.loc["react", "diff_lo"], "{:.2f}"), source=src2)
                             if gate and "react" in t.index and "diff_to_gate" in t.columns else None),
        "gate_below_every_ungated": (Measure(sum(t.loc[p, "diff_lo"] > 0 for p in ungated),
                                        shown="; ".join(f"{p} {_ci(t.loc[p, 'diff_to_gate'], t.loc[p, 'diff_lo'], t.loc[p, 'diff_hi'], '{:+.2f}')}"
                                                        for p in ungated), source=src2)
                                     if gate and "diff_lo" in t.columns else None),
        "gate_exact_archetypes": (Measure(int((a3[GATE] >= 100 - 1e-9).sum()), source=src3,
                                     shown=", ".join(a for a in a3.index if a3.loc[a, GATE] >= 100 - 1e-9))
                                  if GATE in a3.columns else None),
        "gate_unresolvable_loss": (Measure(float(g3.loc["unresolvable", GATE]), source=src3g,
                                      shown=f"{g3.loc['unresolvable', GATE]:.2f}")
                                   if GATE in g3.columns and "unresolvable" in g3.index else None),
        "unresolvable_gamblers": _gamblers(counts, "unresolvable", others, srcc),
        "unresolvable_no_guarantee": _best_on(a3, "unresolvable", unpriv, src3),
        "negative_gap_late_chargeback": _negative_only_on(counts, "late_chargeback", srcc),
        "lost_settlement_losers": _archetype_count(a3, "lost_settlement", list(t.index), lambda x: x <= 0, src3),
        "react_reflection_not_separable": _pair(pairs, "reflection", "react", srcp),
    }
    return out


def _design() -> dict:
    """The design facts the paper states (listed apart, by construction), read off this package: the public
    corpus's independent units (a twin pair is one), the replicates of every interval, the agent's tools."""
    units = len({t.unit for t in corpus_for(C.PUBLIC_SEED).tasks})
    n_boot = Run.__dataclass_fields__["n_boot"].default
    return {"units": Measure(units, shown=f"{units} in the public corpus", source="finbench/sim/corpus.py"),
            "replicates": Measure(n_boot, shown=f"{n_boot:,} (Run.n_boot)", source="finbench/running/run.py"),
            "tools": Measure(len(TOOL_NAMES), shown=f"{len(TOOL_NAMES)}: {', '.join(TOOL_NAMES)}",
                             source="finbench/sim/tools.py")}


def _best_on(a3: pd.DataFrame, archetype: str, policies: list, src: str):
    """The highest exact % on `archetype` among `policies` (Table III), and whose it is."""
    mine = [p for p in policies if p in a3.columns]
    if archetype not in a3.index or not mine:
        return None
    best = max(mine, key=lambda p: (float(a3.loc[archetype, p]), -mine.index(p)))
    x = float(a3.loc[archetype, best])
    return Measure(x, shown=f"{x:.1f}% ({best}, the best unprivileged policy on {archetype})", source=src)


def _archetype_count(a3: pd.DataFrame, archetype: str, policies: list, test, src: str):
    """How many of `policies` pass `test` on their exact % on `archetype` (Table III)."""
    if archetype not in a3.index:
        return None
    hit = [p for p in policies if p in a3.columns and test(a3.loc[archetype, p])]
    return Measure(len(hit), shown=f"{len(hit)}: {', '.join(hit) or 'none'}", source=src)


def _gamblers(counts: pd.DataFrame, archetype: str, policies: list, src: str):
    """How many of `policies` are exact on `archetype` by shipping (a gamble on the outcome that won), with
    those exact there by any disposition beside them."""
    c = counts[counts["archetype"] == archetype].set_index("policy")
    if c.empty:
        return None
    mine = [p for p in policies if p in c.index]
    ship = [p for p in mine if c.loc[p, "exact_by_ship"] > 0]
    any_exact = [p for p in mine if c.loc[p, "exact"] > 0]
    return Measure(len(ship), source=src,
              shown=f"{len(ship)}: {', '.join(ship) or 'none'} (exact on {archetype} by shipping); exact there by any "
                    f"disposition: {len(any_exact)} ({', '.join(any_exact) or 'none'})")


def _negative_only_on(counts: pd.DataFrame, archetype: str, src: str):
    """Whether some episode's gap is negative and every such episode is on `archetype` (None if the corpus
    holds no such task)."""
    if archetype not in set(counts["archetype"]):
        return None
    by_arch = counts.groupby("archetype", sort=True)["negative_gap"].sum()
    by_arch = by_arch[by_arch > 0]
    n = int(by_arch.sum())
    mine = counts[(counts["archetype"] == archetype) & (counts["negative_gap"] > 0)]
    pols = ", ".join(f"{p} {int(x)}" for p, x in zip(mine["policy"], mine["negative_gap"]))
    return Measure(n > 0 and set(by_arch.index) == {archetype}, source=src,
              shown=f"{n} episodes with a negative gap: " + (", ".join(f"{a} {int(x)}" for a, x in by_arch.items())
                                                             or "none") + (f" ({pols})" if pols else ""))


def _pair(pairs: pd.DataFrame, a: str, b: str, src: str):
    """The paired difference a - b with its interval, the unpaired interval beside it."""
    sel = pairs[(pairs["a"] == a) & (pairs["b"] == b)]
    if sel.empty:
        return None
    r = sel.iloc[0]
    d = float(r["diff"])  # (r.diff is the Series method)
    return Measure(d, float(r.diff_lo), float(r.diff_hi), source=src,
              shown=f"paired {_ci(d, r.diff_lo, r.diff_hi, '{:+.2f}')}; unpaired "
                    f"[{r.unpaired_lo:+.2f}, {r.unpaired_hi:+.2f}]")


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about Tables II and III, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


PAIRS = (("reflection", "react"),)
"""Pairs of policies the paper compares directly (besides each policy against the gate, in Table II)."""


def table2_pairs(df: pd.DataFrame, run=None) -> pd.DataFrame:
    """Each of `PAIRS` present: mean gap a - b, paired (a shared resample) with its interval, and the
    unpaired interval (each resampled on its own) beside it."""
    n_boot, seed = (run.n_boot, run.boot_seed) if run is not None else (2000, 0)
    present = set(df["policy"])
    out = []
    for a, b in PAIRS:
        if a in present and b in present:
            d = M.bootstrap_diff(df, a, b, "gap", n_boot, seed)
            u = M.bootstrap_diff_unpaired(df, a, b, "gap", n_boot, seed)
            out.append({"a": a, "b": b, "diff": d["estimate"], "diff_lo": d["lo"], "diff_hi": d["hi"],
                        "unpaired_lo": u["lo"], "unpaired_hi": u["hi"]})
    return pd.DataFrame(out, columns=["a", "b", "diff", "diff_lo", "diff_hi", "unpaired_lo", "unpaired_hi"])


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
    "table2_pairs": TableSpec("Pairs the paper compares: mean gap a - b $, paired and unpaired intervals"),
    "table3_counts": TableSpec("Episodes by archetype x policy: exact, exact by shipping, negative gap",
                               notes=lambda t, claims: [
                                   "Counts of episodes (every task x seed). exact_by_ship: exact episodes that ended "
                                   "in a shipment (on unresolvable, a gamble on the outcome that won); negative_gap: "
                                   f"episodes whose gap is below -{C.MONEY_TOL} (the policy ended above the "
                                   "reference).", ""], bootstrap=False),
}
"""How each table is written (`publish_experiment`)."""
