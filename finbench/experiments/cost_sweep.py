"""The cost sweep: does the ordering survive the constants that decide what is expensive? (SPEC §10)

Notebook `06_cost_sweep`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), ...)
    rows = cost_sweep.episodes(run)           # 45 configurations' mean gaps, re-priced, not re-simulated
    tables = cost_sweep.tables(rows, run)     # cost_sweep: the orderings beside the gaps
    claims = cost_sweep.claims(tables)
    figures = cost_sweep.figures(rows, run, tables)      # cost_sweep
    publish_experiment(cost_sweep, run, tables, claims, figures)

(`sweep_costs(run)` is the table in one call.)

Forty-five configurations: cogs_rate {0.4, 0.5, 0.6, 0.7, 0.8} x dispute_fee
{15, 25, 50} x escalation_cost {10, 18, 36}. No policy sees a price, so the
episodes are simulated once and re-priced under each configuration
(`finbench.running.reprice`); only the reference is recomputed.
"""
from __future__ import annotations

import itertools

import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure
from finbench.analysis.verdicts import claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.sim.economics import Costs
from finbench.agents.policies import UNGATED
from finbench.agents.registry import policy_order
from finbench.running.run import sweep
from finbench.analysis import ordering

NAME = "cost_sweep"
SECTION = "The cost sweep"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
GATE = "finality_gate"
COGS_RATES = (0.4, 0.5, 0.6, 0.7, 0.8)
DISPUTE_FEES = (15.0, 25.0, 50.0)
ESCALATION_COSTS = (10.0, 18.0, 36.0)
TABLES = ("cost_sweep",)
"""The tables this experiment writes and its claims read, by stem."""


def configurations() -> list[Costs]:
    """The 45 cost configurations, cogs rate slowest, escalation cost fastest."""
    return [Costs(cogs_rate=c, dispute_fee=d, escalation_cost=e)
            for c, d, e in itertools.product(COGS_RATES, DISPUTE_FEES, ESCALATION_COSTS)]


def _gaps(run, df: pd.DataFrame) -> pd.DataFrame:
    gap = M.mean_gap(df).reindex(policy_order(df["policy"]))
    c = run.costs
    return pd.DataFrame([{"cogs_rate": c.cogs_rate, "dispute_fee": c.dispute_fee,
                          "escalation_cost": c.escalation_cost, **gap.to_dict()}])


def episodes(run) -> pd.DataFrame:
    """One row per configuration (`configurations`): its three constants and each policy's mean gap,
    re-priced from the run's episodes."""
    run.evaluate()  # simulate (or load) once at the run's own costs; every configuration re-prices these
    return sweep(run, {"costs": configurations()}, _gaps).drop(columns="costs")


def tables(rows: pd.DataFrame, run=None) -> dict[str, pd.DataFrame]:
    """The sweep's table (`orderings` of `episodes`' rows), by stem (`TABLES`)."""
    return {"cost_sweep": orderings(rows)}


def sweep_costs(run) -> pd.DataFrame:
    """The sweep's table in one call: `orderings(episodes(run))`."""
    return orderings(episodes(run))


