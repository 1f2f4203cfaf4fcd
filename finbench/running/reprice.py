"""Re-pricing: an episode recorded once, priced under any costs (SPEC §8).

No unprivileged policy sees a price: the brief carries only tool ticks, the
call budget and the order, and the oracle is told the resolution, not the
costs. So a change of `cogs_rate`, `dispute_fee` or `escalation_cost` cannot
change what any policy does, and the money that moves is fixed by the task and
the actions alone: which captures exist (`retry_at`), the disposition and its
tick (`end_t`), and effects on the unrelated order. `settle_money` turns those
into a position under the new costs, exactly as the simulation would; only the
reference position is recomputed per costs. Costs that do reach policies
(`step_budget`, `read_ticks`, `probe_ticks`) change actions and are refused.
"""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from finbench.errors import FinbenchError, bad, show
from finbench.running.stats import EPISODES
from finbench.sim import constants as C
from finbench.sim.corpus import Corpus
from finbench.sim.economics import Costs, Money, price, settle_money
from finbench.sim.env import reference_position
from finbench.sim.tools import DISPOSITIONS
from finbench.sim.world import Capture, agent_capture, original_capture

PRICED = ("position", "reference_position", "gap", "exact", "cash", "cogs", "liability", "dispute_fee",
          "escalation", "unrelated")
"""The columns that depend on prices; every other column of an episode row does not."""


def simulation_key(costs: Costs) -> tuple:
    """The part of `Costs` that policies can see (through the brief): it decides actions."""
    return (costs.step_budget, costs.read_ticks, costs.probe_ticks)


def _captures(task, retry_at: str) -> list[Capture]:
    """The episode's captures from its row: the original, then one per fresh-key retry time
    (keys do not enter the economics, so the row does not keep them)."""
    caps = [original_capture(task)]
    for n, t in enumerate(filter(None, retry_at.split(";")), start=2):
        caps.append(agent_capture(task, n, f"retry@{t}", int(t)))
    return caps


@lru_cache(maxsize=200_000)
def _money(task, disposition: str, end_t: int, retry_at: str, unrelated_effects: int) -> Money:
    """Where one distinct case's money ends: run once, whatever the prices (they enter linearly)."""
    return settle_money(task, _captures(task, retry_at), disposition, end_t, unrelated_effects)


@lru_cache(maxsize=200_000)
def _price(task, disposition: str, end_t: int, retry_at: str, unrelated_effects: int, costs: Costs) -> tuple:
    out = price(_money(task, disposition, end_t, retry_at, unrelated_effects), costs)
    ref = reference_position(task, costs)
    gap = round(ref - out.position, 6)
    b = out.breakdown
    return (out.position, ref, gap, gap <= C.MONEY_TOL, b["cash"], b["cogs"], b["liability"], b["dispute_fee"],
            b["escalation"], out.unrelated)


_CASE = ("task_id", "disposition", "end_t", "retry_at", "unrelated_effects")
"""The columns of a row that decide its money (with the task)."""


def _check_rows(df: pd.DataFrame, tasks: dict, simulated_with: Costs) -> None:
    """The rows are episodes of these tasks: each re-prices to its own position under the costs
    it was simulated with (another corpus's rows share task ids but not positions)."""
    unknown = sorted(set(df["task_id"]) - set(tasks))
    if unknown:
        raise FinbenchError(f"reprice: rows of task(s) {', '.join(map(str, unknown[:3]))} that the corpus does not "
                            "hold; give the corpus the rows were simulated on")
    odd = sorted(set(df["disposition"]) - set(DISPOSITIONS))
    if odd:
        raise FinbenchError(f"reprice: unknown disposition(s) {', '.join(map(show, odd[:3]))}; "
                            f"rows hold one of {', '.join(DISPOSITIONS)}")
    # one check per distinct case (episodes repeat a few thousand), on plain lists: pandas' own
    # element iteration costs more than the check
    seen = set()
    for tid, disp, end, ra, ue, pos in zip(*(df[c].tolist() for c in (*_CASE, "position"))):
        case = (tid, disp, end, ra, ue, pos)
        if case in seen:
            continue
        seen.add(case)
        own = _price(tasks[tid], disp, int(end), ra if isinstance(ra, str) else "", int(ue), simulated_with)
        if abs(own[0] - pos) > 1e-6:
            raise FinbenchError(f"reprice: the row of {tid} ({disp} at t={end}) does not re-price to its own "
                                "position under simulated_with; these rows come from another corpus or other costs")


def reprice(df: pd.DataFrame, corpus, costs: Costs, simulated_with: Costs) -> pd.DataFrame:
    """The same episodes priced under `costs`: equal to simulating them under `costs`.

    Args:
        df: episode rows from `evaluate` (they carry `retry_at`, `disposition`, `end_t`).
        corpus: the tasks behind the rows.
        costs: the new prices.
        simulated_with: the costs the rows were simulated under.

    Raises:
        FinbenchError: `costs` differs from `simulated_with` in something policies see; the rows are
            not episodes of `corpus` under `simulated_with` (another corpus, other costs, a
            disposition no episode has).
    """
    if not isinstance(corpus, Corpus):
        raise bad("reprice", "corpus", corpus, "the Corpus the rows were simulated on")
    for name, value in (("costs", costs), ("simulated_with", simulated_with)):
        if not isinstance(value, Costs):
            raise bad("reprice", name, value, "a Costs")
    if simulation_key(costs) != simulation_key(simulated_with):
        raise FinbenchError("reprice: cannot re-price across step_budget, read_ticks or probe_ticks: policies "
                            f"see them, so actions may change; simulate instead ({simulated_with} -> {costs})")
    if costs == simulated_with or df.empty:
        return df
    tasks = {t.task_id: t for t in corpus.tasks}
    _check_rows(df, tasks, simulated_with)
    return _repriced(df, tasks, costs)


def reprice_own(df: pd.DataFrame, corpus: Corpus, costs: Costs, simulated_with: Costs) -> pd.DataFrame:
    """`reprice` for rows this process simulated itself from `corpus` under `simulated_with`, with
    the same `simulation_key` (a `Run`'s memo, keyed by both): the same prices, without checking
    each row against its own position again (a cost sweep re-prices the same rows under dozens
    of costs)."""
    if costs == simulated_with or df.empty:
        return df
    return _repriced(df, {t.task_id: t for t in corpus.tasks}, costs)


def _repriced(df: pd.DataFrame, tasks: dict, costs: Costs) -> pd.DataFrame:
    EPISODES["repriced"] += len(df)
    cases = list(zip(*(df[c].tolist() for c in _CASE)))
    prices = {case: None for case in cases}  # each distinct case priced once (episodes repeat a few thousand)
    for case in prices:
        tid, disp, end, ra, ue = case
        prices[case] = _price(tasks[tid], disp, int(end), ra if isinstance(ra, str) else "", int(ue), costs)
    cols = list(zip(*map(prices.__getitem__, cases)))
    out = df.copy()
    for name, values in zip(PRICED, cols):
        out[name] = pd.Series(values, index=df.index, dtype=df[name].dtype)
    return out
