"""Twin pairs: Table IV, Figure 2 and their claims (SPEC §6, §10).

A twin pair is two tasks that differ only in the original capture's terminal
outcome (one settles, one fails); nothing observable before `determined_at`
tells them apart. A policy that commits before the outcome exists therefore
bets: it wins on one half of the pair and loses on the other. Accuracy over
all tasks rewards the bet whenever settling cases outnumber failing ones; the
paired loss (mean gap over both halves) does not.

Notebook `02_twins`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), n_boot=n_boot, ...)
    rows = twins.episodes(run)
    tables = twins.tables(rows, run)                     # table4
    claims = twins.claims(tables)
    figures = twins.figures(rows, run, tables)           # figure2
    publish_experiment(twins, run, tables, claims, figures)

The notebook also draws one twin pair's timeline (`finbench.analysis.timeline`).

Intervals are percentile bootstraps over the twin pairs (each pair is one unit,
both halves resampled together), `run.n_boot` replicates from `run.boot_seed`.
Every twin column is resampled over the same set of units, so the paired loss,
the two halves and the premature rate of all policies share one resample.
"""
from __future__ import annotations

import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure, claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.agents.registry import policy_order
from finbench.analysis import ordering

GATE = "finality_gate"
OPTIMISTIC = "optimistic"
NAME = "twins"
SECTION = "Twin pairs: Table IV, Figure 2"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
SOURCE = "tables/table4.csv"
TABLES = ("table4",)
"""The tables this experiment writes and its claims read, by stem."""
__all__ = ["PUBLISH", "TABLES", "claims", "claims_from_tables", "episodes", "figure2", "figures", "measures",
           "rankings", "table4", "table4_markdown", "table4_notes", "tables"]


def _boot(run) -> tuple[int, int]:
    if run is not None:
        return run.n_boot, run.boot_seed
    return 2000, 0


def episodes(run):
    """The episode rows: the run's policies over its corpus and seeds (the headline's, shared through the cache)."""
    return run.evaluate()


def tables(rows: pd.DataFrame, run=None) -> dict[str, pd.DataFrame]:
    """Table IV, by stem (`TABLES`)."""
    return {"table4": table4(rows, run)}


