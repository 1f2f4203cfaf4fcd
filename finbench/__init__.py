"""FinalityBench: agent decisions under delayed and conflicting financial finality.

The public surface; everything else in the package is free to change.
"""
from __future__ import annotations

from finbench.constants import HANDOVER, HORIZON, PUBLIC_SEED, REGEN_SEED, SHIP_BY
from finbench.corpus import Corpus, CorpusError, Task, load_corpus, make_corpus, make_task
from finbench.economics import Costs
from finbench.env import EpisodeResult, FinalityEnv, run_episode
from finbench.faults import FaultProfile
from finbench.grading import CHECKS, Contract, TraceError, Verdict, grade_trace, load_trace
from finbench.policies import POLICIES, Policy, get_policy
from finbench.runner import evaluate
from finbench.tools import tool_schemas

__all__ = [
    "HANDOVER", "HORIZON", "PUBLIC_SEED", "REGEN_SEED", "SHIP_BY",
    "Corpus", "CorpusError", "Task", "load_corpus", "make_corpus", "make_task",
    "Costs", "EpisodeResult", "FinalityEnv", "run_episode", "FaultProfile",
    "CHECKS", "Contract", "TraceError", "Verdict", "grade_trace", "load_trace",
    "POLICIES", "Policy", "get_policy", "evaluate", "tool_schemas",
]
