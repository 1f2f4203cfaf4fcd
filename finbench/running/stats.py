"""How many episodes this process simulated, loaded from the episode cache, and re-priced.

`evaluate`, `run_episode` and `reprice` count as they go; `publish_experiment`
prints the counts at the end of every experiment notebook, and `make reproduce`
reads that line from each executed notebook (`finbench.pipeline`).
"""
from __future__ import annotations

import re
from collections import Counter

EPISODES: Counter = Counter()
"""Episodes by what happened to them: `simulated`, `loaded`, `repriced`."""
KINDS = ("simulated", "loaded", "repriced")
_LINE = re.compile(r"episodes in this process: simulated ([\d,]+), loaded ([\d,]+), re-priced ([\d,]+)")


def summary() -> str:
    """One line, e.g. "episodes in this process: simulated 14,445, loaded 0, re-priced 0"."""
    s, l, r = (EPISODES[k] for k in KINDS)
    return f"episodes in this process: simulated {s:,}, loaded {l:,}, re-priced {r:,}"


def parse(text: str) -> dict[str, int] | None:
    """The counts of the last `summary` line in `text`, or None if it holds none.

    Example:
        >>> parse("x\\nepisodes in this process: simulated 1,200, loaded 3, re-priced 0\\n")
        {'simulated': 1200, 'loaded': 3, 'repriced': 0}
    """
    found = _LINE.findall(text)
    if not found:
        return None
    return {k: int(v.replace(",", "")) for k, v in zip(KINDS, found[-1])}
