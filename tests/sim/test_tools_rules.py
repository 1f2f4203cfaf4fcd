"""Rules of the twelve tools (`finbench.sim.tools`, SPEC §4).

Pinned here:
- `tool_schemas()` gives every tool, in SPEC order, in the function-calling format: type "function",
  a name, a description, and object parameters whose properties are the tool's arguments (their
  JSON types and, for `wait`, the range 1..MAX_WAIT), all required, and no others allowed
  (`additionalProperties: false`); each call gives a fresh copy, so editing one schema changes
  neither the next call's nor the tools themselves;
- `validate` accepts every well-formed call (None) and for each bad one returns the text an agent
  sees: an unknown (or non-string) tool, an unexpected or a missing argument, a non-string order id,
  ticks that are not an integer in 1..MAX_WAIT, an empty or non-string idempotency key.
"""
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.sim import tools as T

NAMES = ["read_processor", "read_ledger", "read_erp", "read_bank", "probe_processor", "wait", "retry_capture",
         "ship", "refund", "write_off", "escalate", "close"]
ORDER_ONLY = [n for n in NAMES if n not in ("wait", "retry_capture")]
ALL = ", ".join(NAMES)
ORDER_ID = {"type": "string", "description": "The order the call acts on."}


def _by_name():
    return {s["function"]["name"]: s for s in fb.tool_schemas()}


def test_schemas_name_the_twelve_tools_in_order():
    schemas = fb.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == NAMES
    for s in schemas:
        assert set(s) == {"type", "function"} and s["type"] == "function"
        assert set(s["function"]) == {"name", "description", "parameters"}


@pytest.mark.parametrize("name", ORDER_ONLY)
def test_order_only_tools_take_exactly_an_order_id(name):
    params = _by_name()[name]["function"]["parameters"]
    assert params == {"type": "object", "properties": {"order_id": ORDER_ID}, "required": ["order_id"],
                      "additionalProperties": False}


def test_wait_takes_an_order_id_and_ticks_in_range():
    params = _by_name()["wait"]["function"]["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["order_id", "ticks"]
    assert params["properties"]["order_id"] == ORDER_ID
    ticks = params["properties"]["ticks"]
    assert (ticks["type"], ticks["minimum"], ticks["maximum"]) == ("integer", 1, 600) and C.MAX_WAIT == 600


def test_retry_capture_takes_an_order_id_and_a_key():
    params = _by_name()["retry_capture"]["function"]["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["order_id", "idempotency_key"]
    assert params["properties"]["order_id"] == ORDER_ID
    assert params["properties"]["idempotency_key"]["type"] == "string"


def test_descriptions_state_the_costs():
    d = {n: s["function"]["description"] for n, s in _by_name().items()}
    assert all(isinstance(v, str) and v for v in d.values())
    for n in ("read_processor", "read_ledger", "read_erp", "read_bank", "retry_capture", "ship"):
        assert "Costs 1 tick." in d[n]
    assert "Costs 5 ticks." in d["probe_processor"] and "(1..600)" in d["wait"]
    assert "t=600" in d["ship"] and "key-1" in d["retry_capture"]
    for n in ("ship", "refund", "write_off", "escalate"):
        assert "Ends the case." in d[n]
    assert d["close"] == "End the case with no disposition."


def test_editing_a_schema_changes_no_later_schema():
    first = fb.tool_schemas()
    props = [s["function"]["parameters"]["properties"] for s in first]
    try:
        for p in props:
            p["order_id"]["type"] = "integer"
            p["order_id"]["edited"] = True
        props[5]["ticks"]["maximum"] = 5
        again = _by_name()
        for n in NAMES:
            assert again[n]["function"]["parameters"]["properties"]["order_id"] == ORDER_ID
        assert again["wait"]["function"]["parameters"]["properties"]["ticks"]["maximum"] == 600
        assert T.TOOLS["ship"]["params"]["order_id"] == ORDER_ID
    finally:  # under a shallow copy the edits went into the tools themselves: undo them
        for p in props:
            p["order_id"]["type"] = "string"
            p["order_id"].pop("edited", None)
        props[5]["ticks"]["maximum"] = 600


# --- validate ------------------------------------------------------------------------------

@pytest.mark.parametrize("tool, args", [(n, {"order_id": "o-1"}) for n in ORDER_ONLY] + [
    ("wait", {"order_id": "o-1", "ticks": 1}), ("wait", {"order_id": "o-1", "ticks": 600}),
    ("retry_capture", {"order_id": "o-1", "idempotency_key": "key-2"}),
])
def test_well_formed_calls_pass(tool, args):
    assert T.validate(tool, args) is None


class _LooksLikeShip:
    """Not a string, but equal to (and hashed like) "ship"."""

    def __eq__(self, other):
        return other == "ship"

    def __hash__(self):
        return hash("ship")

    def __repr__(self):
        return "<ship-like>"


@pytest.mark.parametrize("tool, shown", [("fly", "'fly'"), (5, "5"), (None, "None"), (_LooksLikeShip(), "<ship-like>")])
def test_unknown_or_non_string_tool(tool, shown):
    assert T.validate(tool, {"order_id": "o-1"}) == f"unknown tool {shown}; tools: {ALL}"


@pytest.mark.parametrize("tool, args, message", [
    ("ship", {"order_id": "o", "x": 1}, "ship: unexpected argument(s) x; takes order_id"),
    ("ship", {"order_id": "o", "z": 1, "a": 2}, "ship: unexpected argument(s) a, z; takes order_id"),
    ("wait", {"order_id": "o", "ticks": 3, "why": ""}, "wait: unexpected argument(s) why; takes order_id, ticks"),
    ("read_bank", {}, "read_bank: missing argument(s) order_id"),
    ("wait", {"order_id": "o"}, "wait: missing argument(s) ticks"),
    ("wait", {}, "wait: missing argument(s) order_id, ticks"),
    ("retry_capture", {"order_id": "o"}, "retry_capture: missing argument(s) idempotency_key"),
])
def test_unexpected_and_missing_arguments(tool, args, message):
    assert T.validate(tool, args) == message


@pytest.mark.parametrize("tool, args", [(n, {"order_id": 7}) for n in ORDER_ONLY] + [
    ("wait", {"order_id": None, "ticks": 5}), ("retry_capture", {"order_id": 1, "idempotency_key": "k"}),
])
def test_order_id_must_be_a_string(tool, args):
    assert T.validate(tool, args) == f"{tool}: order_id must be a string"


@pytest.mark.parametrize("ticks", [0, 601, -1, True, 1.0, "5", None])
def test_wait_ticks_must_be_an_integer_in_range(ticks):
    assert T.validate("wait", {"order_id": "o", "ticks": ticks}) == \
        f"wait: ticks must be an integer in 1..600, got {ticks!r}"


@pytest.mark.parametrize("key", ["", None, 2])
def test_idempotency_key_must_be_a_non_empty_string(key):
    assert T.validate("retry_capture", {"order_id": "o", "idempotency_key": key}) == \
        "retry_capture: idempotency_key must be a non-empty string"
