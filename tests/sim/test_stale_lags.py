"""`Base.stale_lags`: the stale reads among the first reads of each system, remembered per read counts."""
from __future__ import annotations

import finbench as fb
from finbench.sim import constants as C
from finbench.sim.world import Base, stale_draw

TASK = fb.make_corpus(n_tasks=5).tasks[2]


def _by_hand(base: Base, reads) -> tuple:
    return tuple((s, n, lag) for s, k in zip(C.SYSTEMS, reads) for n in range(k)
                 if (lag := stale_draw(base.stale_draw, base.stale_intensity, s, n)[0]))


def test_the_lags_are_the_keyed_draws_and_are_kept():
    base = Base(TASK, 3, fb.FaultProfile.only("stale_read", intensity=0.6))
    counts = [(0, 0, 0, 0), (6, 2, 0, 9), (1, 0, 4, 0), (12, 12, 12, 12)]
    seen = []
    for reads in counts:
        got = base.stale_lags(reads)
        assert got == _by_hand(base, reads)
        assert base.stale_lags(list(reads)) is got  # a list asks the same entry
        seen.append(got)
    assert any(seen) and seen[0] == () and len(base._lags) == len(counts)


def test_no_stale_reads_no_lags_and_nothing_kept():
    base = Base(TASK, 3, fb.FaultProfile.without("stale_read"))
    assert base.stale_lags((9, 9, 9, 9)) == () and not base._lags
