"""Rows made from episodes already played, without playing them (origins `derived_seed` and
`derived_reads`, `running.origin`): the two memos `run_chunk` consults for the package's own policies, and
the rules that decide a kept episode is the one asked for.

- `derive_seed`: an episode that saw only the truth (`FinalityEnv.saw_only_truth`: it read no system,
  only a probe that tells the truth) of a policy that ignores the seed is the same episode under every
  seed and fault profile but for the faults fired.
- `same_reads`: an episode whose every read would return the same payload under another fault profile
  (or probe mode, if it never probed) makes the same calls to the same end.
"""
from __future__ import annotations

from finbench.memo import register
from finbench.running.columns import COLUMNS
from finbench.sim import constants as C
from finbench.sim.env import FinalityEnv
from finbench.sim.faults import FaultProfile
from finbench.sim.world import reads_signature, replayed_firings, same_reads_firings

__all__ = ["TRUTH_ONLY", "SAME_READS", "derive_seed", "keep_truth_only", "keep_reads", "same_reads"]

_SEED = COLUMNS.index("seed")
_FIRED = COLUMNS.index(f"fired_{C.FAMILIES[0]}")


def derive_seed(kept: tuple, task, seed: int, profile: FaultProfile) -> tuple:
    """The row of an episode that saw only the truth (`FinalityEnv.saw_only_truth`) of a package policy that
    ignores the seed (`ignores_seed`), played under `seed` and `profile` instead: the same calls get the same
    answers (the agent read no system, only a probe that tells the truth), so only the seed and the faults
    the world fires differ. `kept`: the played row and the episode's captures."""
    row, captures = kept
    fired = replayed_firings(task, seed, profile, captures)
    return (*row[:_SEED], seed, *row[_SEED + 1:_FIRED], *(fired[f] for f in C.FAMILIES),
            *row[_FIRED + len(C.FAMILIES):])


TRUTH_ONLY_SIZE = 16_384
TRUTH_ONLY: dict = register(
    "running.derivation.saw_only_truth",
    {}, keys="(task, the package policy's cache key and label, costs, probe mode): the row and captures of an "
             "episode that saw only the truth",
    bound=TRUTH_ONLY_SIZE)
"""Episodes that saw only the truth, of the package's own policies that ignore the seed, so that another
fault profile (an ablation arm) or another seed derives them instead of playing them again."""


SAME_READS_SIZE = 65_536
SAME_READS: dict = register(
    "running.derivation.same_reads",
    {}, keys="(task, the package policy's cache key and label, costs, seed): the rows played under other fault "
             "profiles or probe modes, each with what its reads saw and whether it probed", bound=SAME_READS_SIZE)
"""Episodes of the package's own policies with what their reads saw, so that another fault profile (an
ablation arm) under which every read returns the same payload derives them."""


class _Kept:
    """An ended episode kept for `same_reads`: what decides what its reads saw (`World.reads_record`) and its
    row. What they saw is worked out the first time another profile asks (`signature`): a run of one profile
    never pays for it. `probe`: the probe mode's key it was played under, and whether it probed."""

    __slots__ = ("record", "row", "profile", "probe", "probed", "_signature")

    def __init__(self, record: tuple, row: tuple, profile: FaultProfile, probe, probed: bool):
        self.record, self.row, self.profile, self.probe, self.probed = record, row, profile, probe, probed
        self._signature = None

    def signature(self, task, seed: int) -> tuple[tuple, tuple]:
        """What its reads saw under its own profile (`sim.world.reads_signature`)."""
        if self._signature is None:
            self._signature = reads_signature(task, seed, self.profile, self.record)
        return self._signature


def same_reads(variants: list, task, seed: int, profile: FaultProfile, probe=None) -> tuple | None:
    """The row of an earlier episode that is this one under `profile`, or None.

    An episode sees the world only through its reads. If under `profile` each read is as stale (or fresh)
    as it was, and each system holds the same deliveries up to the latest tick it was read as of (its
    base's and those of the captures the agent made, which arrive no earlier than their submission, so
    no read before a capture sees them), every read returns the same payload, and the agent makes the
    same calls to the same end. Only the faults fired elsewhere differ: the row takes this world's.
    The probe mode (`probe`, its key) answers only the probe: an episode that never probed is the same
    under every mode (the brief does not name it), one that probed only under its own."""
    for kept in variants:
        if kept.probed and kept.probe != probe:
            continue
        fired = same_reads_firings(task, seed, profile, kept.record, kept.signature(task, seed))
        if fired is not None:
            row = kept.row
            return (*row[:_FIRED], *(fired[f] for f in C.FAMILIES), *row[_FIRED + len(C.FAMILIES):])
    return None


def keep_reads(key: tuple, env: FinalityEnv, row: tuple, probe=None) -> None:
    """Keep an ended episode (played under the probe mode whose key is `probe`) for `same_reads`."""
    if len(SAME_READS) >= SAME_READS_SIZE:
        SAME_READS.clear()
    SAME_READS.setdefault(key, []).append(_Kept(env.world.reads_record(), row, env.profile, probe, env.probe_calls > 0))



def keep_truth_only(key: tuple, kept: tuple) -> None:
    """Keep an episode that saw only the truth (its row and captures) for `derive_seed` under other seeds and
    profiles."""
    if len(TRUTH_ONLY) >= TRUTH_ONLY_SIZE:
        TRUTH_ONLY.clear()
    TRUTH_ONLY[key] = kept
