"""Evaluate policies over a corpus: one row per episode, parallel, cached, resumable (SPEC §8).

Work is split into chunks of whole tasks (every seed of a task in one chunk,
so a world's fault schedule is built once and shared by the policies). Each
chunk's rows are cached under `data/cache/` keyed by everything that decides
them (corpus fingerprint, policy and knobs, profile, costs, seeds, engine
version) and written atomically, so notebooks share episodes and an
interrupted run resumes from the chunks it finished. Rows are sorted at the
end, so `n_jobs` and the joblib backend cannot change the result.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from finbench import constants as C
from finbench.economics import Costs
from finbench.env import FinalityEnv, play, reference_position
from finbench.faults import FaultProfile
from finbench.grading import CHECKS, Contract, grade_trace
from finbench.policies import POLICIES, get_policy

CACHE_DIR = Path(__file__).resolve().parent.parent / "data" / "cache"
CHUNK_TASKS = 24


def policy_label(name: str, knobs: dict | None = None) -> str:
    """'sop' or 'sop[patience=120,poll_interval=15]'."""
    if not knobs:
        return name
    return f"{name}[{','.join(f'{k}={v}' for k, v in sorted(knobs.items()))}]"


def _specs(policies) -> list[tuple[str, dict]]:
    if policies is None:
        policies = list(POLICIES)
    out = []
    for p in policies:
        name, knobs = (p, {}) if isinstance(p, str) else (p[0], dict(p[1]))
        get_policy(name, **knobs)  # fail early and clearly on a bad name or knob
        out.append((name, knobs))
    return out


def episode_row(task, name: str, knobs: dict, seed: int, profile: FaultProfile, costs: Costs) -> dict:
    """Play one episode and flatten its result into a row."""
    env = play(FinalityEnv(task, seed, profile, costs), get_policy(name, **knobs))
    res = env.result(policy_label(name, knobs), reference_position(task, costs))
    row = {
        "task_id": task.task_id, "archetype": task.archetype, "unit": task.unit, "twin_side": task.twin_side,
        "policy": res.policy, "seed": seed, "position": res.position,
        "reference_position": res.reference_position, "gap": res.gap, "exact": res.exact,
        "premature_irreversible": res.premature_irreversible, "n_calls": res.n_calls, "end_t": res.end_t,
        "disposition": res.disposition, "probe_calls": res.probe_calls, "wait_calls": res.wait_calls,
        "unrelated_effects": res.unrelated_effects,
        **{k: v for k, v in res.loss_breakdown.items()},
        **{f"fired_{f}": res.fired[f] for f in C.FAMILIES},
    }
    row.update(grade_row(task, res.trace))
    return row


def episode_contract(task) -> Contract:
    """The benchmark's own contract: capture the order value once, after
    authorisation, and touch no other order."""
    return Contract(task.order_id, task.order_value, op="capture")


def grade_row(task, trace) -> dict:
    """The effect-level verdict of one episode's trace, as row columns."""
    v = grade_trace(list(trace), episode_contract(task))
    captures = sum(1 for r in trace if r.get("kind") == "effect" and r.get("op") == "capture"
                   and r.get("new_effect") and r.get("order") == task.order_id)
    return {"verdict": v.verdict, "capture_effects": captures, **{f"check_{k}": v.checks[k] for k in CHECKS}}


def _run_chunk(tasks, specs, seeds, profile, costs) -> list[dict]:
    rows = []
    for task in tasks:
        for seed in seeds:
            for name, knobs in specs:
                rows.append(episode_row(task, name, knobs, seed, profile, costs))
    return rows


def _cache_key(fingerprint: str, chunk_ids, spec, seeds, profile, costs) -> str:
    blob = json.dumps([C.ENGINE_VERSION, fingerprint, list(chunk_ids), spec[0], sorted(spec[1].items()),
                       list(seeds), profile.key(), costs.key()], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _atomic_pickle(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    df.to_pickle(tmp)
    os.replace(tmp, path)


def evaluate(corpus, policies=None, seeds=range(5), profile: FaultProfile | None = None,
             costs: Costs | None = None, n_jobs: int = 1, cache: bool | str | Path = True,
             progress: bool = False) -> pd.DataFrame:
    """One row per (task, policy, seed), sorted; identical for any n_jobs or backend.

    Args:
        corpus: a `Corpus` (or any iterable of tasks with a `fingerprint`).
        policies: names, or (name, knobs) pairs; None means all nine.
        seeds: the fault seeds.
        profile, costs: the fault profile and the economics.
        n_jobs: joblib workers (`joblib.parallel_config(backend=...)` picks the backend).
        cache: True for `data/cache/`, a folder, or False for none.
        progress: show a progress bar over chunks.
    """
    from joblib import Parallel, delayed

    profile = profile if profile is not None else FaultProfile.default()
    costs = costs if costs is not None else Costs()
    seeds = [int(s) for s in seeds]
    specs = _specs(policies)
    tasks = list(corpus.tasks)
    cache_dir = None if cache is False else Path(CACHE_DIR if cache is True else cache)
    chunks = [tasks[i:i + CHUNK_TASKS] for i in range(0, len(tasks), CHUNK_TASKS)]
    jobs, done = [], {}
    for ci, chunk in enumerate(chunks):
        for si, spec in enumerate(specs):
            path = None
            if cache_dir is not None:
                key = _cache_key(corpus.fingerprint, [t.task_id for t in chunk], spec, seeds, profile, costs)
                path = cache_dir / spec[0] / f"{key}.pkl"
                if path.exists():
                    try:
                        done[(ci, si)] = pd.read_pickle(path)
                        continue
                    except Exception:  # a torn or foreign file: recompute it
                        path.unlink(missing_ok=True)
            jobs.append((ci, si, path))
    # group the missing work by chunk so a worker builds each world once for all policies
    by_chunk: dict[int, list] = {}
    for ci, si, path in jobs:
        by_chunk.setdefault(ci, []).append((si, path))
    work = list(by_chunk.items())

    def finish(ci, items, rows):
        per_spec: dict[int, list] = {}
        labels = {policy_label(*specs[si]): si for si, _ in items}
        for r in rows:
            per_spec.setdefault(labels[r["policy"]], []).append(r)
        for si, path in items:
            df = pd.DataFrame(per_spec.get(si, []))
            if path is not None:
                _atomic_pickle(df, path)
            done[(ci, si)] = df

    calls = (delayed(_run_chunk)(chunks[ci], [specs[si] for si, _ in items], seeds, profile, costs)
             for ci, items in work)
    if work:
        results = Parallel(n_jobs=n_jobs, return_as="generator")(calls)
        if progress:
            from tqdm import tqdm
            results = tqdm(results, total=len(work), desc="chunks", leave=False)
        for (ci, items), rows in zip(work, results):
            finish(ci, items, rows)
    frames = [done[k] for k in sorted(done) if len(done[k])]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return df
    order = {t.task_id: i for i, t in enumerate(tasks)}
    pol = {policy_label(*s): i for i, s in enumerate(specs)}
    df = df.assign(_t=df.task_id.map(order), _p=df.policy.map(pol))
    return df.sort_values(["_p", "_t", "seed"], kind="stable").drop(columns=["_t", "_p"]).reset_index(drop=True)
