"""Orderings of policies and the twin-pair view of episode rows (Table IV, the cost sweep)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from finbench.analysis.metrics import require, exact_rate, mean_gap, premature_rate


def rank_policies(scores: pd.Series, ascending: bool) -> list[str]:
    """Policy names ordered by score, ties broken by name.

    Args:
        scores: A score per policy (the index holds the names).
        ascending: True when lower is better (a loss), False for a rate.

    Returns:
        The names, best first.
    """
    frame = pd.DataFrame({"name": scores.index.astype(str), "score": scores.to_numpy()})
    frame = frame.sort_values(["score", "name"], ascending=[ascending, True], kind="mergesort")
    return list(scores.index[frame.index])


def rank_disagreements(order_a: Sequence[str], order_b: Sequence[str]) -> int:
    """Number of positions at which two rankings of the same policies differ.

    Args:
        order_a: Policy names, best first.
        order_b: The same names in another order.

    Returns:
        How many ranks hold a different policy in the two orders.

    Raises:
        ValueError: If the two are not orderings of the same distinct names.
    """
    order_a, order_b = list(order_a), list(order_b)
    if len(set(order_a)) != len(order_a) or sorted(order_a) != sorted(order_b):
        raise ValueError(f"not two orderings of the same policies: {order_a} vs {order_b}")
    return sum(x != y for x, y in zip(order_a, order_b))


def twin_table(df: pd.DataFrame) -> pd.DataFrame:
    """Twin-pair metrics per policy (Table IV).

    Only tasks with a ``twin_side`` count. The two halves of a pair are
    indistinguishable until determination, so a policy that acts early loses
    on one half whatever it does.

    Args:
        df: Per-episode results.

    Returns:
        A DataFrame indexed by policy with ``paired_loss`` (mean gap over both
        halves), ``settle_gap`` and ``fail_gap`` (mean gap of each half),
        ``premature_irreversible`` and ``exact`` (rates over twin episodes),
        and ``n_pairs`` (distinct units).
    """
    require(df, ["policy", "unit", "twin_side", "gap", "exact", "premature_irreversible"])
    twins = df[df["twin_side"].notna()]
    if twins.empty:
        raise ValueError("the results hold no twin tasks")
    sides = set(twins["twin_side"].unique())
    if not sides <= {"settle", "fail"}:
        raise ValueError(f"twin_side must be 'settle' or 'fail', got {sorted(map(str, sides))}")
    gap = twins["gap"].astype(float)
    side_gap = gap.groupby([twins["policy"], twins["twin_side"]], sort=True).mean().unstack("twin_side")
    out = pd.DataFrame(
        {
            "paired_loss": mean_gap(twins),
            "settle_gap": side_gap.get("settle"),
            "fail_gap": side_gap.get("fail"),
            "premature_irreversible": premature_rate(twins),
            "exact": exact_rate(twins),
            "n_pairs": twins.groupby("policy", sort=True)["unit"].nunique(),
        }
    )
    out.index.name = "policy"
    return out
