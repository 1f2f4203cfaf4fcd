"""Observations are the caller's own: editing one changes no later read or episode (issue 18)."""
from __future__ import annotations

import finbench as fb
from finbench.sim.env import FinalityEnv
from finbench.sim.play import play

TASK = next(t for t in fb.make_corpus(n_tasks=18).tasks if t.archetype == "duplicate_settlement")


def _gate_episode(seed: int = 0) -> FinalityEnv:
    return play(FinalityEnv(TASK, seed), fb.get_policy("majority_vote"))  # reads every system, fast path


def test_editing_env_actions_changes_no_later_episode():
    before = _gate_episode().actions
    reads = [obs["result"] for _, tool, _, obs in before if tool.startswith("read_")]
    assert len(reads) > 0
    for result in reads:  # vandalise every observation the caller was given
        result.clear()
        result["poisoned"] = True
    again = _gate_episode()
    assert again.actions == _fresh_actions()
    assert all("poisoned" not in obs.get("result", {}) for *_, obs in again.actions)


def _fresh_actions():
    from finbench.memo import clear_caches

    clear_caches()
    return _gate_episode().actions


def test_calls_list_what_was_called_without_observations():
    env = _gate_episode()
    assert [(t, tool, args) for t, tool, args, _ in env.actions] == env.calls()
    assert len(env.calls()) == env.costs.step_budget - env.calls_left
