"""The effects table: what each policy did to the money, check by check (SPEC §9, §10; issue 4).

Every episode's trace is graded against the benchmark's own contract, "capture
the order value once, after authorisation, and touch no other order"
(`trace.episode_contract`). This module folds those per-episode verdicts into
one row per policy: the share of episodes failing each of the six checks, the
count of each verdict, and the behaviours behind the failures (captured twice,
captured nothing, acted on another order, acted before authorisation).

Captured nothing is not always a mistake. When the original capture and its
replacement would both fail, the payment is lost for good and zero captures
is the right outcome, yet `exactly_one_effect` fails, for the oracle too. The
table therefore splits zero captures by whether the payment was recoverable,
and keeps both apart from capturing twice.

Notebook `08_effects`, in the shape every experiment shares:

    rows = effects.episodes(run)                     # the headline's episodes, shared through the cache
    tables = effects.tables(rows, run)               # effects
    claims = effects.claims(tables)                  # none: the paper makes no claim about this table
    figures = effects.figures(rows, run, tables)     # none
    publish_experiment(effects, run, tables, claims, figures)

It has no `claims_from_tables`: with no claims it writes no claims file and the
claims report does not read it. The notebook also writes one episode's trace
(`write_example`) to `data/traces`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finbench.analysis.publish import TableSpec
from finbench.sim import constants as C
from finbench.grading import CHECKS
from finbench.agents.registry import as_ref, policy_order
from finbench.running.episode import run_episode
from finbench.grading import grade_trace
from finbench.running.episode import episode_contract

NAME = "effects"
TABLES = ("effects",)
"""The tables this experiment writes, by stem."""
VERDICTS = ("pass", "violation", "unscorable")
CONTRACT = "capture the order value once, after authorisation, touch no other order"
"""The benchmark's own contract, in words (`trace.episode_contract`)."""

#: Short column labels of the Markdown rendering, per check.
CHECK_LABELS = {
    "auth_precedes_effect": "auth precedes",
    "targets_intended": "targets intended",
    "exactly_one_effect": "exactly one",
    "retry_idempotent": "retry idempotent",
    "unrelated_unchanged": "unrelated unchanged",
    "evidence_complete": "evidence complete",
}


def payment_lost(task) -> bool:
    """True if no capture of this order can settle: the original fails and so would a replacement."""
    return task.outcome == "failed" and task.retry_outcome != "settled"


def episodes(run) -> pd.DataFrame:
    """The episode rows: the run's policies over its corpus and seeds (each with its effect-level verdict)."""
    return run.evaluate()


def tables(rows: pd.DataFrame, run) -> dict[str, pd.DataFrame]:
    """The effects table, zero captures split by whether the payment was lost (`run.corpus`), by stem (`TABLES`)."""
    return {"effects": effects_table(rows, run.corpus)}


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """None: the paper makes no claim about the effects table (so no claims file is written)."""
    return []


def figures(rows: pd.DataFrame, run, tables: dict | None = None) -> dict:
    """None: the effects table has no figure."""
    return {}