def table4(df: pd.DataFrame, run=None) -> pd.DataFrame:
    """Table IV: per policy, what the twin pairs cost it, beside its accuracy.

    Args:
        df: episode rows (`evaluate`, `Run.evaluate`); must include twin tasks.
        run: the `Run` behind them, for the bootstrap (replicates, seed); None:
            2,000 replicates, seed 0.

    Returns:
        One row per policy in `policy_order`, columns:
        `policy`, `n_pairs` (distinct twin pairs), `settle_episodes`, `fail_episodes`;
        `paired_loss` (mean gap over every twin episode, both halves) with `paired_lo`,
        `paired_hi`; `settle_gap`, `settle_lo`, `settle_hi` and `fail_gap`, `fail_lo`,
        `fail_hi` (mean gap over one half); `premature_pct`, `premature_lo`,
        `premature_hi` (% of twin episodes with an irreversible action before
        determination); `premature_all_pct` (the same over every episode, every task and
        seed: Table II's premature-irreversible %); `same_disposition_pct` (% of twin pairs x seeds on
        which both halves ended with the same disposition: 100 for a policy that cannot tell them apart);
        `exact_pct`, `exact_lo`, `exact_hi`
        (% of all episodes exact, over every task: Table II's accuracy and interval); `rank_exact` (1 = most
        accurate), `rank_paired` (1 = lowest paired loss) and `rank_differs`.
        Twin intervals resample twin pairs; the accuracy interval resamples every unit.

    Raises:
        ValueError: the rows hold no twin task, or a pair lacks one half.

    Example:
        Optimistic ships before the outcome exists: third by accuracy, last by paired loss.

        >>> from finbench.running.run import Run
        >>> run = Run.make(n_tasks=60, seeds=range(3), n_boot=200, cache=False)
        >>> t4 = table4(run.evaluate(), run).set_index("policy")
        >>> t4.loc["optimistic", ["settle_gap", "fail_gap"]].round(1).tolist()
        [4.4, 393.5]
        >>> t4.loc["optimistic", ["rank_exact", "rank_paired"]].tolist()
        [3, 9]
    """
    n_boot, seed = _boot(run)
    order = policy_order(df["policy"])
    twins = df[df["twin_side"].notna()]
    if twins.empty:
        raise ValueError("table4: the episode rows hold no twin task")
    settle = twins[twins["twin_side"] == "settle"]
    fail = twins[twins["twin_side"] == "fail"]
    if set(settle["unit"]) != set(fail["unit"]):
        raise ValueError("table4: some twin pairs lack a half; evaluate whole pairs")
    point = ordering.twin_table(df).reindex(order)
    # The four twin intervals resample the same universe (the twin pairs), so they
    # draw the same resampled pairs; accuracy resamples every unit, as Table II does.
    paired = M.bootstrap_ci(twins, "gap", order, n_boot, seed)
    s_ci = M.bootstrap_ci(settle, "gap", order, n_boot, seed)
    f_ci = M.bootstrap_ci(fail, "gap", order, n_boot, seed)
    prem = M.bootstrap_ci(twins, "premature_irreversible", order, n_boot, seed)
    exact = M.bootstrap_ci(df, "exact", order, n_boot, seed)
    side_n = twins.groupby(["policy", "twin_side"]).size().unstack("twin_side").reindex(order)
    # whether a policy tells the halves apart at all: both halves of a pair (one seed) ended alike
    ends = twins.pivot_table(index=["policy", "unit", "seed"], columns="twin_side", values="disposition",
                             aggfunc="first")
    same = (ends["settle"] == ends["fail"]).groupby("policy").mean().reindex(order)
    out = pd.DataFrame({
        "policy": order,
        "n_pairs": point["n_pairs"].to_numpy(),
        "settle_episodes": side_n["settle"].to_numpy(),
        "fail_episodes": side_n["fail"].to_numpy(),
        "paired_loss": point["paired_loss"].to_numpy(),
        "paired_lo": paired["lo"].to_numpy(), "paired_hi": paired["hi"].to_numpy(),
        "settle_gap": point["settle_gap"].to_numpy(),
        "settle_lo": s_ci["lo"].to_numpy(), "settle_hi": s_ci["hi"].to_numpy(),
        "fail_gap": point["fail_gap"].to_numpy(),
        "fail_lo": f_ci["lo"].to_numpy(), "fail_hi": f_ci["hi"].to_numpy(),
        "premature_pct": 100 * point["premature_irreversible"].to_numpy(),
        "premature_lo": 100 * prem["lo"].to_numpy(), "premature_hi": 100 * prem["hi"].to_numpy(),
        "premature_all_pct": 100 * M.premature_rate(df).reindex(order).to_numpy(),
        "same_disposition_pct": 100 * same.to_numpy(),
        "exact_pct": 100 * exact["estimate"].to_numpy(),
        "exact_lo": 100 * exact["lo"].to_numpy(), "exact_hi": 100 * exact["hi"].to_numpy(),
        "privileged": M.privileged(df, order),
    })
    r = rankings(out)
    out["rank_exact"] = [r["by_exact"].index(p) + 1 for p in order]
    out["rank_paired"] = [r["by_paired_loss"].index(p) + 1 for p in order]
    out["rank_differs"] = out["rank_exact"] != out["rank_paired"]
    return out


def rankings(t4: pd.DataFrame) -> dict:
    """The two orderings of Table IV's policies and how many places they disagree.

    Accuracy is ranked descending (`exact_pct`), paired loss ascending (`paired_loss`);
    ties are broken by policy name in both (`ordering.rank_policies`).

    Returns:
        {"by_exact": [names, best first], "by_paired_loss": [names, best first],
         "disagreements": `ordering.rank_disagreements` of the two}.
    """
    t = t4.set_index("policy")
    by_exact = ordering.rank_policies(t["exact_pct"], ascending=False)
    by_loss = ordering.rank_policies(t["paired_loss"], ascending=True)
    return {"by_exact": by_exact, "by_paired_loss": by_loss,
            "disagreements": ordering.rank_disagreements(by_exact, by_loss)}


def _ci(x, lo, hi, fmt="{:.1f}") -> str:
    return f"{fmt.format(x)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def table4_markdown(t4: pd.DataFrame) -> pd.DataFrame:
    """The human rendering of Table IV: point estimates with their intervals, and the two ranks."""
    rows = []
    for r in t4.itertuples(index=False):
        rows.append({
            "policy": r.policy,
            "pairs": int(r.n_pairs),
            "paired loss $": _ci(r.paired_loss, r.paired_lo, r.paired_hi, "{:.2f}"),
            "settle half $": _ci(r.settle_gap, r.settle_lo, r.settle_hi, "{:.2f}"),
            "fail half $": _ci(r.fail_gap, r.fail_lo, r.fail_hi, "{:.2f}"),
            "premature-irreversible % (twins)": _ci(r.premature_pct, r.premature_lo, r.premature_hi),
            "premature-irreversible % (all tasks)": f"{r.premature_all_pct:.1f}",
            "same end on both halves %": f"{r.same_disposition_pct:.1f}",
            "exact % (all tasks)": _ci(r.exact_pct, r.exact_lo, r.exact_hi),
            "rank by exact": int(r.rank_exact),
            "rank by paired loss": int(r.rank_paired),
            "ranks differ": "yes" if r.rank_differs else "",
        })
    return pd.DataFrame(rows)


