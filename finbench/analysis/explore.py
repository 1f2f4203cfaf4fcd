"""Exploring episodes interactively (notebook `explore`): choose a run by name, filter its rows, look
at one episode on a time axis and grade its trace again. Writes nothing.

    run = explore_run(arm="only:loss", probe="full", policy="optimistic")
    rows = select(run.evaluate(), policy="optimistic", archetype="pending_fail", verdict="violation")
    counts(rows)                                  # policy x verdict
    row = pick_row(rows, 0)
    drawn = timeline_plot.draw_row(row, run)      # the episode on one time axis
    checks(row, drawn.result, run.corpus[row.task_id])

An *arm* is a fault profile named as `FaultProfile.name` spells it (the `arm`
column of Table VI): `all`, `none`, `only:loss`, `only:loss+delay`,
`without:stale_read`, with an optional `@intensity`. The probe mode is named
as `ProbeMode.name` spells it (Table VIII's arms): `full`, `none`, `delayed`,
`delayed[D=60]`, `rate_limited`, `rate_limited[N=5]`, `identity_only`. Both go
into the `Run`, so episodes come from (and go to) the same cache as the
notebooks that made the tables.

The policy explored is any reference (`finbench.agents.loading.policy_ref`): a
label, a registered name, a user's class, factory or object, or `PATH.py:NAME`;
it joins SPEC's nine. Rows made elsewhere (`evaluate`'s, a report card's
`rows.csv`) are read by `read_rows` and replayed by `rows_replay` when their
corpus and policy can be rebuilt.
"""
from __future__ import annotations

import dataclasses
import io
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from finbench.sim import constants as C
from finbench.errors import FinbenchError, PolicyError, show
from finbench.sim.corpus import Corpus, corpus_for
from finbench.sim.economics import Costs
from finbench.sim.faults import FaultProfile
from finbench.grading import CHECKS, grade_trace
from finbench.agents.loading import policy_ref
from finbench.agents.policies import POLICIES
from finbench.agents.registry import DEFAULT_POLICIES, PolicyRef, as_ref, policy_order
from finbench.sim.probe import DEFAULT_DELAY, DEFAULT_LIMIT, ProbeMode
from finbench.running.run import Run, costs_label, seeds_label
from finbench.running.episode import episode_contract

__all__ = ["ROW_COLUMNS", "VERDICTS", "Replay", "checks", "counts", "explore_run", "explored_policy", "pick_row",
           "probe_named", "profile_named", "read_rows", "rebuilt", "recorded", "rows_replay", "select"]

VERDICTS = ("pass", "violation", "unscorable")
"""The effect-level grader's verdicts (the `verdict` column of `evaluate`'s rows)."""

_ARM = ("a fault profile's name: 'all', 'none', 'only:<families>' or 'without:<families>' (families '+'-joined "
        f"from {', '.join(C.FAMILIES)}), optionally '@<intensity>'")


def profile_named(name: str) -> FaultProfile:
    """The fault profile `name` names: the inverse of `FaultProfile.name`.

    Raises:
        FinbenchError: not such a name, or an unknown family.

    Example:
        >>> profile_named("without:delay") == FaultProfile.without("delay")
        True
    """
    if not isinstance(name, str):
        raise FinbenchError(f"arm must be {_ARM}, got {show(name)}")
    text, at, level = name.strip().partition("@")
    intensity = C.DEFAULT_INTENSITY
    if at:
        try:
            intensity = float(level)
        except ValueError:
            raise FinbenchError(f"arm must be {_ARM}, got {show(name)}") from None
    if text == "all":
        return FaultProfile.default(intensity)
    if text == "none" and not at:
        return FaultProfile.none()
    kind, colon, families = text.partition(":")
    if colon and kind in ("only", "without") and families:
        make = FaultProfile.only if kind == "only" else FaultProfile.without
        return make(*families.split("+"), intensity=intensity)
    raise FinbenchError(f"arm must be {_ARM}, got {show(name)}")


_PROBE = re.compile(r"^(?P<kind>[a-z_]+)(?:\[(?P<knob>[DN])=(?P<value>\d+)\])?$")


