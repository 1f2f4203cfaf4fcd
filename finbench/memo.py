"""Every in-process memo of the package, with its owner and one way to empty them all.

A memo saves recomputing a pure function of what it is keyed by: it is keyed by
content (never `id()`), holds values nobody changes after they are stored, and
is bounded (least-recently-used, or emptied when full). Each one is registered
here where it is defined, with what it keys on and why a hit is the value the
computation would give; `docs/ARCHITECTURE.md` lists them (a test holds the two
in step) and `clear_caches()` empties every one.

No memo holds the episodes of a user's own policy unless it declared a
`cache_id` (see `finbench.agents.registry`): only the run memo and the
re-pricing frames hold episode rows at all, and they are keyed like the disk cache.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class MemoInfo:
    """One registered memo.

    Attributes:
        name: `module.what`, e.g. `sim.world.base_world`.
        keys: what a hit is keyed by.
        bound: at most this many entries.
        clear: empties it.
        size: how many entries it holds now.
    """

    name: str
    keys: str
    bound: int
    clear: Callable[[], None]
    size: Callable[[], int]


MEMOS: dict[str, MemoInfo] = {}
"""Every memo, by name, in the order their modules were imported."""


def register(name: str, store: Any, *, keys: str, bound: int) -> Any:
    """Register a dict-like memo `store` (a `dict` emptied when full, or an `OrderedDict` kept to
    `bound` entries) under `name`; returns `store`."""
    MEMOS[name] = MemoInfo(name, keys, bound, store.clear, store.__len__)
    return store


def memoised(name: str, *, keys: str, bound: int) -> Callable:
    """`functools.lru_cache(maxsize=bound)`, registered under `name`."""

    def wrap(fn: Callable) -> Callable:
        cached = functools.lru_cache(maxsize=bound)(fn)
        MEMOS[name] = MemoInfo(name, keys, bound, cached.cache_clear, lambda: cached.cache_info().currsize)
        return cached

    return wrap


def clear_caches() -> None:
    """Empty every in-process memo (`MEMOS`); the episode cache on disk is left as it is.

    No result depends on them: a benchmark clears them to measure from cold, a test to
    start clean. Example:
        >>> clear_caches()
        >>> all(m.size() == 0 for m in MEMOS.values())
        True
    """
    for memo in MEMOS.values():
        memo.clear()
