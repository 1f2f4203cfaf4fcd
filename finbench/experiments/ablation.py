"""The fault ablation: Table VI, Figure 3, what each family changes, and the 2x2 of loss and delay (SPEC §10).

Notebook `04_ablation`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), policies=ablation.POLICIES, ...)
    rows = ablation.episodes(run)        # every arm, one sweep: the same tasks and seeds in each
    tables = ablation.tables(rows, run)  # table6, table6_firings, table6_families, interaction
    claims = ablation.claims(tables)
    figures = ablation.figures(rows, run, tables)        # figure3
    publish_experiment(ablation, run, tables, claims, figures)

Arms: all, none, `only(f)` and `without(f)` for each of the six families (14),
and loss+delay for the 2x2. Every arm runs the same tasks and seeds, and fault
draws are keyed per family, so a difference between two arms of one episode is
what the families that differ did to it. Besides SPEC's nine, every arm runs
`sop[fallback=refund]`: the paper never says what its procedure does when its
patience runs out, and the 2x2 shows whether its conclusion depends on that.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.sim import constants as C
from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure
from finbench.analysis.verdicts import claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.sim.faults import FaultProfile
from finbench.agents.policies import UNGATED
from finbench.agents.registry import DEFAULT_POLICIES, policy_order
from finbench.running.run import sweep

NAME = "ablation"
SECTION = "Fault ablation and the 2x2: Table VI, Figure 3"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
GATE = "finality_gate"
SOP_REFUND = "sop[fallback=refund]"
POLICIES = (*DEFAULT_POLICIES, SOP_REFUND)
"""SPEC's nine and the procedure with the other fallback."""
FAMILIES = C.FAMILIES
KEYS = ["policy", "task_id", "seed"]
TABLES = ("table6", "table6_firings", "table6_families", "interaction")
"""The tables this experiment writes and its claims read, by stem."""


def arms() -> dict[str, FaultProfile]:
    """Arm name -> fault profile, in the order the tables show them."""
    profiles = [FaultProfile.default(), FaultProfile.none()]
    profiles += [FaultProfile.only(f) for f in FAMILIES]
    profiles += [FaultProfile.without(f) for f in FAMILIES]
    profiles += [FaultProfile.only("loss", "delay")]
    return {p.name: p for p in profiles}


ALL, NONE = "all", "none"
LOSS, DELAY, BOTH = "only:loss", "only:delay", FaultProfile.only("loss", "delay").name


def episodes(run) -> pd.DataFrame:
    """Every arm's episodes under `run` (its profile replaced), with an `arm` column first."""
    return sweep(run, {"profile": list(arms().values())}).rename(columns={"profile": "arm"})


def tables(rows: pd.DataFrame, run) -> dict[str, pd.DataFrame]:
    """Table VI, the firings, what each family changes and the 2x2, by stem (`TABLES`)."""
    return {"table6": table6(rows, run), "table6_firings": firings(rows), "table6_families": families(rows, run),
            "interaction": interaction(rows, run)}


def _wide(df: pd.DataFrame, value: str) -> pd.DataFrame:
    """One row per episode (policy, task, seed) with `unit` and one column of `value` per arm."""
    wide = df.set_index([*KEYS, "arm"])[value].unstack("arm")
    units = df.drop_duplicates(KEYS).set_index(KEYS)["unit"]
    return wide.join(units)


def _ci(frame: pd.DataFrame, values: pd.Series, order, run) -> pd.DataFrame:
    """Mean of per-episode `values` per policy, with a unit-bootstrap interval (shared resamples)."""
    rows = frame[["unit"]].assign(value=values.astype(float)).reset_index()
    return M.bootstrap_ci(rows, "value", order, run.n_boot, run.boot_seed)


def _check_same_episodes(df: pd.DataFrame) -> None:
    """Every arm must hold the same (policy, task, seed) episodes: the comparison is paired."""
    sizes = df.groupby("arm").size()
    if sizes.nunique() != 1 or df.duplicated([*KEYS, "arm"]).any():
        raise ValueError(f"arms hold different episodes: {sizes.to_dict()}")


