"""`trace_shape` (finbench.sim.trace) stays in step with what the grader reads (`FIELDS_READ`,
finbench.grading.records): the rule between the two layers that lets `running.episode` grade one
trace per shape.

The grader reads, of each record, the fields `FIELDS_READ` names for its kind (and the seq of a kind
it does not know); it compares order ids only with each other and with the contract's order. So a
shape is a sound memo key when every such field of the trace built from the inputs is decided by the
shape, order ids up to which order they name. Checked by moving every input of `build_trace` one at
a time (each field of the task, of each capture, of the outcome, each element of each replay,
disposition and effect on the other order, and dropping each list item) from episodes that hold
every kind of record: whenever what the grader reads moves, the shape moves too; every field the
grader reads is moved by some input (so a field it starts to read that the trace does not carry, or
carries as a constant, fails here and is named); and renaming the two orders changes neither the
shape nor the grade.
"""
from __future__ import annotations

import dataclasses

import pytest

import finbench as fb
from finbench.grading import FIELDS_READ, grade_trace
from finbench.running.episode import episode_contract
from finbench.sim.env import FinalityEnv
from finbench.sim.play import play
from finbench.sim.trace import build_trace, episode_inputs, trace_shape

NONE = fb.FaultProfile.none()
MISSING = "<missing>"
# read by the grader, but the same in every trace the engine builds: a log is always complete, the
# authorization names the case order, and a chargeback's reverse names no order (the grader then takes
# the receipt's carrier)
CONSTANT = {("log_meta", "complete"), ("authorize", "order"), ("reverse", "order")}


def _scripted(task, calls, seed=0, profile=NONE):
    env = FinalityEnv(task, seed, profile)
    brief = env.reset()
    for tool, args in calls:
        if env.done:
            break
        order = brief["customer_orders"][0] if args.pop("other", False) else brief["order_id"]
        env.step(tool, order_id=order, **args)
    while not env.done:
        env.step("close", order_id=brief["order_id"])
    return env


def _bases():
    """Ended episodes whose traces hold every kind of record: captures (settled, failed, twice), replays,
    the agent's and the clerk's ship and refund, chargeback reversals, effects on the other order."""
    chargeback = fb.make_task("late_chargeback", seed=2)
    envs = [
        _scripted(fb.make_task("settled_clean", seed=3), [("refund", {"other": True}),
                                                          ("retry_capture", {"idempotency_key": "key-1"}),
                                                          ("ship", {})]),
        _scripted(fb.make_task("pending_fail", seed=4, determined_at=150),
                  [("retry_capture", {"idempotency_key": "key-1"}), ("retry_capture", {"idempotency_key": "key-2"}),
                   ("retry_capture", {"idempotency_key": "key-2"}), ("wait", {"ticks": 200}), ("ship", {})]),
        _scripted(chargeback, [("ship", {})]),
        _scripted(chargeback, [("retry_capture", {"idempotency_key": "key-2"}), ("ship", {})]),
        _scripted(fb.make_task("lost_settlement", seed=3, determined_at=300),
                  [("retry_capture", {"idempotency_key": "key-2"}), ("escalate", {})]),
        _scripted(fb.make_task("unresolvable", seed=1, determined_at=900, outcome="settled"), [("escalate", {})]),
        _scripted(fb.make_task("pending_settle", seed=3, determined_at=200),
                  [("retry_capture", {"idempotency_key": "key-2"}), ("wait", {"ticks": 300}), ("refund", {}),
                   ("retry_capture", {"idempotency_key": "key-2", "other": True})]),
    ]
    for task in fb.make_corpus(n_tasks=9).tasks:
        for name in ("finality_gate", "random", "majority_vote"):
            envs.append(play(FinalityEnv(task, 1), fb.get_policy(name)))
    return [(env.task, episode_inputs(env, env.outcome())) for env in envs]


