"""Master seeds of further regenerated corpora, shared by every experiment that needs several splits.

The paper measures one regenerated split (`REGEN_SEED`). To see how much a
number moves from one draw of the generator to the next, the tuning and splits
experiments repeat it on further corpora whose master seeds are derived from
`REGEN_SEED`, so that they are the same on every machine and in every notebook:

    regenerated_seeds(3)       # three further master seeds (never PUBLIC_SEED or REGEN_SEED)
    split_seeds(3)             # (REGEN_SEED, *regenerated_seeds(3)): the paper's split first

Derivation (`DERIVATION`): for i = 1, 2, ... the i-th seed is the first 32-bit
word of a `numpy.random.SeedSequence` whose entropy is `rng.entropy("regenerated-split",
base, i)` (a BLAKE2b hash of the purpose, the base seed and i), skipping a value
equal to `PUBLIC_SEED`, to the base, or to an earlier seed (none is skipped for
the first thousand). The sequence is prefix-stable: `regenerated_seeds(10)` is
`regenerated_seeds(20)[:10]`, so an experiment with fewer splits reuses the
episodes (and the cache) of one with more.
"""
from __future__ import annotations

import numpy as np

from finbench.sim import constants as C
from finbench.errors import check_int
from finbench.sim.rng import entropy

PURPOSE = "regenerated-split"
DERIVATION = ("seed_i = SeedSequence(blake2b('regenerated-split', regen_seed, i)).generate_state(1, uint32)[0], "
              "i = 1, 2, ...; repeats of PUBLIC_SEED, regen_seed or an earlier seed skipped")
"""The derivation in one line, for the stamp of every table that uses further splits."""

MAX_SPLITS = 10_000


def _derived(base: int, i: int) -> int:
    return int(np.random.SeedSequence(entropy(PURPOSE, base, i)).generate_state(1, np.uint32)[0])


def regenerated_seeds(n: int, base: int = C.REGEN_SEED) -> tuple[int, ...]:
    """Master seeds of `n` further regenerated corpora, derived from `base`.

    Args:
        n: How many (0 to 10,000).
        base: The seed they are derived from (the regenerated split's, `REGEN_SEED`).

    Returns:
        `n` distinct non-negative integers, none equal to `PUBLIC_SEED` or `base`;
        the same in every process; a prefix of the sequence for any larger `n`.

    Raises:
        FinbenchError: `n` or `base` is not an integer in range.

    Example:
        >>> from finbench.sim.corpus import make_corpus
        >>> corpora = [make_corpus(s) for s in regenerated_seeds(2)]
    """
    n = check_int("regenerated_seeds", "n", n, 0, MAX_SPLITS)
    base = check_int("regenerated_seeds", "base", base, 0)
    seen = {C.PUBLIC_SEED, base}
    out: list[int] = []
    i = 0
    while len(out) < n:
        i += 1
        s = _derived(base, i)
        if s not in seen:
            seen.add(s)
            out.append(s)
    return tuple(out)


def split_seeds(n: int, base: int = C.REGEN_SEED) -> tuple[int, ...]:
    """The regenerated split's seed and `n` further ones: `(base, *regenerated_seeds(n, base))`."""
    base = check_int("split_seeds", "base", base, 0)
    return (base, *regenerated_seeds(n, base))
