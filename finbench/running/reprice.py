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

import decimal
import math
import numbers
import threading
from collections import OrderedDict

import numpy as np
import pandas as pd

from finbench.errors import FinbenchError, bad, show
from finbench.memo import register
from finbench.running import origin as O
from finbench.running.stats import add
from finbench.sim.corpus import Corpus
from finbench.sim.economics import Costs, Money, gap_of, price, settle_money
from finbench.sim.env import reference_money
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


class _Book:
    """One corpus's cases, each run to its money once whatever the prices (they enter linearly):
    a case (`_CASE`) maps to the index of its `Money` among the corpus's distinct ones."""

    def __init__(self, corpus: Corpus):
        self.tasks = {t.task_id: t for t in corpus.tasks}
        self.cases: dict[tuple, int] = {}
        self.index: dict[Money, int] = {}
        self.moneys: list[Money] = []
        self.references: dict[tuple[str, Costs], int] = {}

    def _indexed(self, money: Money) -> int:
        with _LOCK:  # threads re-pricing one corpus at once: one index per money, each its own
            i = self.index.get(money)
            if i is None:
                i = self.index[money] = len(self.moneys)
                self.moneys.append(money)
            return i

    def reference_of(self, tid: str, simulated: Costs) -> int:
        """The index of the reference's money on task `tid` (what `reference_position` prices)."""
        key = (tid, simulated)
        i = self.references.get(key)
        if i is None:
            i = self.references[key] = self._indexed(reference_money(self.tasks[tid], simulated))
        return i

    def money_of(self, tid: str, disposition: str, end_t: int, retry_at, unrelated_effects: int) -> int:
        case = (tid, disposition, int(end_t), _retry_text(retry_at), int(unrelated_effects))
        i = self.cases.get(case)
        if i is None:
            task = self.tasks[tid]
            i = self.cases[case] = self._indexed(settle_money(task, _captures(task, case[3]), disposition, case[2],
                                                              case[4]))
        return i


_BOOKS_SIZE = 64
_BOOKS: OrderedDict = register("running.reprice.books", OrderedDict(), keys="a corpus's fingerprint (its content)",
                               bound=_BOOKS_SIZE)
"""Each corpus's book: its cases' money and its tasks' reference money, filled as rows are priced."""


_LOCK = threading.RLock()


def _book(corpus: Corpus) -> _Book:
    """The corpus's book, kept across calls (by fingerprint: its content) for the last few corpora."""
    key = corpus.fingerprint
    with _LOCK:
        book = _BOOKS.get(key)
        if book is None:
            book = _BOOKS[key] = _Book(corpus)
            while len(_BOOKS) > _BOOKS_SIZE:
                _BOOKS.popitem(last=False)
        _BOOKS.move_to_end(key)
        return book


_CASE = ("task_id", "disposition", "end_t", "retry_at", "unrelated_effects")
"""The columns of a row that decide its money (with the task)."""


class Repricer:
    """Rows of one corpus made ready to price under any costs.

    Each row is reduced once to its (money, task) pair: a few thousand rows come to about a
    thousand pairs and a few hundred distinct moneys, so pricing under one costs prices each
    money once (`price`), each task's reference once (`reference_position`), each pair's gap
    once, and spreads them over the rows (a cost sweep prices one frame under 45 costs).
    """

    def __init__(self, df: pd.DataFrame, corpus: Corpus):
        self.df, self.book = df, _book(corpus)
        pairs: dict[tuple[int, str], int] = {}
        cases = zip(*(df[c].tolist() for c in _CASE))
        self.rows = np.fromiter((pairs.setdefault((self.book.money_of(*case), case[0]), len(pairs))
                                 for case in cases), dtype=np.intp, count=len(df))
        self.pairs = list(pairs)

    def columns(self, costs: Costs) -> list[np.ndarray]:
        """The `PRICED` columns of the rows under `costs`, in that order."""
        book, simulated = self.book, costs.simulated()
        outs: dict[int, object] = {}

        def money_priced(i: int):
            out = outs.get(i)
            if out is None:
                out = outs[i] = price(book.moneys[i], costs)
            return out

        values = []
        for i, tid in self.pairs:
            out, ref = money_priced(i), money_priced(book.reference_of(tid, simulated)).position
            values.append((out.position, ref, *gap_of(ref, out.position), out.cash, out.cogs, out.liability,
                           out.dispute_fee, out.escalation, out.unrelated))
        return [np.array(col)[self.rows] for col in zip(*values)]

    def priced(self, costs: Costs) -> pd.DataFrame:
        """A copy of the rows with their `PRICED` columns under `costs` (each column keeps its dtype)."""
        add(O.REPRICED, len(self.df))
        df, out = self.df, self.df.copy()
        for name, values in zip(PRICED, self.columns(costs)):
            kept = df[name].dtype  # a price is not a whole number: an integer column comes back as floats
            out[name] = pd.Series(values, index=df.index, dtype=None if kept.kind in "iu" else kept)
        out[O.COLUMN] = O.REPRICED
        return out


