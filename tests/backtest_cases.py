"""Small committed backtests: a few cells of Table II and Table III at a small size.

A change that shifts a reproduced number fails `make test` until the backtest is
regenerated on purpose: `python -m tests.backtest_cases` (then commit the CSVs
with a message that says why the numbers moved).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent / "backtests"
COLUMNS_T2 = ["policy", "episodes", "exact_pct", "exact_lo", "exact_hi", "mean_gap", "gap_lo", "gap_hi",
              "pass3_pct", "premature_pct", "diff_to_gate"]


def compute() -> dict[str, pd.DataFrame]:
    """Table II and III at 36 tasks x 3 seeds x 9 policies, 200 bootstrap replicates, no cache."""
    from finbench import Run
    from finbench.experiments import headline

    run = Run.make(n_tasks=36, seeds=range(3), n_boot=200, cache=False)
    df = run.evaluate()
    return {"table2_small": headline.table2(df, run)[COLUMNS_T2], "table3_small": headline.table3(df)}


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name, frame in compute().items():
        frame.to_csv(HERE / f"{name}.csv", index=False, float_format="%.10g", lineterminator="\n")
        print(f"wrote {HERE / name}.csv ({len(frame)} rows)")


if __name__ == "__main__":
    main()
