"""Probe arms: Table VIII, its figure and claims (issue 12; SPEC §10, "beyond the paper").

The paper's winning policy gates on the authoritative probe and so never has to
reason across the four replicas. These arms take the probe away in part or in
whole (`finbench.sim.probe.ProbeMode`: full, none, delayed, rate_limited,
identity_only) and add a tenth, unprivileged policy, `reconciler`
(`finbench.agents.reconciler`), that reasons across the replicas and uses the probe
only when it has one.

Notebook `09_probe_arms`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), n_boot=n_boot, policies=P.POLICIES, ...)
    rows = P.episodes(run)                   # sweep(run, {"probe": ProbeMode.all()})
    tables = P.tables(rows, run)             # table8, table8_differences, table8_archetypes
    claims = P.claims(tables)
    figures = P.figures(rows, run, tables)   # table8
    publish_experiment(P, run, tables, claims, figures)

Intervals are percentile bootstraps over units (twins together), `run.n_boot`
replicates from `run.boot_seed`; differences are paired on the same resamples.
"""
from __future__ import annotations

import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure
from finbench.analysis.verdicts import claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.agents.registry import DEFAULT_POLICIES
from finbench.sim.probe import ProbeMode
from finbench.running.run import sweep
from finbench.sim.probe import DEFAULT_DELAY, DEFAULT_LIMIT

NAME = "probe_arms"
SECTION = "Beyond the paper: probe arms, Table VIII"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
RECONCILER = "reconciler"
GATE = "finality_gate"
POLICIES = (*DEFAULT_POLICIES, RECONCILER)
"""SPEC's nine, then the reconciler."""
TABLES = ("table8", "table8_differences", "table8_archetypes")
"""The tables this experiment writes and its claims read, by stem."""
__all__ = ["PUBLISH", "POLICIES", "TABLES", "archetypes", "arms", "claims", "claims_from_tables", "differences",
           "episodes", "figure", "figures", "measures", "notes", "table8", "table8_markdown", "tables"]


def modes() -> list[ProbeMode]:
    """Table VIII's five arms (default D and N)."""
    return list(ProbeMode.all())


def arms(run, probe_modes=None) -> pd.DataFrame:
    """Episode rows of `run` under every probe mode, with a leading `probe` column (the mode's name)."""
    return sweep(run, {"probe": list(probe_modes or modes())})


def episodes(run) -> pd.DataFrame:
    """The episode rows under every probe mode (`arms` with Table VIII's five)."""
    return arms(run)


def tables(rows: pd.DataFrame, run) -> dict[str, pd.DataFrame]:
    """Table VIII, its paired differences and the reconciler per archetype, by stem (`TABLES`)."""
    return {"table8": table8(rows, run), "table8_differences": differences(rows, run),
            "table8_archetypes": archetypes(rows, run)}


def _order(df: pd.DataFrame) -> list[str]:
    present = df["policy"].unique().tolist()
    return [p for p in POLICIES if p in present] + [p for p in present if p not in POLICIES]


def table8(df: pd.DataFrame, run) -> pd.DataFrame:
    """Table VIII: one row per (probe mode, policy), modes in sweep order, policies SPEC's nine then the reconciler.

    Columns: `probe`, `policy`, `episodes`, `exact_pct` (`exact_lo`, `exact_hi`), `mean_gap`
    (`gap_lo`, `gap_hi`), `premature_pct`, `escalate_pct`, `probe_calls` (mean per episode),
    `n_calls` (mean).
    """
    rows = []
    for mode in df["probe"].unique().tolist():
        part = df[df["probe"] == mode]
        order = _order(part)
        gap = M.bootstrap_ci(part, "gap", order, run.n_boot, run.boot_seed)
        exact = M.bootstrap_ci(part, "exact", order, run.n_boot, run.boot_seed)
        g = part.groupby("policy")
        for p in order:
            sub = part[part["policy"] == p]
            rows.append({
                "probe": mode, "policy": p, "episodes": len(sub),
                "exact_pct": 100 * exact.loc[p, "estimate"], "exact_lo": 100 * exact.loc[p, "lo"],
                "exact_hi": 100 * exact.loc[p, "hi"],
                "mean_gap": gap.loc[p, "estimate"], "gap_lo": gap.loc[p, "lo"], "gap_hi": gap.loc[p, "hi"],
                "premature_pct": 100 * float(sub["premature_irreversible"].mean()),
                "escalate_pct": 100 * float((sub["disposition"] == "escalate").mean()),
                "probe_calls": float(g["probe_calls"].mean()[p]), "n_calls": float(g["n_calls"].mean()[p]),
            })
    return pd.DataFrame(rows)


def _ci(x, lo, hi, fmt="{:.2f}") -> str:
    return f"{fmt.format(x)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def table8_markdown(t8: pd.DataFrame) -> pd.DataFrame:
    """Policies down, probe modes across: mean gap $ [interval] and exact % in each cell."""
    modes_ = list(dict.fromkeys(t8["probe"]))
    out = []
    for p in dict.fromkeys(t8["policy"]):
        row = {"policy": p}
        for m in modes_:
            r = t8[(t8["probe"] == m) & (t8["policy"] == p)].iloc[0]
            row[f"{m}: gap $"] = _ci(r.mean_gap, r.gap_lo, r.gap_hi)
            row[f"{m}: exact %"] = _ci(r.exact_pct, r.exact_lo, r.exact_hi, "{:.1f}")
        out.append(row)
    return pd.DataFrame(out)


