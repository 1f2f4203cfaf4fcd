"""FinalityBench: agent decisions under delayed and conflicting financial finality."""
from __future__ import annotations

from finbench.constants import HANDOVER, HORIZON, PUBLIC_SEED, REGEN_SEED, SHIP_BY
from finbench.corpus import Corpus, CorpusError, Task, load_corpus, make_corpus, make_task
from finbench.economics import Costs
from finbench.env import EpisodeResult, FinalityEnv, run_episode
from finbench.faults import FaultProfile
from finbench.policies import POLICIES, get_policy
from finbench.tools import tool_schemas

__all__ = [
    "HANDOVER", "HORIZON", "PUBLIC_SEED", "REGEN_SEED", "SHIP_BY",
    "Corpus", "CorpusError", "Task", "load_corpus", "make_corpus", "make_task",
    "Costs", "EpisodeResult", "FinalityEnv", "run_episode", "FaultProfile",
    "POLICIES", "get_policy", "tool_schemas",
]
