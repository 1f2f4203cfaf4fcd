"""Rules of `finbench.sim.splitseeds` (the master seeds of further regenerated corpora).

Pinned here, from the module docstring and `DERIVATION`:
- the i-th seed (i = 1, 2, ...) is the first uint32 word of a `numpy.random.SeedSequence` whose
  entropy is the 128-bit big-endian BLAKE2b digest of "regenerated-split", the base seed and i
  (joined by the unit separator, as `rng.entropy` keys every draw); the expectation is re-derived
  here with hashlib, for the default base and for another base;
- a value equal to PUBLIC_SEED, to the base or to an earlier seed is skipped;
- `split_seeds(n, base)` is `(base, *regenerated_seeds(n, base))`;
- the argument checks and their messages name the function and the parameter.
"""
import hashlib

import numpy as np
import pytest

from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim import splitseeds as S


def _expected(base: int, i: int) -> int:
    text = f"regenerated-split\x1f{base}\x1f{i}".encode()
    ent = int.from_bytes(hashlib.blake2b(text, digest_size=16).digest(), "big")
    return int(np.random.SeedSequence(ent).generate_state(1, np.uint32)[0])


def test_derivation_text_names_the_rule():
    assert S.PURPOSE == "regenerated-split"
    assert "SeedSequence(blake2b('regenerated-split', regen_seed, i))" in S.DERIVATION
    assert "uint32" in S.DERIVATION and "PUBLIC_SEED" in S.DERIVATION


def test_default_seeds_are_the_blake2b_derivation_of_regen_seed():
    want = tuple(_expected(C.REGEN_SEED, i) for i in range(1, 6))
    assert len(set(want)) == 5
    assert S.regenerated_seeds(5) == want
    assert S.regenerated_seeds(5, C.REGEN_SEED) == want


def test_seeds_depend_on_the_base():
    base = 12345
    want = tuple(_expected(base, i) for i in range(1, 4))
    got = S.regenerated_seeds(3, base=base)
    assert got == want
    assert got != S.regenerated_seeds(3)
    assert S.regenerated_seeds(3, base=0) == tuple(_expected(0, i) for i in range(1, 4)) != got


def test_none_skipped_in_the_first_thousand_and_prefix_stable():
    want = tuple(_expected(C.REGEN_SEED, i) for i in range(1, 1001))
    got = S.regenerated_seeds(1000)
    assert got == want
    assert S.regenerated_seeds(10) == got[:10]
    assert C.PUBLIC_SEED not in got and C.REGEN_SEED not in got
    assert S.regenerated_seeds(0) == ()


def test_public_seed_base_and_repeats_are_skipped(monkeypatch):
    base = 7
    stream = {1: C.PUBLIC_SEED, 2: 11, 3: base, 4: 11, 5: 13, 6: 17}

    def derived(b, i):
        assert b == base, "derived from another base"
        return stream[i]  # a KeyError if more than six are asked

    monkeypatch.setattr(S, "_derived", derived)
    assert S.regenerated_seeds(3, base) == (11, 13, 17)


def test_split_seeds_puts_the_base_first():
    assert S.split_seeds(3) == (C.REGEN_SEED, *(_expected(C.REGEN_SEED, i) for i in range(1, 4)))
    assert S.split_seeds(2, 99) == (99, _expected(99, 1), _expected(99, 2))
    assert S.split_seeds(0, 5) == (5,)


@pytest.mark.parametrize("call, message", [
    (lambda: S.regenerated_seeds(-1), "regenerated_seeds: n must be an integer in [0, 10000], got -1"),
    (lambda: S.regenerated_seeds(10_001), "regenerated_seeds: n must be an integer in [0, 10000], got 10001"),
    (lambda: S.regenerated_seeds(1.0), "regenerated_seeds: n must be an integer in [0, 10000], got 1.0"),
    (lambda: S.regenerated_seeds(1, base=-1), "regenerated_seeds: base must be an integer >= 0, got -1"),
    (lambda: S.regenerated_seeds(1, base="7"), "regenerated_seeds: base must be an integer >= 0, got '7'"),
    (lambda: S.split_seeds(1, base=-1), "split_seeds: base must be an integer >= 0, got -1"),
    (lambda: S.split_seeds(1, base=True), "split_seeds: base must be an integer >= 0, got True"),
    (lambda: S.split_seeds(-1, base=3), "regenerated_seeds: n must be an integer in [0, 10000], got -1"),
], ids=["n_negative", "n_too_many", "n_float", "base_negative", "base_str", "split_base_negative",
        "split_base_bool", "split_n_negative"])
def test_bad_arguments_are_refused_with_their_message(call, message):
    with pytest.raises(FinbenchError) as e:
        call()
    assert str(e.value) == message
