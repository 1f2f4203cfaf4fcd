"""How an episode row was obtained: the `origin` column of every frame `evaluate` and `Run.evaluate` return.

The engine plays an episode only when it cannot reuse one. Each way a row can be made without playing is
named here, in the order `Run.evaluate` and `evaluate` try them, and a row carries the name of the way that
served it (`finbench verify` replays a sample of each and compares every column with a fresh play):

    memo           the run's in-process memo: the same policy's rows of an identical run
    cut            the memo's rows of the same run under more seeds, cut to this run's seeds
    repriced       rows of the same episodes under other prices, re-priced (`running.reprice`)
    cache          the episode cache on disk (`data/cache/`), keyed by everything that decides the episode
    derived_seed   an episode that saw only the truth (it read no system, only a truthful probe), of a package
                   policy that ignores the seed, played under another seed or fault profile: the same calls,
                   only the faults fired differ
    derived_reads  an episode of a package policy played under another fault profile or probe mode whose
                   every read returned the same payload (the same calls to the same end)
    played         simulated now

A user's policy is never derived and its rows are reused only under its declared `cache_id`. Rows a
language model replays from its transcripts are `played`: the environment ran them.
"""
from __future__ import annotations

MEMO, CUT, REPRICED, CACHE = "memo", "cut", "repriced", "cache"
DERIVED_SEED, DERIVED_READS, PLAYED = "derived_seed", "derived_reads", "played"

ORIGINS = (MEMO, CUT, REPRICED, CACHE, DERIVED_SEED, DERIVED_READS, PLAYED)
"""Every origin, in the order the runners try them (`played` last)."""

DERIVED = (DERIVED_SEED, DERIVED_READS)
REUSED = (MEMO, CUT, REPRICED, CACHE)

COLUMN = "origin"
"""The frame's column (after every column of `evaluation.COLUMNS`); no table reads it."""

__all__ = ["CACHE", "COLUMN", "CUT", "DERIVED", "DERIVED_READS", "DERIVED_SEED", "MEMO", "ORIGINS", "PLAYED",
           "REPRICED", "REUSED"]
