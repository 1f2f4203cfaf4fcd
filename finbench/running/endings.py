"""How an ended episode's row says it ended: its position against the reference, its money and its grade,
memoised by everything that decides them (many episodes of a task end alike, whatever they read on the way)."""
from __future__ import annotations

from finbench.grading import CHECKS
from finbench.memo import register
from finbench.running.episode import grade_played
from finbench.sim.env import FinalityEnv, reference_position

__all__ = ["GRADED", "ended"]

GRADED = ("verdict", "capture_effects", *(f"check_{c}" for c in CHECKS))
"""The grade's row columns, in the runner's order."""

_ENDS_SIZE = 1 << 15
_ENDS: dict = register(
    "running.endings",
    {}, keys="(task, costs, disposition and its tick, the first irreversible tick, the effects on the other order, "
             "the replayed keys, each agent capture's key and tick): what an ended episode's row says of its end",
    bound=_ENDS_SIZE)
"""What the row says of how an episode ended (its position and gap, its money, its grade), by all that decides
it: many episodes of a task end alike, whatever they read on the way."""


def ended(env: FinalityEnv) -> tuple:
    """(position, reference, gap, exact, premature), the outcome's money (cash, cogs, liability, dispute fee,
    escalation, unrelated), and the grade (`GRADED`), of an ended episode."""
    # every part is hashable: `step` takes a capture's key as a plain string, tool names are checked names
    key = (env.task, env.costs, env.disposition, env.disposition_t, env.first_irreversible_t,
           tuple(env.other_effects), tuple(env.replays),
           tuple([(c.key, c.submitted_at) for c in env.world.captures[1:]]))
    hit = _ENDS.get(key)
    if hit is not None:
        return hit
    out = env.outcome()
    refpos = reference_position(env.task, env.costs)
    graded = grade_played(env, out)
    hit = ((out.position, refpos, *env.scores(out, refpos)),
           (out.cash, out.cogs, out.liability, out.dispute_fee, out.escalation, out.unrelated),
           tuple([graded[c] for c in GRADED]))
    if len(_ENDS) >= _ENDS_SIZE:
        _ENDS.clear()
    _ENDS[key] = hit
    return hit
