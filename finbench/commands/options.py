"""The options of `finbench eval` (and of the commands that share them): the words of their help, and the
argparse types that check each value and say what is wrong in one line."""
from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from finbench.errors import FinbenchError, show
from finbench.eval_cli import unwritable

AGENT = "PATH.py:NAME or module:NAME"  # as finbench.agents.loading words it (not imported: it loads the simulator)
POLICY = "a class with begin(brief) and act(observation), a factory of no arguments returning one, or such an object"
FAMILIES = ("delay", "duplicate", "loss", "reorder", "partial_commit", "stale_read")  # sim.constants.FAMILIES
PROFILE = (f"default, none, only:FAMILIES or without:FAMILIES (comma-separated from {', '.join(FAMILIES)}); all "
           "is default's other name (every family), as stamps print it")
N_TASKS = ("a corpus of N tasks generated from the public corpus's seed with its mix of archetypes scaled to N "
           "(make_corpus(n_tasks=N)); only N=321 is the public corpus: for any other N these are not the public "
           "corpus's first N tasks (ids from ord-0001 again, naming other tasks), so its numbers are not the "
           "public corpus's; to run tasks of the public corpus, give --task-ids (default: 321)")
TASK_IDS = ("run these tasks of the public corpus (321 tasks, make_corpus()) instead, comma-separated: a task "
            "id (ord-0007) or a twin pair's order id (ord-0014: both halves, ord-0014:settle and ord-0014:fail; "
            "a half alone is refused, as the card compares whole pairs); an id the corpus lacks exits 64")
PROBE = "full, none, delayed[:D], rate_limited[:N] or identity_only"


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {show(text)}")
    return n


def jobs(text: str) -> int:
    if text.strip() == "-1":
        return -1
    try:
        return count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or -1 (every core), got {show(text)}") from None


def task_ids(text: str) -> tuple[str, ...]:
    from finbench.sim.corpus import corpus_for  # lazy: `grade` loads no simulator

    tasks = corpus_for().tasks  # the public corpus
    ids = {t.task_id: t for t in tasks}
    units: dict[str, list[str]] = {}
    for t in tasks:
        units.setdefault(t.unit, []).append(t.task_id)
    chosen: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part not in ids and part not in units:
            raise argparse.ArgumentTypeError(f"the public corpus has no task {show(part)} (its ids run from "
                                             f"{tasks[0].unit} to ord-{len(units):04d}; a twin pair's halves are "
                                             "ID:settle and ID:fail)")
        chosen += [i for i in units.get(part, [part]) if i not in chosen]
    half = next((i for i in chosen if any(j not in chosen for j in units[ids[i].unit])), None)
    if half is not None:
        raise argparse.ArgumentTypeError(f"{show(half)} is one half of the twin pair {ids[half].unit}: give "
                                         f"{ids[half].unit} for both halves (the card compares whole pairs)")
    if not chosen:
        raise argparse.ArgumentTypeError(f"must name at least one task, got {show(text)}")
    return tuple(chosen)


def profile(text: str):
    from finbench.sim.faults import FaultProfile  # lazy: `grade` loads no simulator

    kind, colon, rest = text.strip().partition(":")
    families = [f for f in rest.replace("+", ",").split(",") if f]
    if not colon and kind in ("default", "all"):
        return FaultProfile.default()
    if not colon and kind == "none":
        return FaultProfile.none()
    if kind in ("only", "without") and families and set(families) <= set(FAMILIES):
        return (FaultProfile.only if kind == "only" else FaultProfile.without)(*families)
    raise argparse.ArgumentTypeError(f"must be {PROFILE}, got {show(text)}")


def probe(text: str):
    from finbench.sim.probe import ProbeMode  # lazy: `grade` loads no simulator

    kind, colon, knob = text.strip().partition(":")
    try:
        if kind in ("full", "none", "identity_only") and not colon:
            return ProbeMode(kind)
        if kind == "delayed":
            return ProbeMode.delayed(int(knob)) if colon else ProbeMode.delayed()
        if kind == "rate_limited":
            return ProbeMode.rate_limited(int(knob)) if colon else ProbeMode.rate_limited()
    except (ValueError, FinbenchError):
        pass
    raise argparse.ArgumentTypeError(f"must be {PROBE} (D in 1..1800 ticks, N in 0..40 answers), got {show(text)}")


def costs(text: str):
    from finbench.sim.economics import Costs  # lazy: `grade` loads no simulator

    kinds = {f.name: f.type for f in dataclasses.fields(Costs)}
    allowed = f"key=value,... with keys from {', '.join(kinds)}"
    values = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in kinds or key in values:
            raise argparse.ArgumentTypeError(f"must be {allowed} (each once), got {show(text)}")
        try:
            values[key] = int(value) if kinds[key] in (int, "int") else float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key} must be a number, got {show(value)}") from None
    try:
        return Costs(**values)
    except FinbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if value == 0:
        return None
    if not 0.01 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in [0.01, 86400], or 0 or none for no "
                                         f"limit, got {show(text)}")
    return value


def folder_for(what: str):
    """The argparse type of an `--out` folder that `what` will be written to (made if missing)."""
    def out(text: str) -> Path:
        path = Path(text)
        why = unwritable(path) if text.strip() else "it is empty"
        if why:
            raise argparse.ArgumentTypeError(f"must be a folder {what} can be written to, got {show(text)}: {why}")
        return path
    return out


out = folder_for("the card")


def nonneg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {show(text)}")
    return n


def text(value: str) -> str:
    """A value that is not blank."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value
