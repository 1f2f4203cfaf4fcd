"""Table II, Table III and Figure 1 from per-episode rows (SPEC §10, first rows)."""
from __future__ import annotations

import pandas as pd

from finbench import metrics as M
from finbench.policies import POLICIES, UNGATED

GATE = "finality_gate"


def policy_order(df: pd.DataFrame) -> list[str]:
    """The nine in SPEC's order, then anything else (e.g. knob variants) by name."""
    present = list(dict.fromkeys(df["policy"]))
    return [p for p in POLICIES if p in present] + sorted(p for p in present if p not in POLICIES)


def table2(df: pd.DataFrame, n_boot: int = 2000, seed: int = 0, k: int = 5) -> pd.DataFrame:
    """Per policy: exact % [CI], mean gap $ [CI], pass^k %, premature-irreversible %,
    and the mean-gap difference to the finality gate [CI] on a shared resample."""
    order = policy_order(df)
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
    })
    if GATE in order:
        d = M.bootstrap_diff_table(df, GATE, "gap", order, n_boot, seed)
        out["diff_to_gate"] = d["estimate"].to_numpy()
        out["diff_lo"], out["diff_hi"] = d["lo"].to_numpy(), d["hi"].to_numpy()
    return out


def _ci(x, lo, hi, fmt="{:.1f}") -> str:
    return f"{fmt.format(x)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def table2_markdown(t2: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The human rendering of Table II: point estimates with their intervals."""
    rows = []
    for r in t2.itertuples(index=False):
        row = {"policy": r.policy, "exact %": _ci(r.exact_pct, r.exact_lo, r.exact_hi),
               "mean gap $": _ci(r.mean_gap, r.gap_lo, r.gap_hi, "{:.2f}"),
               f"pass^{k} %": f"{getattr(r, f'pass{k}_pct'):.1f}",
               "premature-irreversible %": f"{r.premature_pct:.1f}"}
        if hasattr(r, "diff_to_gate"):
            row["gap - gate $"] = _ci(r.diff_to_gate, r.diff_lo, r.diff_hi, "{:.2f}")
        rows.append(row)
    return pd.DataFrame(rows)


def table3(df: pd.DataFrame) -> pd.DataFrame:
    """Exact % by archetype (rows) x policy (columns)."""
    t = 100 * M.exact_by_archetype(df)
    t = t[policy_order(df)]
    return t.reset_index()


def headline_claims(t2: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """The paper's qualitative claims about Table II, checked against the regenerated table."""
    t = t2.set_index("policy")
    ungated = [p for p in UNGATED if p in t.index]
    pk = f"pass{k}_pct"
    by_exact = [p for p in t.sort_values("exact_pct", ascending=False).index if p != "finality_oracle"]
    claims = []
    if GATE in t.index and ungated:
        ahead = all(t.loc[p, "diff_lo"] > 0 for p in ungated)
        claims.append(("the gate's mean gap is below every ungated policy's, each interval excluding zero",
                       ahead, "; ".join(f"{p} {t.loc[p, 'diff_to_gate']:+.2f} [{t.loc[p, 'diff_lo']:.2f}, "
                                        f"{t.loc[p, 'diff_hi']:.2f}]" for p in ungated)))
        claims.append(("the gate's pass^5 equals its single-seed exact rate",
                       abs(t.loc[GATE, pk] - t.loc[GATE, "exact_pct"]) < 1e-9,
                       f"{t.loc[GATE, 'exact_pct']:.1f}% -> {t.loc[GATE, pk]:.1f}%"))
    if "optimistic" in t.index and len(by_exact) > 1:
        claims.append(("optimistic is second by accuracy (behind the gate)",
                       by_exact[:2] == [GATE, "optimistic"], f"order by exact: {', '.join(by_exact)}"))
    for p in ("react", "sop"):
        if p in t.index:
            claims.append((f"{p} collapses under pass^5 (loses more than half its exact rate)",
                           t.loc[p, pk] < 0.5 * t.loc[p, "exact_pct"],
                           f"{t.loc[p, 'exact_pct']:.1f}% -> {t.loc[p, pk]:.1f}%"))
    return pd.DataFrame(claims, columns=["claim", "holds", "measured"])


def claims_notes(claims: pd.DataFrame) -> list[str]:
    """Markdown lines stating which claims hold, for the table's notes."""
    return ["Claims of the paper checked against this table:", ""] + [
        f"- {'holds' if c.holds else 'DOES NOT HOLD'}: {c.claim} ({c.measured})" for c in claims.itertuples()]


def figure1(df: pd.DataFrame, k_max: int = 5):
    """Figure 1: exact vs pass^5 per policy, and the pass^k curve. Returns two figures."""
    from finbench.plotting import plot_exact_vs_pass5, plot_pass_k_curve

    order = policy_order(df)
    s = M.summary_table(df, k=k_max).reindex(order)
    curve = M.pass_k_curve(df, ks=range(1, k_max + 1)).reindex(order)
    return plot_exact_vs_pass5(s, y=f"pass^{k_max}"), plot_pass_k_curve(curve)