def _unprivileged(df: pd.DataFrame) -> list[str]:
    """Every policy but the reconciler that was never told the resolution (the rows' `privileged`)."""
    order = _order(df)
    return [p for p, told in zip(order, M.privileged(df, order)) if not told and p != RECONCILER]


def differences(df: pd.DataFrame, run) -> pd.DataFrame:
    """Per probe mode, each other unprivileged policy's mean gap minus the reconciler's (paired over
    units; > 0: the reconciler loses less), and the reconciler under each mode against the gate with
    the full probe (`vs = "finality_gate@full"`, reconciler minus gate)."""
    rows = []
    for mode in df["probe"].unique().tolist():
        part = df[df["probe"] == mode]
        others = _unprivileged(part)
        d = M.bootstrap_diff_table(part, RECONCILER, "gap", others, run.n_boot, run.boot_seed)
        for p in others:
            r = d.loc[p]
            rows.append({"probe": mode, "comparison": f"{p} - {RECONCILER}", "estimate": r["estimate"],
                         "lo": r["lo"], "hi": r["hi"], "excludes_zero": bool(r["lo"] > 0 or r["hi"] < 0)})
    full = "full" if "full" in set(df["probe"]) else None
    if full is not None:
        gate = df[(df["probe"] == full) & (df["policy"] == GATE)].assign(policy=f"{GATE}@full")
        for mode in df["probe"].unique().tolist():
            rec = df[(df["probe"] == mode) & (df["policy"] == RECONCILER)].assign(policy=f"{RECONCILER}@{mode}")
            both = pd.concat([rec, gate], ignore_index=True)
            r = M.bootstrap_diff(both, f"{RECONCILER}@{mode}", f"{GATE}@full", "gap", run.n_boot, run.boot_seed)
            rows.append({"probe": mode, "comparison": f"{RECONCILER}@{mode} - {GATE}@full",
                         "estimate": r["estimate"], "lo": r["lo"], "hi": r["hi"],
                         "excludes_zero": bool(r["lo"] > 0 or r["hi"] < 0)})
    return pd.DataFrame(rows)


def archetypes(df: pd.DataFrame, run) -> pd.DataFrame:
    """The reconciler per archetype and probe mode, beside the gate with the full probe:
    episodes, exact %, mean gap $ and its share of the reconciler's total gap in that mode."""
    gate = df[(df["probe"] == "full") & (df["policy"] == GATE)] if "full" in set(df["probe"]) else df.iloc[0:0]
    gate_gap = gate.groupby("archetype")["gap"].mean()
    rows = []
    for mode in df["probe"].unique().tolist():
        rec = df[(df["probe"] == mode) & (df["policy"] == RECONCILER)]
        total = float(rec["gap"].sum())
        for a, sub in rec.groupby("archetype", sort=True):
            rows.append({"probe": mode, "archetype": a, "episodes": len(sub),
                         "exact_pct": 100 * float(sub["exact"].mean()), "mean_gap": float(sub["gap"].mean()),
                         "share_of_gap_pct": 100 * float(sub["gap"].sum()) / total if total else 0.0,
                         "gate_full_gap": float(gate_gap.get(a, float("nan")))})
    return pd.DataFrame(rows)


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the probe arms' claims (`data/paper_claims.csv`, experiment "probe_arms"), from
    Table VIII and its paired differences: under `none` whether every other unprivileged policy minus the
    reconciler lies above zero (each interval); the reconciler under `none` minus the gate under `full`
    with its paired interval; the reconciler's probe calls per episode under `full`. A measure is None
    (not run) when its arm or policy is absent."""
    t8, diffs = tables["table8"], tables["table8_differences"]
    src8, srcd = (f"tables/{stem}.csv" for stem in TABLES[:2])
    t = t8.set_index(["probe", "policy"])
    none = diffs[(diffs["probe"] == "none") & ~diffs["comparison"].str.contains("@")]
    best = None
    if len(none):
        best = Measure(bool((none["estimate"] > 0).all() and (none["lo"] > 0).all()), source=srcd,
                  shown="; ".join(f"{r.comparison} {_ci(r.estimate, r.lo, r.hi)}" for r in none.itertuples()))
    vs = diffs[diffs["comparison"] == f"{RECONCILER}@none - {GATE}@full"]
    within = None
    if len(vs):
        r = vs.iloc[0]
        within = Measure(float(r["estimate"]), float(r["lo"]), float(r["hi"]), source=srcd,
                    shown=f"{RECONCILER}@none - {GATE}@full {_ci(r['estimate'], r['lo'], r['hi'])}")
    uses = None
    if ("full", RECONCILER) in t.index:
        used = float(t.loc[("full", RECONCILER), "probe_calls"])
        uses = Measure(used, shown=f"{used:.2f} probe calls per episode under full", source=src8)
    return {"reconciler_best_without_probe": best, "reconciler_none_within_gate_full": within,
            "reconciler_uses_probe": uses}


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The issue's acceptance (`data/paper_claims.csv`, experiment "probe_arms"), decided on ours (`measures`):
    under `none` the reconciler's mean gap is below every other unprivileged policy's, each difference's
    interval excluding zero; it is indistinguishable from the gate with the full probe; and it uses the
    probe when it has one. Reads `tables["table8"]` and `tables["table8_differences"]`."""
    return claims_of(NAME, measures(tables))


