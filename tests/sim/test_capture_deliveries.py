"""An agent's capture's deliveries are memoised (`finbench.sim.world._capture_deliveries`): every world that makes
the same capture gets the deliveries and firings the fault pipeline gives it, drawn afresh."""
from __future__ import annotations

import pytest

import finbench as fb
from finbench.sim import world as W
from finbench.sim.faults import deliver
from finbench.sim.play import play
from finbench.sim.rng import Keyed

TASKS = fb.make_corpus(n_tasks=12).tasks
PROFILES = [fb.FaultProfile.default(), fb.FaultProfile.only("reorder", "duplicate", intensity=0.9),
            fb.FaultProfile.none()]


def _fields(ds) -> list[tuple]:
    return [(d.id, d.system, d.group, d.arrival, d.earliest, d.seq, d.partial, d.event) for d in ds]


def _afresh(task, seed, profile, captures) -> tuple[list, list, list]:
    """The delivery specs' ids, deliveries and firings of the agent's captures, through the fault pipeline
    directly (no memo)."""
    base = W.Base(task, seed, profile)
    out, firings, ids, n_before = [], [], [], len(base.deliveries)
    for n, (key, t) in enumerate(captures, start=2):
        cap = W.agent_capture(task, n, key, t)
        specs = W.event_specs(task, W.capture_events(cap), cap.id)
        ids += [s.id for s in specs]
        out += deliver(specs, Keyed(task.stream, seed), profile, firings, seq_start=n_before + len(out))
    return ids, out, firings


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_world_gets_the_pipeline_s_deliveries(profile):
    fb.clear_caches()
    plans = [[("key-2", 130)], [("key-2", 130), ("key-3", 300)], [("k-x", 599)], [("key-2", 130)]]
    checked = 0
    for task in TASKS:
        for seed in (0, 4):
            for captures in plans:  # the first and the last plan: the second world reads the memo
                w = W.World(task, seed, profile)
                for key, t in captures:
                    w.add_capture(key, t)
                ids, want, fired = _afresh(task, seed, profile, captures)
                assert want and _fields(w.extra) == _fields(want)
                assert w.extra_firings == fired
                assert [s.id for s in w.extra_specs] == ids
                checked += 1
    assert checked == len(TASKS) * 2 * len(plans)
    info = W._capture_deliveries.cache_info()
    assert info.hits > 0 and info.currsize > 0
    fb.clear_caches()


def test_a_read_does_not_change_the_shared_deliveries():
    fb.clear_caches()
    task, profile = TASKS[3], fb.FaultProfile.default()
    first = W.World(task, 1, profile)
    first.add_capture("key-2", 200)
    before = _fields(first.extra)
    for t in range(120, 1800, 97):
        for system in ("processor", "ledger", "erp", "bank"):
            first.read(system, t)
    second = W.World(task, 1, profile)
    second.add_capture("key-2", 200)
    assert _fields(second.extra) == before and _fields(first.extra) == before
    fb.clear_caches()


class _Unhashable(str):
    __hash__ = None


class _AlwaysEqual(str):
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 1


@pytest.mark.parametrize("kind", [_Unhashable, _AlwaysEqual, str])
def test_a_key_of_a_str_subclass_plays_as_the_plain_string(kind):
    """A user's key may be a str subclass that cannot be hashed, or equals anything: the environment takes it as
    the plain string it spells, so no memo keyed by it can fail or answer for another key."""
    task = TASKS[5]

    class Retrier:
        name = "retrier"

        def begin(self, brief):
            self.o, self.n = brief["order_id"], 0

        def act(self, obs):
            self.n += 1
            if self.n in (1, 2):  # the second retry replays the first's key
                return "retry_capture", {"order_id": self.o, "idempotency_key": kind(f"mine-{self.n // 3}")}
            if self.n == 3:
                return "retry_capture", {"order_id": self.o, "idempotency_key": kind("other")}
            return "ship", {"order_id": self.o}

    fb.clear_caches()
    env = play(fb.FinalityEnv(task, 2), Retrier())
    assert [c.key for c in env.world.captures[1:]] == ["mine-0", "other"]
    assert all(c.key.__class__ is str for c in env.world.captures)
    assert [r[1] for r in env.replays] == ["mine-0"] and env.replays[0][1].__class__ is str
    fb.clear_caches()


@pytest.mark.parametrize("kind", [_Unhashable, _AlwaysEqual, str])
def test_an_order_id_of_a_str_subclass_plays_as_the_plain_string(kind):
    """An order id is taken as the plain string it spells, as a key is: one that equals anything names the order
    it spells (never the other order for it), and one that cannot be hashed is no error; the calls recorded hold
    plain strings."""
    task = TASKS[5]
    env = fb.FinalityEnv(task, 2)
    order = env.reset()["order_id"]
    assert env.step("read_erp", order_id=kind(task.other_order_id))["result"]["order_id"] == task.other_order_id
    obs = env.step("ship", order_id=kind(order))
    assert obs["result"] == {"order_id": order, "disposition": "ship"} and env.disposition == "ship"
    assert env.other_effects == [] and [a[2]["order_id"].__class__ for a in env.actions] == [str, str]
