"""Plan search: can any open-loop plan beat the reference? (SPEC §10, the paper's search of 1,215 plans.)

Excess loss (the gap to the privileged reference) means something only if the
reference is hard to beat. The paper checks it by exhaustive search: every
plan of the form wait -> retry (none / original key / fresh key) -> wait ->
one terminal action (`finbench.agents.plans`, 1,215 plans) on 40 sampled tasks; the
reference is *beaten* on a task when some plan's position is above it by more
than half a cent (gap < -0.005, SPEC §5's tolerance). After its two fixes the
paper finds it beaten on a few tasks, all `late_chargeback`: a correct decision
punished by a chargeback that had not happened when it was made (its numbers:
`data/paper_claims.csv`).

Notebook `07_plan_search`, in the shape every experiment shares:

    run = Run.make(master_seed, n_tasks, seeds=[0], policies=["finality_oracle"], n_jobs=n_jobs, cache=cache_dir)
    rows = plan_search.episodes(run, n_sample, sample_seed)   # the search over a stratified sample
    tables = plan_search.tables(rows, run)                    # plan_search; beside it, "premature"
    claims = plan_search.claims(tables)
    figures = plan_search.figures(rows, run, tables)          # none
    publish_experiment(plan_search, run, tables, claims, figures,
                       meta=plan_search.meta(run, tables, sample_seed))

One seed is enough: a plan reads nothing, so its calls are fixed before the
episode starts, and faults only perturb deliveries to the replicas. Its
position is a function of the task's canonical log, its call times and the
costs, the same under every seed and profile (tested on several of each).
The episodes go through `runner.evaluate` like every other policy's: the same
environment, economics and grading.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.sim import constants as C
from finbench.analysis.verdicts import Claim, claims_notes, claims_of, from_tables
from finbench.analysis.verdicts import Measure
from finbench.analysis.publish import TableSpec
from finbench.sim.corpus import Corpus
from finbench.errors import bad, check_int
from finbench.sim.faults import FaultProfile
from finbench.agents.plans import N_PLANS, all_plans, charges_twice, plan_ref
from finbench.sim.rng import generator
from finbench.sim.env import reference_position
from finbench.running.episode import run_episode
from finbench.agents.registry import as_ref
from finbench.running.evaluation import evaluate

NAME = "plan_search"
SECTION = "The plan search: is the reference beaten?"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
SOURCE = "tables/plan_search.csv"
TABLES = ("plan_search",)
"""The tables this experiment writes and its claims read, by stem."""
ORACLE = "finality_oracle"
BEATEN_TOL = 0.005
"""A plan beats the reference when its position is higher by more than this (SPEC §5's `exact` tolerance)."""
N_SAMPLE = 40
SAMPLE_SEED = 0
"""The sample's seed: the first one, not chosen for its result (under proportional allocation
every sample of 40 holds two `late_chargeback` tasks, whatever the seed)."""

COLUMNS = ("task_id", "archetype", "twin_side", "order_value", "outcome", "reference_position", "best_plan",
           "best_position", "gap", "margin", "beaten", "n_beating", "double_charge", "double_charge_gain",
           "plans")

__all__ = ["CLAIMS", "PUBLISH", "TABLES", "beaten", "claims", "claims_from_tables", "episodes", "figures", "markdown",
           "measures", "meta", "notes", "premature", "read_premature", "sample_tasks", "search", "tables"]


def episodes(run, n: int = N_SAMPLE, seed: int = SAMPLE_SEED) -> pd.DataFrame:
    """The search's rows: every plan on a stratified sample of `n` tasks of the run's corpus
    (`search(run, sample_tasks(run.corpus, n, seed))`), one row per task."""
    return search(run, sample_tasks(run.corpus, n, seed))


def tables(rows: pd.DataFrame, run) -> dict:
    """The plan-search table by stem (`TABLES`) and, under "premature", the reference's premature rate
    over the run's full corpus (`premature`): the claims and the notes read it, and the table's stamp
    carries it (`meta`), so `claims_from_tables` reads it back from there (`read_premature`)."""
    return {"plan_search": rows, "premature": premature(run.evaluate())}


# --- the sample --------------------------------------------------------------------------

def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many tasks of each archetype a stratified sample of `n` takes.

    Proportional to the archetype's share of the corpus, largest remainder
    first (ties in SPEC's archetype order), with at least one of every
    archetype present and never more than it has.

    Raises:
        FinbenchError: `n` below the number of archetypes present or above the corpus size.
    """
    total = sum(sizes.values())
    n = check_int("sample_tasks", "n", n, len(sizes), total)
    quota = {a: n * s / total for a, s in sizes.items()}
    count = {a: min(s, max(1, int(quota[a]))) for a, s in sizes.items()}
    order = list(sizes)
    while sum(count.values()) < n:  # one more to the largest remainder with room
        a = max((a for a in order if count[a] < sizes[a]), key=lambda a: (quota[a] - count[a], -order.index(a)))
        count[a] += 1
    while sum(count.values()) > n:  # a minimum of one overshot: take back from the smallest remainder
        a = min((a for a in order if count[a] > 1), key=lambda a: (quota[a] - count[a], order.index(a)))
        count[a] -= 1
    return count


def sample_tasks(corpus: Corpus, n: int = N_SAMPLE, seed: int = SAMPLE_SEED) -> tuple:
    """A stratified sample of `n` tasks, every archetype present, in corpus order.

    Each archetype gets its proportional share (`allocate`: largest remainder,
    at least one); within an archetype the tasks are drawn without replacement
    from a stream keyed by (this purpose, the corpus fingerprint, `seed`, the
    archetype), so one archetype's draw never shifts another's. The sample is
    of tasks, not units: twins are allowed, and both halves of a pair may be
    drawn, each counted in its own archetype. That is sound here because the
    search computes nothing across tasks that needs independent units (no
    interval): each task is searched on its own.

    Args:
        corpus: the corpus to sample.
        n: the sample size (>= the number of archetypes present).
        seed: the sample's seed (an integer >= 0).

    Returns:
        A tuple of `Task`s in corpus order.

    Example:
        >>> import collections
        >>> from finbench.sim.corpus import make_corpus
        >>> tasks = sample_tasks(make_corpus(), 40, seed=0)
        >>> collections.Counter(t.archetype for t in tasks)["late_chargeback"]
        2
    """
    if not isinstance(corpus, Corpus):
        raise bad("sample_tasks", "corpus", corpus, "a Corpus")
    seed = check_int("sample_tasks", "seed", seed, 0)
    pools: dict[str, list[int]] = {}
    for i, t in enumerate(corpus.tasks):
        pools.setdefault(t.archetype, []).append(i)
    sizes = {a: len(pools[a]) for a in C.ARCHETYPES if a in pools}
    chosen: list[int] = []
    for a, k in allocate(sizes, n).items():
        rng = generator("plan-search-sample", corpus.fingerprint, seed, a)
        chosen += [pools[a][j] for j in rng.choice(len(pools[a]), size=k, replace=False)]
    return tuple(corpus.tasks[i] for i in sorted(chosen))


# --- the search --------------------------------------------------------------------------

def _reference_positions(tasks, reference, costs) -> list[float]:
    """Each task's reference position: `reference` played once with no faults (it is the
    reference's position the gap is measured against, whatever that policy is)."""
    if reference is None:
        return [reference_position(t, costs) for t in tasks]
    ref = as_ref(reference)
    return [run_episode(t, ref.make(), 0, FaultProfile.none(), costs).position for t in tasks]


def search(run, tasks, *, reference=None, plans=None) -> pd.DataFrame:
    """Every plan once on every task; per task the best plan against the reference.

    Args:
        run: the `Run` whose profile, costs and first seed the plan episodes use
            (`n_jobs` and its cache too). Its corpus and policies are not used: the
            episodes are over `tasks`, cached like any run's (a folder per plan).
        tasks: the tasks to search (e.g. `sample_tasks`), with distinct task ids.
        reference: None for the benchmark's reference (`finality_oracle`, as in every
            row's `reference_position`); or any policy reference (a name, a label, a
            class, an object) whose position, played once with no faults, the plans
            are measured against instead. A weakened reference planted here must be
            found beaten (`tests/experiments/test_plan_search.py`).
        plans: knob dicts to search (default: `plans.all_plans()`, all 1,215).

    Returns:
        One row per task, in the order given, with `COLUMNS`: `reference_position`;
        `best_plan` (the label of the best plan, the first in search order among
        equals) and `best_position`; `gap` = reference - best position (negative:
        the reference is beaten); `margin` = how much the best plan beats the
        reference by (0 if it does not); `beaten` (gap < -0.005); `n_beating` (plans
        above the reference by more than 0.005); `double_charge` (the best plan
        takes a fresh-key capture on an order whose original capture settles);
        `double_charge_gain` (best position - best position of a plan that does
        not charge twice: what charging twice would add, 0 if nothing); `plans`
        (episodes per task).

    Raises:
        FinbenchError: no tasks, repeated task ids, or no plans.

    Example:
        >>> from finbench.running.run import Run
        >>> run = Run.make(n_tasks=9, seeds=[0], policies=["finality_oracle"], cache=False)
        >>> table = search(run, sample_tasks(run.corpus, 9))
        >>> len(table), int(table.plans.iloc[0])
        (9, 1215)
        >>> beaten(table)[["task_id", "archetype", "margin"]].values.tolist()
        [['ord-0004', 'late_chargeback', 39.994]]
    """
    tasks = tuple(tasks)
    if not tasks or len({t.task_id for t in tasks}) != len(tasks):
        raise bad("search", "tasks", tasks, "a non-empty collection of tasks with distinct task ids")
    knobs = list(all_plans()) if plans is None else [dict(p) for p in plans]
    if not knobs:
        raise bad("search", "plans", plans, "at least one plan (knob dict)")
    refs = [plan_ref(k) for k in knobs]
    sub = Corpus(tasks, run.corpus.master_seed)
    rows = evaluate(sub, refs, seeds=[run.seeds[0]], profile=run.profile, costs=run.costs, n_jobs=run.n_jobs,
                    cache=run.cache)
    # rows come in (policy, task) order: one matrix, plans x tasks
    n_p, n_t = len(refs), len(tasks)
    labels = rows["policy"].to_numpy().reshape(n_p, n_t)
    ids = rows["task_id"].to_numpy().reshape(n_p, n_t)
    if not ((labels[:, 0] == [r.label for r in refs]).all() and (ids == ids[0]).all()):
        raise RuntimeError("search: evaluate's rows are not in (policy, task) order")
    pos = rows["position"].to_numpy(dtype=float).reshape(n_p, n_t)
    ref_pos = np.asarray(_reference_positions(tasks, reference, run.costs), dtype=float)
    twice = np.array([[charges_twice(k, t) for t in tasks] for k in knobs])
    out = []
    for j, task in enumerate(tasks):
        col = pos[:, j]
        top = col.max()
        i = int(np.flatnonzero(col >= top - 1e-9)[0])  # the first plan in search order among the best
        single = col[~twice[:, j]]
        gap = round(float(ref_pos[j] - col[i]), 6)
        out.append({
            "task_id": task.task_id, "archetype": task.archetype, "twin_side": task.twin_side,
            "order_value": task.order_value, "outcome": task.outcome,
            "reference_position": float(ref_pos[j]), "best_plan": labels[i, 0], "best_position": float(col[i]),
            "gap": gap, "margin": max(0.0, -gap), "beaten": gap < -BEATEN_TOL,
            "n_beating": int((col - ref_pos[j] > BEATEN_TOL).sum()),
            "double_charge": bool(twice[i, j]),
            "double_charge_gain": round(float(top - single.max()), 6) if single.size else float("nan"),
            "plans": n_p,
        })
    return pd.DataFrame(out, columns=list(COLUMNS))


def beaten(table: pd.DataFrame) -> pd.DataFrame:
    """The tasks on which some plan beats the reference (gap < -0.005), by archetype (SPEC's
    order), with the winning plan, the margin, and whether that plan charges the customer twice."""
    b = table[table["gap"] < -BEATEN_TOL]
    rank = {a: i for i, a in enumerate(C.ARCHETYPES)}
    b = b.assign(_r=b["archetype"].map(rank)).sort_values(["_r", "task_id"], kind="stable")
    return b[["archetype", "task_id", "best_plan", "margin", "double_charge", "n_beating", "order_value",
              "reference_position", "best_position"]].reset_index(drop=True)


def by_archetype(table: pd.DataFrame) -> pd.DataFrame:
    """Per archetype in the sample: tasks, beaten tasks, and the largest margin."""
    g = table.assign(beaten=table["gap"] < -BEATEN_TOL).groupby("archetype", sort=False)
    out = pd.DataFrame({"tasks": g.size(), "beaten": g["beaten"].sum(), "max_margin": g["margin"].max()})
    return out.reindex([a for a in C.ARCHETYPES if a in out.index]).reset_index()


# --- the reference's premature rate -------------------------------------------------------

def premature(rows: pd.DataFrame, policy: str = ORACLE) -> dict:
    """The reference's premature-irreversible rate (an irreversible action before the
    original capture is determined, SPEC §7) over the episode rows given.

    Args:
        rows: episode rows including `policy`'s (e.g. a `Run` over the full corpus
            with `policies=["finality_oracle"]`, one seed: the oracle reads nothing,
            so every seed gives the same episodes).

    Returns:
        {"premature": episodes premature, "episodes": episodes, "pct": percentage}.

    Raises:
        FinbenchError: no rows of `policy`.
    """
    r = rows[rows["policy"] == policy]
    if r.empty:
        raise bad("premature", "rows", f"{len(rows)} rows without {policy!r}", f"episode rows of {policy!r}")
    k, n = int(r["premature_irreversible"].sum()), len(r)
    return {"premature": k, "episodes": n, "pct": 100.0 * k / n}


def meta(run, tables: dict, sample_seed: int) -> dict:
    """The stamp entries the plan-search table and its claims add to the run's own (which names the full
    corpus and the seed the plans were played under): the sample (its tasks are the table's, drawn with
    `sample_seed`), the plans, the reference's premature rate (`tables["premature"]`)."""
    tasks, prem = tuple(run.corpus[i] for i in tables["plan_search"]["task_id"]), tables["premature"]
    return {"sample": len(tasks), "sample_seed": sample_seed, "sample_fingerprint": Corpus(tasks).fingerprint,
            "plans": N_PLANS, "reference_premature": f"{prem['premature']}/{prem['episodes']} ({prem['pct']:.1f}%)"}


def read_premature(path) -> dict:
    """The `reference_premature` entry of a written table's stamp, as `premature` returns it."""
    for line in open(path, encoding="utf-8"):
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(": ")
        if key == "reference_premature":
            k, n = (int(x) for x in value.split(" ")[0].split("/"))
            return {"premature": k, "episodes": n, "pct": 100.0 * k / n}
    raise bad("read_premature", "path", str(path), "a plan-search table with a reference_premature stamp")


# --- claims, markdown, notes --------------------------------------------------------------

def measures(tables: dict) -> dict:
    """Ours for each of the plan search's claims (`data/paper_claims.csv`, experiment "plan_search"), from
    the table (`tables["plan_search"]`) and the premature rate it is stamped with (`tables["premature"]`:
    `premature`/`read_premature`; None if absent)."""
    table, prem = tables["plan_search"], tables.get("premature")
    b = beaten(table)
    k, n = len(b), len(table)
    kinds = ", ".join(f"{t} ({a})" for t, a in zip(b["task_id"], b["archetype"])) or "none"
    gain = float(table["double_charge_gain"].max()) if n else float("nan")
    return {
        "reference_beaten": Measure(k, shown=f"{k} of {n}: {kinds}", source=SOURCE),
        "beaten_late_chargeback": Measure(len(b) > 0 and bool((b["archetype"] == "late_chargeback").all()),
                                     shown=f"beaten: {kinds}",
                                     source=SOURCE),
        "reference_premature": (Measure(prem["pct"], source=SOURCE,
                                   shown=f"{prem['pct']:.2f}% ({prem['premature']} of {prem['episodes']} tasks)")
                                if prem else None),
        # no winning plan charges twice, and charging twice never beats every plan that does not
        "no_double_charge": Measure(not bool(b["double_charge"].any()) and gain <= BEATEN_TOL, source=SOURCE,
                               shown=f"winning plans: {', '.join(b['best_plan']) or 'none'}; charging twice adds "
                                     f"at most ${gain:.2f} on any sampled task"),
        # the design's size, as the table holds it: plans searched per task (the same on every one) and tasks
        "plans": (Measure(int(table["plans"].max()), source=SOURCE, shown=f"{int(table['plans'].max()):,} on each of "
                                                                         f"{n} tasks")
                  if n and table["plans"].nunique() == 1 else None),
        "tasks": Measure(n, shown=f"{n} sampled tasks", source=SOURCE),
    }


def claims(tables: dict) -> list[Claim]:
    """The paper's plan-search claims, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


def markdown(table: pd.DataFrame) -> pd.DataFrame:
    """The human rendering: one row per task, the reference's and the best plan's positions."""
    return pd.DataFrame({
        "task": table["task_id"], "archetype": table["archetype"],
        "value $": table["order_value"].map("{:.2f}".format),
        "reference $": table["reference_position"].map("{:.2f}".format),
        "best plan": table["best_plan"],
        "best $": table["best_position"].map("{:.2f}".format),
        "beats reference by $": [f"{m:.2f}" if b else "" for m, b in zip(table["margin"], table["beaten"])],
        "plans above reference": table["n_beating"],
    })


def notes(table: pd.DataFrame, prem: dict, claims_list: list | None = None) -> list[str]:
    """Markdown notes: the beaten tasks with plan and margin, per archetype, and the premature rate."""
    b = beaten(table)
    arch = by_archetype(table)
    lines = [f"Every one of the {int(table['plans'].iloc[0]):,} plans was played once on each of the "
             f"{len(table)} sampled tasks ({int(table['plans'].sum()):,} episodes, one seed: an open-loop "
             "plan reads nothing, so its position is the same under every fault seed and profile). "
             "The best plan is the first in search order among the plans of highest position.", "",
             f"The reference is beaten (some plan above it by more than $0.005) on {len(b)} of {len(table)} "
             "tasks:", ""]
    for r in b.itertuples():
        twice = "; it charges the customer twice" if r.double_charge else ""
        lines.append(f"- {r.task_id} ({r.archetype}, ${r.order_value:.2f}): {r.best_plan} beats the reference "
                     f"by ${r.margin:.2f} ({r.n_beating} plans beat it){twice}")
    lines += ["", "By archetype (beaten / sampled): "
              + ", ".join(f"{a} {int(bt)}/{int(t)}" for a, t, bt in zip(arch["archetype"], arch["tasks"],
                                                                          arch["beaten"])) + ".", "",
              f"The reference acts irreversibly before the original capture is determined on "
              f"{prem['premature']} of {prem['episodes']} tasks of the full corpus ({prem['pct']:.1f}%).", ""]
    return lines + (claims_notes(claims_list) if claims_list else [])


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """None: the plan search has no figure."""
    return {}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the plan-search table the notebook wrote under `folder` (its rows, and
    the reference's premature rate from its stamp): what the claims report reads."""
    path = Path(folder) / "plan_search.csv"
    return from_tables(folder, lambda t: claims({**t, "premature": read_premature(path)}), TABLES)


PUBLISH = {
    "plan_search": TableSpec("Plan search: 1,215 open-loop plans against the reference",
                             markdown=lambda t: markdown(t["plan_search"]),
                             notes=lambda t, claims: notes(t["plan_search"], t["premature"], claims), bootstrap=False),
}
"""How each table is written (`publish_experiment`; its stamp entries are `meta`'s)."""
CLAIMS = TableSpec(bootstrap=False)
"""How the claims are written: no bootstrap lies behind them, so their stamp names none."""