def table6(df: pd.DataFrame, run) -> pd.DataFrame:
    """Mean gap per arm and policy with its interval (long form: arm, policy, episodes, mean_gap, gap_lo, gap_hi)."""
    _check_same_episodes(df)
    order = policy_order(df["policy"])
    out = []
    for arm in arms():
        d = df[df["arm"] == arm]
        ci = M.bootstrap_ci(d, "gap", order, run.n_boot, run.boot_seed)
        n = d.groupby("policy").size().reindex(order)
        out.append(pd.DataFrame({"arm": arm, "policy": order, "episodes": n.to_numpy(),
                                 "mean_gap": ci["estimate"].to_numpy(), "gap_lo": ci["lo"].to_numpy(),
                                 "gap_hi": ci["hi"].to_numpy()}))
    return pd.concat(out, ignore_index=True)


def table6_markdown(t6: pd.DataFrame) -> pd.DataFrame:
    """Arms as rows, policies as columns: mean gap $ [interval]."""
    cell = t6.assign(cell=[f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in zip(t6.mean_gap, t6.gap_lo, t6.gap_hi)])
    wide = cell.pivot(index="arm", columns="policy", values="cell")
    return wide.reindex(index=list(dict.fromkeys(t6.arm)), columns=list(dict.fromkeys(t6.policy))).reset_index()


def firings(df: pd.DataFrame) -> pd.DataFrame:
    """Firings per episode of each family, per arm, from the `fired` records of the episodes of the paper's
    nine policies (`DEFAULT_POLICIES`; of every policy if none of them ran): a policy's own captures are
    delivered and faulted too, so the rate depends on who plays, and the paper's is over its nine."""
    nine = df["policy"].isin(DEFAULT_POLICIES)
    if nine.any():
        df = df[nine]
    cols = [f"fired_{f}" for f in FAMILIES]
    t = df.groupby("arm", sort=False)[cols].mean().reindex(list(arms()))
    t.columns = list(FAMILIES)
    t.insert(0, "episodes", df.groupby("arm", sort=False).size().reindex(list(arms())).to_numpy())
    return t.reset_index()


def families(df: pd.DataFrame, run) -> pd.DataFrame:
    """Per family and policy: the cost the family adds alone and removes when taken away, and whose
    decisions it changes.

    Columns: family, policy; `alone` = gap(only f) - gap(none) and `removed` = gap(all) -
    gap(without f), each with `_lo`/`_hi` (episode-paired, unit bootstrap); `changed_alone_n/_pct`
    and `changed_removed_n/_pct`: episodes whose action sequence differs between the two arms;
    `flipped_alone_n`, `flipped_removed_n`: episodes whose disposition differs.
    """
    _check_same_episodes(df)
    order = policy_order(df["policy"])
    gap, calls, disp = _wide(df, "gap"), _wide(df, "calls"), _wide(df, "disposition")
    rows = []
    for f in FAMILIES:
        only, without = f"only:{f}", f"without:{f}"
        alone = _ci(gap, gap[only] - gap[NONE], order, run)
        removed = _ci(gap, gap[ALL] - gap[without], order, run)
        c_alone = (calls[only] != calls[NONE]).groupby(level="policy").agg(["sum", "mean"])
        c_removed = (calls[ALL] != calls[without]).groupby(level="policy").agg(["sum", "mean"])
        f_alone = (disp[only] != disp[NONE]).groupby(level="policy").sum()
        f_removed = (disp[ALL] != disp[without]).groupby(level="policy").sum()
        for p in order:
            rows.append({
                "family": f, "policy": p,
                "alone": alone.loc[p, "estimate"], "alone_lo": alone.loc[p, "lo"], "alone_hi": alone.loc[p, "hi"],
                "removed": removed.loc[p, "estimate"], "removed_lo": removed.loc[p, "lo"],
                "removed_hi": removed.loc[p, "hi"],
                "changed_alone_n": int(c_alone.loc[p, "sum"]), "changed_alone_pct": 100 * c_alone.loc[p, "mean"],
                "changed_removed_n": int(c_removed.loc[p, "sum"]),
                "changed_removed_pct": 100 * c_removed.loc[p, "mean"],
                "flipped_alone_n": int(f_alone.loc[p]), "flipped_removed_n": int(f_removed.loc[p]),
            })
    return pd.DataFrame(rows)


