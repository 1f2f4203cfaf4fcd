"""The package's tasks, registered with Inspect: `inspect eval finbench/finbench --model ...` from any folder.

Inspect loads this module through the package's `inspect_ai` entry point (pyproject.toml) when a task name
starts with `finbench/`; nothing else imports it (it imports `inspect_ai`).

- `finbench/finbench`: `finbench.inspect_task` with its defaults (Table V's subset of the 321 tasks, seed 0);
  its arguments as `-T n_tasks=30 -T "seeds=[0,1]" -T subset=all`.
- `finbench/table5`: the same task under the name of the table it reproduces.
"""
from __future__ import annotations

from inspect_ai import task

from finbench.running.inspect_task import finbench as _finbench
from finbench.sim import constants as C

__all__ = ["finbench", "table5"]


@task(name="finbench")
def finbench(n_tasks: int | None = None, seeds: list[int] = (0,), subset: str = "table5", subset_size: int = 60,
             subset_seed: int = 0, master_seed: int = C.PUBLIC_SEED):
    """The benchmark's episodes as samples (`finbench.inspect_task`)."""
    return _finbench(n_tasks, seeds, subset, subset_size, subset_seed, master_seed)


@task(name="table5")
def table5(n_tasks: int | None = None, seeds: list[int] = (0,), subset_size: int = 60, subset_seed: int = 0,
           master_seed: int = C.PUBLIC_SEED):
    """Table V's stratified subset (every archetype, whole twin pairs), seed 0 by default."""
    return _finbench(n_tasks, seeds, "table5", subset_size, subset_seed, master_seed)
