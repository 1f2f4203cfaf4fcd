"""Every tunable constant of the benchmark, in one module, with its reason.

SPEC §1–§6 fix the mechanisms; the numbers below are the ones SPEC allows us to
tune "openly, toward the paper's figures". Nothing here has been moved from
SPEC's stated values; where SPEC gives a range we use the range as stated.
A change to any constant changes `ENGINE_VERSION`'s meaning: bump it so cached
episode results are not reused.
"""
from __future__ import annotations

ENGINE_VERSION = "6"
"""Bumped whenever the semantics of the engine or of a policy change; part of every cache key (6: `sop`
polls every 60 ticks by default, was 30)."""

# --- time (SPEC §1) --------------------------------------------------------
HANDOVER = 120
SHIP_BY = 600
HORIZON = 1800

AUTH_AT = 2
CAPTURE_AT = 10
ORIGINAL_CAPTURE = "cap-1"
ORIGINAL_KEY = "key-1"

ORDER_VALUES = (24.99, 49.99, 89.00, 149.99, 299.00, 649.00, 1299.00, 3499.00)

# --- seeds -------------------------------------------------------------------
PUBLIC_SEED = 20260321
"""Master seed of the public split (SPEC §6). The paper's seed is not stated, so
its fingerprint (35c002b563fc9c8f) cannot be matched; ours is printed instead."""
REGEN_SEED = 20261202
"""Master seed of the regenerated split: same generator, other seed."""

# --- systems (SPEC §2) -------------------------------------------------------
SYSTEMS = ("processor", "ledger", "erp", "bank")
LATENCY = {"processor": 2, "ledger": 5, "erp": 15, "bank": 0}
BANK_BATCH = 60
"""The bank posts on 60-tick boundaries strictly after the (perturbed) arrival."""

# --- faults (SPEC §3) --------------------------------------------------------
FAMILIES = ("delay", "duplicate", "loss", "reorder", "partial_commit", "stale_read")
DEFAULT_INTENSITY = 0.30
DELAY_RANGE = (30, 300)
DUPLICATE_GAP = (1, 60)
REORDER_WINDOW = 60
STALE_RANGE = (30, 180)

# --- tools (SPEC §4) ---------------------------------------------------------
MAX_WAIT = 600

# --- corpus (SPEC §6) --------------------------------------------------------
ARCHETYPES = (
    "settled_clean",
    "lost_settlement",
    "stale_processor",
    "pending_settle",
    "pending_fail",
    "unresolvable",
    "duplicate_settlement",
    "partial_ledger",
    "late_chargeback",
)

DETERMINATION = {
    "settled_clean": (30, 110),
    "lost_settlement": (200, 400),
    "stale_processor": (130, 480),
    "pending_settle": (130, 560),
    "pending_fail": (130, 560),
    "unresolvable": (620, 1500),
    "duplicate_settlement": (130, 480),
    "partial_ledger": (130, 480),
    "late_chargeback": (130, 480),
}
"""Inclusive intervals of `determined_at` per archetype (SPEC §6)."""

RETRY_DELAY = (30, 120)
PROCESSOR_LAG = (200, 400)
"""stale_processor: the replica receives terminal statuses this many ticks late."""
CHARGEBACK_DELAY = (200, 600)
UNRESOLVABLE_SETTLE_P = 0.5
"""P(settles) for an unresolvable single's outcome and for its retry outcome."""

# The default 321-task mix, as units: singles and twin pairs (SPEC §6).
SINGLES = {
    "settled_clean": 45,
    "lost_settlement": 40,
    "stale_processor": 36,
    "pending_settle": 14,
    "pending_fail": 19,
    "unresolvable": 2,
    "duplicate_settlement": 30,
    "partial_ledger": 30,
    "late_chargeback": 15,
}
PAIRS = {
    # pair kind -> (settle-side archetype, fail-side archetype), count
    "pending": (("pending_settle", "pending_fail"), 26),
    "unresolvable": (("unresolvable", "unresolvable"), 19),
}
DEFAULT_TASKS = 321

MONEY_TOL = 0.005
"""Half a cent: two amounts closer than this are the same money (`exact` is gap <= MONEY_TOL; a liability
or an over-collection counts from above it). The grader has its own, equal, tolerance: it stands alone."""

MAX_COST = 1_000_000.0
"""The largest dispute fee or escalation cost `Costs` accepts: orders are at most $3,499, so a
larger fee is a typo, and a fee near 1e308 overflows a position to inf and a mean to NaN."""