def _moved(value) -> list:
    """Other values of one input: others of the same type, and the same number as the other type."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):  # a tick one later, at 0 and past everything (reordering the records), as a float
        return [v for v in (value + 1, 0, value + 10_000) if v != value] + [float(value)]
    if isinstance(value, float):
        return [value + 1.0] + ([int(value)] if value == int(value) else [])
    if isinstance(value, str):
        return [value + "~"]
    if value is None:
        return [7]
    return []


def _with(obj, name, value):
    if dataclasses.is_dataclass(obj):
        return dataclasses.replace(obj, **{name: value})
    return tuple(value if i == name else x for i, x in enumerate(obj))


def _fields(obj):
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    return list(enumerate(obj))


def _variants(inputs):
    """(what moved, inputs with that one thing moved), for every input of `build_trace`."""
    task, captures, replays, moves, outcome, other = inputs
    for name, value in _fields(task):
        for new in _moved(value):
            yield f"task.{name}", (_with(task, name, new), captures, replays, moves, outcome, other)
    for name, value in _fields(outcome):
        for new in _moved(value):
            yield f"outcome.{name}", (task, captures, replays, moves, _with(outcome, name, new), other)
    for slot, label in ((1, "capture"), (2, "replay"), (3, "disposition"), (5, "other effect")):
        items = list(inputs[slot])
        for i, item in enumerate(items):
            dropped = items[:i] + items[i + 1:]
            yield f"{label} {i} dropped", tuple(dropped if s == slot else x for s, x in enumerate(inputs))
            for name, value in _fields(item):
                for new in _moved(value):
                    changed = items[:i] + [_with(item, name, new)] + items[i + 1:]
                    part = f".{name}" if isinstance(name, str) else f"[{name}]"
                    yield f"{label} {i}{part}", tuple(changed if s == slot else x for s, x in enumerate(inputs))


def read_by_grader(task, trace) -> tuple:
    """What the grader reads of a trace: per record, its kind and the `FIELDS_READ` of that kind (the seq
    of an unknown kind), each value with its type; an order id as the order it names."""
    role = {task.order_id: "<case order>", task.other_order_id: "<other order>"}
    out = []
    for rec in trace:
        kind = rec.get("kind")
        values = []
        for f in FIELDS_READ.get(kind, ("seq",)):
            v = rec.get(f, MISSING)
            if f == "order" and isinstance(v, str):
                v = role.get(v, v)
            values.append((f, type(v).__name__, v))
        out.append((kind, tuple(values)))
    return tuple(out)


def _changed_fields(a: tuple, b: tuple) -> set:
    """(kind, field) pairs that take a value in one projection that they take in no record of that kind
    in the other (a record more or less of the same values moves no field)."""
    def values(proj, kind, field):
        return {tuple(x) for k, vals in proj if k == kind for f, *x in vals if f == field}
    pairs = {(k, f) for k, vals in a + b for f, *_ in vals}
    return {(k, f) for k, f in pairs
            if values(a, k, f) and values(b, k, f) and values(a, k, f) != values(b, k, f)}


BASES = _bases()


def test_the_bases_hold_every_kind_of_record_the_grader_reads():
    kinds = {rec.get("kind") for _, inputs in BASES for rec in build_trace(*inputs)}
    assert set(FIELDS_READ) <= kinds


def test_what_the_grader_reads_of_a_trace_is_decided_by_its_shape():
    moved = set()  # (kind, field) the grader reads that some input moved
    checked = 0
    for task, inputs in BASES:
        by_shape = {trace_shape(*inputs): ("the episode", read_by_grader(task, build_trace(*inputs)))}
        base = by_shape[trace_shape(*inputs)][1]
        for what, variant in _variants(inputs):
            try:
                trace = build_trace(*variant)
            except TypeError:  # a combination no episode holds (a chargeback on a task without one)
                assert what.startswith("outcome.chargeback"), what
                continue
            shape, read = trace_shape(*variant), read_by_grader(variant[0], trace)
            moved |= _changed_fields(base, read)
            seen = by_shape.setdefault(shape, (what, read))
            assert seen[1] == read, (f"{task.task_id}: moving {what} changes what the grader reads "
                                     f"({sorted(_changed_fields(seen[1], read)) or 'which records'}) but not "
                                     f"the trace shape (the same shape as {seen[0]})")
            checked += 1
    assert checked > 1000
    read = {(kind, f) for kind, fields in FIELDS_READ.items() for f in fields}
    assert read - moved == CONSTANT, (
        "fields the grader reads that no input of the trace moves (the trace does not carry them, or carries "
        f"a constant): {sorted(read - moved - CONSTANT)}; no longer constant: {sorted(CONSTANT - (read - moved))}")


@pytest.mark.parametrize("case,other", [("ord-renamed", "ord-other"), ("zzz", "aaa"), ("b", "a")])
def test_renaming_the_orders_changes_neither_the_shape_nor_the_grade(case, other):
    # the shape leaves the order ids out: the grader must compare them only for equality (the contract's
    # order is renamed with the trace's); "zzz"/"aaa" flips which order sorts first
    for task, inputs in BASES:
        renamed = dataclasses.replace(task, order_id=case, other_order_id=other)
        again = (renamed, *inputs[1:])
        assert trace_shape(*again) == trace_shape(*inputs)
        a = grade_trace(build_trace(*inputs), episode_contract(task))
        b = grade_trace(build_trace(*again), episode_contract(renamed))
        assert (a.verdict, a.checks) == (b.verdict, b.checks), task.task_id
