"""Where the headline evaluation's time goes, by category: `python scripts/profile_engine.py`.

Profiles one cold `evaluate` of the nine policies on the corpus x 5 seeds (grading
on, no cache, one process) with cProfile and sums each function's own time
(`tottime`) into the categories below, by the file and function it belongs to.
cProfile inflates code that makes many small calls, so the shares are a guide,
not a measurement; `make bench` gives the rate. Prints a Markdown table
(docs/performance.md quotes it).
"""
from __future__ import annotations

import cProfile
import pstats
import sys

CATEGORIES = (  # (category, file suffix, function names or None for all), first match wins
    ("policy logic", "agents/policies.py", None),
    ("tool dispatch (step, _call, _case)", "sim/env.py", {"step", "_call", "_case", "_finish_call", "_other",
                                                          "_dispose", "_irreversible"}),
    ("tool dispatch (step, _call, _case)", "sim/tools.py", None),
    ("tool dispatch (step, _call, _case)", "sim/play.py", None),
    ("reads and folds", "sim/world.py", {"read", "view", "probe", "other_view", "stale_draw"}),
    ("reads and folds", "sim/systems.py", None),
    ("fault schedule (draws, deliveries)", "sim/faults.py", None),
    ("fault schedule (draws, deliveries)", "sim/rng.py", None),
    ("fault schedule (draws, deliveries)", "sim/world.py", {"__init__", "base_world", "_lanes", "add_capture",
                                                            "_add", "capture_events", "event_specs",
                                                            "_log_specs", "record_disposition", "fired"}),
    ("economics and reference", "sim/economics.py", None),
    ("economics and reference", "sim/env.py", {"outcome", "reference_position", "scores"}),
    ("grading (trace, memo, grader)", "grading/", None),
    ("grading (trace, memo, grader)", "running/episode.py", None),
    ("grading (trace, memo, grader)", "sim/trace.py", None),
    ("env and world set-up", "sim/env.py", None),
    ("env and world set-up", "sim/task.py", None),
    ("env and world set-up", "agents/registry.py", None),
    ("env and world set-up", "errors.py", None),
    ("env and world set-up", "sim/probe.py", None),
    ("row building and chunks", "running/", None),
)


def category(filename: str, func: str) -> str:
    path = filename.replace("\\", "/")
    for name, suffix, funcs in CATEGORIES:
        if (suffix in path) and (funcs is None or func in funcs):
            return name
    return "builtins and the rest (dict, list, str, generators)"


def main() -> int:
    from finbench.running.evaluation import evaluate
    from finbench.sim.corpus import make_corpus

    corpus = make_corpus(n_tasks=321)
    evaluate(make_corpus(n_tasks=1, master_seed=1), None, seeds=[9], n_jobs=1, cache=False)  # imports
    prof = cProfile.Profile()
    prof.enable()
    n = len(evaluate(corpus, None, seeds=range(5), n_jobs=1, cache=False))
    prof.disable()
    totals: dict[str, float] = {}
    for (filename, _, func), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
        key = category(filename, func)
        totals[key] = totals.get(key, 0.0) + tottime
    whole = sum(totals.values())
    print(f"| category | share | µs per episode (profiled) |\n| --- | ---: | ---: |")
    for name, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {t / whole:.0%} | {t / n * 1e6:.1f} |")
    print(f"| **all** ({n:,} episodes) | 100% | {whole / n * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