def notes(t8: pd.DataFrame, diffs: pd.DataFrame, arch: pd.DataFrame, claims_list=None) -> list[str]:
    """Markdown notes under Table VIII: the modes, the acceptance difference, where the gap lies."""
    lines = [
        "Probe modes: full (SPEC §4's probe); none (the probe answers that it is unavailable, and costs the "
        f"call); delayed (answers as of t - D, D = {DEFAULT_DELAY}); rate_limited (at most N = {DEFAULT_LIMIT} "
        "answers per episode, then unavailable); identity_only (each capture's id, key and amount, never its "
        "status). The reconciler is registered beside SPEC's nine, not among them.",
        "",
        "Cells: mean gap $ and exact %, each with a 95% percentile bootstrap interval over units (twins "
        "together); the CSV also holds premature-irreversible %, escalate %, probe calls and calls per episode.",
        "",
    ]
    none = diffs[(diffs["probe"] == "none")]
    if len(none):
        lines.append("Under no probe, paired differences of mean gap $ (other policy minus reconciler; > 0: the "
                     "reconciler loses less): " + "; ".join(
                         f"{r.comparison} {r.estimate:.2f} [{r.lo:.2f}, {r.hi:.2f}]" for r in none.itertuples()) + ".")
        lines.append("")
    rec = arch[(arch["probe"] == "none") & (arch["mean_gap"] > 0.005)].sort_values("share_of_gap_pct",
                                                                                   ascending=False)
    if len(rec):
        lines.append("Where the reconciler's gap lies under no probe (archetype: mean gap $, share of its total; "
                     "the gate with the full probe in brackets): " + "; ".join(
                         f"{r.archetype} {r.mean_gap:.2f}, {r.share_of_gap_pct:.0f}% [{r.gate_full_gap:.2f}]"
                         for r in rec.itertuples()) + ".")
        lines.append("")
    return lines + (claims_notes(claims_list) if claims_list else [])


def figure(t8: pd.DataFrame, run=None):
    """Mean gap $ with its interval, one row per policy, one marker per probe mode."""
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    policies = list(dict.fromkeys(t8["policy"]))
    modes_ = list(dict.fromkeys(t8["probe"]))
    n, k = len(policies), len(modes_)
    y = np.arange(n)
    colors = sns.color_palette("colorblind", k)
    markers = ["o", "s", "^", "D", "v", "P", "X"]
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * n + 1.6), layout="constrained", dpi=PNG_DPI)
    step = 0.7 / max(k, 1)
    for j, m in enumerate(modes_):
        part = t8[t8["probe"] == m].set_index("policy").reindex(policies)
        mid, lo, hi = (part[c].to_numpy(dtype=float) for c in ("mean_gap", "gap_lo", "gap_hi"))
        yy = y - 0.35 + step * (j + 0.5)
        ax.errorbar(mid, yy, xerr=[mid - lo, hi - mid], fmt=markers[j % len(markers)], color=colors[j], ms=3.5,
                    elinewidth=0.8, capsize=1.5, label=m, clip_on=False)
    ax.set_yticks(y, policies, fontsize=7)
    ax.set_ylim(n - 0.5, -1.4)
    ax.set_xlim(left=0)
    ax.set_xlabel("mean gap per episode ($), 95% interval over units")
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper center", ncol=k, fontsize=7, frameon=False, bbox_to_anchor=(0.5, 1.0),
              handletextpad=0.3, columnspacing=1.0)
    ax.set_title("Probe arms: what each policy loses when the authoritative probe is taken away", fontsize=8)
    return fig


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """Table VIII's figure (mean gap per policy and probe mode), by stem; Table VIII from `tables` if given."""
    t8 = tables["table8"] if tables else table8(rows, run)
    return {"table8": figure(t8, run)}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "table8": TableSpec("Table VIII: probe arms (mean gap $ and exact % per policy and probe mode)",
                        markdown=lambda t: table8_markdown(t["table8"]),
                        notes=lambda t, claims: notes(t["table8"], t["table8_differences"], t["table8_archetypes"],
                                                      claims),
                        meta=lambda run: {"probe_modes": ", ".join(m.name for m in modes())}),
    "table8_differences": TableSpec("Table VIII: paired differences of mean gap $"),
    "table8_archetypes": TableSpec("Table VIII: the reconciler per archetype and probe mode", bootstrap=False),
}
"""How each table is written (`publish_experiment`)."""