def probe_named(name: str) -> ProbeMode:
    """The probe mode `name` names: the inverse of `ProbeMode.name` (`delayed` and `rate_limited`
    alone take the default D and N).

    Raises:
        FinbenchError: not such a name.
    """
    m = _PROBE.match(name.strip()) if isinstance(name, str) else None
    allowed = ("a probe mode's name: full, none, delayed, delayed[D=<ticks>], rate_limited, rate_limited[N=<calls>] "
               "or identity_only")
    if m is None:
        raise FinbenchError(f"probe must be {allowed}, got {show(name)}")
    kind, knob, value = m["kind"], m["knob"], m["value"]
    if kind == "delayed" and knob in (None, "D"):
        return ProbeMode.delayed(int(value) if value else DEFAULT_DELAY)
    if kind == "rate_limited" and knob in (None, "N"):
        return ProbeMode.rate_limited(int(value) if value else DEFAULT_LIMIT)
    if kind in ("full", "none", "identity_only") and knob is None:
        return ProbeMode(kind)
    raise FinbenchError(f"probe must be {allowed}, got {show(name)}")


def explored_policy(policy: Any, where: str = "explore_run") -> tuple[PolicyRef | None, str]:
    """(the reference to add to SPEC's nine, or None; the label its rows carry) for any policy reference
    ('' or None: no policy, label ''; one of the nine's labels: nothing to add).

    Raises:
        PolicyError: not a policy, one that cannot be loaded or made, or a policy of one's own labelled as
            one of the nine (its rows could not be told from theirs).
    """
    if policy is None or (isinstance(policy, str) and not policy.strip()):
        return None, ""
    ref = policy_ref(policy, where)  # a file is loaded, a class or factory called, once: here
    if ref.label not in DEFAULT_POLICIES:
        return ref, ref.label
    if (ref.builtin and ref.cache_id == f"registry:{ref.label}") or policy is POLICIES[ref.label]:
        return None, ref.label  # the nine's own, by name or class: already in the run
    raise PolicyError(f"{where}: policy must be labelled apart from SPEC's nine (its `name` attribute), got "
                      f"{show(policy)}, labelled {ref.label!r}")


def explore_run(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS, seeds=range(5), *,
                arm: str = "all", probe: str = "full", policy: Any = "", n_jobs: int = 1, cache=True) -> Run:
    """The `Run` to explore: SPEC's nine policies, plus `policy` if it is another (any reference: a label
    such as `sop[patience=60]` or `reconciler`, a class, factory or object, `PATH.py:NAME`), under the named
    arm and probe mode. A policy of one's own is played afresh unless it declares `cache_id`.

    Raises:
        FinbenchError: an unknown arm or probe mode; PolicyError: an unusable policy (`explored_policy`).
    """
    ref, _ = explored_policy(policy)
    policies = [*DEFAULT_POLICIES, *([ref] if ref is not None else [])]
    return Run.make(master_seed, n_tasks, seeds=tuple(seeds), profile=profile_named(arm), probe=probe_named(probe),
                    policies=policies, n_jobs=n_jobs, cache=cache)


def _one_of(what: str, value: str, present) -> None:
    present = list(present)
    if value and value not in present:
        raise FinbenchError(f"{what} must be '' (any) or one of {', '.join(map(str, present))}; got {show(value)}")


def select(df: pd.DataFrame, *, policy: str = "", archetype: str = "", verdict: str = "") -> pd.DataFrame:
    """The rows matching every filter given ('' matches anything), in the rows' order, renumbered from 0.

    Raises:
        FinbenchError: a filter value that is not a policy of the rows, an archetype, or a verdict.
    """
    _one_of("policy", policy, policy_order(df["policy"]))
    _one_of("archetype", archetype, C.ARCHETYPES)
    _one_of("verdict", verdict, VERDICTS)
    keep = pd.Series(True, index=df.index)
    for col, value in (("policy", policy), ("archetype", archetype), ("verdict", verdict)):
        if value:
            keep &= df[col] == value
    return df[keep].reset_index(drop=True)


def counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Episodes per policy (rows, in `policy_order`) and verdict (columns), with totals."""
    table = pd.crosstab(rows["policy"], rows["verdict"]).reindex(index=policy_order(rows["policy"]),
                                                                 columns=list(VERDICTS), fill_value=0)
    table["episodes"] = table.sum(axis=1)
    table.loc["all"] = table.sum(axis=0)
    return table.rename_axis(index="policy", columns=None)


def pick_row(rows: pd.DataFrame, pick: int) -> pd.Series:
    """`rows.iloc[pick]`, or an error saying how many rows there are to pick from."""
    if not len(rows):
        raise FinbenchError("pick: no episode matches the filters; widen policy, archetype or verdict")
    if isinstance(pick, bool) or not isinstance(pick, int) or not -len(rows) <= pick < len(rows):
        raise FinbenchError(f"pick must be an integer in 0..{len(rows) - 1} ({len(rows):,} rows match), "
                            f"got {show(pick)}")
    return rows.iloc[pick]


def checks(row: pd.Series, result, task) -> pd.DataFrame:
    """The six effect checks of one episode: as its row records them, and re-graded from its replayed
    trace (`result.trace`) against the benchmark's contract, with the grader's reason for each.

    Raises:
        RuntimeError: the re-graded checks differ from the row's (episodes are deterministic).
    """
    verdict = grade_trace(list(result.trace), episode_contract(task))
    table = pd.DataFrame({"row": [row[f"check_{c}"] for c in CHECKS],
                          "re-graded": [verdict.checks[c] for c in CHECKS],
                          "reason": [verdict.reasons[c] for c in CHECKS]}, index=pd.Index(CHECKS, name="check"))
    table.loc["verdict"] = [row["verdict"], verdict.verdict, verdict.reason]
    if not (table["row"] == table["re-graded"]).all():
        raise RuntimeError(f"re-grading {row['policy']} on {row['task_id']} seed {row['seed']} gave "
                           f"{verdict.verdict} {verdict.checks}; the row says {row['verdict']}")
    return table


def recorded(row: pd.Series) -> pd.DataFrame:
    """The six effect checks and the verdict as the row records them (`checks` without the replay)."""
    return pd.DataFrame({"row": [*(row[f"check_{c}"] for c in CHECKS), row["verdict"]]},
                        index=pd.Index([*CHECKS, "verdict"], name="check"))


# --- rows made elsewhere: evaluate's, a report card's rows.csv ------------------------------------------------

ROW_COLUMNS = ("task_id", "archetype", "policy", "seed", "gap", "disposition", "verdict",
               *(f"check_{c}" for c in CHECKS))
"""The columns of episode rows the explorer reads (every row of `evaluate` has them)."""

_ROWS = "a DataFrame or the path of a rows.csv file (episode rows: evaluate's, or a report card's)"
_TEXT = ("task_id", "archetype", "unit", "twin_side", "policy", "disposition", "verdict", "retry_at", "calls",
         "call_errors", *(f"check_{c}" for c in CHECKS))


def read_rows(rows: Any, where: str = "read_rows") -> pd.DataFrame:
    """Episode rows from a DataFrame, or from a CSV file (or a report card's folder, holding rows.csv),
    renumbered from 0. A file's `# key: value` lines before the header (a report card's stamp: corpus,
    seeds, profile, costs, probe) go into `attrs["stamp"]`; a DataFrame's own `attrs["stamp"]` is kept.

    Raises:
        FinbenchError: not a DataFrame nor a readable CSV table, no rows, a column of `ROW_COLUMNS`
            lacking, or seeds that are not integers.
    """
    if isinstance(rows, pd.DataFrame):
        df, stamp, source = rows.reset_index(drop=True), dict(rows.attrs.get("stamp") or {}), "rows"
    elif isinstance(rows, (str, os.PathLike)):
        df, stamp = _read_csv(rows, where)
        source = str(rows)
    else:
        raise FinbenchError(f"{where}: rows must be {_ROWS}, got {show(rows)}")
    missing = [c for c in ROW_COLUMNS if c not in df.columns]
    if missing:
        raise FinbenchError(f"{where}: rows must be {_ROWS}, with columns {', '.join(ROW_COLUMNS)}; got a table "
                            f"lacking {', '.join(missing)}")
    if not len(df):
        raise FinbenchError(f"{where}: rows must hold at least one episode, got a table with no episode")
    seeds = pd.to_numeric(df["seed"], errors="coerce")
    if seeds.isna().any() or (seeds % 1 != 0).any():
        raise FinbenchError(f"{where}: rows must have integer seeds, got {show(df['seed'][seeds.isna()].iloc[0])}"
                            if seeds.isna().any() else f"{where}: rows must have integer seeds, got a fraction")
    df = df.assign(seed=seeds.astype(int))
    df.attrs = {"stamp": stamp, "source": source}
    return df


def _read_csv(rows, where: str) -> tuple[pd.DataFrame, dict]:
    path = Path(rows)
    if path.is_dir() and (path / "rows.csv").is_file():
        path = path / "rows.csv"  # a report card's folder: its rows
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark is no part of the stamp
    except (OSError, UnicodeDecodeError) as e:
        why = ("no such file" if isinstance(e, FileNotFoundError) else "a folder without rows.csv"
               if path.is_dir() else "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else e.strerror or str(e))
        raise FinbenchError(f"{where}: rows must be {_ROWS}, got {show(str(rows))} ({why})") from None
    lines = text.splitlines(keepends=True)
    top = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    stamp = {}
    for line in lines[:top]:
        key, colon, value = line[1:].partition(":")
        if colon:
            stamp[key.strip()] = value.strip()
    try:  # only an empty cell is missing: a policy labelled 'NA' stays a label
        df = pd.read_csv(io.StringIO("".join(lines[top:])), dtype={c: str for c in _TEXT}, keep_default_na=False,
                         na_values=[""])
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise FinbenchError(f"{where}: rows must be {_ROWS}, got {show(str(rows))} (not a CSV table: "
                            f"{' '.join(str(e).split())[:120]})") from None
    return df, stamp


@dataclasses.dataclass(frozen=True)
class Replay:
    """What replays rows read by `read_rows`: `run` (their corpus, seeds, profile, costs and probe mode, and
    every policy of theirs that can be rebuilt; None when none can), `cannot` (label -> why its episodes
    cannot be replayed), `label` (the policy chosen, '' for none), the arm and probe mode by name, and the
    caption every drawing prints."""

    run: Run | None
    arm: str
    probe: str
    caption: str
    label: str = ""
    cannot: dict = dataclasses.field(default_factory=dict)


def rows_replay(rows: pd.DataFrame, *, policy: Any = None, master_seed: int = C.PUBLIC_SEED,
                n_tasks: int | None = None, arm: str | None = None, probe: str | None = None,
                where: str = "rows_replay") -> Replay:
    """How to replay `rows` (from `read_rows`). A stamp (a report card's) decides the corpus, profile, costs
    and probe mode; without one, `master_seed` and `n_tasks` (default: the tasks the rows name) the corpus,
    `arm` and `probe` the rest, with SPEC's costs. A policy of the package's, or registered, is rebuilt from
    its label; `policy` (any reference) replays the rows of its label (a user's agent).

    Raises:
        FinbenchError: `arm` or `probe` other than the stamp's, or `policy` labelled as none of the rows.
        PolicyError: an unusable policy.
    """
    stamp, labels = rows.attrs.get("stamp") or {}, policy_order(rows["policy"])
    arm = _stamped(where, "arm", arm, stamp.get("profile"), "all", profile_named)
    probe = _stamped(where, "probe", probe, stamp.get("probe", "full") if stamp else None, "full", probe_named)
    given = None  # a label of the rows (or none) only filters; anything else is the agent that made them
    if not (policy is None or (isinstance(policy, str) and (not policy.strip() or policy in labels))):
        given = policy_ref(policy, where)
        if given.label not in labels:
            named = "" if given.label == policy else f", labelled {given.label!r}"
            raise FinbenchError(f"{where}: policy must be one of the rows' policies ({', '.join(labels)}) or a policy "
                                f"labelled as one, got {show(policy)}{named}")
    label = given.label if given is not None else (policy or "").strip()
    why, corpus, costs = rebuilt(stamp, rows, master_seed, n_tasks)
    refs, cannot = [], {}
    for name in labels:
        if why:
            cannot[name] = why
        elif given is not None and name == given.label:
            refs.append(given)
        else:
            try:  # a label only, never a file named in a table: reading rows runs no code they name
                refs.append(dataclasses.replace(as_ref(name), label=name))
            except PolicyError:
                cannot[name] = (f"{name!r} is not a policy this process can rebuild (neither the package's nor a "
                                "registered name); pass policy= the agent that made these rows (its class, factory "
                                "or PATH.py:NAME) to replay them")
    profile, mode = profile_named(arm), probe_named(probe)
    run = Run(corpus, seeds=tuple(sorted(set(rows["seed"]))), profile=profile, costs=costs, probe=mode,
              policies=refs, cache=False) if refs else None
    source = rows.attrs.get("source", "rows")
    named = stamp.get("corpus") or (corpus.fingerprint if corpus is not None else "unknown")
    caption = (f"{source} · {len(rows):,} episodes · corpus {named} · seeds "
               f"{seeds_label(sorted(set(rows['seed'])))} · profile {profile.name} · costs {costs_label(costs)}"
               + ("" if mode.is_full else f" · probe {mode.name}"))
    return Replay(run, arm, probe, caption, label, cannot)


def _stamped(where: str, name: str, given, stamped, default: str, parse) -> str:
    """The stamp's arm or probe mode (an argument may repeat it, not contradict it), else the argument's."""
    if stamped is None:
        return default if given is None else given
    if given is not None and parse(given) != parse(stamped):
        raise FinbenchError(f"{where}: {name} must be the rows' own, {stamped!r} (from their stamp), or None; got "
                            f"{show(given)}")
    return stamped


def rebuilt(stamp: dict, rows: pd.DataFrame, master_seed: int, n_tasks: int | None):
    """(why the rows' episodes cannot be replayed, or ''; their corpus; their costs)."""
    try:
        seed = int(stamp.get("master_seed", master_seed))
        n = int(stamp.get("tasks", n_tasks or rows["task_id"].nunique()))
        corpus = corpus_for(seed, n)
        if stamp.get("task_ids"):  # chosen tasks of a whole corpus (eval --task-ids), in its order
            chosen = set(stamp["task_ids"].split(","))
            corpus = Corpus(tuple(t for t in corpus_for(seed).tasks if t.task_id in chosen), seed)
        costs = _costs(stamp.get("costs", "default"))
    except (ValueError, TypeError) as e:  # a stamp written by hand, or by another version
        return f"the rows' stamp cannot be read ({' '.join(str(e).split())[:120]})", None, Costs()
    if stamp.get("engine", C.ENGINE_VERSION) != C.ENGINE_VERSION:
        return (f"the rows were played by engine {stamp['engine']}, this package plays engine {C.ENGINE_VERSION}",
                corpus, costs)
    if stamp.get("corpus", corpus.fingerprint) != corpus.fingerprint:
        return f"the rows' corpus {stamp['corpus']} is not make_corpus({seed}, {n}) ({corpus.fingerprint})", corpus, costs
    known = {t.task_id for t in corpus.tasks}
    stray = [t for t in rows["task_id"].unique() if t not in known]
    if stray:
        return (f"task {stray[0]!r} is not in make_corpus({seed}, {n}); pass master_seed and n_tasks of the corpus "
                "the rows came from", corpus, costs)
    return "", corpus, costs


def _costs(text: str) -> Costs:
    """The inverse of `costs_label`: 'default' or 'cogs_rate=0.4,dispute_fee=15'."""
    if text == "default":
        return Costs()
    values = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        values[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else float(value)
    return Costs(**values)