def _ticks(value) -> bool:
    """A retry list as rows hold it: ';'-separated whole ticks, empty, missing (None, NaN), or one
    tick as a number (a CSV reads a column without a ';' back as numbers, NaN where none)."""
    if isinstance(value, str):
        return all(part.isascii() and part.isdigit() for part in value.split(";") if part)
    if value is None or value is pd.NA:
        return True
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        return False
    return value != value or (math.isfinite(value) and value >= 0 and value == int(value))


def _retry_text(value) -> str:
    """The retry list of a row as text (see `_ticks`): "" when missing, "121" for 121.0."""
    if isinstance(value, str):
        return value
    if value is None or value is pd.NA or value != value:
        return ""
    return str(int(value))


def _reals(column: pd.Series) -> np.ndarray:
    """The column as floats, NaN where a value is not a real number (text is not a number here)."""
    if column.dtype.kind in "iufb":
        return column.to_numpy(dtype=float, na_value=np.nan)
    return np.array([float(v) if isinstance(v, (numbers.Real, decimal.Decimal)) and not isinstance(v, bool)
                     else np.nan for v in column.tolist()], dtype=float)


def _check_values(df: pd.DataFrame) -> None:
    """Every value re-pricing reads is one an episode can hold; else the first row that does not,
    named with its column and value (rows read back from a file may hold anything)."""
    bad = {"retry_at": np.flatnonzero(~df["retry_at"].map(_ticks).to_numpy(dtype=bool))}
    for name in ("end_t", "unrelated_effects", "position", "reference_position"):
        x = _reals(df[name])
        bad[name] = np.flatnonzero(np.isnan(x) if "position" in name else ~(np.isfinite(x) & (x == np.floor(x))))
    found = [(int(at[0]), name) for name, at in bad.items() if len(at)]
    if found:
        at, name = min(found)  # the first row; within it, the columns by name
        raise FinbenchError(f"reprice: the row of {df['task_id'].iloc[at]} (index {show(df.index[at])}) holds "
                            f"{name}={show(df[name].tolist()[at])}, which no episode has: end_t and "
                            "unrelated_effects are whole numbers, retry_at ';'-separated ticks, the positions numbers")


def _check_rows(df: pd.DataFrame, corpus: Corpus, simulated_with: Costs) -> Repricer:
    """The rows are episodes of the corpus: each re-prices to its own position under the costs
    it was simulated with (another corpus's rows share task ids but not positions). Returns
    the rows made ready to price."""
    lack = [c for c in dict.fromkeys((*_CASE, *PRICED)) if c not in df.columns]
    if lack:
        raise FinbenchError(f"reprice: the rows lack column(s) {', '.join(lack)}; give episode rows as evaluate "
                            "writes them")
    twice = [c for c in dict.fromkeys((*_CASE, *PRICED)) if list(df.columns).count(c) > 1]
    if twice:
        raise FinbenchError(f"reprice: the rows hold column(s) {', '.join(twice)} more than once")
    unknown = sorted(set(df["task_id"]) - {t.task_id for t in corpus.tasks}, key=show)
    if unknown:
        raise FinbenchError(f"reprice: rows of task(s) {', '.join(map(str, unknown[:3]))} that the corpus does not "
                            "hold; give the corpus the rows were simulated on")
    odd = sorted(set(df["disposition"]) - set(DISPOSITIONS), key=show)
    if odd:
        raise FinbenchError(f"reprice: unknown disposition(s) {', '.join(map(show, odd[:3]))}; "
                            f"rows hold one of {', '.join(DISPOSITIONS)}")
    _check_values(df)
    rows = Repricer(df, corpus)
    # its own position and its own reference: a row of another corpus may share the first by chance
    own = rows.columns(simulated_with)[:2]
    for name, values in zip(("position", "reference position"), own):
        off = np.flatnonzero(np.abs(values - _reals(df[name.replace(" ", "_")])) > 1e-6)
        if len(off):
            r = df.iloc[off[0]]
            raise FinbenchError(f"reprice: the row of {r['task_id']} ({r['disposition']} at t={r['end_t']}) does "
                                f"not re-price to its own {name} under simulated_with; these rows come from another "
                                "corpus or other costs")
    return rows


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
    return _check_rows(df, corpus, simulated_with).priced(costs)
