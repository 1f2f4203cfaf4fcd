"""Random streams that agree across processes, platforms and PYTHONHASHSEED.

Two kinds:
- `generator(*key)`: a numpy `Generator` from a `SeedSequence` keyed by what it
  is for (corpus units, the random policy, the bootstrap).
- `uniform(*key)` / `integer(lo, hi, *key)`: counter-based draws, one per named
  opportunity (a fault family at one delivery). Each fault decision is addressed
  by its own key (unit, seed, family, delivery id), so enabling or removing one
  family, or one delivery, cannot shift the draws of any other; this is a
  strictly finer keying than one stream per (unit, seed, family).
"""
from __future__ import annotations

import hashlib

import numpy as np

_SCALE = 1.0 / 2**64


def _digest(key: tuple) -> int:
    text = "\x1f".join(map(str, key)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def uniform(*key: object) -> float:
    """A uniform draw in [0, 1) fixed by `key` (str/int parts)."""
    return _digest(key) * _SCALE


def integer(lo: int, hi: int, *key: object) -> int:
    """A uniform integer on [lo, hi] inclusive, fixed by `key`."""
    return lo + int(uniform(*key) * (hi - lo + 1))


def entropy(*key: object) -> int:
    """A 128-bit integer for `SeedSequence`, fixed by `key`."""
    text = "\x1f".join(map(str, key)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=16).digest(), "big")


def generator(*key: object) -> np.random.Generator:
    """A numpy Generator keyed by `key` (never the global state)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy(*key))))
