"""What a report card (`finbench.card`) shows beyond the experiments' tables, computed from episode rows.

    facts = card_facts(rows, run, "patient", "finality_gate")   # invalid calls, dispositions, usage, pass^k, ...
    invalid_calls(rows[rows.policy == agent])

Every number here is read from the rows `evaluate` returns (no episode is played again), so it costs a
pass over the agent's rows. The invalid calls are what the environment counted while it played (the rows'
`invalid_calls`, `other_order_calls` and `call_errors`): nothing is re-read from the rendered `calls`. The
experiments' own tables (Table II, III, IV, the effect-check split) are borrowed by `finbench.card`, which may import the experiment layer.
"""
from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pandas as pd

from finbench.analysis import metrics as M
from finbench.grading import CHECKS
from finbench.sim import constants as C
from finbench.sim.corpus import corpus_for
from finbench.sim.economics import Costs

__all__ = ["INVALID_WARN_PCT", "OUTCOMES", "SCHEMA", "card_facts", "card_json", "checks_table", "commit",
           "corpus_expr", "dispositions", "draw_command", "examples", "invalid_calls", "json_ready", "outcome_of",
           "pass_k", "usage", "worst_pair"]

SCHEMA = "finbench-card/2"
"""card.json's schema (docs/card.md); bumped whenever a field changes meaning or goes away."""
INVALID_WARN_PCT = 5.0
"""Above this share of an agent's calls, invalid calls (and calls naming another order) head the card."""
OUTCOMES = ("ship", "refund", "write_off", "escalate", "close", "budget", "horizon")
"""How a case ended: the agent's five dispositions, or closed by the call budget or the horizon."""
TOP_MESSAGES = 5
_TICK = re.compile(r"at t=\d+")


# --- invalid calls ---------------------------------------------------------------------------------------------

def invalid_calls(own: pd.DataFrame) -> dict:
    """The agent's invalid calls over its rows, as the environment counted them while it played (the columns
    `invalid_calls`, `other_order_calls`, `call_errors`, `n_calls`): counts, shares, and the most frequent
    messages (most first, then first answered), the tick of a late `ship` elided."""
    messages: Counter = Counter()
    for errors in own["call_errors"]:
        for message, n in (json.loads(errors).items() if errors else ()):
            messages[_TICK.sub("at t=…", message)] += n
    invalid, other = int(own["invalid_calls"].sum()), int(own["other_order_calls"].sum())
    total = int(own["n_calls"].sum())
    pct = 100 * invalid / total if total else 0.0
    other_pct = 100 * other / total if total else 0.0
    return {
        "calls": total, "invalid": invalid, "invalid_pct": pct, "episodes": len(own),
        "episodes_with_invalid": int((own["invalid_calls"] > 0).sum()),
        "other_order": other, "other_order_pct": other_pct,
        "warn": pct > INVALID_WARN_PCT, "warn_other_order": other_pct > INVALID_WARN_PCT,
        "threshold_pct": INVALID_WARN_PCT,
        "messages": [{"message": m, "count": c, "pct_of_calls": 100 * c / total}
                     for m, c in messages.most_common(TOP_MESSAGES)],
        "distinct_messages": len(messages),
        "method": "counted by the environment while it played (the rows' invalid_calls, other_order_calls and "
                  "call_errors; docs/card.md)",
    }


# --- how cases ended, and what they cost in calls and ticks ----------------------------------------------------

def outcome_of(disposition: str, calls: str, n_calls: int, step_budget: int) -> str:
    """The case's end (`OUTCOMES`): a `close` the agent did not call is the budget's (every call spent) or the
    horizon's; the agent's own `close` is its last call, a bare `close` (always valid, so it ended the case)."""
    if disposition != "close" or calls.rpartition(";")[2] == "close":
        return disposition
    return "budget" if n_calls >= step_budget else "horizon"


def dispositions(rows: pd.DataFrame, step_budget: int) -> dict:
    """Episodes and % per outcome, `budget_or_horizon` their sum; the escalation fees paid."""
    ends = [outcome_of(d, c, int(n), step_budget) for d, c, n in zip(rows["disposition"], rows["calls"],
                                                                       rows["n_calls"])]
    count = Counter(ends)
    n = len(rows)
    out = {o: {"episodes": count[o], "pct": 100 * count[o] / n} for o in OUTCOMES}
    both = count["budget"] + count["horizon"]
    out["budget_or_horizon"] = {"episodes": both, "pct": 100 * both / n}
    fees = rows["escalation"].astype(float)
    out["escalation_fees"] = {"episodes": int((fees > 0).sum()), "total": float(fees.sum()),
                              "per_episode": float(fees.mean())}
    return out


