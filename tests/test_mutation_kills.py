"""Tests that kill mutants which survived `make mutate` (docs/mutation.md) in the engine's
economics and faults and in re-pricing."""