def effects_table(df: pd.DataFrame, corpus=None) -> pd.DataFrame:
    """One row per policy (in `policy_refs.policy_order`) over the episode rows of `evaluate`.

    Args:
        df: per-episode rows with `verdict`, `capture_effects`,
            `unrelated_effects` and `check_<name>` for the six checks.
        corpus: the tasks behind `df`; if given, zero-capture episodes are
            split into `zero_lost_pct` (the payment could not be captured) and
            `zero_recoverable_pct` (a replacement capture would have settled).

    Returns:
        Columns `policy, episodes`, the verdict counts `pass, violation,
        unscorable`, `fail_<check>_pct` for each check, `unknown_pct` (episodes
        with any check unknown), `captured_twice_pct` (two or more capture
        effects on the order), `captured_zero_pct` (none), the two zero splits
        when `corpus` is given, `other_order_pct` (any effect on the unrelated
        order) and `before_auth_pct` (an effect before a matching
        authorisation). Percentages are of the policy's episodes.
    """
    checks = [f"check_{c}" for c in CHECKS]
    missing = [c for c in ("policy", "verdict", "capture_effects", "unrelated_effects", *checks)
               if c not in df.columns]
    if missing:
        raise KeyError(f"episode rows lack column(s) {missing}")
    lost = None
    if corpus is not None:
        lost = df["task_id"].map({t.task_id: payment_lost(t) for t in corpus})
        if lost.isna().any():
            raise KeyError(f"task(s) not in the corpus: {sorted(df.task_id[lost.isna()].unique())[:3]}")
        lost = lost.astype(bool)
    rows = []
    for p in policy_order(df["policy"]):
        mine = df["policy"] == p
        d = df[mine]
        n = len(d)
        row: dict = {"policy": p, "episodes": n}
        for v in VERDICTS:
            row[v] = int((d["verdict"] == v).sum())
        for c in CHECKS:
            row[f"fail_{c}_pct"] = 100 * (d[f"check_{c}"] == "fail").mean()
        row["unknown_pct"] = 100 * (d[checks] == "unknown").any(axis=1).mean()
        zero = d["capture_effects"] == 0
        row["captured_twice_pct"] = 100 * (d["capture_effects"] >= 2).mean()
        row["captured_zero_pct"] = 100 * zero.mean()
        if lost is not None:
            row["zero_lost_pct"] = 100 * (zero & lost[mine]).mean()
            row["zero_recoverable_pct"] = 100 * (zero & ~lost[mine]).mean()
        row["other_order_pct"] = 100 * (d["unrelated_effects"] > 0).mean()
        row["before_auth_pct"] = 100 * (d["check_auth_precedes_effect"] == "fail").mean()
        rows.append(row)
    return pd.DataFrame(rows)


def effects_markdown(table: pd.DataFrame) -> pd.DataFrame:
    """The human rendering: verdict counts, % of episodes failing each check, and the split of
    `exactly_one_effect` into captured twice and captured zero (lost or recoverable).

    "Acted before authorisation" and "acted on another order" are the auth-precedes and
    unrelated-unchanged columns (the CSV also has them as `before_auth_pct` and `other_order_pct`).
    """
    out = table[["policy", "episodes", *VERDICTS]].copy()
    for c in CHECKS:
        out[f"{CHECK_LABELS[c]} %"] = table[f"fail_{c}_pct"]
    if (table["unknown_pct"] > 0).any():
        out["any unknown %"] = table["unknown_pct"]
    out["captured twice %"] = table["captured_twice_pct"]
    if "zero_lost_pct" in table:
        out["captured 0, lost %"] = table["zero_lost_pct"]
        out["captured 0, recoverable %"] = table["zero_recoverable_pct"]
    else:
        out["captured 0 %"] = table["captured_zero_pct"]
    return out


def _who(table: pd.DataFrame, col: str) -> list[str]:
    t = table[table[col] > 0]
    return [f"{r.policy} {getattr(r, col):.1f}% ({round(getattr(r, col) * r.episodes / 100):,} of "
            f"{r.episodes:,})" for r in t.itertuples()]


def _sentence(table: pd.DataFrame, col: str, what: str, none: str) -> str:
    who = _who(table, col)
    if not who:
        return f"- {what}: {none}"
    rest = len(table) - len(who)
    return f"- {what}: " + "; ".join(who) + (f"; the other {rest} policies never." if rest else ".")


