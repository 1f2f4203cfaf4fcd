"""Comparing episode rows made in different ways: every column but `origin`, exactly, and the origins apart."""
from __future__ import annotations

import pandas as pd

from finbench.memo import clear_caches
from finbench.running.columns import COLUMNS
from finbench.running.evaluation import episode_row
from finbench.running.origin import COLUMN
from finbench.sim.economics import Costs


def without_origin(df: pd.DataFrame) -> pd.DataFrame:
    """`df` without its `origin` column (a frame from `evaluate` must have one)."""
    assert COLUMN in df.columns, "an evaluate frame without its origin column"
    return df.drop(columns=COLUMN)


def assert_same_rows(a: pd.DataFrame, b: pd.DataFrame, **kw) -> None:
    """The two frames' rows are equal in every column but `origin` (exactly, unless `kw` says otherwise)."""
    kw.setdefault("check_exact", True)
    pd.testing.assert_frame_equal(without_origin(a), without_origin(b), **kw)


def origins(df: pd.DataFrame) -> dict[str, int]:
    """How many rows of each origin."""
    return df[COLUMN].value_counts().sort_index().to_dict()


def played_alone(tasks, refs, seeds, profile, probe=None) -> pd.DataFrame:
    """The same rows, in the same (policy, task, seed) order, each episode played alone after every memo of
    the process was emptied: an oracle that shares nothing with what it checks (the memos are emptied again
    at the end, so a test reads its own memos before calling it)."""
    rows = []
    for ref in refs:
        for task in tasks:
            for seed in seeds:
                clear_caches()
                rows.append({**dict(zip(COLUMNS, episode_row(task, ref, seed, profile, Costs(), probe))),
                             "origin": "played"})
    clear_caches()
    return pd.DataFrame(rows)