def spread(values) -> dict:
    s = pd.Series(values, dtype=float)
    return {"mean": float(s.mean()), "sd": float(s.std(ddof=0)), "min": float(s.min()),
            "p10": float(s.quantile(0.1)), "median": float(s.median()), "p90": float(s.quantile(0.9)),
            "max": float(s.max())}


def usage(rows: pd.DataFrame) -> dict:
    """Calls made and ticks used from the hand-over to the case's end, per episode."""
    return {"calls": spread(rows["n_calls"]), "ticks": spread(rows["end_t"] - C.HANDOVER)}


# --- against the gate ------------------------------------------------------------------------------------------

def _paired(rows: pd.DataFrame, agent: str, gate: str, on: list[str]) -> pd.DataFrame:
    """The agent's and the gate's rows side by side on `on` (first-seen order kept: corpus, then seed)."""
    keep = [*on, "gap", "disposition", "calls", "n_calls"]
    mine = rows.loc[rows["policy"] == agent, list(dict.fromkeys([*keep, "archetype", "task_id"]))]
    gate_rows = rows.loc[rows["policy"] == gate, list(dict.fromkeys(keep))]
    return mine.merge(gate_rows, on=on, suffixes=("", "_gate"), how="inner", sort=False)


def examples(rows: pd.DataFrame, agent: str, gate: str, step_budget: int, n: int = 3) -> list[dict]:
    """Up to `n` episodes, of distinct tasks, on which the agent's gap most exceeds the gate's on the same task
    and seed (each task's worst seed; ties: corpus order, then the lower seed). Only episodes it loses (by more
    than half a cent)."""
    both = _paired(rows, agent, gate, ["task_id", "seed"])
    both["loss"] = both["gap"] - both["gap_gate"]
    worst = both[both["loss"] > C.MONEY_TOL].sort_values("loss", ascending=False, kind="mergesort")
    worst = worst.drop_duplicates("task_id").head(n)
    return [{"task_id": str(r.task_id), "archetype": str(r.archetype), "seed": int(r.seed), "gap": float(r.gap),
             "gate_gap": float(r.gap_gate), "loss_vs_gate": float(r.loss),
             "ended": outcome_of(r.disposition, r.calls, int(r.n_calls), step_budget),
             "gate_ended": outcome_of(r.disposition_gate, r.calls_gate, int(r.n_calls_gate), step_budget)}
            for r in worst.itertuples()]


def worst_pair(rows: pd.DataFrame, agent: str, gate: str) -> dict | None:
    """The (twin pair, seed) on which the agent's paired loss (mean gap over both halves) most exceeds the
    gate's on the same pair and seed; ties: corpus order, then the lower seed. None without twin pairs."""
    tw = rows[rows["twin_side"].notna() & rows["policy"].isin([agent, gate])]
    if tw.empty:
        return None
    wide = tw.pivot_table(index=["unit", "seed"], columns=["policy", "twin_side"], values="gap", aggfunc="first",
                          sort=False)
    mine, theirs = wide[agent], wide[gate]
    loss, gate_loss = (mine["settle"] + mine["fail"]) / 2, (theirs["settle"] + theirs["fail"]) / 2
    excess = loss - gate_loss
    unit, seed = excess.idxmax()  # the first maximum: corpus order, then seed
    ids = tw[(tw["unit"] == unit) & (tw["policy"] == agent) & (tw["seed"] == seed)].set_index("twin_side")
    at = (unit, seed)
    return {"unit": str(unit), "seed": int(seed), "settle": str(ids.loc["settle", "task_id"]),
            "fail": str(ids.loc["fail", "task_id"]), "loss": float(loss[at]),
            "settle_gap": float(mine.loc[at, "settle"]), "fail_gap": float(mine.loc[at, "fail"]),
            "gate_loss": float(gate_loss[at]), "gate_settle_gap": float(theirs.loc[at, "settle"]),
            "gate_fail_gap": float(theirs.loc[at, "fail"]), "excess": float(excess[at])}


