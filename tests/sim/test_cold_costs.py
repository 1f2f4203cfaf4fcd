"""What a world of one (task, seed) no policy shares costs: the parts only a read needs are made at the
first read, the default profile is made once, and a task's fields are listed without a deep copy."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.faults import Delivery, FaultProfile, Spec, deliver
from finbench.sim.rng import Keyed, uniform
from finbench.sim.tools import TOOLS, tool_costs, tool_ticks
from finbench.sim.world import World, _lanes, _log_specs, base_world

TASKS = fb.make_corpus(n_tasks=18).tasks


def _probe_only(env: FinalityEnv) -> None:
    order = env.reset()["order_id"]
    while not env.done:
        env.step("probe_processor", order_id=order)


def test_an_episode_that_only_probes_makes_no_lanes():
    fb.clear_caches()
    env = FinalityEnv(TASKS[0], 4)
    _probe_only(env)
    base = env.world._base
    assert env.probe_calls > 0 and "lanes" not in vars(base) and "stale_draw" not in vars(base)
    fresh = World(TASKS[0], 4)  # the ended episode's world holds its disposition's delivery: not the base's
    assert fresh._base is base
    fresh.read("ledger", 300)  # the first read makes them, once, for every world of the base
    assert "lanes" in vars(base) and "stale_draw" in vars(base)
    assert fresh._own_lanes() is base.lanes and World(TASKS[0], 4)._own_lanes() is base.lanes


def test_the_lanes_made_late_are_the_lanes_of_the_deliveries():
    for task in TASKS:
        for seed in (0, 1):
            world = World(task, seed)
            want = _lanes(world.deliveries)
            got = world._own_lanes()
            assert {s: ([d.id for d in ds], a) for s, (ds, a) in got.items()} == \
                   {s: ([d.id for d in ds], a) for s, (ds, a) in want.items()}
            world.add_capture("k-late", 200)
            mine = world._own_lanes()
            assert mine is not world._base.lanes
            assert sum(len(ds) for ds, _ in mine.values()) == len(world.deliveries)


def test_a_capture_whose_deliveries_are_all_lost_keeps_the_base_lanes():
    lossy = FaultProfile(1.0, frozenset({"loss"}))  # every faultable delivery is lost
    world = World(TASKS[3], 0, lossy)
    world.add_capture("k-lost", 200)
    assert len(world.captures) == 2 and not world.extra
    assert world._own_lanes() is base_world(TASKS[3], 0, lossy).lanes


def test_the_default_and_the_empty_profile_are_made_once():
    assert FaultProfile.default() is FaultProfile.default() == FaultProfile(C.DEFAULT_INTENSITY)
    assert FaultProfile.none() is FaultProfile.none() == FaultProfile(C.DEFAULT_INTENSITY, frozenset())
    other = FaultProfile.default(0.5)
    assert other.intensity == 0.5 and other.families == frozenset(C.FAMILIES)

    class Mine(FaultProfile):
        pass

    assert type(Mine.default()) is Mine and type(Mine.none()) is Mine


def test_a_tasks_dict_is_asdict():
    for task in TASKS:
        got = task.to_dict()
        assert got == dataclasses.asdict(task) and list(got) == [f.name for f in dataclasses.fields(task)]


def test_each_call_costs_the_ticks_of_its_costs():
    for costs in (fb.Costs(), fb.Costs(read_ticks=3, probe_ticks=11), fb.Costs(read_ticks=7, probe_ticks=2)):
        table = tool_costs(costs)
        assert set(table) == set(TOOLS) - {"wait"}
        for tool, ticks in table.items():
            assert ticks == tool_ticks(tool, {}, costs)
        for fast in (False, True):  # the public step and the package's fast path
            env = FinalityEnv(TASKS[0], 0, costs=costs)
            order = env.reset()["order_id"]
            call = (lambda tool, **a: env._call(tool, {"order_id": order, **a})) if fast else \
                (lambda tool, **a: env.step(tool, order_id=order, **a))
            before = env.now
            for tool, extra in (("read_ledger", {}), ("probe_processor", {}), ("wait", {"ticks": 13}),
                                ("read_bank", {})):
                call(tool, **extra)
                assert env.now - before == (13 if tool == "wait" else table[tool])
                before = env.now
    for fast in (False, True):
        env = FinalityEnv(TASKS[0], 0)
        order = env.reset()["order_id"]
        for tool, args in [("wait", {"order_id": order, "ticks": C.MAX_WAIT})] * 2 + \
                [("read_erp", {"order_id": order}), ("wait", {"order_id": order, "ticks": C.MAX_WAIT})]:
            env._call(tool, args) if fast else env.step(tool, **args)
        assert env.now == C.HORIZON and env.done  # the clock stops at the horizon
        assert [o["t"] for *_, o in env.actions][-2:] == [C.HANDOVER + 2 * C.MAX_WAIT + 1, C.HORIZON]


def test_costs_set_anew_set_each_calls_ticks():
    for fast in (False, True):
        env = FinalityEnv(TASKS[0], 0)
        order = env.reset()["order_id"]
        env.costs = fb.Costs(read_ticks=7, probe_ticks=50)
        for tool, ticks in (("read_processor", 7), ("probe_processor", 50)):
            before = env.now
            env._call(tool, {"order_id": order}) if fast else env.step(tool, order_id=order)
            assert env.now - before == ticks
    with pytest.raises(FinbenchError, match="costs must be a Costs"):
        env.costs = None


def test_the_value_types_hold_only_their_fields():
    """`X(**vars(x))` remakes a task, costs or probe mode, however much it was used."""
    task = TASKS[2]
    env = FinalityEnv(task, 1, costs=fb.Costs(probe_ticks=3), probe=fb.ProbeMode.delayed(30))
    _probe_only(env)
    hash(task), hash(env.costs), hash(env.probe)
    for value in (task, env.costs, env.probe):
        assert type(value)(**vars(value)) == value


def test_draws_of_equal_seeds_of_different_text_are_kept_apart():
    """Seeds 1 and 1.0 are equal (one memo key) but begin different key texts: each world draws its own."""
    task = TASKS[4]
    profile = FaultProfile.without("reorder", intensity=0.5)

    def seen(seed):
        w = World(task, seed, profile)
        return [(d.id, d.arrival) for d in w.deliveries], w.fired(), [w.read(s, 500) for s in C.SYSTEMS]

    fb.clear_caches()
    fresh = seen(1.0)
    fb.clear_caches()
    World(task, 1, FaultProfile.default(0.5))  # the int seed asks first
    assert seen(1.0) == fresh
    assert Keyed(task.stream, 1.0).pair("loss", "x") == uniform(task.stream, 1.0, "loss", "x") != \
        uniform(task.stream, 1, "loss", "x")


def test_one_keyed_stream_per_unit_and_seed_serves_every_profile_and_every_capture():
    """The fault draws of one (unit stream, seed) are one memoised keyed stream (`Base.draw`), the same under
    every fault profile: each profile's base and each agent capture's deliveries draw through it, so a draw asked
    once is remembered for all of them. What it remembers is the plain keyed draw; another seed has its own."""
    fb.clear_caches()
    task = TASKS[5]
    base = base_world(task, 3, FaultProfile.default())
    other = base_world(task, 3, FaultProfile.only("loss", "duplicate", intensity=0.9))
    draw = base.draw
    assert other is not base and other.draw is draw and base_world(task, 4, FaultProfile.default()).draw is not draw
    assert draw.prefix == f"{task.stream}\x1f3\x1f"
    # the loss of every faultable delivery of the log is drawn first, under both profiles
    logged = {"loss\x1f" + s.id for s in _log_specs(task) if s.faultable and not s.drop}
    assert logged and logged <= set(draw.memo)
    world = World(task, 3, FaultProfile.default())
    world.add_capture("k-mine", 200)
    captured = {"loss\x1f" + s.id for s in world.extra_specs if s.faultable}
    assert captured and not captured & logged and captured <= set(draw.memo)
    assert all(u == uniform(task.stream, 3, *rest.split("\x1f")) for rest, u in draw.memo.items())
    fb.clear_caches()


def test_the_usual_call_stops_the_clock_at_the_horizon():
    env = FinalityEnv(TASKS[0], 0)
    order = env.reset()["order_id"]
    for ticks in (C.MAX_WAIT, C.MAX_WAIT, C.HORIZON - C.HANDOVER - 2 * C.MAX_WAIT - 3):
        env.step("wait", order_id=order, ticks=ticks)
    assert env.now == C.HORIZON - 3 and not env.done
    obs = env.step("probe_processor", order_id=order)  # costs 5 ticks: capped at the horizon
    assert obs["t"] == C.HORIZON and env.now == C.HORIZON and env.done and obs["note"] == "horizon reached"


def test_an_unfaultable_ledger_settlement_is_never_half_committed():
    event = SimpleNamespace(t=200, kind="capture_settled")
    spec = Spec("cap-1:terminal:ledger", "ledger", event, "base", 201, faultable=False)
    fired: list = []
    out = deliver([spec], Keyed("s", 0), FaultProfile.only("partial_commit", intensity=1.0), fired)
    assert [d.partial for d in out] == [False] and fired == []
    out = deliver([dataclasses.replace(spec, faultable=True)], Keyed("s", 0),
                  FaultProfile.only("partial_commit", intensity=1.0), fired)
    assert [d.partial for d in out] == [True] and fired == [("partial_commit", spec.id)]


def test_the_default_profile_checks_an_intensity_that_is_not_a_float():
    with pytest.raises(FinbenchError):
        FaultProfile.default(np.array([C.DEFAULT_INTENSITY]))
    assert FaultProfile.default(np.float64(C.DEFAULT_INTENSITY)) == FaultProfile.default()


def test_a_lanes_ties_keep_the_order_of_delivery():
    """Two deliveries arriving at one tick are folded in the order they were made (`seq`), whatever their ids."""
    e = SimpleNamespace(t=100, kind="capture_settled")
    late_id_first = Delivery("z-first", "erp", e, "base", 150, 100, 3)
    early_id_second = Delivery("a-second", "erp", e, "agent", 150, 100, 4)
    lanes = _lanes([early_id_second, late_id_first])
    assert [d.id for d in lanes["erp"][0]] == ["z-first", "a-second"] and lanes["erp"][1] == [150, 150]
