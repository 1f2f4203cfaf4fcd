"""FinalityBench: agent decisions under delayed and conflicting financial finality.

The public surface; everything else in the package is free to change. Names
are imported lazily (PEP 562), so `import finbench.grading` or the `grade`
command loads neither pandas nor the simulator.
"""
from __future__ import annotations

import importlib

__version__ = "1.1.0"
"""The package version (every stamp also carries the engine version: rows of two package versions
with one engine version are comparable; see CHANGELOG.md)."""

_EXPORTS = {
    "sim.constants": ("HANDOVER", "HORIZON", "PUBLIC_SEED", "REGEN_SEED", "SHIP_BY"),
    "sim.corpus": ("Corpus", "load_corpus", "make_corpus", "make_task"),
    "sim.task": ("CorpusError", "Task"),
    "sim.economics": ("Costs",),
    "sim.env": ("FinalityEnv",),
    "sim.result": ("EpisodeResult",),
    "running.episode": ("run_episode",),
    "sim.faults": ("FaultProfile",),
    "sim.probe": ("ProbeMode",),
    "grading": ("CHECKS", "Contract", "TraceError", "Verdict", "grade_trace", "load_trace"),
    "agents.policies": ("POLICIES", "Policy"),
    "agents.registry": ("PolicyRef", "get_policy", "register_policy"),
    "errors": ("FinbenchError", "PolicyError"),
    "memo": ("clear_caches",),
    "running.evaluation": ("evaluate",),
    "sim.tools": ("tool_schemas",),
    "running.run": ("Run", "sweep"),
    "analysis.publish": ("publish",),
    "analysis.verdicts": ("Claim",),
    "running.reprice": ("reprice",),
    "running.verify": ("verify",),
    "analysis.timeline_plot": ("draw_timeline", "timeline_figure"),
    "analysis.explorer_widget": ("explorer",),
    "running.inspect_task": ("inspect_task",),
    "card": ("ReportCard", "card_of", "report_card"),
    "sharing.submitted": ("read_submitted",),
    "sharing.compare": ("compare",),
    "sharing.leaderboard": ("leaderboard",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [name for names in _EXPORTS.values() for name in names] + ["experiments"]


def __getattr__(name: str):
    if name == "experiments":
        return importlib.import_module("finbench.experiments")
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'finbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"finbench.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
