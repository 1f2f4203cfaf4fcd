"""Effect-level grading of one effect trace against a contract (SPEC section 9).

A final-total grader passes every run whose net amount is right, including one
that paid before it was allowed to and paid twice. This module scores the
effects instead: six separate checks, never averaged, and a third outcome,
``"unscorable"``, for a trace that does not carry enough evidence to say
either ``"pass"`` or ``"violation"``.

The governing rule for incomplete evidence is *monotonicity*: a check says
``"fail"`` on an incomplete log only when no record the log might be missing
could undo the failure (a second effect stays a second effect; a missing
authorization could still turn up). See ``docs/grading.md`` for every rule and
the choices made where the specification is silent.

The package deliberately imports nothing else from ``finbench`` but its errors so that it can
grade traces people bring without loading the simulator.
"""

from __future__ import annotations

from finbench.grading.checks import grade_trace
from finbench.grading.contract import CHECKS, MAX_MONEY, MONEY_TOL, Contract, TraceError, Verdict
from finbench.grading.records import FIELDS_READ, load_trace

__all__ = ["CHECKS", "FIELDS_READ", "MAX_MONEY", "MONEY_TOL", "Contract", "TraceError", "Verdict", "grade_trace", "load_trace"]
