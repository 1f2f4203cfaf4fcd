"""How many episodes this process played, derived, loaded and re-priced (by `origin`, `running.origin`).

`evaluate`, `Run.evaluate`, `run_episode` and `reprice` count as they go; `publish_experiment`
prints the counts at the end of every experiment notebook, and `make reproduce`
reads that line from each executed notebook (`finbench.pipeline`).
"""
from __future__ import annotations

import re
from collections import Counter

from finbench.running import origin as O

EPISODES: Counter = Counter()
"""Episodes by what happened to them (`KINDS`)."""
BY_ORIGIN: Counter = Counter()
"""Episodes by origin (`running.origin.ORIGINS`)."""
KINDS = ("played", "derived", "loaded", "repriced")
"""played: simulated now; derived: made from another played episode without playing (`derived_seed`,
`derived_reads`); loaded: reused as they were (the disk cache, the run memo, a cut of more seeds);
repriced: the same episodes under other prices."""
KIND_OF = {O.PLAYED: "played", O.DERIVED_SEED: "derived", O.DERIVED_READS: "derived", O.CACHE: "loaded",
           O.MEMO: "loaded", O.CUT: "loaded", O.REPRICED: "repriced"}
HEADINGS = ("played", "derived", "loaded", "re-priced")
_LINE = re.compile(r"episodes in this process: played ([\d,]+), derived ([\d,]+), loaded ([\d,]+), "
                   r"re-priced ([\d,]+)")


def count(origins) -> None:
    """Add rows of these origins (one name a row) to `EPISODES`."""
    for name, n in Counter(origins).items():
        add(name, n)


def add(origin: str, n: int) -> None:
    """Add `n` rows of one origin to `EPISODES`."""
    BY_ORIGIN[origin] += n
    EPISODES[KIND_OF[origin]] += n


def summary() -> str:
    """One line, e.g. "episodes in this process: played 14,445, derived 3,210, loaded 0, re-priced 0"."""
    return "episodes in this process: " + ", ".join(f"{h} {EPISODES[k]:,}" for k, h in zip(KINDS, HEADINGS))


def parse(text: str) -> dict[str, int] | None:
    """The counts of the last `summary` line in `text`, or None if it holds none.

    Example:
        >>> parse("x\\nepisodes in this process: played 1,200, derived 5, loaded 3, re-priced 0\\n")
        {'played': 1200, 'derived': 5, 'loaded': 3, 'repriced': 0}
    """
    found = _LINE.findall(text)
    if not found:
        return None
    return {k: int(v.replace(",", "")) for k, v in zip(KINDS, found[-1])}
