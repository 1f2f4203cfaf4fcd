"""The collector around a runner chunk (`batch_mode`): the package's own policies make no reference cycles, so a
chunk of only them skips the closing collection; a chunk with a user's policy collects what it made."""
from __future__ import annotations

import gc
import weakref

import pytest

import finbench as fb
from finbench.agents.registry import as_ref
from finbench.running import evaluation as E
from finbench.sim import play as P

TASKS = fb.make_corpus(n_tasks=30).tasks
PACKAGE = [*fb.POLICIES, "sop[fallback=refund]", "reconciler"]


@pytest.mark.parametrize("share", [False, True])
def test_the_package_policies_leave_no_cyclic_garbage(share):
    """What makes skipping the closing collection safe: with the collector off throughout, a chunk of every
    package policy under two profiles leaves nothing for a collection to find."""
    refs = [as_ref(n) for n in PACKAGE]
    assert len(refs) == 11
    fb.clear_caches()
    gc.collect()
    gc.disable()
    try:
        for profile in (fb.FaultProfile.default(), fb.FaultProfile.none()):
            parts = E.run_chunk(TASKS, refs, [0, 1], profile, fb.Costs(), None, share)
            assert all(len(p["seed"]) == len(TASKS) * 2 for p in parts)
    finally:
        gc.enable()
    assert gc.collect() == 0
    fb.clear_caches()


def _collections(monkeypatch) -> list:
    calls = []
    real = gc.collect
    monkeypatch.setattr(P.gc, "collect", lambda *a: calls.append(a) or real(*a))
    return calls


def test_batch_mode_collects_young_at_entry_and_at_exit_only_when_asked(monkeypatch):
    calls = _collections(monkeypatch)
    with P.batch_mode(cycles=False):
        assert calls == [(0,)] and not gc.isenabled()
    assert calls == [(0,)] and gc.isenabled()
    calls.clear()
    with P.batch_mode():
        pass
    assert calls == [(0,), (0,)] and gc.isenabled()


def test_a_chunk_of_package_policies_skips_the_closing_collection(monkeypatch):
    calls = _collections(monkeypatch)
    E.run_chunk(TASKS[:2], [as_ref("sop"), as_ref("react")], [0], fb.FaultProfile.default(), fb.Costs())
    assert calls == [(0,)]


class Cyclic:
    """A user's policy that leaves a reference cycle behind in every episode."""
    name = "cyclic"
    made: list = []

    def begin(self, brief):
        self.o = brief["order_id"]
        loop = {}
        loop["self"] = loop
        Cyclic.made.append(weakref.ref(_Holder(loop)))

    def act(self, obs):
        return "close", {"order_id": self.o}


class _Holder:
    def __init__(self, loop):
        self.loop = loop
        loop["holder"] = self


def test_a_chunk_with_a_user_policy_collects_the_cycles_it_made(monkeypatch):
    calls = _collections(monkeypatch)
    Cyclic.made = []
    E.run_chunk(TASKS[:3], [as_ref("sop"), as_ref(Cyclic)], [0], fb.FaultProfile.default(), fb.Costs())
    assert calls == [(0,), (0,)]
    assert len(Cyclic.made) == 3 and all(ref() is None for ref in Cyclic.made)
