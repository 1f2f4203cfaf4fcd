"""Comparing episode rows made in different ways: every column but `origin`, exactly, and the origins apart."""
from __future__ import annotations

import pandas as pd

from finbench.running.origin import COLUMN


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
