"""The reconciler (issue 12): an unprivileged policy that cannot tell twins apart, never acts irreversibly
before the outcome exists under any probe mode, and is registered beside the nine (the probe modes
themselves: tests/sim/test_probe.py)."""
import pytest

import finbench as fb
from finbench.sim.probe import ProbeMode
from finbench.agents.reconciler import Reconciler
from tests.agents.test_policies import calls_before

CORPUS = fb.make_corpus()
MODES = list(ProbeMode.all())


@pytest.mark.parametrize("mode", [ProbeMode.full(), ProbeMode.none()], ids=lambda m: m.name)
def test_reconciler_cannot_tell_twins_apart(mode):
    for settle, fail in CORPUS.twin_pairs:
        for seed in range(5):
            d = settle.determined_at
            assert calls_before(settle, Reconciler(), seed, d, mode) == calls_before(fail, Reconciler(), seed, d, mode), \
                (settle.task_id, seed)


def test_reconciler_is_registered_beside_the_nine():
    assert "reconciler" not in fb.POLICIES and len(fb.POLICIES) == 9
    from finbench.agents.registry import DEFAULT_POLICIES, REGISTRY
    assert REGISTRY["reconciler"] is Reconciler and "reconciler" not in DEFAULT_POLICIES
    assert not fb.get_policy("reconciler").privileged


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_reconciler_never_acts_irreversibly_before_the_outcome_exists(mode):
    """Its evidence is what replicas and probe show, and neither invents a terminal status."""
    for task in CORPUS.tasks[::3]:
        for seed in (0, 3):
            res = fb.run_episode(task, "reconciler", seed, probe=mode)
            assert not res.premature_irreversible, (mode.name, task.task_id, seed)
            keys = [a["idempotency_key"] for _, tool, a, _ in res.actions if tool == "retry_capture"]
            assert len(keys) <= 1 and (not keys or task.outcome == "failed")
