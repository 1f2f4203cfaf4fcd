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
"""
from __future__ import annotations

import re

import pandas as pd

from finbench.sim import constants as C
from finbench.errors import FinbenchError, show
from finbench.sim.faults import FaultProfile
from finbench.grading import CHECKS, grade_trace
from finbench.agents.registry import DEFAULT_POLICIES, as_ref, policy_order
from finbench.sim.probe import DEFAULT_DELAY, DEFAULT_LIMIT, ProbeMode
from finbench.running.run import Run
from finbench.running.episode import episode_contract

__all__ = ["VERDICTS", "checks", "counts", "explore_run", "pick_row", "probe_named", "profile_named", "select"]

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


def explore_run(master_seed: int = C.PUBLIC_SEED, n_tasks: int = C.DEFAULT_TASKS, seeds=range(5), *,
                arm: str = "all", probe: str = "full", policy: str = "", n_jobs: int = 1, cache=True) -> Run:
    """The `Run` to explore: SPEC's nine policies (plus `policy` if it is another label, such as
    `sop[patience=60]` or `reconciler`) under the named arm and probe mode.

    Raises:
        FinbenchError: an unknown arm or probe mode; PolicyError: an unknown policy.
    """
    policies = list(DEFAULT_POLICIES)
    if policy and policy not in policies:
        as_ref(policy)  # an unknown name or knob fails here, clearly
        policies.append(policy)
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
