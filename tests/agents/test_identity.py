"""A user's agent never gets another agent's rows: cache identity from content (issue 18)."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

import finbench as fb
from tests.rows import assert_same_rows
from finbench.agents.identity import identity
from finbench.agents.registry import REGISTRY, PolicyRef, register_policy
from finbench.memo import clear_caches

ROOT = Path(__file__).resolve().parents[2]
SMALL = fb.make_corpus(n_tasks=18)


class Patient:
    """Ship once the processor shows a settlement; escalate after `deadline`."""

    name = "patient"
    cache_id = "v1"

    def __init__(self, deadline: int = 590):
        self.deadline = deadline

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return "ship", {"order_id": self.order}
        if obs["t"] > self.deadline:
            return "escalate", {"order_id": self.order}
        return "probe_processor", {"order_id": self.order}


class ShipNow:
    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return "ship", {"order_id": self.order}


class WriteOff(ShipNow):
    def act(self, obs):
        return "write_off", {"order_id": self.order}


def _fresh(policy) -> pd.DataFrame:
    clear_caches()
    return fb.evaluate(SMALL, [policy], seeds=[0, 1], cache=False)


def _same(got: pd.DataFrame, policy) -> None:
    assert_same_rows(got.reset_index(drop=True), _fresh(policy).reset_index(drop=True))


def test_instances_with_other_state_get_their_own_rows(tmp_path):
    first = fb.evaluate(SMALL, [Patient(590)], seeds=[0, 1], cache=tmp_path)
    second = fb.evaluate(SMALL, [Patient(130)], seeds=[0, 1], cache=tmp_path)
    _same(second, Patient(130))
    assert second.gap.mean() != first.gap.mean()  # the two really play differently
    _same(fb.evaluate(SMALL, [Patient(590)], seeds=[0, 1], cache=tmp_path), Patient(590))


def test_factories_through_the_run_memo_get_their_own_rows():
    """Closures over other values: the in-memory memo keyed them by id(), reused after collection."""
    clear_caches()
    for deadline in (590, 130, 300, 590, 450, 130):
        factory = (lambda d: (lambda: Patient(d)))(deadline)
        ref = PolicyRef.of(factory, label="patient")
        rows = fb.Run.make(n_tasks=18, seeds=(0, 1), policies=[ref], cache=False).evaluate()
        expected = _fresh(PolicyRef.of((lambda d: (lambda: Patient(d)))(deadline), label="patient"))
        pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected.reset_index(drop=True))
        del factory, ref


def test_a_replaced_registration_plays_the_new_factory(tmp_path):
    try:
        register_policy("mine_identity", ShipNow)
        ships = fb.evaluate(SMALL, ["mine_identity"], seeds=[0, 1], cache=tmp_path)
        register_policy("mine_identity", WriteOff, replace=True)
        got = fb.evaluate(SMALL, ["mine_identity"], seeds=[0, 1], cache=tmp_path)
        assert set(got.disposition) == {"write_off"} and set(ships.disposition) == {"ship"}
        clear_caches()
        got_run = fb.Run.make(n_tasks=18, seeds=(0, 1), policies=["mine_identity"], cache=False).evaluate()
        assert set(got_run.disposition) == {"write_off"}
    finally:
        REGISTRY.pop("mine_identity", None)


class Private(Patient):
    """Its knob kept under a private name: a digest that skipped `_` attributes would take 590 for 130."""

    def __init__(self, deadline: int = 590):
        self._deadline = deadline
        super().__init__(deadline)
        self.deadline = 590


class Slotted:
    __slots__ = ("_deadline",)
    name = "slotted"
    cache_id = "v1"

    def __init__(self, deadline: int):
        self._deadline = deadline


@pytest.mark.parametrize("a, b, same", [
    (Private(590), Private(130), False),
    (Slotted(590), Slotted(130), False),
    (Slotted(590), Slotted(590), True),
    (Patient, Patient, True),
    (Patient(590), Patient(590), True),
    (Patient(590), Patient(130), False),
    (ShipNow, WriteOff, False),
    (lambda: Patient(590), lambda: Patient(590), True),
    (lambda: Patient(590), lambda: Patient(130), False),
    (lambda: ShipNow(), lambda: WriteOff(), False),
], ids=["private-attribute", "private-slot", "equal-slot", "class", "equal-state", "other-state", "subclass", "same-lambda", "other-constant", "other-global"])
def test_identity_follows_content(a, b, same):
    ia, ib = identity(a), identity(b)
    assert ia is not None and ib is not None
    assert (ia == ib) is same


def test_a_closure_value_enters_the_identity():
    def make(deadline):
        return lambda: Patient(deadline)

    assert identity(make(590)) == identity(make(590)) != identity(make(130))


def test_no_stable_identity_runs_uncached_and_says_so(tmp_path, capsys):
    lock = threading.Lock()

    def factory():
        p = Patient(590)
        p.lock = lock  # state a cache key cannot hash
        return p

    assert identity(factory) is None
    ref = PolicyRef.of(factory, label="locked")  # Patient declares cache_id: the declaration is checked, and fails
    assert ref.cache_id is not None and ref.cache_key() is None
    got = fb.evaluate(SMALL, [ref], seeds=[0], cache=tmp_path)
    err = capsys.readouterr().err
    assert err.count("note: playing locked afresh") == 1 and "cannot be read or hashed" in err
    assert not list(tmp_path.rglob("*.json"))
    assert len(got) == len(SMALL) and got.attrs["loaded"] == {"locked": 0}


@pytest.mark.slow  # a subprocess
def test_the_identity_is_the_same_in_another_process():
    code = ("import sys; sys.path.insert(0, '.'); from tests.agents.test_identity import Patient; "
            "from finbench.agents.identity import identity; print(identity(Patient), identity(Patient(130)))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                           env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed, "PATH": ""}).stdout.strip()
            for seed in ("0", "123")}
    assert outs == {f"{identity(Patient)} {identity(Patient(130))}"}


# --- the running code and the values it reads, not a file's text (the hostile pass) ----------------

LIMIT = 590


class ReadsAGlobal(Patient):
    def act(self, obs):
        if obs["t"] > LIMIT:
            return "escalate", {"order_id": self.order}
        return super().act(obs)


def test_a_plain_global_the_code_reads_enters_the_identity():
    global LIMIT
    before = identity(ReadsAGlobal)
    try:
        LIMIT = 130
        assert identity(ReadsAGlobal) != before
    finally:
        LIMIT = 590
    assert identity(ReadsAGlobal) == before


def test_a_class_attribute_or_method_changed_after_use_changes_the_identity():
    class Tool(ShipNow):
        tool = "ship"

        def act(self, obs):
            return self.tool, {"order_id": self.order}

    before = identity(Tool)
    Tool.tool = "write_off"
    assert identity(Tool) != before
    Tool.tool = "ship"
    assert identity(Tool) == before
    Tool.act = lambda self, obs: ("close", {"order_id": self.order})
    assert identity(Tool) != before


def test_classes_made_by_a_function_differ_by_their_closure():
    def make(tool):
        class Made(ShipNow):
            def act(self, obs):
                return tool, {"order_id": self.order}
        return Made

    assert identity(make("ship")) == identity(make("ship")) != identity(make("write_off"))


def test_exec_made_classes_are_the_users_code():
    src = "class P:\n    def begin(self, b): self.o = b['order_id']\n    def act(self, o): return {!r}, {{'order_id': self.o}}\n"
    a, b = {}, {}
    exec(src.format("ship"), a)  # noqa: S102 - a class with no source file, as a notebook or exec makes
    exec(src.format("write_off"), b)  # noqa: S102
    assert a["P"].__module__ == "builtins"
    assert identity(a["P"]) is not None and identity(a["P"]) != identity(b["P"])


def test_an_object_plays_as_it_was_when_referenced():
    obj = Patient(590)
    ref = PolicyRef.of(obj)
    obj.deadline = 130  # edited after the reference was made: the run still plays 590
    assert ref.make().deadline == 590 and ref.cache_key() == PolicyRef.of(Patient(590)).cache_key()


def test_an_object_holding_a_function_counts_its_code():
    class Holder(ShipNow):
        def __init__(self, rule):
            self.rule = rule

    assert identity(Holder(lambda t: t > 300)) != identity(Holder(lambda t: t > 130))


def test_cache_id_none_on_the_policy_opts_out():
    class Never(ShipNow):
        cache_id = None

    class Declared(ShipNow):
        cache_id = "v1"

    assert PolicyRef.of(Never).cache_key() is None and PolicyRef.of(ShipNow).cache_key() is None
    assert PolicyRef.of(Declared).cache_key().startswith("user:Declared:v1:")


@pytest.mark.slow  # worker processes
def test_a_replaced_registration_reaches_worker_processes():
    try:
        register_policy("mine_workers", ShipNow)
        register_policy("mine_workers", WriteOff, replace=True)
        clear_caches()
        corpus = fb.make_corpus(n_tasks=60)  # three chunks: two worker processes really play them
        two = fb.evaluate(corpus, ["mine_workers"], seeds=[0], cache=False, n_jobs=2)
        assert set(two.disposition) == {"write_off"}
        pd.testing.assert_frame_equal(two, fb.evaluate(corpus, ["mine_workers"], seeds=[0], cache=False))
    finally:
        REGISTRY.pop("mine_workers", None)
