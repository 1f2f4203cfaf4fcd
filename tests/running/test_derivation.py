"""`derivation.same_reads` (running/derivation.py): which kept episodes a same-reads derivation may use."""
from __future__ import annotations

import json

import finbench as fb
from finbench.agents.registry import as_ref
from finbench.running import derivation as D
from finbench.running.columns import COLUMNS
from finbench.running.evaluation import episode_row
from finbench.sim.env import FinalityEnv
from finbench.sim.play import play


def test_a_variant_probed_under_another_mode_is_skipped_and_the_next_one_used():
    """A kept episode that probed under another probe mode is passed over (`continue`): a later variant of the
    same key, which never probed, still derives the row, the row the episode gives when played."""
    task, seed, profile, costs, sop = fb.make_task("settled_clean", seed=0), 0, fb.FaultProfile.default(), \
        fb.Costs(), as_ref("sop")
    env = play(FinalityEnv(task, seed, profile, costs), sop.make())
    played = episode_row(task, sop, seed, profile, costs)
    record = env.world.reads_record()
    i = COLUMNS.index("policy")
    elsewhere = (*played[:i], "another policy's row", *played[i + 1:])
    probed_elsewhere = D._Kept(record, elsewhere, profile, json.dumps(fb.ProbeMode.none().key()), True)
    never_probed = D._Kept(record, played, profile, None, False)
    assert D.same_reads([probed_elsewhere], task, seed, profile, probed_elsewhere.probe) == elsewhere  # its own mode
    assert D.same_reads([probed_elsewhere], task, seed, profile, None) is None
    assert D.same_reads([probed_elsewhere, never_probed], task, seed, profile, None) == played
