"""The twelve tools: costs, arguments, validation, and function-calling schemas (SPEC §4)."""
from __future__ import annotations

import copy

from finbench.memo import memoised
from finbench.sim import constants as C

READS = ("read_processor", "read_ledger", "read_erp", "read_bank")

_ORDER = {"order_id": {"type": "string", "description": "The order the call acts on."}}

KEY_LENGTH = 255
"""The longest idempotency key a capture takes (as payment APIs bound theirs): a longer one is a bad call."""
TOOLS: dict[str, dict] = {
    **{name: {"description": f"Read the {name[5:]}'s current view of the order. Costs 1 tick.",
              "params": dict(_ORDER)} for name in READS},
    "probe_processor": {
        "description": ("Ask the payment network for each capture's terminal status: 'settled' or "
                        "'failed' once determined, otherwise 'unknown'. Costs 5 ticks."),
        "params": dict(_ORDER)},
    "wait": {"description": f"Let time pass. Costs the ticks waited (1..{C.MAX_WAIT}).",
             "params": {**_ORDER, "ticks": {"type": "integer", "minimum": 1, "maximum": C.MAX_WAIT,
                                            "description": "How many ticks (seconds) to wait."}}},
    "retry_capture": {
        "description": ("Submit a capture under an idempotency key. A key used before (the original is "
                        "key-1) is a no-op that returns that capture's receipt; a new key creates a new "
                        "capture. Costs 1 tick."),
        "params": {**_ORDER, "idempotency_key": {"type": "string", "minLength": 1, "maxLength": KEY_LENGTH,
                                                 "description": "The idempotency key."}}},
    "ship": {"description": (f"Release the goods. Ends the case. Fails after the ship-by deadline "
                             f"(t={C.SHIP_BY}). Costs 1 tick."), "params": dict(_ORDER)},
    "refund": {"description": "Return every amount settled so far and cancel the order. Ends the case.",
               "params": dict(_ORDER)},
    "write_off": {"description": "Cancel the order, declaring the payment lost. Ends the case.",
                  "params": dict(_ORDER)},
    "escalate": {"description": "Hand the case to a human (who charges a fee). Ends the case.",
                 "params": dict(_ORDER)},
    "close": {"description": "End the case with no disposition.", "params": dict(_ORDER)},
}
TOOL_NAMES = tuple(TOOLS)
DISPOSITIONS = ("ship", "refund", "write_off", "escalate", "close")
"""The five terminal dispositions (SPEC §4): the first successful one on the case order ends it."""
_PARAM_SETS = {name: frozenset(spec["params"]) for name, spec in TOOLS.items()}
assert len(TOOLS) == 12


def tool_ticks(tool: str, args: dict, costs) -> int:
    """Simulated time a (valid) call costs."""
    if tool in READS:
        return costs.read_ticks
    if tool == "probe_processor":
        return costs.probe_ticks
    if tool == "wait":
        return int(args["ticks"])
    return 1


@memoised("sim.tools.tool_costs", keys="the costs (a frozen value)", bound=1024)
def tool_costs(costs) -> dict[str, int]:
    """The ticks of every tool but `wait` (which costs what it asks) under `costs`: an episode reads them
    at every call."""
    return {tool: tool_ticks(tool, {}, costs) for tool in TOOLS if tool != "wait"}


_ORDER_KEY = frozenset({"order_id"})
ORDER_ONLY = frozenset(name for name, params in _PARAM_SETS.items() if params == _ORDER_KEY)
"""The tools that take only `order_id` (all but `wait` and `retry_capture`)."""


def validate(tool: object, args: dict) -> str | None:
    """None if the call is well-formed, else the error text an agent sees."""
    if tool.__class__ is str and tool in ORDER_ONLY and args.keys() == _ORDER_KEY:  # most calls
        return None if isinstance(args["order_id"], str) else f"{tool}: order_id must be a string"
    if not isinstance(tool, str) or tool not in TOOLS:
        return f"unknown tool {tool!r}; tools: {', '.join(TOOL_NAMES)}"
    params = TOOLS[tool]["params"]
    if args.keys() != _PARAM_SETS[tool]:
        extra = sorted(set(args) - set(params))
        if extra:
            return f"{tool}: unexpected argument(s) {', '.join(extra)}; takes {', '.join(params)}"
        return f"{tool}: missing argument(s) {', '.join(p for p in params if p not in args)}"
    if not isinstance(args["order_id"], str):
        return f"{tool}: order_id must be a string"
    if tool == "wait":
        t = args["ticks"]
        if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= C.MAX_WAIT:
            return f"wait: ticks must be an integer in 1..{C.MAX_WAIT}, got {t!r}"
    if tool == "retry_capture":
        k = args["idempotency_key"]
        if not isinstance(k, str) or not k:
            return "retry_capture: idempotency_key must be a non-empty string"
        if len(k) > KEY_LENGTH:
            return f"retry_capture: idempotency_key must be at most {KEY_LENGTH} characters, got {len(k):,}"
    return None


def tool_schemas() -> list[dict]:
    """The tools in the function-calling format language-model APIs take."""
    out = []
    for name, spec in TOOLS.items():
        out.append({"type": "function", "function": {
            "name": name,
            "description": spec["description"],
            "parameters": {"type": "object", "properties": copy.deepcopy(spec["params"]),
                           "required": list(spec["params"]), "additionalProperties": False},
        }})
    return out
