"""`make bench`: episodes per second over the full corpus x 5 seeds, one process, no cache.

Each figure includes building the fault schedules, the reference position
and grading every trace; nothing is reused between measurements.
"""
from __future__ import annotations

import sys
import time

from finbench.corpus import make_corpus
from finbench.policies import POLICIES
from finbench.runner import evaluate
from finbench.env import reference_position
from finbench.world import base_world


def main() -> int:
    corpus = make_corpus()
    total_n, total_s = 0, 0.0
    base_world.cache_clear()
    reference_position.cache_clear()
    start = time.perf_counter()
    df = evaluate(corpus, list(POLICIES), seeds=range(5), n_jobs=1, cache=False)
    all_s = time.perf_counter() - start
    print(f"all {len(POLICIES)} policies together: {len(df):,} episodes in {all_s:.2f} s "
          f"= {len(df) / all_s:,.0f} episodes/s (one process, no cache)")
    for name in POLICIES:
        base_world.cache_clear()
        reference_position.cache_clear()
        start = time.perf_counter()
        n = len(evaluate(corpus, [name], seeds=range(5), n_jobs=1, cache=False))
        s = time.perf_counter() - start
        total_n, total_s = total_n + n, total_s + s
        print(f"  {name:<16} {n:>6,} episodes {s:6.2f} s {n / s:>8,.0f} episodes/s (alone, worlds built)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