def pass_k(rows: pd.DataFrame, agent: str, gate: str) -> list[dict]:
    """pass^k (%) of the agent and the gate for k = 1..seeds (`metrics.pass_k_curve`)."""
    mine = rows[rows["policy"].isin([agent, gate])]
    n = int(mine["seed"].nunique())
    curve = 100 * M.pass_k_curve(mine, ks=range(1, n + 1))
    return [{"k": k, "agent": float(curve.loc[agent, k]), "gate": float(curve.loc[gate, k])}
            for k in range(1, n + 1)]


def declared(ref) -> str | None:
    """The `cache_id` the agent declared, from its reference's (`user:<label>:<declared>`, or `registry:...` for
    a factory it registered), or None."""
    key = ref.cache_id
    for kind in ("user", "registry"):
        if key is not None and key.startswith(f"{kind}:{ref.label}:"):
            return key[len(f"{kind}:{ref.label}:"):]
    return key


def source(rows: pd.DataFrame, agent: str, cache_id: str | None) -> dict:
    """Where the agent's rows came from: `evaluate`'s `attrs["loaded"]` (episodes from a cache; 0: played now)."""
    total = int((rows["policy"] == agent).sum())
    loaded = int((rows.attrs.get("loaded") or {}).get(agent, 0))
    text = "played now" if loaded == 0 else f"{loaded:,} of {total:,} episodes from the cache" + (
        f" (declared cache_id {cache_id!r})" if cache_id is not None else "")
    return {"episodes": total, "from_cache": loaded, "played_now": total - loaded, "cache_id": cache_id,
            "text": text}


def model_source(rows: pd.DataFrame, agent: str, model: dict) -> dict:
    """Where a model's rows came from: asked now, resumed (replayed, then asked) or replayed whole from their
    transcripts (`model["episodes"]`, the run's `Usage`); never "played now" for a replay."""
    total = int((rows["policy"] == agent).sum())
    e = model["episodes"]
    return {"episodes": total, "from_cache": 0, "played_now": e["asked_now"] + e["resumed"],
            "asked_now": e["asked_now"], "resumed": e["resumed"], "replayed": e["replayed"], "cache_id": None,
            "text": f"{model['source']} (transcripts in {model['transcripts']})"}


def model_lines(model: dict) -> list[str]:
    """The model's section of report.md, one line a fact."""
    lat = ("no request asked now" if model["latency_median_s"] is None else
           f"median {model['latency_median_s']:.3f} s, 90th percentile {model['latency_p90_s']:.3f} s")
    tokens = f"{model['input_tokens']:,} in, {model['output_tokens']:,} out" + (
        f" (estimated, four characters a token, for the {model['estimated_requests']:,} replies that gave no usage)"
        if model["tokens_estimated"] else " (the server's usage)")
    return [f"- model: {model['name']} at {model['endpoint'] or 'none (replay only)'}",
            f"- sampling: {', '.join(f'{k} {v}' for k, v in sorted(model['params'].items())) or 'the server defaults'}"
            f"; prompt hash {model['prompt_hash']}",
            f"- requests: {model['requests']:,} answered ({model['requests_sent']:,} sent: {model['retries']:,} "
            f"retried, {model['rate_limited']:,} answered 429 or 503); up to {model['max_connections']} episodes "
            f"at once, at most {model['peak_in_flight']} requests in flight",
            f"- tokens: {tokens}", f"- latency per request: {lat}",
            f"- malformed calls: {model['malformed_calls']:,}; episodes ended by the context length: "
            f"{model['context_length_episodes']:,}",
            f"- episodes: {model['source']}", f"- transcripts: {model['transcripts']}"]


def checks_table(rows: pd.DataFrame, agent: str, gate: str) -> pd.DataFrame:
    """Per check: % of the agent's episodes failing it and unknown, % of the gate's failing; most failed first."""
    mine, theirs = rows[rows["policy"] == agent], rows[rows["policy"] == gate]
    out = pd.DataFrame({
        "check": list(CHECKS),
        "fail_pct": [100 * (mine[f"check_{c}"] == "fail").mean() for c in CHECKS],
        "unknown_pct": [100 * (mine[f"check_{c}"] == "unknown").mean() for c in CHECKS],
        "gate_fail_pct": [100 * (theirs[f"check_{c}"] == "fail").mean() if len(theirs) else float("nan")
                          for c in CHECKS],
    })
    return out.sort_values(["fail_pct", "unknown_pct"], ascending=False, kind="mergesort").reset_index(drop=True)


# --- the stamp, and commands that draw an episode --------------------------------------------------------------

