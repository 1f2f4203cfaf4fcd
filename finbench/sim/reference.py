"""The privileged reference (SPEC §7): its decision rule and the position it reaches.

The rule has one home, here: `finbench.agents.policies.FinalityOracle` plays
`oracle_plan`, and so does `finbench.sim.env.reference_position`, against which
`FinalityEnv.result` prices an episode.
"""
from __future__ import annotations



def oracle_plan(resolution: dict) -> list[tuple[str, dict]]:
    """The reference's calls, given how the pending capture resolves (arguments without `order_id`).

    Ships at once if it will settle; if it fails but a replacement would settle,
    submits the replacement at once (under a fresh key) and ships; if it fails for
    good, writes off.

    Example:
        >>> oracle_plan({"outcome": "failed", "retry_outcome": "settled", "determined_at": 300})
        [('retry_capture', {'idempotency_key': 'key-2'}), ('ship', {})]
    """
    if resolution["outcome"] == "settled":
        return [("ship", {})]
    if resolution["retry_outcome"] == "settled":
        return [("retry_capture", {"idempotency_key": "key-2"}), ("ship", {})]
    return [("write_off", {})]