def table4_notes(t4: pd.DataFrame, claims_list: list | None = None) -> list[str]:
    """Markdown notes under Table IV: the two rankings, what the columns count, and the claims."""
    r = rankings(t4)
    lines = [
        f"Ranked by exact % (best first): {', '.join(r['by_exact'])}.",
        "",
        f"Ranked by paired loss (best first): {', '.join(r['by_paired_loss'])}.",
        "",
        f"The two rankings disagree in {r['disagreements']} of {len(t4)} places (ties broken by name).",
        "",
        "Paired loss is the mean gap over every twin episode (both halves of each pair); the halves are "
        "the twins whose original capture settles and those whose capture fails. Premature-irreversible % "
        "is over twin episodes, and beside it over every episode (every task and seed, Table II's); exact % "
        "is over every task (Table II's accuracy). Intervals: 95% "
        "percentile bootstrap resampling twin pairs (accuracy: every unit, twins together).",
        "",
    ]
    return lines + (claims_notes(claims_list) if claims_list else [])


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the twins' claims (`data/paper_claims.csv`, experiment "twins"), from
    `tables["table4"]` alone; a claim whose policy is absent from the table is None (not run)."""
    t4 = tables["table4"]
    t = t4.set_index("policy")
    r = rankings(t4)
    by_loss = ", ".join(f"{p} {t.loc[p, 'paired_loss']:.2f}" for p in r["by_paired_loss"])

    def cell(policy, col, fmt="{:.2f}", extra=None, versus=None):
        """Table IV's cell (policy, col); `extra(row)` is appended to the shown value; `versus`: (the other
        side of the row's comparison, in words) or None."""
        if policy not in t.index:
            return None
        x = float(t.loc[policy, col])
        shown = fmt.format(x) + (extra(t.loc[policy]) if extra else "")
        other = None
        if versus is not None and versus[0] is not None:
            other = float(versus[0])
            shown += f"; {versus[1]} {fmt.format(other)}"
        return Measure(x, shown=shown, source=SOURCE, versus=other)

    def of(policy, col):
        return float(t.loc[policy, col]) if policy in t.index else None

    rest = [p for p in t.index if p != OPTIMISTIC]
    worst_other = (max(float(t.loc[p, "paired_loss"]) for p in rest), "the highest of the others") if rest else None

    def ci(lo, hi):
        return lambda row: f" [{row[lo]:.2f}, {row[hi]:.2f}]"

    # counted from the worst: 1 + the policies whose paired loss is at least optimistic's (a tie for the
    # worst place is not "the worst")
    worst_place = None
    if OPTIMISTIC in t.index:
        o = float(t.loc[OPTIMISTIC, "paired_loss"])
        place = 1 + sum(float(t.loc[p, "paired_loss"]) >= o for p in t.index if p != OPTIMISTIC)
        worst_place = Measure(place, shown=f"place {place} of {len(t)} from the worst; by paired loss $ (best "
                                           f"first): {by_loss}", source=SOURCE)
    n = r["disagreements"]
    return {
        "optimistic_worst_paired_loss": worst_place,
        "optimistic_paired_loss": cell(OPTIMISTIC, "paired_loss", extra=ci("paired_lo", "paired_hi"),
                                       versus=worst_other),
        "gate_paired_loss": cell(GATE, "paired_loss", extra=ci("paired_lo", "paired_hi"),
                                 versus=(of(OPTIMISTIC, "paired_loss"), "optimistic")),
        "optimistic_settle_half": cell(OPTIMISTIC, "settle_gap", extra=ci("settle_lo", "settle_hi"),
                                       versus=(of(OPTIMISTIC, "fail_gap"), "fail half")),
        "optimistic_fail_half": cell(OPTIMISTIC, "fail_gap", extra=ci("fail_lo", "fail_hi"),
                                     versus=(of(OPTIMISTIC, "settle_gap"), "settle half")),
        # "of tasks": over every task and seed (Table II's base), the twin episodes' rate beside it
        "optimistic_premature": cell(OPTIMISTIC, "premature_all_pct", "{:.1f}%",
                                     extra=lambda row: f" of every episode ({row.premature_pct:.1f}% "
                                                       f"[{row.premature_lo:.1f}, {row.premature_hi:.1f}] of the twin "
                                                       "episodes)"),
        "optimistic_cannot_tell": (None if OPTIMISTIC not in t.index else Measure(
            bool(t.loc[OPTIMISTIC, "same_disposition_pct"] == 100), source=SOURCE,
            shown=f"the same disposition on both halves in {t.loc[OPTIMISTIC, 'same_disposition_pct']:.1f}% of the "
                  "twin pairs x seeds")),
        "rank_disagreements": Measure(n, shown=f"{n} of {len(t)} places; by exact: {', '.join(r['by_exact'])}; "
                                               f"by paired loss: {', '.join(r['by_paired_loss'])}", source=SOURCE),
    }


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about Table IV, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