def interaction(df: pd.DataFrame, run) -> pd.DataFrame:
    """The 2x2 of loss and delay per policy: each cell's mean gap, the cost of loss alone, of delay alone
    and of both (each minus none), and the interaction (both - loss - delay + none) with its interval."""
    order = policy_order(df["policy"])
    gap = _wide(df[df["arm"].isin([NONE, LOSS, DELAY, BOTH])], "gap")
    cells = gap.groupby(level="policy")[[NONE, LOSS, DELAY, BOTH]].mean().reindex(order)
    inter = _ci(gap, gap[BOTH] - gap[LOSS] - gap[DELAY] + gap[NONE], order, run)
    return pd.DataFrame({
        "policy": order, "none": cells[NONE].to_numpy(), "loss": cells[LOSS].to_numpy(),
        "delay": cells[DELAY].to_numpy(), "both": cells[BOTH].to_numpy(),
        "loss_cost": (cells[LOSS] - cells[NONE]).to_numpy(), "delay_cost": (cells[DELAY] - cells[NONE]).to_numpy(),
        "both_cost": (cells[BOTH] - cells[NONE]).to_numpy(),
        "interaction": inter["estimate"].to_numpy(), "interaction_lo": inter["lo"].to_numpy(),
        "interaction_hi": inter["hi"].to_numpy(),
    })


def families_markdown(fam: pd.DataFrame) -> pd.DataFrame:
    def ci(x, lo, hi):
        return f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]"

    return pd.DataFrame({
        "family": fam.family, "policy": fam.policy,
        "adds alone $ (only - none)": [ci(*v) for v in zip(fam.alone, fam.alone_lo, fam.alone_hi)],
        "removes $ (all - without)": [ci(*v) for v in zip(fam.removed, fam.removed_lo, fam.removed_hi)],
        "decisions changed alone": [f"{n} ({p:.1f}%)" for n, p in zip(fam.changed_alone_n, fam.changed_alone_pct)],
        "decisions changed, removed": [f"{n} ({p:.1f}%)" for n, p in zip(fam.changed_removed_n,
                                                                          fam.changed_removed_pct)],
        "dispositions flipped (alone / removed)": [f"{a} / {r}" for a, r in zip(fam.flipped_alone_n,
                                                                               fam.flipped_removed_n)],
    })


def interaction_markdown(inter: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "policy": inter.policy, "none $": inter["none"].round(2), "loss only $": inter["loss"].round(2),
        "delay only $": inter["delay"].round(2), "both $": inter["both"].round(2),
        "loss costs $": inter.loss_cost.round(2), "delay costs $": inter.delay_cost.round(2),
        "both cost $": inter.both_cost.round(2),
        "interaction $": [f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]" for x, lo, hi in
                          zip(inter.interaction, inter.interaction_lo, inter.interaction_hi)],
    })


def _who_changes(fam: pd.DataFrame, family: str, col: str) -> list[str]:
    d = fam[(fam.family == family) & (fam[col] > 0)]
    return list(d.policy)


def _flipped(fam: pd.DataFrame, family: str) -> list[str]:
    """Which of SPEC's nine end an episode differently with the family present (alone or in all)."""
    d = fam[(fam.family == family) & fam.policy.isin(DEFAULT_POLICIES)
            & ((fam.flipped_alone_n > 0) | (fam.flipped_removed_n > 0))]
    return list(d.policy)


def _decisions_text(fam: pd.DataFrame, family: str) -> str:
    d = fam[(fam.family == family) & fam.policy.isin(DEFAULT_POLICIES)]
    flips = [f"{r.policy} {r.flipped_alone_n} alone / {r.flipped_removed_n} removed" for r in d.itertuples()
             if r.flipped_alone_n or r.flipped_removed_n]
    seqs = [f"{r.policy} {r.changed_alone_n} / {r.changed_removed_n}" for r in d.itertuples()
            if r.changed_alone_n or r.changed_removed_n]
    return (f"dispositions flipped: {'; '.join(flips) or 'none'}; action sequences changed (alone / removed): "
            f"{'; '.join(seqs) or 'none'}")


