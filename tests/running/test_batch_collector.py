"""The collector around a runner chunk (`batch_mode`): the package's own policies make no reference cycles, so a
chunk of only them skips the closing collection; a chunk with a user's policy collects what it made."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

import finbench as fb
from finbench.agents.registry import as_ref
from finbench.running import evaluation as E
from finbench.sim import play as P

TASKS = fb.make_corpus(n_tasks=30).tasks
PACKAGE = [*fb.POLICIES, "sop[fallback=refund]", "reconciler"]


_NO_GARBAGE = """
import gc, sys
import finbench as fb
from finbench.agents.registry import as_ref
from finbench.running import evaluation as E
share = sys.argv[1] == "True"
refs = [as_ref(n) for n in [*fb.POLICIES, "sop[fallback=refund]", "reconciler"]]
assert len(refs) == 11
tasks = fb.make_corpus(n_tasks=30).tasks
gc.collect()
gc.disable()
for profile in (fb.FaultProfile.default(), fb.FaultProfile.none()):
    parts = E.run_chunk(tasks, refs, [0, 1], profile, fb.Costs(), None, share)
    assert all(len(p["seed"]) == len(tasks) * 2 for p in parts)
gc.enable()
print(gc.collect())
"""


@pytest.mark.slow  # a subprocess
@pytest.mark.parametrize("share", [False, True])
def test_the_package_policies_leave_no_cyclic_garbage(share):
    """What makes skipping the closing collection safe: with the collector off throughout, a chunk of every
    package policy under two profiles leaves nothing for a collection to find. In a process of its own: a
    thread another test left behind (a loopback server) makes garbage of its own meanwhile."""
    done = subprocess.run([sys.executable, "-c", _NO_GARBAGE, str(share)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


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