def commit() -> str | None:
    """The commit of the repository the package was imported from, or None outside a git checkout."""
    here = Path(__file__).resolve().parents[2]
    try:
        proc = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != here:
        return None  # not a checkout, or the package sits inside some other repository
    return lines[1]


def corpus_expr(corpus) -> str | None:
    """A Python expression building a corpus that holds `corpus`'s tasks, or None."""
    seed = corpus.master_seed
    if seed is None:
        return None
    if corpus_for(seed, len(corpus)).fingerprint == corpus.fingerprint:
        return f"fb.make_corpus({seed}, {len(corpus)})"
    whole = corpus_for(seed, C.DEFAULT_TASKS)
    mine = {t.task_id: t for t in whole.tasks}
    if all(mine.get(t.task_id) == t for t in corpus.tasks):  # chosen tasks of a whole corpus (--task-ids)
        return f"fb.make_corpus({seed})"
    return None


def _lit(text: str) -> str:
    return json.dumps(text)  # a double-quoted Python literal


def draw_command(run, task_ids, seed: int, agent_expr: str, gate: str, out: str, other_expr: str = "") -> str:
    """The shell line that draws the agent (left) and the gate (right; or the policy `other_expr` names) on
    `task_ids` under `seed` and the run's profile, costs and probe into the PNG `out`; a placeholder `CORPUS`
    when no expression builds the corpus."""
    from finbench.sim.faults import FaultProfile  # lazy: only to compare with the default

    head = ["import finbench as fb"]
    corpus = corpus_expr(run.corpus) or "CORPUS"  # CORPUS: the run's, which no make_corpus call builds
    tasks = ", ".join(f"c[{_lit(t)}]" for t in task_ids)
    extra = ""
    if run.profile != FaultProfile.default():
        head.append("from finbench.analysis.explore import profile_named")
        extra += f", profile=profile_named({_lit(run.profile.name)})"
    base = Costs()
    changed = [f"{f.name}={getattr(run.costs, f.name)!r}" for f in fields(Costs)
               if getattr(run.costs, f.name) != getattr(base, f.name)]
    if changed:
        extra += f", costs=fb.Costs({', '.join(changed)})"
    if not run.probe.is_full:
        head.append("from finbench.analysis.explore import probe_named")
        extra += f", probe=probe_named({_lit(run.probe.name)})"
    if "policy_ref(" in agent_expr + other_expr:
        head.append("from finbench.agents.loading import policy_ref")
    code = "; ".join([*head, f"c = {corpus}",
                      f"fb.timeline_figure([{tasks}], policies=({agent_expr}, {other_expr or _lit(gate)}), "
                      f"seed={seed}{extra})"
                      f".savefig({_lit(out)})"])
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def agent_expr(spec: str | None, ref) -> str:
    """How a command names the agent: its PATH.py:NAME or module:NAME (a path made absolute), a built-in's
    label, or the placeholder AGENT (a class or object given from Python, which no text names)."""
    if spec:
        where, _, name = spec.rpartition(":")
        if where.endswith(".py"):
            spec = f"{Path(where).resolve()}:{name}"
        return f"policy_ref({_lit(spec)})"
    if getattr(ref, "builtin", False):
        return _lit(ref.label)
    return "AGENT"


def png_name(task_ids, seed: int) -> str:
    return "_".join(t.replace(":", "-") for t in task_ids) + f"_seed{seed}.png"


# --- everything at once -----------------------------------------------------------------------------------------

def card_facts(rows: pd.DataFrame, run, agent: str, gate: str, spec: str | None = None) -> dict:
    """The card's own facts beyond the experiments' tables (each a JSON-ready value; see docs/card.md)."""
    ref = next(r for r in run.policies if r.label == agent)
    mine, theirs = rows[rows["policy"] == agent], rows[rows["policy"] == gate]
    who = agent_expr(spec, ref)
    budget = run.costs.step_budget
    ex = examples(rows, agent, gate, budget)
    for e in ex:
        e["draw"] = draw_command(run, [e["task_id"]], e["seed"], who, gate, png_name([e["task_id"]], e["seed"]))
    worst = worst_pair(rows, agent, gate)
    if worst is not None:
        pair = [worst["settle"], worst["fail"]]
        worst["draw"] = draw_command(run, pair, worst["seed"], who, gate, png_name(pair, worst["seed"]))
    return {
        "source": source(rows, agent, declared(ref)),
        "invalid_calls": invalid_calls(mine),
        "dispositions": {"agent": dispositions(mine, budget), "gate": dispositions(theirs, budget)},
        "usage": {"agent": usage(mine), "gate": usage(theirs)},
        "pass_k": pass_k(rows, agent, gate),
        "worst_pair": worst,
        "examples": ex,
        "placeholders": [p for p, used in (("AGENT", who == "AGENT"), ("CORPUS", corpus_expr(run.corpus) is None))
                         if used],
        "agent_expr": who,
    }