def notes(fr: pd.DataFrame, fam: pd.DataFrame, inter: pd.DataFrame) -> list[str]:
    """What each family changes, in sentences computed from the tables."""
    lines = ["Decisions changed: episodes whose action sequence differs between `all` and `without(f)` "
             "(removed) and between `none` and `only(f)` (alone); a flipped disposition is a different "
             "final action.", ""]
    allrow = fr.set_index("arm").loc[ALL]
    lines.append("- Firings per episode under all: " + ", ".join(f"{f} {allrow[f]:.2f}" for f in FAMILIES) + ".")
    for f in FAMILIES:
        removed = _who_changes(fam, f, "changed_removed_n")
        alone = _who_changes(fam, f, "changed_alone_n")
        flips = fam[(fam.family == f) & ((fam.flipped_removed_n > 0) | (fam.flipped_alone_n > 0))]
        text = (f"- {f}: changes decisions of {', '.join(removed) or 'no policy'} when removed from all; "
                f"of {', '.join(alone) or 'no policy'} alone")
        if len(flips):
            text += "; dispositions flipped for " + ", ".join(
                f"{r.policy} ({r.flipped_removed_n} removed / {r.flipped_alone_n} alone)" for r in flips.itertuples())
        lines.append(text + ".")
    signs = ", ".join(f"{r.policy} {r.interaction:+.2f}" for r in inter.itertuples() if r.policy != "finality_oracle")
    lines.append(f"- Loss x delay interaction (both - loss - delay + none): {signs}.")
    return lines


