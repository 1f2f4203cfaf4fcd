"""A check that replays: a seeded sample of a run's rows of every origin, each played again alone with
nothing reused (every in-process memo emptied, no cache), compared column by column.

    bad = fb.verify(run)                       # or verify(run, rows) for rows already evaluated
    assert bad.empty, bad.to_string()

A row the engine derived, cut, re-priced or loaded must equal the episode played afresh; a difference is a
bug in the reuse that made it (or, for a user's policy, a policy that does not play the same twice).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from finbench.memo import clear_caches
from finbench.running import origin as O
from finbench.running.columns import COLUMNS, MONEY
from finbench.running.evaluation import episode_row
from finbench.running.run import Run
from finbench.sim.economics import Costs
from finbench.sim.faults import FaultProfile
from finbench.sim.probe import ProbeMode

__all__ = ["PRICE_TOLERANCE", "SUBMITTED", "verify"]

PRICE_TOLERANCE = 1e-9
"""Re-priced money is computed in another order than played money: it may differ in the last bits (dollars)."""


def _missing(value) -> bool:
    return value is None or isinstance(value, float) and math.isnan(value)


def _differs(origin: str, column: str, got, want) -> bool:
    if _missing(got) or _missing(want):  # a frame holds a missing value as NaN or None, a row tuple as None
        return not (_missing(got) and _missing(want))
    if origin == O.REPRICED and column in MONEY:
        return not abs(float(got) - float(want)) <= PRICE_TOLERANCE
    return got != want or type(got) is not type(want) and not (isinstance(got, (int, float)) and
                                                                 isinstance(want, (int, float)))


def _written_differs(column: str, got, want) -> bool:
    """`_differs` for a value read back from a rows.csv: an empty cell is an empty text, a number was written
    at ten significant digits."""
    if isinstance(want, str) and _missing(got):
        got = ""
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return not abs(got - want) <= WRITTEN_TOLERANCE * max(1.0, abs(want))
    return _differs(SUBMITTED, column, got, want)


def sample(rows: pd.DataFrame, per_origin: int, seed: int) -> list[int]:
    """Up to `per_origin` row positions of each origin, drawn with a generator seeded by `seed`, in order."""
    rng = np.random.default_rng(seed)
    picked = []
    for origin in (*O.ORIGINS, SUBMITTED):
        where = np.flatnonzero(rows[O.COLUMN].to_numpy() == origin)
        if len(where):
            picked += rng.choice(where, size=min(per_origin, len(where)), replace=False).tolist()
    return sorted(picked)


SUBMITTED = "submitted"
"""The origin `verify` gives rows that say none (a shared rows.csv: written, read back)."""
WRITTEN_TOLERANCE = 1e-9
"""A rows.csv holds numbers at ten significant digits: a replayed number within this share of it is equal."""


def verify(run, rows: pd.DataFrame | None = None, per_origin: int = 10, seed: int = 0,
           written: bool = False) -> pd.DataFrame:
    """The differences between a sample of `run`'s rows (`rows`, else `run.evaluate()`) and the same episodes
    played again alone: one line per differing column (row position, origin, policy, task, seed, column, the
    row's value, the replay's). Empty: every sampled row equals its replay. `written`: the rows were read back
    from a file (a shared rows.csv), so numbers are compared as written (ten significant digits) and an empty
    cell is an empty text; rows without an `origin` are sampled as one origin, `submitted`.

    Every in-process memo is emptied before each replay (`clear_caches`) and the replay reads no cache, so
    nothing that made the row can make its replay."""
    rows = run.evaluate() if rows is None else rows
    if O.COLUMN not in rows.columns:  # rows shared as a file, from before rows said their origin
        rows = rows.assign(**{O.COLUMN: SUBMITTED})  # rows are sampled and named by position
        written = True
    refs = {ref.label: ref for ref in run.policies}
    out = []
    for i in sample(rows, per_origin, seed):
        row = rows.iloc[i]
        clear_caches()
        fresh = dict(zip(COLUMNS, episode_row(run.corpus[row["task_id"]], refs[row["policy"]], int(row["seed"]),
                                              run.profile, run.costs, run.probe)))
        for column in COLUMNS:
            got, want = _plain(row[column]), fresh[column]
            if _written_differs(column, got, want) if written else _differs(row[O.COLUMN], column, got, want):
                out.append({"row": i, "origin": row[O.COLUMN], "policy": row["policy"], "task_id": row["task_id"],
                            "seed": int(row["seed"]), "column": column, "row_value": got, "replayed": want})
    clear_caches()
    return pd.DataFrame(out, columns=["row", "origin", "policy", "task_id", "seed", "column", "row_value",
                                      "replayed"])


def _plain(value):
    """A frame's cell as the Python value a row tuple holds (numpy scalars made plain, pandas' NA None)."""
    if value is None or value is pd.NA:
        return None
    return value.item() if isinstance(value, np.generic) else value


def notebook_runs(n_tasks: int = 321, seeds=range(5)) -> list[tuple[str, object]]:
    """The notebooks' principal runs, in an order that makes rows of every origin: the nine on the public
    corpus (played, and derived across seeds), two fault-ablation arms and a probe arm (derived from the
    first by their reads), the first seed alone (cut), other prices (re-priced), and the nine again, from
    the run memo and then from the episode cache (the caller gives a fresh cache folder). (name, Run) each."""
    head = Run.make(n_tasks=n_tasks, seeds=tuple(seeds))
    return [("headline", head), ("ablation: without loss", head.replace(profile=FaultProfile.without("loss"))),
            ("ablation: without stale_read", head.replace(profile=FaultProfile.without("stale_read"))),
            ("probe arm: none", head.replace(probe=ProbeMode.none())), ("one seed", head.replace(seeds=(0,))),
            ("cost sweep: dispute_fee=50", head.replace(costs=Costs(dispute_fee=50.0))),
            ("headline again (the run memo)", head), ("headline again (the episode cache)", head)]


def verify_runs(cache_dir, n_tasks: int = 321, seeds=range(5), per_origin: int = 10, seed: int = 0,
                out=print) -> pd.DataFrame:
    """`verify` on each of `notebook_runs` (evaluated with the episode cache in `cache_dir`, a fresh folder,
    the in-process memos emptied before the last run so it reads the cache), one line of `out` per run; the
    differences of all of them (a `run` column names each)."""
    runs = [(name, run.replace(cache=cache_dir)) for name, run in notebook_runs(n_tasks, seeds)]
    evaluated = []
    for i, (name, run) in enumerate(runs):  # all evaluated first: each replay empties the memos they share
        if i == len(runs) - 1:
            clear_caches()
        evaluated.append((name, run, run.evaluate()))
    found = []
    for i, (name, run, rows) in enumerate(evaluated):
        bad = verify(run, rows, per_origin, seed + i)
        counts = rows[O.COLUMN].value_counts()
        out(f"{name}: {len(rows):,} rows ({', '.join(f'{o} {counts[o]:,}' for o in O.ORIGINS if o in counts)}); "
            f"replayed {len(sample(rows, per_origin, seed + i))}, "
            + ("every one equal" if bad.empty else f"{bad['row'].nunique()} differ"))
        found.append(bad.assign(run=name))
    return pd.concat(found, ignore_index=True)
