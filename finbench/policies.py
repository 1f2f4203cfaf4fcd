"""Policies: one interface, `begin(brief)` then `act(observation) -> (tool, args)` (SPEC §7)."""
from __future__ import annotations

from finbench import constants as C


class Policy:
    """Base class. Subclasses see observations only; `privileged` ones also get the resolution."""

    name = "policy"
    privileged = False

    def begin(self, brief: dict, resolution: dict | None = None) -> None:
        self.order = brief["order_id"]
        self.brief = brief
        self.t = brief["t"]

    def call(self, tool: str, **args) -> tuple[str, dict]:
        return tool, {"order_id": self.order, **args}


class FinalityOracle(Policy):
    """The privileged reference: told how and when the pending capture resolves.

    Ships at once if it will settle; if it fails but a replacement would settle,
    submits the replacement at once and ships; if it fails for good, writes off.
    """

    name = "finality_oracle"
    privileged = True

    def begin(self, brief, resolution=None):
        super().begin(brief)
        if resolution is None:
            raise ValueError("finality_oracle is privileged: run it through run_episode/play")
        if resolution["outcome"] == "settled":
            self.plan = [("ship", {})]
        elif resolution["retry_outcome"] == "settled":
            self.plan = [("retry_capture", {"idempotency_key": "key-2"}), ("ship", {})]
        else:
            self.plan = [("write_off", {})]

    def act(self, obs):
        tool, args = self.plan.pop(0) if self.plan else ("close", {})
        return self.call(tool, **args)


POLICIES = {
    "finality_oracle": FinalityOracle,
}


def get_policy(name: str, **knobs) -> Policy:
    """A fresh policy by name, with optional knobs.

    Raises:
        ValueError: unknown name, or a knob the policy does not take.
    """
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")
    try:
        return POLICIES[name](**knobs)
    except TypeError as e:
        raise ValueError(f"policy {name!r} does not take {sorted(knobs)}: {e}") from None


assert C.ORIGINAL_KEY == "key-1"