def _interval(x, lo, hi) -> str:
    return f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the ablation's claims (`data/paper_claims.csv`, experiment "ablation"), from the
    four tables (`TABLES`); None for a claim whose arm or policy the tables do not hold."""
    t6, fr, fam, inter = (tables[stem] for stem in TABLES)
    src6, srcf, srcfam, srci = (f"tables/{stem}.csv" for stem in TABLES)
    fires = fr.set_index("arm")
    fires = fires.loc[ALL] if ALL in fires.index else pd.Series(dtype=float)
    most = max((f for f in FAMILIES if f in fires.index), key=lambda f: fires[f], default=None)
    out = {f"fires_{f}": (Measure(float(fires[f]), shown=f"{fires[f]:.2f} per episode (most: {most})", source=srcf)
                          if f in fires.index else None) for f in ("loss", "duplicate", "reorder")}
    by = fam.set_index(["family", "policy"])
    present = set(fam.policy)
    out["loss_dominates"] = _loss_dominates(t6, by, [p for p in UNGATED if p in present], srcfam)
    nine = [p for p in DEFAULT_POLICIES if p in present]
    reo = _flipped(fam, "reorder")
    out["reorder_changes_nothing"] = (Measure(len(reo), shown=f"{len(reo)} of {len(nine)} ({', '.join(reo) or 'none'}); "
                                         + _decisions_text(fam, "reorder"), source=srcfam) if nine and (fam.family == "reorder").any() else None)
    mv = ("duplicate", "majority_vote") in by.index
    out["duplicate_changes_only_majority_vote"] = (Measure(_flipped(fam, "duplicate") == ["majority_vote"],
                                                      shown=_decisions_text(fam, "duplicate"), source=srcfam)
                                                   if mv else None)
    if mv:
        r = by.loc[("duplicate", "majority_vote")]
        out["majority_vote_duplicate"] = Measure(float(r["removed"]), shown=_interval(r["removed"], r["removed_lo"],
                                                                                  r["removed_hi"]), source=srcfam)
    else:
        out["majority_vote_duplicate"] = None
    it = inter.set_index("policy")
    for name, col in (("sop_loss", "loss_cost"), ("sop_delay", "delay_cost"), ("sop_both", "both_cost")):
        out[name] = (Measure(float(it.loc["sop", col]), shown=f"{it.loc['sop', col]:.2f} (none {it.loc['sop', 'none']:.2f})",
                        source=srci) if "sop" in it.index else None)
    for name, p in (("sop_interaction", "sop"), ("react_interaction_negative", "react"),
                    ("reflection_interaction_negative", "reflection")):
        out[name] = (Measure(float(it.loc[p, "interaction"]), float(it.loc[p, "interaction_lo"]),
                        float(it.loc[p, "interaction_hi"]), source=srci,
                        shown=_interval(it.loc[p, "interaction"], it.loc[p, "interaction_lo"],
                                        it.loc[p, "interaction_hi"])) if p in it.index else None)
    gate = t6[t6.policy == GATE]
    if len(gate):
        changed = int(fam[fam.policy == GATE][["changed_alone_n", "changed_removed_n"]].to_numpy().sum())
        distinct = int(gate["mean_gap"].nunique())
        out["gate_flat"] = Measure(distinct == 1 and changed == 0, source=src6,
                              shown=f"{distinct} distinct mean gap(s) over {len(gate)} arms; actions changed in "
                                    f"{changed} episode comparisons")
    else:
        out["gate_flat"] = None
    return out


def _loss_dominates(t6: pd.DataFrame, by: pd.DataFrame, ungated: list[str], src: str):
    """"Accounting for most of the damage on its own": whether loss alone (only:loss - none) is more than half
    of the damage of the whole profile (all - none), pooled over the ungated policies it hurts (`ungated`: of
    the paper's nine; random, which decides without reading, is hurt by nothing). The per-policy reading (for
    how many the share is more than half) is shown beside it."""
    g = t6.pivot_table(index="policy", columns="arm", values="mean_gap", aggfunc="first")
    if ALL not in g.columns or NONE not in g.columns:
        return None
    damage = {p: float(g.loc[p, ALL] - g.loc[p, NONE]) for p in ungated if p in g.index and ("loss", p) in by.index}
    hurt = [p for p in ungated if damage.get(p, 0.0) > C.MONEY_TOL]
    if not hurt:
        return None
    alone = {p: float(by.loc[("loss", p), "alone"]) for p in hurt}
    share = sum(alone.values()) / sum(damage[p] for p in hurt)
    most = [p for p in hurt if alone[p] > damage[p] / 2]
    return Measure(share > 0.5, source=src,
              shown=f"loss alone is {share:.1%} of the damage pooled over the {len(hurt)} ungated policies the "
                    f"profile hurts (all - none ${sum(damage[p] for p in hurt):.2f}, loss alone "
                    f"${sum(alone.values()):.2f}); per policy more than half for {len(most)} of {len(hurt)}: "
                    + ", ".join(f"{p} {alone[p] / damage[p]:.0%}" for p in hurt))


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about the ablation, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


def figure3(fam: pd.DataFrame):
    """Figure 3: policy x family heatmaps of the cost a family adds alone and removes when taken away."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    order = list(dict.fromkeys(fam.policy))
    panels = (("alone", "adds alone: only(family) − none"), ("removed", "removes when taken away: all − without(family)"))
    mats = {k: fam.pivot(index="policy", columns="family", values=k).reindex(index=order, columns=list(FAMILIES))
            for k, _ in panels}
    lim = max(1.0, float(np.nanmax([np.abs(m.to_numpy()).max() for m in mats.values()])))
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.6), layout="constrained", sharey=True)
    for ax, (k, title) in zip(axes, panels):
        sns.heatmap(mats[k], ax=ax, cmap="RdBu_r", vmin=-lim, vmax=lim, center=0, annot=True, fmt=".1f",
                    annot_kws={"fontsize": 7}, cbar=k == "removed", linewidths=0.5, linecolor="white",
                    cbar_kws={"label": "mean gap, $ per episode (red: the family costs money)"})
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("fault family")
        ax.set_ylabel("policy" if k == "alone" else "")
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("What each fault family costs each policy (Figure 3)", fontsize=10)
    return fig


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """Figure 3 (what each family costs each policy), by stem; the families table from `tables` if given."""
    fam = tables["table6_families"] if tables else families(rows, run)
    return {"figure3": figure3(fam)}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "table6": TableSpec("Table VI: mean gap $ per fault arm and policy",
                        markdown=lambda t: table6_markdown(t["table6"]), notes=lambda t, claims: claims_notes(claims),
                        meta=lambda run: {"arms": len(arms())}),
    "table6_firings": TableSpec("Firings per episode of each family, per arm (the paper's nine policies)",
                                bootstrap=False),
    "table6_families": TableSpec("What each family costs and changes, per policy",
                                 markdown=lambda t: families_markdown(t["table6_families"]),
                                 notes=lambda t, claims: notes(t["table6_firings"], t["table6_families"],
                                                               t["interaction"])),
    "interaction": TableSpec("The 2x2 of loss and delay", markdown=lambda t: interaction_markdown(t["interaction"])),
}
"""How each table is written (`publish_experiment`)."""