def figure2(t4: pd.DataFrame, run=None):
    """Figure 2: what each policy loses on each half of the twin pairs, and the paired loss.

    One row per policy (Table IV's order, top to bottom): the mean gap on the
    settle half and on the fail half as bars with their intervals, the paired
    loss as a black diamond with its interval; the tick label carries the
    policy's rank by accuracy and by paired loss. A policy that bets on
    settlement shows a short settle bar beside a long fail bar.

    Args:
        t4: `table4`'s frame.
        run: unused (the caption is added by `publish`); accepted for a uniform signature.

    Returns:
        The figure (constrained layout; style from `plotting.apply_style`).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    n = len(t4)
    y = np.arange(n)
    h = 0.36
    colors = sns.color_palette("colorblind")
    settle_c, fail_c = colors[0], colors[3]
    # Laid out at the PNG's dpi: `plotting.save` freezes the layout at the figure's dpi,
    # and tick labels laid out at 100 dpi come out wider than their slot at 150.
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * n + 1.6), layout="constrained", dpi=PNG_DPI)

    def bars(offset, mid, lo, hi, color, label):
        mid, lo, hi = (t4[c].to_numpy(dtype=float) for c in (mid, lo, hi))
        ax.barh(y + offset, mid, height=h, color=color, alpha=0.85, label=label, zorder=2)
        ax.errorbar(mid, y + offset, xerr=[mid - lo, hi - mid], fmt="none", ecolor="0.25", elinewidth=0.8,
                    capsize=1.8, zorder=3)

    bars(-h / 2, "settle_gap", "settle_lo", "settle_hi", settle_c, "settle half (capture settles)")
    bars(h / 2, "fail_gap", "fail_lo", "fail_hi", fail_c, "fail half (capture fails)")
    pl, lo, hi = (t4[c].to_numpy(dtype=float) for c in ("paired_loss", "paired_lo", "paired_hi"))
    ax.errorbar(pl, y, xerr=[pl - lo, hi - pl], fmt="none", ecolor="black", elinewidth=1.2, zorder=4)
    # not clipped: a zero paired loss (the oracle) sits on the axis
    ax.plot(pl, y, "D", color="black", ms=4.5, zorder=5, clip_on=False, label="paired loss (both halves)")
    labels = [f"{p}\nexact #{int(a)} · paired #{int(b)}" for p, a, b in
              zip(t4["policy"], t4["rank_exact"], t4["rank_paired"])]
    ax.set_yticks(y, labels, fontsize=7)
    for tick, differs in zip(ax.get_yticklabels(), t4["rank_differs"]):
        if differs:
            tick.set_fontweight("bold")
    ax.set_ylim(n - 0.4, -1.5)  # inverted, with room above the first row for the legend
    xmax = float(np.nanmax(t4[["settle_hi", "fail_hi", "paired_hi"]].to_numpy(dtype=float)))
    ax.set_xlim(0, xmax * 1.04 if xmax > 0 else 1)
    ax.set_xlabel("mean excess loss per twin episode ($), 95% interval over twin pairs")
    ax.grid(axis="y", visible=False)
    handles, names = ax.get_legend_handles_labels()
    first = sorted(range(len(names)), key=lambda i: names[i].startswith("paired"))  # bars, then the diamond
    ax.legend([handles[i] for i in first], [names[i] for i in first], loc="upper center", ncol=3, fontsize=7,
              frameon=False, bbox_to_anchor=(0.5, 1.0), handletextpad=0.4, columnspacing=1.2)
    ax.set_title("Twin pairs: loss on each half and paired loss\n"
                 "under each name its rank by exact % and by paired loss; bold: the two ranks differ",
                 fontsize=8)
    return fig


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """Figure 2 (each half of the twin pairs and the paired loss), by stem; Table IV from `tables` if given."""
    t4 = tables["table4"] if tables else table4(rows, run)
    return {"figure2": figure2(t4, run)}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "table4": TableSpec("Table IV: twin pairs", markdown=lambda t: table4_markdown(t["table4"]),
                        notes=lambda t, claims: table4_notes(t["table4"], claims)),
}
"""How each table is written (`publish_experiment`)."""
