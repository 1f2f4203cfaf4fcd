"""Random streams that agree across processes, platforms and PYTHONHASHSEED.

Two kinds:
- `generator(*key)`: a numpy `Generator` from a `SeedSequence` keyed by what it
  is for (corpus units, the random policy, the bootstrap).
- `uniform(*key)` / `integer(lo, hi, *key)`: counter-based draws, one per named
  opportunity (a fault family at one delivery). Each fault decision is addressed
  by its own key (unit, seed, family, delivery id), so enabling or removing one
  family, or one delivery, cannot shift the draws of any other; this is a
  strictly finer keying than one stream per (unit, seed, family).
  `Keyed(*prefix)` draws the same numbers under a fixed prefix, faster, and can
  remember them (the nine policies of one task and seed ask the same keys).
"""
from __future__ import annotations

import hashlib

import numpy as np

_SCALE = 1.0 / 2**64
_blake2b = hashlib.blake2b


def _hash_text(text: str) -> int:
    return int.from_bytes(_blake2b(text.encode(), digest_size=8).digest(), "big")


def _digest(key: tuple) -> int:
    return _hash_text("\x1f".join(map(str, key)))


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


def key_prefix(*parts: object) -> str:
    """The text a key starting with `parts` begins with: each part's `str`, then `\x1f` (what a memo of
    `Keyed` draws is for: seeds 1 and 1.0 are equal but begin different keys)."""
    return "".join([str(p) + "\x1f" for p in parts])


class Keyed:
    """The draws of `uniform`/`integer` under a fixed key prefix, e.g. (unit stream, seed).

    `Keyed(stream, seed).uniform("loss", did) == uniform(stream, seed, "loss", did)`
    exactly: the prefix is hashed once (the hash state after it is copied for each
    draw) instead of at every draw. With a `memo` dict, draws are remembered by
    the text after the prefix, so a repeat is the same number by construction; a
    memo serves one prefix only (the worlds of one task and seed share one: every
    policy that creates a capture asks the same keys). `at(rest)` is the draw keyed by
    the prefix, then `rest`: the other parts' text with `\x1f` between two (what `pair`
    and `uniform` build; the fault pipeline builds it itself).
    """

    __slots__ = ("prefix", "memo", "at")

    def __init__(self, *prefix: object, memo: dict | None = None):
        self._start(key_prefix(*prefix), memo)

    @classmethod
    def after(cls, prefix: str, memo: dict | None = None) -> Keyed:
        """The draws under a prefix given as its text (`key_prefix(*parts)`): `Keyed(*parts, memo=memo)`."""
        keyed = cls.__new__(cls)
        keyed._start(prefix, memo)
        return keyed

    def _start(self, prefix: str, memo: dict | None) -> None:
        self.prefix = prefix
        self.memo = memo
        self.at = _drawer(_blake2b(prefix.encode(), digest_size=8), memo)

    def uniform(self, *rest: object) -> float:
        return self.at("\x1f".join(map(str, rest)))

    def integer(self, lo: int, hi: int, *rest: object) -> int:
        return lo + int(self.uniform(*rest) * (hi - lo + 1))

    def pair(self, family: str, name: str) -> float:
        """`uniform(family, name)` for two plain strings (the fault pipeline's
        family and delivery id, drawn thousands of times per corpus)."""
        return self.at(family + "\x1f" + name)


def _drawer(head, memo: dict | None):
    """`Keyed.at` for the hash state `head` after the prefix: a closure, its lookups bound once (a fault
    world asks dozens of draws)."""
    copy, from_bytes = head.copy, int.from_bytes
    if memo is None:
        def at(rest: str) -> float:
            h = copy()  # = blake2b of the whole text: hashing is streamed
            h.update(rest.encode())
            return from_bytes(h.digest(), "big") * _SCALE

        return at
    get = memo.get

    def remembered(rest: str) -> float:
        u = get(rest)
        if u is None:  # `at`, inlined: most draws of a fault world are asked once
            h = copy()
            h.update(rest.encode())
            u = memo[rest] = from_bytes(h.digest(), "big") * _SCALE
        return u

    return remembered