# --- card.json ------------------------------------------------------------------------------------------------

def json_ready(value):
    """JSON-ready: numpy scalars as Python numbers, NaN and infinities as null, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _ci(r, lo: str, hi: str) -> list:
    return [r[lo], r[hi]]


def card_json(card) -> dict:
    """card.json (schema `SCHEMA`, every field in docs/card.md) of a `finbench.card.ReportCard`."""
    a, gate, k, f = card.agent, "finality_gate", card.run.k, card.facts
    t2 = card.table2.set_index("policy")

    def headline(p):
        r = t2.loc[p]
        out = {"episodes": r["episodes"], "exact_pct": r["exact_pct"], "exact_ci": _ci(r, "exact_lo", "exact_hi"),
               "mean_gap": r["mean_gap"], "gap_ci": _ci(r, "gap_lo", "gap_hi"), "pass_k_pct": r[f"pass{k}_pct"],
               "premature_pct": r["premature_pct"], "violation_pct": r["violation_pct"],
               "unscorable_pct": r["unscorable_pct"]}
        if "diff_to_gate" in r.index:
            out.update(diff_to_gate=r["diff_to_gate"], diff_ci=_ci(r, "diff_lo", "diff_hi"))
        return out

    def twin(p):
        r = card.table4.set_index("policy").loc[p]
        return {"n_pairs": r["n_pairs"], "paired_loss": r["paired_loss"], "paired_ci": _ci(r, "paired_lo", "paired_hi"),
                "settle_gap": r["settle_gap"], "fail_gap": r["fail_gap"], "premature_pct": r["premature_pct"],
                "rank_paired": r["rank_paired"], "rank_exact": r["rank_exact"], "of": len(card.table4)}

    def split(p):
        r = card.effects.set_index("policy").loc[p]
        return {"fail_pct": r["fail_exactly_one_effect_pct"], "captured_twice_pct": r["captured_twice_pct"],
                "never_captured_pct": r["captured_zero_pct"], "never_captured_lost_pct": r["zero_lost_pct"],
                "never_captured_recoverable_pct": r["zero_recoverable_pct"]}

    exact = card.table3.set_index("policy")
    archetypes = [{"archetype": r.archetype, "episodes": r.episodes, "exact_pct": exact.loc[a, r.archetype],
                   "gate_exact_pct": exact.loc[gate, r.archetype], "mean_gap": r.agent, "gate_mean_gap": r.gate,
                   "diff": r.diff} for r in card.gaps.itertuples(index=False)]
    return json_ready({
        "schema": SCHEMA, "agent": a, "gate": gate, "stamp": {**card.stamp(), "commit": card.meta.get("commit")},
        "source": f["source"], "warnings": card.warnings(),
        "headline": {"k": k, "agent": headline(a), "gate": headline(gate)},
        "invalid_calls": f["invalid_calls"], "dispositions": f["dispositions"], "usage": f["usage"],
        "archetypes": archetypes,
        "exactly_one_effect": {"agent": split(a), "gate": split(gate), "lost_for_good_pct": f["lost_for_good_pct"],
                               "note": "a payment lost for good (the original capture and a replacement would both "
                                       "fail) is never captured in any right play: exactly_one_effect fails there "
                                       "for every policy, the oracle included"},
        "checks": card.checks.to_dict("records"),
        "pass_k": f["pass_k"],
        "twin_pairs": None if card.table4 is None else {"agent": twin(a), "gate": twin(gate)},
        "table2": [{"policy": p, "privileged": bool(t2.loc[p, "privileged"]), **headline(p)} for p in t2.index],
        "table4": None if card.table4 is None else [{"policy": p, **twin(p)} for p in card.table4["policy"]],
        "worst_pair": f["worst_pair"], "examples": f["examples"], "placeholders": f["placeholders"],
        "agent_expr": f["agent_expr"],
        "model": f.get("model"),
    })