def effects_notes(table: pd.DataFrame) -> list[str]:
    """Sentences for the Markdown: who captures twice, acts on another order or before
    authorisation, and how often; and why `exactly_one_effect` fails even for the oracle."""
    notes = ["Percentages are of each policy's episodes. The six check columns give the share of "
             "episodes failing that check (auth precedes = acted before authorisation; unrelated "
             "unchanged = acted on another order). The contract is \"capture the order value once, "
             "after authorisation, and touch no other order\" (op capture; ship and refund are logged "
             "but are not captures).", ""]
    notes.append(_sentence(table, "captured_twice_pct", "Captured twice (two or more capture effects on "
                           "the order)", "no policy."))
    notes.append(_sentence(table, "other_order_pct", "Acted on another order (an effect on the "
                           "customer's unrelated, completed order)", "no policy, in any episode."))
    notes.append(_sentence(table, "before_auth_pct", "Acted before authorisation", "no policy, in any "
                           f"episode: the order is authorised (t={C.AUTH_AT}) before the agent is handed "
                           f"the case (t={C.HANDOVER}) and every capture is for the authorised amount, so "
                           "in the simulator this check can only pass; it is there for traces from outside."))
    retry = _who(table, "fail_retry_idempotent_pct")
    notes.append("- A replayed key producing a new effect (retry_idempotent): "
                 + ("; ".join(retry) + "." if retry else "never: replays under a used key return the "
                    "first receipt and move no money."))
    zero = "zero_lost_pct" in table
    oracle = table.set_index("policy").loc["finality_oracle"] if "finality_oracle" in set(table.policy) else None
    line = ("- Captured zero times also fails exactly_one_effect. Under this contract an order whose "
            "payment fails for good (the original capture and a replacement would both fail) "
            "legitimately has no capture effect, so the check fails there for every policy")
    if oracle is not None:
        line += f", the oracle included ({oracle['captured_zero_pct']:.1f}% of its episodes)"
    line += ". Read the exactly-one column as captured twice plus captured zero, never as double charging."
    notes.append(line)
    if zero:
        miss = _who(table, "zero_recoverable_pct")
        notes.append("- Captured zero times although a replacement capture would have settled (a missed "
                     "recovery, not a lost payment): " + ("; ".join(miss) + "." if miss else "no policy."))
    counts = table[list(VERDICTS)].sum()
    notes.append(f"- Verdicts over all {int(table.episodes.sum()):,} episodes: {int(counts['pass']):,} pass, "
                 f"{int(counts['violation']):,} violation, {int(counts['unscorable']):,} unscorable. "
                 + ("Every episode's log claims complete coverage and numbers its events without a gap."
                    if counts["unscorable"] == 0 else ""))
    return notes


def replay_trace(task, policy, seed: int, profile=None, costs=None) -> list[dict]:
    """The effect trace of one episode, played again (episodes are deterministic in (task, policy, seed)).

    `policy` is any policy reference: a name, a label with knobs as it appears in
    the rows (`"sop[patience=60]"`), a `(name, knobs)` pair, a class, factory or object.
    """
    return list(run_episode(task, as_ref(policy).make(), seed, profile, costs).trace)


def example_row(df: pd.DataFrame) -> pd.Series:
    """The first episode (in `df` order) that captured twice; failing that, the first violation; else the first."""
    for mask in (df["capture_effects"] >= 2, df["verdict"] == "violation"):
        if mask.any():
            return df[mask].iloc[0]
    return df.iloc[0]


def write_trace(records: list[dict], path: str | Path) -> Path:
    """Write a trace as `.jsonl` (one JSON object a line), readable by `grading.load_trace`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_example(df: pd.DataFrame, run, path: str | Path) -> dict:
    """Replay `example_row(df)` from `run`, write its trace, grade it again.

    Returns:
        {"path", "row", "verdict", "command"}: the file, the episode's row, its
        `Verdict` (equal to the row's) and the `grade` command that reproduces it.
    """
    row = example_row(df)
    task = run.corpus[row.task_id]
    ref = next(r for r in run.policies if r.label == row.policy)
    records = replay_trace(task, ref, int(row.seed), run.profile, run.costs)
    path = write_trace(records, path)
    verdict = grade_trace(records, episode_contract(task))
    if verdict.verdict != row.verdict:
        raise RuntimeError(f"replay of {row.policy} on {row.task_id} seed {row.seed} graded {verdict.verdict}, "
                           f"the row says {row.verdict}: episodes are not deterministic")
    command = (f"python -m finbench grade {path} --order {task.order_id} --amount {task.order_value} "
               f"--op capture  # {row.policy} on {row.task_id} seed {row.seed}: {verdict.verdict}")
    return {"path": path, "row": row, "verdict": verdict, "command": command}


PUBLISH = {
    "effects": TableSpec("Effects: the six checks and the verdicts per policy",
                         markdown=lambda t: effects_markdown(t["effects"]),
                         notes=lambda t, claims: effects_notes(t["effects"]), floatfmt=".1f", bootstrap=False,
                         meta=lambda run: {"contract": CONTRACT}),
}
"""How each table is written (`publish_experiment`)."""