def orderings(wide: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: each policy's mean gap, the full ordering (best first, ties by
    name), whether it equals the default's, whether the gate is ahead of every ungated policy, and
    by how much (the smallest ungated mean gap minus the gate's).

    Args:
        wide: `episodes`' rows (the three constants and one mean gap column per policy).
    """
    policies = [c for c in wide.columns if c not in ("cogs_rate", "dispute_fee", "escalation_cost")]
    default = _ordering(_default(wide)[policies])
    orders = [_ordering(r[policies]) for _, r in wide.iterrows()]
    ungated = [p for p in UNGATED if p in policies]
    out = wide.assign(
        ordering=[" < ".join(o) for o in orders],
        same_as_default=[o == default for o in orders],
        rank_changes=[ordering.rank_disagreements(o, default) for o in orders],
    )
    if GATE in policies and ungated:
        margin = wide[ungated].min(axis=1) - wide[GATE]
        out = out.assign(gate_ahead=margin > 0, gate_margin=margin)
    return out


def _default(table: pd.DataFrame) -> pd.Series:
    """The row of the default configuration (`Costs()`: the benchmark's own constants)."""
    c = Costs()
    return table[(table.cogs_rate == c.cogs_rate) & (table.dispute_fee == c.dispute_fee)
                 & (table.escalation_cost == c.escalation_cost)].iloc[0]


def _ordering(gaps: pd.Series) -> list[str]:
    return ordering.rank_policies(gaps.astype(float), ascending=True)


def swaps(table: pd.DataFrame) -> pd.DataFrame:
    """Adjacent pairs of the default ordering: in how many configurations they swap, and how
    close they were under the default costs (the difference of their mean gaps)."""
    default_row = _default(table)
    default = default_row["ordering"].split(" < ")
    orders = [o.split(" < ") for o in table["ordering"]]
    rows = []
    for a, b in zip(default, default[1:]):
        n = sum(o.index(a) > o.index(b) for o in orders)
        rows.append({"better": a, "worse": b, "default_difference": float(default_row[b] - default_row[a]),
                     "configurations_swapped": n})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> pd.DataFrame:
    """The human rendering: the configuration, the ordering, and the two checks."""
    out = pd.DataFrame({
        "cogs": table.cogs_rate, "fee $": table.dispute_fee, "escalation $": table.escalation_cost,
        "ordering (lowest mean gap first)": table.ordering.str.replace("finality_", "f_", regex=False),
        "= default": table.same_as_default.map({True: "yes", False: ""}),
    })
    if "gate_ahead" in table:
        out["gate ahead (margin $)"] = [f"{'yes' if a else 'NO'} ({m:.2f})" for a, m in
                                        zip(table.gate_ahead, table.gate_margin)]
    return out


def notes(table: pd.DataFrame, sw: pd.DataFrame) -> list[str]:
    n = len(table)
    lines = [f"- The full ordering equals the default's in {int(table.same_as_default.sum())} of {n} configurations."]
    if "gate_ahead" in table:
        i = table.gate_margin.idxmin()
        r = table.loc[i]
        lines.append(f"- The finality gate is ahead of every ungated policy in {int(table.gate_ahead.sum())} of {n}; "
                     f"the smallest margin is ${r.gate_margin:.2f} (cogs {r.cogs_rate:g}, fee {r.dispute_fee:g}, "
                     f"escalation {r.escalation_cost:g}).")
    lines.append("- Adjacent pairs of the default ordering, how often they swap, and how close they were at "
                 "the default costs: " + "; ".join(
                     f"{s.better} / {s.worse}: {s.configurations_swapped} of {n} (${s.default_difference:.2f} apart)"
                     for s in sw.itertuples()) + ".")
    return lines


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the sweep's claims (`data/paper_claims.csv`, experiment "cost_sweep"), from the
    table (`tables["cost_sweep"]`): how many configurations keep the default's ordering, and in how many
    the gate is ahead of every ungated policy (None if the table has no gate column)."""
    table = tables["cost_sweep"]
    n, src = len(table), "tables/cost_sweep.csv"
    same = int(table.same_as_default.sum())
    out = {"ordering_stable": Measure(same, shown=f"{same} of {n}", source=src), "gate_ahead_everywhere": None,
           "configurations": Measure(n, shown=f"{n} configurations", source=src)}
    if "gate_ahead" in table and n:
        ahead = int(table.gate_ahead.sum())
        out["gate_ahead_everywhere"] = Measure(ahead, source=src,
                                          shown=f"{ahead} of {n}; smallest margin ${table.gate_margin.min():.2f}")
    return out


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about the sweep, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


def figure(table: pd.DataFrame):
    """Each policy's rank (1 = lowest mean gap) in each of the configurations."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    orders = [o.split(" < ") for o in table["ordering"]]
    policies = table["ordering"].iloc[0].split(" < ")
    default = _default(table)["ordering"].split(" < ")
    ranks = pd.DataFrame({i: {p: o.index(p) + 1 for p in policies} for i, o in enumerate(orders)}).reindex(default)
    fig, ax = plt.subplots(figsize=(11, 4.2), layout="constrained")
    sns.heatmap(ranks, ax=ax, cmap="viridis_r", annot=True, fmt="d", annot_kws={"fontsize": 6}, cbar=True,
                linewidths=0.3, linecolor="white", cbar_kws={"label": "rank (1 = lowest mean gap)"})
    labels = [f"{c:g}/{d:g}/{e:g}" for c, d, e in zip(table.cogs_rate, table.dispute_fee, table.escalation_cost)]
    ax.set_xticks([i + 0.5 for i in range(len(labels))], labels, rotation=90, fontsize=6)
    ax.set_xlabel("configuration: cogs rate / dispute fee (USD) / escalation cost (USD)")
    ax.set_ylabel("policy (default order)")
    ax.set_title("Each policy's rank by mean gap across the 45 cost configurations", fontsize=10)
    return fig


def figures(rows: pd.DataFrame, run=None, tables: dict | None = None) -> dict:
    """Each policy's rank in each configuration, by stem; the table from `tables` if given."""
    table = tables["cost_sweep"] if tables else orderings(rows)
    return {"cost_sweep": figure(table)}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "cost_sweep": TableSpec("The cost sweep: 45 configurations, mean gap $ per policy",
                            markdown=lambda t: markdown(t["cost_sweep"]),
                            notes=lambda t, claims: notes(t["cost_sweep"], swaps(t["cost_sweep"])), bootstrap=False,
                            meta=lambda run: {"configurations": len(configurations())}),
}
"""How each table is written (`publish_experiment`)."""
CLAIMS = TableSpec(bootstrap=False)
"""How the claims file is stamped (`publish_experiment`): no bootstrap lies behind these claims."""
