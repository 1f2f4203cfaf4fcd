"""The model arm: Table V and its claims (SPEC §10; the paper's model-arm paragraphs).

Language-model agents (`finbench.agents.llm.ModelAgent`) play a stratified subset of
the corpus (every archetype, whole twin pairs, a fixed seed), and
`finality_gate` is recomputed on exactly the episodes each model played: its
full-corpus figure comes from a different, harder task set.

Notebook `03_model_arm`, in the shape every experiment shares:

    run = model_arm.subset_run(master_seed, n_tasks, subset_size, subset_seed, seeds=range(n_seeds))
    rows = model_arm.episodes(run, transcripts, model, base_url,   # plays the model first if given (resumable)
                              timeout=120.0, max_tokens=1024)
    tables = model_arm.tables(rows, run)                          # table5; beside it, what its notes read
    claims = model_arm.claims(tables)
    figures = model_arm.figures(rows, run, tables)                # none
    publish_experiment(model_arm, run, tables, claims, figures,
                       meta=model_arm.meta(tables, master_seed, n_tasks, subset_size, subset_seed))

No model row is ever made up: a model appears only with episodes replayed from
its transcripts; with none, Table V is the gate's row and a note saying so. An
episode whose conversation the server refused as too long (a context length
exceeded) is closed there and counts as played (column `ended`:
`"context_length"`; "" for the others); the run goes on to the next episode.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.sim import constants as C
from finbench.errors import FinbenchError, show
from finbench.analysis.verdicts import Measure, claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.sim.corpus import stratified_subset  # noqa: F401  (part of this module's API)
from finbench.agents.llm import MAX_TOKENS, MODEL_CONNECTIONS, TIMEOUT, checked_limits, model_dir_name
from finbench.agents.llm_traffic import Usage
from finbench.running.model_runs import EPISODE_COLUMNS, model_episodes, run_model, transcript_models  # noqa: F401 - its API
from finbench.running.run import Run, corpus_for

GATE = "finality_gate"
NAME = "model_arm"
SECTION = "The model arm: Table V"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
SOURCE = "tables/table5.csv"
TABLES = ("table5",)
"""The tables this experiment writes and its claims read, by stem."""
ZERO_GAP = 0.005  # the exactness tolerance of a single episode (EpisodeResult.exact)
LOSSES_ON = {"pending_fail", "unresolvable"}
"""Where the paper says its models lose (§VI); `model_loses_only_on` checks ours against it."""
__all__ = ["CLAIMS", "PUBLISH", "TABLES", "claims", "claims_from_tables", "episodes", "figures", "measures", "meta",
           "model_episodes", "notes", "run_model", "stratified_subset", "subset_run", "table5", "table5_markdown",
           "tables"]


# --- the subset -------------------------------------------------------------------------

def subset_run(master_seed: int, n_tasks: int, size: int = 60, subset_seed: int = 0, **kw) -> Run:
    """A `Run` of `finality_gate` over `stratified_subset(make_corpus(master_seed, n_tasks), size, subset_seed)`."""
    sub = stratified_subset(corpus_for(master_seed, n_tasks), size, subset_seed)
    kw.setdefault("policies", [GATE])
    return Run(sub, **kw)


def named_models(model: str = "", models=()) -> list[str]:
    """The models Table V shows: `model` (the one asked, if any) and `models` (names replayed from their
    transcripts: a list, or one comma-separated string), each once, in that order."""
    if isinstance(models, str):
        models = [m.strip() for m in models.split(",")]
    out: list[str] = []
    for name in [model, *models]:
        if not isinstance(name, str):
            raise FinbenchError(f"model_arm: a model name must be a string, got {show(name)}")
        if name and name not in out:
            out.append(name)
    return out


def episodes(run: Run, transcripts: str | Path = "data/model_runs", model: str = "", base_url: str = "",
             api_key_env: str = "OPENAI_API_KEY", *, timeout: float | None = TIMEOUT,
             max_tokens: int | None = MAX_TOKENS, models=(), max_connections: int = MODEL_CONNECTIONS,
             usage: Usage | None = None) -> dict:
    """The gate's episodes on the subset and the named models' (`named_models(model, models)`) replayed
    from their transcripts on disk, after playing `model` at `base_url` if both are given (`run_model`,
    resumable, `max_connections` episodes at once, with this `timeout` per request attempt and
    `max_tokens` per reply; the transcripts replayed are those under this `max_tokens`). A model with
    transcripts on disk that is not named is not shown.

    Returns:
        {"gate": rows, "models": rows (`model_episodes`, maybe empty), "named": the models named,
        "endpoint": whether a model was asked (the notes say so)}.
    """
    timeout, max_tokens = checked_limits("model_arm.episodes", timeout, max_tokens)
    named = named_models(model, models)
    endpoint = bool(model and base_url)
    if endpoint:
        run_model(run, model, base_url, transcripts=transcripts, api_key_env=api_key_env, timeout=timeout,
                  max_tokens=max_tokens, max_connections=max_connections, usage=usage, progress=False)
    found = model_episodes(run, transcripts, models=named, max_tokens=max_tokens) if named else \
        pd.DataFrame(columns=EPISODE_COLUMNS)
    return {"gate": run.evaluate(), "models": found, "named": named, "endpoint": endpoint}


def output_folder(tables_dir: str | Path, named: list[str], publish: bool) -> Path:
    """Where the notebook writes Table V: `tables_dir` (the committed tables) when no model is named or
    `publish` is asked; else `build/model_arm/<models>/` beside it (in the folder that holds `tables_dir`), so
    that running a model never changes a committed file."""
    if publish or not named:
        return Path(tables_dir)
    slug = "+".join(model_dir_name(m) for m in named)
    slug = slug if len(slug) <= 200 else slug[:180] + f"-and-{len(named) - 1}-more"
    return Path(tables_dir).resolve().parent / "build" / "model_arm" / slug


def tables(rows: dict, run: Run) -> dict:
    """Table V by stem (`TABLES`) and, beside it, what its notes read that it does not hold: the subset's
    `run` and whether an `endpoint` was asked."""
    return {"table5": table5(rows["gate"], rows["models"], rows.get("named")), "run": run,
            "endpoint": rows["endpoint"], "named": rows.get("named")}


def figures(rows: dict, run: Run, tables: dict | None = None) -> dict:
    """None: Table V has no figure."""
    return {}


# --- Table V ----------------------------------------------------------------------------

def _summary(rows: pd.DataFrame) -> dict:
    arch = rows.groupby("archetype")["gap"].mean()
    zero = sorted(a for a, g in arch.items() if g < ZERO_GAP)
    halves = {side: rows.loc[rows["twin_side"] == side, "gap"].astype(float) for side in ("settle", "fail")}
    return {
        "episodes": len(rows), "tasks": rows["task_id"].nunique(),
        "exact_pct": 100 * rows["exact"].astype(float).mean(), "mean_gap": rows["gap"].astype(float).mean(),
        "probe_use_pct": 100 * (rows["probe_calls"] > 0).mean(), "wait_use_pct": 100 * (rows["wait_calls"] > 0).mean(),
        "premature_pct": 100 * rows["premature_irreversible"].astype(float).mean(),
        "archetypes": len(arch), "zero_gap_archetypes": len(zero), "zero_gap_list": ", ".join(zero),
        **{f"{side}_twin_episodes": len(h) for side, h in halves.items()},
        **{f"{side}_twin_gap": (float(h.mean()) if len(h) else np.nan) for side, h in halves.items()},
    }


def table5(gate: pd.DataFrame, models: pd.DataFrame, named: list[str] | None = None) -> pd.DataFrame:
    """Table V: the gate on the whole subset, then one row per model with the gate on exactly its episodes.

    Args:
        gate: `finality_gate`'s episode rows on the subset (`run.evaluate()`).
        models: model episode rows (`model_episodes`, `run_model`); may be empty.
        named: the models to show, in order (None: every model in `models`, sorted); a named model
            without an episode is left out (the notes say so).

    Returns:
        One row per policy: `policy`, `kind` ("reference policy" or "model"), `episodes`,
        `tasks`, `exact_pct`, `mean_gap`, `probe_use_pct`, `wait_use_pct` (% of episodes
        with at least one such call), `premature_pct`, `archetypes`, `zero_gap_archetypes`
        (archetypes whose mean gap is zero) and `zero_gap_list`, `settle_twin_episodes`,
        `fail_twin_episodes`, `settle_twin_gap`, `fail_twin_gap` (the twin episodes of each half and
        their mean gap: the settle half's capture settles, the fail half's fails), `malformed_calls`, and
        `gate_episodes`, `gate_exact_pct`, `gate_mean_gap`: the gate on exactly the same
        (task, seed) episodes as the row.
    """
    g = gate[gate["policy"] == GATE]
    rows = [{"policy": GATE, "kind": "reference policy", **_summary(g), "malformed_calls": 0,
             "gate_episodes": len(g), "gate_exact_pct": 100 * g["exact"].astype(float).mean(),
             "gate_mean_gap": g["gap"].astype(float).mean()}]
    gi = g.set_index(["task_id", "seed"])
    have = set(models["policy"]) if len(models) else set()
    for model in [m for m in named if m in have] if named is not None else sorted(have):
        m = models[models["policy"] == model]
        same = gi.loc[list(zip(m["task_id"], m["seed"]))]
        rows.append({"policy": model, "kind": "model", **_summary(m), "malformed_calls": int(m["malformed"].sum()),
                     "gate_episodes": len(same), "gate_exact_pct": 100 * same["exact"].astype(float).mean(),
                     "gate_mean_gap": same["gap"].astype(float).mean()})
    return pd.DataFrame(rows)


def table5_markdown(t5: pd.DataFrame) -> pd.DataFrame:
    """The human rendering of Table V."""
    full = int(t5["episodes"].iloc[0]) if len(t5) else 0  # the gate's row: every episode of the subset
    return pd.DataFrame({
        "policy": t5["policy"],
        "episodes": [f"{n} of {full}" if kind == "model" and n < full else n
                     for n, kind in zip(t5["episodes"], t5["kind"])],
        "exact %": t5["exact_pct"].map("{:.1f}".format), "mean gap $": t5["mean_gap"].map("{:.2f}".format),
        "gate on the same episodes: exact % / gap $": [f"{a:.1f} / {b:.2f}" for a, b in
                                                       zip(t5["gate_exact_pct"], t5["gate_mean_gap"])],
        "probe use %": t5["probe_use_pct"].map("{:.1f}".format), "wait use %": t5["wait_use_pct"].map("{:.1f}".format),
        "premature-irreversible %": t5["premature_pct"].map("{:.1f}".format),
        "zero-gap archetypes": [f"{z} of {n}" + (f" ({lst})" if lst else "") for z, n, lst in
                                zip(t5["zero_gap_archetypes"], t5["archetypes"], t5["zero_gap_list"])],
        "malformed calls": t5["malformed_calls"],
    })


def notes(t5: pd.DataFrame, run: Run, claims_list: list | None = None, *, endpoint: bool = False,
          named: list[str] | None = None) -> list[str]:
    """The notes under Table V: which rows exist and why, a partial run's count, what the columns count,
    the claims."""
    m = t5[t5["kind"] == "model"]
    models = list(m["policy"])
    full = int(t5["episodes"].iloc[0]) if len(t5) else 0
    missing = [x for x in (named or []) if x not in models]
    if models:
        lines = [f"Model rows: {', '.join(models)}, each replayed from its transcripts on disk (only finished "
                 "episodes under the current prompt hash); the gate's columns beside each are on exactly that "
                 "model's episodes."]
        partial = [f"{r.policy} ({r.episodes} of {full})" for r in m.itertuples() if r.episodes < full]
        if partial:
            lines += ["", f"**Partial runs:** {', '.join(partial)} episodes finished; each row's columns are over "
                          "those episodes only (resume the run to complete it)."]
    elif missing or endpoint:
        lines = ["**No model row: no named model has a finished episode.** Table V shows the finality gate on "
                 "the subset alone; no model row is ever made up."]
    else:
        lines = ["**No model row: no model was named.** Give `model` and `base_url` to run one, or `models` to "
                 "replay models' transcripts on disk. Table V shows the finality gate on the subset alone; no "
                 "model row is ever made up."]
    if missing:
        lines += ["", f"Named without a finished episode on this subset: {', '.join(missing)}."]
    lines += ["", f"Subset: {len(run.corpus)} tasks ({len(run.corpus.twin_pairs)} whole twin pairs, every "
                  f"archetype) x seeds {', '.join(map(str, run.seeds))}.",
              "", "Probe / wait use: % of episodes with at least one such call. Zero-gap archetypes: those whose "
                  "mean gap is zero on these episodes. Settle / fail twin gap (in table5.csv): the mean gap on "
                  "the twins whose capture settles / fails. Malformed calls: replies with no tool call, an unknown "
                  "tool, arguments that are not a JSON object or do not fit the schema (each answered with an "
                  "error and charged a call).", ""]
    return lines + (claims_notes(claims_list) if claims_list else [])


def meta(tables: dict, master_seed: int, n_tasks: int, size: int, subset_seed: int) -> dict:
    """The stamp entries Table V and its claims add to the subset run's own: the corpus the subset is
    drawn from (`subset_run`'s arguments) and the models with a row."""
    models = ", ".join(tables["table5"].policy[1:]) or "none"
    return {"source_corpus": corpus_for(master_seed, n_tasks).fingerprint, "source_tasks": n_tasks,
            "subset_size": size, "subset_seed": subset_seed, "models": models}


def measures(tables: dict) -> dict:
    """Ours for each of the model arm's claims (`data/paper_claims.csv`, experiment "model_arm"), from
    `tables["table5"]`; the model claims are None (not run) without a model row.

    With several models, the model claims are read on their episodes pooled (the paper's probe-use and
    premature figures are over every evaluated model): rates and gaps weighted by episodes, the zero-gap
    archetypes those zero for every model (a pooled mean of gaps, never negative, is zero only then), and
    the gate on the union of their episodes (weighted by each model's). The gate's claims are "recomputed on
    exactly the episodes the models attempted": without a model row, on the whole subset, which is fixed and
    which a model attempts whole."""
    t5 = tables["table5"]
    t = t5.set_index("policy")
    m = t5[t5["kind"] == "model"]
    models = list(m["policy"])
    have = len(m) > 0
    who = ", ".join(models) + (" (pooled)" if len(models) > 1 else "")

    def pooled(col, weight="episodes"):
        w = m[weight].astype(float)
        return float((m[col].astype(float) * w).sum() / w.sum()) if have and w.sum() > 0 else None

    def model(col, fmt):
        x = pooled(col)
        return Measure(x, shown=f"{who}: {fmt.format(x)}", source=SOURCE) if x is not None else None

    # the gate "recomputed on exactly the episodes the models attempted": on each model's, pooled; with no
    # model row, on the whole subset, which is fixed and which a model attempts whole (the same episodes)
    gate = None
    if have:
        g_exact, g_gap = pooled("gate_exact_pct", "gate_episodes"), pooled("gate_mean_gap", "gate_episodes")
        where = f"on {who}'s {int(m['gate_episodes'].sum())} episodes"
    elif GATE in t.index:
        g_exact, g_gap = float(t.loc[GATE, "gate_exact_pct"]), float(t.loc[GATE, "gate_mean_gap"])
        where = f"on the whole subset's {int(t.loc[GATE, 'episodes'])} episodes (a model attempts every one)"
    else:
        g_exact = g_gap = None
    zero = asym = None
    if have:
        lists = [set(a.strip() for a in str(x).split(",") if a.strip()) if isinstance(x, str) else set()
                 for x in m["zero_gap_list"]]
        common = sorted(set.intersection(*lists))
        zero = Measure(len(common), shown=f"{who}: {len(common)} of {int(m['archetypes'].max())} "
                                          f"({', '.join(common) or 'none'})", source=SOURCE)
        settle, fail = pooled("settle_twin_gap", "settle_twin_episodes"), pooled("fail_twin_gap", "fail_twin_episodes")
        if settle is not None and fail is not None:
            asym = Measure(settle - fail, shown=f"{who}: settle twins {settle:.2f} - fail twins {fail:.2f} = "
                                                f"{settle - fail:+.2f}", source=SOURCE)
    return {
        "gate_subset_exact": (Measure(g_exact, shown=f"{g_exact:.1f}% {where}", source=SOURCE) if g_exact is not None
                              else Measure(None, shown=gate, source=SOURCE) if gate else None),
        "gate_subset_gap": (Measure(g_gap, shown=f"{g_gap:.2f} {where}", source=SOURCE) if g_gap is not None
                            else Measure(None, shown=gate, source=SOURCE) if gate else None),
        "model_exact": model("exact_pct", "{:.1f}%"),
        "model_gap": model("mean_gap", "{:.2f}"),
        "model_probe_use": model("probe_use_pct", "{:.1f}%"),
        "model_premature": model("premature_pct", "{:.1f}%"),
        "model_zero_gap_archetypes": zero,
        "model_settle_twin_asymmetry": asym,
        "model_loses_twice": (None if not have or not g_gap else Measure(
            pooled("mean_gap") / g_gap, shown=f"{who}: mean gap {pooled('mean_gap'):.2f} against the gate's "
                                              f"{g_gap:.2f} {where} ({pooled('mean_gap') / g_gap:.2f}x)",
            source=SOURCE)),
        "model_waited": model("wait_use_pct", "{:.1f}%") if "wait_use_pct" in m else None,
        "model_loses_only_on": (None if zero is None else Measure(
            set(C.ARCHETYPES) - set(common) <= LOSSES_ON, source=SOURCE,
            shown=f"{who}: a non-zero gap on {', '.join(a for a in C.ARCHETYPES if a not in common) or 'none'}")),
    }


def claims(tables: dict) -> list:
    """The paper's model-arm claims, decided on ours (`measures`) by `data/paper_claims.csv`; the model
    claims are "not run" without a model row."""
    return claims_of(NAME, measures(tables))


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "table5": TableSpec("Table V: the model arm", markdown=lambda t: table5_markdown(t["table5"]),
                        notes=lambda t, claims: notes(t["table5"], t["run"], claims, endpoint=t["endpoint"],
                                                      named=t.get("named")),
                        bootstrap=False),
}
"""How each table is written (`publish_experiment`; its stamp entries are `meta`'s)."""
CLAIMS = TableSpec(bootstrap=False)
"""How the claims are written: no bootstrap lies behind them, so their stamp names none."""
