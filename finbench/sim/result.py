"""What one played episode comes to: `EpisodeResult`."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EpisodeResult:
    """One graded episode. `gap` = reference position - position; `exact` = gap <= `MONEY_TOL` (half a cent)."""

    task_id: str
    archetype: str
    policy: str
    seed: int
    position: float
    reference_position: float
    gap: float
    exact: bool
    premature_irreversible: bool
    disposition: str
    end_t: int
    n_calls: int
    fired: dict
    loss_breakdown: dict
    actions: tuple = field(repr=False)
    trace: tuple = field(repr=False)
    unrelated_effects: int = 0
    probe_calls: int = 0
    wait_calls: int = 0
    privileged: bool = False  # the agent was told the resolution (SPEC §7): never compared as unprivileged


_RESULT_FIELDS = tuple(EpisodeResult.__dataclass_fields__)


def episode_result(**values) -> EpisodeResult:
    """`EpisodeResult(**values)` without the frozen dataclass's field-by-field
    `object.__setattr__` (a fifth of a short episode's cost): the same object,
    attributes set in declaration order. Any other set of names takes the
    constructor, so a field added later cannot be skipped silently."""
    if tuple(values) != _RESULT_FIELDS:
        return EpisodeResult(**values)
    res = object.__new__(EpisodeResult)
    res.__dict__.update(values)
    return res
