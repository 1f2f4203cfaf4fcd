"""The columns of an episode row, in order: what `evaluate` returns (with `origin` after them) and the
episode cache holds."""
from __future__ import annotations

from finbench.sim import constants as C

__all__ = ["COLUMNS"]

COLUMNS = (
    "task_id", "archetype", "unit", "twin_side", "policy", "privileged", "seed", "position", "reference_position", "gap",
    "exact", "premature_irreversible", "n_calls", "end_t", "disposition", "probe_calls", "wait_calls",
    "unrelated_effects", "cash", "cogs", "liability", "dispute_fee", "escalation", "unrelated",
    *(f"fired_{f}" for f in C.FAMILIES), "retry_at", "calls", "invalid_calls",
    "other_order_calls", "call_errors", "verdict", "capture_effects",
    "check_auth_precedes_effect", "check_targets_intended", "check_exactly_one_effect",
    "check_retry_idempotent", "check_unrelated_unchanged", "check_evidence_complete",
)
"""Every episode row's columns, in order. `privileged` says the policy was told the resolution
(SPEC §7: the reference, or a user's policy that asks for it); such rows are never compared as
unprivileged. `retry_at` lists the ticks of fresh-key
captures (';'-joined), which with `disposition`, `end_t` and `unrelated_effects`
is all that pricing needs (`finbench.running.reprice`). `calls` is the episode's action
sequence, one `tool[@other][:args]` a call, ';'-joined (`%`, `;`, `,`, `:` and `@` inside a tool's name or a
value written `%25`, `%3B`, `%2C`, `%3A`, `%40`, so the rendering splits back unambiguously): two episodes decided
alike exactly when their `calls` are equal (the ablation compares them). `invalid_calls` counts the calls the
environment answered with an error, `other_order_calls` the valid calls on the customer's other order, and
`call_errors` holds each error message with its count (a JSON object, first answered first; "" when none):
counted by the environment while it played (`FinalityEnv.errors`), never re-read from `calls`."""

MONEY = ("position", "reference_position", "gap", "cash", "cogs", "liability", "dispute_fee", "escalation", "unrelated")
_BOOL = ("privileged", "exact", "premature_irreversible")
_INT = ("seed", "n_calls", "end_t", "probe_calls", "wait_calls", "unrelated_effects", "capture_effects",
        "invalid_calls", "other_order_calls",
        *(f"fired_{f}" for f in C.FAMILIES))
KINDS = {c: (float, int) if c in MONEY else (bool,) if c in _BOOL else (int,) if c in _INT
         else (str, type(None)) if c == "twin_side" else (str,) for c in COLUMNS}
"""The Python types each column's values may have (exactly: a bool is not an int here), as rows are made
and as the episode cache holds them; a cached chunk with any other is recomputed."""

__all__ += ["KINDS", "MONEY"]
