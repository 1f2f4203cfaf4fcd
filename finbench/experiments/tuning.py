"""Tuning transfer: Table VII, the grid behind it, and its repetition over further regenerated splits (SPEC §10).

A grid over the procedure's (`sop`) two knobs, `poll_interval` and `patience`, on the public split gives the *tuned*
configuration (lowest mean gap); it, the default and an *unfitted control* (`react` by default) are re-measured on the
regenerated split and further regenerated corpora. *Degradation*: the mean gap there minus on the public split.

Notebook `05_tuning` (its run's policies: `policies(polls, patiences, control)`):

    rows = tuning.episodes(run, polls, patiences, split_seeds(n_splits, regen_seed))
    tables = tuning.tables(rows, run)                 # tuning_grid, table7, tuning_splits
    claims, figures = tuning.claims(tables), tuning.figures(rows, run, tables)   # no figure
    publish_experiment(tuning, run, tables, claims, figures, meta=tuning.meta(tables))
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd

from finbench.analysis import metrics as M
from finbench.analysis.verdicts import Measure, claims_notes, claims_of, from_tables
from finbench.analysis.publish import TableSpec
from finbench.agents.policies import SOP
from finbench.agents.registry import as_ref, parse_label, policy_label
from finbench.running.run import corpus_for, sweep
from finbench.sim.splitseeds import DERIVATION

NAME = "tuning"
TABLES = ("tuning_grid", "table7", "tuning_splits")  # the tables it writes and its claims read
SECTION = "Tuning transfer: Table VII"  # how the claims report groups these claims
PROCEDURE = "sop"
KNOBS = ("poll_interval", "patience")
CONTROL = "react"
CONTROL_REASON = ("Why react: like the procedure it decides from the processor's replica and polls on a timer, so a "
                  "new draw moves it through the same archetypes; its defaults were never fitted, and no experiment "
                  "tunes it. The gate would be a weaker control: fault-invariant, its level moves with a corpus's "
                  "unresolvable mix and little else.")  # the unfitted control, and why (printed under Table VII)
ROLES = ("default", "tuned", "control")
TIE = 1e-9
"""Two mean gaps within this many dollars are a tie (they are equal: the configurations
played the same episodes, e.g. a patience longer than the call budget lets the procedure poll)."""
__all__ = ["PUBLISH", "TABLES", "best", "claims", "claims_from_tables", "config_label", "default_knobs", "episodes",
           "figures", "grid_frame", "grid_markdown", "grid_table", "measures", "meta", "notes", "policies",
           "regenerated",
           "splits_markdown", "splits_table", "table7", "table7_markdown", "tables"]


def default_knobs() -> dict[str, int]:
    """The procedure's own defaults for the two knobs (read from its signature, not retyped)."""
    return {k: inspect.signature(SOP).parameters[k].default for k in KNOBS}


DEFAULT = PROCEDURE
"""The default configuration's label: plain `sop`, so its episodes are the headline's."""


def config_label(poll_interval: int, patience: int) -> str:
    """'sop[patience=120,poll_interval=15]', or plain 'sop' for the defaults (the same episodes)."""
    knobs = {"poll_interval": poll_interval, "patience": patience}
    return DEFAULT if knobs == default_knobs() else policy_label(PROCEDURE, knobs)


def grid_frame(poll_intervals, patiences) -> pd.DataFrame:
    """The grid in its order (poll interval outer, patience inner): poll_interval, patience, policy.

    Raises:
        ValueError: a value repeats on an axis, or an axis is empty.
        PolicyError: a value the procedure refuses (checked now, by the procedure itself).
    """
    polls, pats = list(poll_intervals), list(patiences)
    for name, axis in (("poll_intervals", polls), ("patiences", pats)):
        if not axis or len(set(axis)) != len(axis):
            raise ValueError(f"tuning: {name} must be a non-empty list of distinct values, got {axis}")
    rows = [(p, q, config_label(p, q)) for p in polls for q in pats]
    for _, _, label in rows:
        as_ref(label)  # the procedure checks its knobs
    return pd.DataFrame(rows, columns=["poll_interval", "patience", "policy"])


def policies(poll_intervals, patiences, control: str = CONTROL) -> list[str]:
    """Every grid configuration (grid order), the default if the grid lacks it, then the control."""
    labels = list(grid_frame(poll_intervals, patiences)["policy"])
    control = as_ref(control).label
    if control in labels or control == DEFAULT:
        raise ValueError(f"tuning: the control {control!r} must not be a configuration of the procedure")
    return list(dict.fromkeys([*labels, DEFAULT, control]))


def episodes(run, poll_intervals, patiences, seeds) -> dict[str, pd.DataFrame]:
    """What the grid run (`run`: `policies(poll_intervals, patiences, control)`, the control last) and the regenerated
    runs produce: {"public": its episode rows, "grid": their `grid_table`, "regen": `regenerated(..., seeds)`'s}."""
    public = run.evaluate()
    grid = grid_table(public, run, poll_intervals, patiences)
    return {"public": public, "grid": grid, "regen": regenerated(run, best(grid), run.labels[-1], seeds)}


def tables(rows: dict[str, pd.DataFrame], run) -> dict[str, pd.DataFrame]:
    """The grid, Table VII and the regenerated splits (`episodes`' rows), by stem (`TABLES`)."""
    public, grid, regen, control = rows["public"], rows["grid"], rows["regen"], run.labels[-1]
    per_split = splits_table(public, regen, best(grid), control)
    return dict(zip(TABLES, (grid, table7(public, regen, run, best(grid), control, per_split), per_split)))


def grid_table(df: pd.DataFrame, run, poll_intervals, patiences) -> pd.DataFrame:
    """Every grid configuration on the public split, and which one is best.

    Args:
        df: the public split's episode rows (`run.evaluate()`); must hold every configuration and the default.
        run: the `Run` behind them (k of pass^k, bootstrap replicates and seed); poll_intervals, patiences: the axes.

    Returns:
        One row per configuration, in grid order: `poll_interval`, `patience`, `policy`, `is_default`, `episodes`,
        `exact_pct`, `mean_gap` with `gap_lo`/`gap_hi` (unit bootstrap), `pass{k}_pct`, `diff_to_default` with
        `diff_lo`/`diff_hi` (mean gap minus the default's, on a shared resample), `rank` (1 = lowest mean gap; ties
        in grid order), `best` (the tuned configuration) and `tied_with_best`.

    Example:
        >>> from finbench.running.run import Run
        >>> run = Run.make(n_tasks=36, seeds=range(3), policies=policies([15, 30], [120, 180]),
        ...                n_boot=200, cache=False)
        >>> grid = grid_table(run.evaluate(), run, [15, 30], [120, 180])
        >>> best(grid)
        'sop[patience=180,poll_interval=15]'
    """
    g = grid_frame(poll_intervals, patiences)
    labels = list(g["policy"])
    order = list(dict.fromkeys([*labels, DEFAULT]))
    missing = [p for p in order if p not in set(df["policy"])]
    if missing:
        raise ValueError(f"grid_table: no episodes for {missing[:3]}; run tuning.policies(...)")
    sub = df[df["policy"].isin(order)]
    s = M.summary_table(sub, k=run.k).reindex(labels)
    ci = M.bootstrap_ci(sub, "gap", labels, run.n_boot, run.boot_seed)
    d = M.bootstrap_diff_table(sub, DEFAULT, "gap", labels, run.n_boot, run.boot_seed)
    out = g.assign(
        is_default=[p == DEFAULT for p in labels], episodes=s["n_episodes"].to_numpy(),
        exact_pct=100 * s["exact"].to_numpy(),
        mean_gap=s["mean_gap"].to_numpy(), gap_lo=ci["lo"].to_numpy(), gap_hi=ci["hi"].to_numpy(),
        **{f"pass{run.k}_pct": 100 * s[f"pass^{run.k}"].to_numpy()},
        diff_to_default=d["estimate"].to_numpy(), diff_lo=d["lo"].to_numpy(), diff_hi=d["hi"].to_numpy(),
    )
    # lowest mean gap first; a tie (equal gaps) goes to the earlier configuration in grid order
    ranked = sorted(range(len(out)), key=lambda i: (out["mean_gap"].iloc[i], i))
    lowest = out["mean_gap"].iloc[ranked[0]]
    rank = np.empty(len(out), dtype=int)
    rank[ranked] = np.arange(1, len(out) + 1)
    out["rank"] = rank
    out["best"] = out["rank"] == 1
    out["tied_with_best"] = (out["mean_gap"] - lowest).abs() <= TIE
    return out


def best(grid: pd.DataFrame) -> str:
    """The tuned configuration's label: the grid's lowest mean gap (ties: first in grid order)."""
    return str(grid.loc[grid["best"], "policy"].iloc[0])


def _roles(best_label: str, control: str) -> dict[str, str]:
    return dict(zip(ROLES, (DEFAULT, best_label, as_ref(control).label)))


def regenerated(run, best_label: str, control: str, seeds) -> pd.DataFrame:
    """The default, the tuned configuration and the control on regenerated corpora.

    Args:
        run: the public split's `Run` (seeds, profile, costs, bootstrap and execution kept; corpus, policies replaced).
        best_label: the tuned configuration (`best(grid)`); control: the unfitted control's name or label.
        seeds: master seeds of the regenerated corpora, the paper's split first
            (`splitseeds.split_seeds(n, regen_seed)`); each corpus has as many tasks as the public one.

    Returns:
        Their episode rows with three leading columns: `split` (0 for the first seed, the paper's regenerated
        split), `master_seed` and `corpus` (the fingerprint).

    Raises:
        ValueError: a seed repeats or is the public split's.
    """
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds) or run.corpus.master_seed in seeds:
        raise ValueError(f"regenerated: seeds must be distinct and differ from the public split's "
                         f"({run.corpus.master_seed}), got {seeds}")
    corpora = [corpus_for(s, len(run.corpus)) for s in seeds]
    base = run.replace(policies=list(dict.fromkeys(_roles(best_label, control).values())))
    frame = sweep(base, {"corpus": corpora}).rename(columns={"corpus": "master_seed"})
    split, prints = {s: i for i, s in enumerate(seeds)}, {c.master_seed: c.fingerprint for c in corpora}
    frame.insert(0, "split", frame["master_seed"].map(split).astype(int))
    frame.insert(2, "corpus", frame["master_seed"].map(prints))
    return frame


def splits_table(public: pd.DataFrame, regen: pd.DataFrame, best_label: str, control: str) -> pd.DataFrame:
    """One row per regenerated split: each role's mean gap there and its degradation.

    Returns:
        Columns `split` (0: the paper's regenerated split), `master_seed`, `corpus`; for each role (default, tuned,
        control) `<role>_gap` (mean gap on the split) and `<role>_degradation` (that minus the role's mean gap on
        the public split); `tuned_minus_default` and `tuned_beats_default` (the tuned gap strictly lower);
        `tuned_degrades_more` (the tuned degradation above the control's, as the paper found).
    """
    roles = _roles(best_label, control)
    pub = public.groupby("policy")["gap"].mean()
    reg = regen.groupby(["split", "master_seed", "corpus", "policy"])["gap"].mean().unstack("policy")
    out = reg.index.to_frame(index=False)
    for role, p in roles.items():
        out[f"{role}_gap"] = reg[p].to_numpy()
    for role, p in roles.items():
        out[f"{role}_degradation"] = out[f"{role}_gap"] - pub[p]
    out["tuned_minus_default"] = out["tuned_gap"] - out["default_gap"]
    out["tuned_beats_default"] = out["tuned_gap"] < out["default_gap"]
    out["tuned_degrades_more"] = out["tuned_degradation"] > out["control_degradation"]
    return out


def _knobs(label: str) -> dict | None:
    """The two knobs of a configuration of the procedure (None for another policy)."""
    name, knobs = parse_label(label)
    return {**default_knobs(), **knobs} if name == PROCEDURE else None


def _replicates(df: pd.DataFrame, policy: str, n_boot: int, seed: int) -> np.ndarray:
    """The policy's resampled mean gaps (units resampled, twins together), as `metrics.bootstrap_ci` draws them:
    the universe is every unit of `df`, rows summed in a canonical order."""
    universe = np.unique(df["unit"].to_numpy())
    sub = df.loc[df["policy"] == policy, ["unit", "task_id", "seed", "gap"]]
    sub = sub.sort_values(["unit", "task_id", "seed", "gap"], kind="mergesort")
    g = sub.groupby("unit", sort=True)["gap"].agg(["sum", "size"]).reindex(universe, fill_value=0)
    idx = M.bootstrap_units(universe, n_boot, seed)
    sums, counts = g["sum"].to_numpy(dtype=float), g["size"].to_numpy(dtype=float)
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def _pct(reps: np.ndarray) -> tuple[float, float]:
    return tuple(float(q) for q in np.quantile(reps, [0.025, 0.975]))


def _across(values: pd.Series) -> dict:
    """Mean, sd, 95% t-interval of the mean, RMS, min, median, max of one value over the splits."""
    from scipy import stats

    v, n = values.to_numpy(dtype=float), len(values)
    mean, sd = float(v.mean()), (float(v.std(ddof=1)) if n > 1 else math.nan)
    half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)) if n > 1 else math.nan
    return {"splits": n, "splits_mean": mean, "splits_sd": sd, "splits_t_lo": mean - half,
            "splits_t_hi": mean + half, "splits_rms": float(np.sqrt(np.mean(v ** 2))),
            "splits_min": float(v.min()), "splits_median": float(np.median(v)), "splits_max": float(v.max())}


def table7(public: pd.DataFrame, regen: pd.DataFrame, run, best_label: str, control: str,
           per_split: pd.DataFrame) -> pd.DataFrame:
    """Table VII: default, tuned and control on the public and the regenerated split, and over every split.

    Args:
        public, regen: the public split's episode rows (the grid run's) and `regenerated(...)`'s (split 0 is the
            paper's regenerated split); run: the public run (k, bootstrap replicates and seed).
        best_label, control: the tuned configuration and the control; per_split: `splits_table` of the same rows.

    Returns:
        One row per role (default, tuned, control): `role`, `policy`, `poll_interval`, `patience` (NaN for the
        control); on each split (`public_`, `regen_`) `exact_pct`, `gap` with `lo`/`hi` (95% unit bootstrap);
        `degradation` (regen - public) with `degradation_lo`/`_hi` (percentiles of the difference of the two
        corpora's resampled means, resampled independently: the regenerated split from `boot_seed + 1`);
        `public_vs_default` and `regen_vs_default` with `_lo`/`_hi` (mean gap minus the default's on a shared
        resample); over every regenerated split (`per_split`): `splits` (N), `splits_mean`, `splits_sd`,
        `splits_t_lo`/`_hi` (95% t-interval of the mean degradation), `splits_rms`, `splits_min`, `splits_median`,
        `splits_max`, `splits_beats_default` (splits on which the role's gap is below the default's).
    """
    roles = _roles(best_label, control)
    first = regen[regen["split"] == 0]
    rows = []
    for role, p in roles.items():
        kn = _knobs(p)
        row = {"role": role, "policy": p, "poll_interval": kn["poll_interval"] if kn else math.nan,
               "patience": kn["patience"] if kn else math.nan}
        reps = {}
        # the regenerated split is resampled from boot_seed + 1: the two corpora's resamples are independent
        for where, d, seed in (("public", public, run.boot_seed), ("regen", first, run.boot_seed + 1)):
            mine = d[d["policy"] == p]
            reps[where] = _replicates(d, p, run.n_boot, seed)
            lo, hi = _pct(reps[where])
            row.update({f"{where}_exact_pct": 100 * mine["exact"].astype(float).mean(),
                        f"{where}_gap": mine["gap"].astype(float).mean(), f"{where}_lo": lo, f"{where}_hi": hi})
        row["degradation"] = row["regen_gap"] - row["public_gap"]
        row["degradation_lo"], row["degradation_hi"] = _pct(reps["regen"] - reps["public"])
        for where, d in (("public", public), ("regen", first)):
            diff = M.bootstrap_diff(d, p, DEFAULT, "gap", run.n_boot, run.boot_seed)
            row.update({f"{where}_vs_default": diff["estimate"], f"{where}_vs_default_lo": diff["lo"],
                        f"{where}_vs_default_hi": diff["hi"]})
        row.update(_across(per_split[f"{role}_degradation"]))
        row["splits_beats_default"] = (math.nan if role == "default" else
                                       int((per_split[f"{role}_gap"] < per_split["default_gap"]).sum()))
        rows.append(row)
    return pd.DataFrame(rows)


def _ci(x, lo, hi, sign="") -> str:
    f = "{:" + sign + ".2f}"
    return f"{f.format(x)} [{f.format(lo)}, {f.format(hi)}]"


def table7_markdown(t7: pd.DataFrame) -> pd.DataFrame:
    """The human rendering of Table VII (public, regenerated, degradation; then over every split)."""
    rows = []
    for r in t7.itertuples(index=False):
        n = int(r.splits)
        rows.append({
            "role": r.role, "policy": r.policy,
            "public mean gap $": _ci(r.public_gap, r.public_lo, r.public_hi),
            "regenerated mean gap $": _ci(r.regen_gap, r.regen_lo, r.regen_hi),
            "degradation $": _ci(r.degradation, r.degradation_lo, r.degradation_hi, "+"),
            "vs default, regenerated $": _ci(r.regen_vs_default, r.regen_vs_default_lo, r.regen_vs_default_hi, "+"),
            f"degradation over {n} splits: mean [95% t] $": _ci(r.splits_mean, r.splits_t_lo, r.splits_t_hi, "+"),
            "min .. max $": f"{r.splits_min:+.2f} .. {r.splits_max:+.2f}",
            "beats default": "" if r.role == "default" else f"{int(r.splits_beats_default)} of {n}",
        })
    return pd.DataFrame(rows)


def grid_markdown(grid: pd.DataFrame) -> pd.DataFrame:
    """Mean gap $ by poll interval (rows) x patience (columns); **bold** the tuned one, (d) the default."""
    cell = [("**{:.2f}**" if b else "{:.2f}").format(g) + (" (d)" if d else "")
            for g, b, d in zip(grid["mean_gap"], grid["best"], grid["is_default"])]
    wide = grid.assign(cell=cell).pivot(index="poll_interval", columns="patience", values="cell")
    wide = wide.reindex(index=list(dict.fromkeys(grid["poll_interval"])), columns=list(dict.fromkeys(grid["patience"])))
    wide.columns = [f"patience {c}" for c in wide.columns]
    return wide.reset_index().rename(columns={"poll_interval": "poll interval"})


def splits_markdown(per_split: pd.DataFrame) -> pd.DataFrame:
    """Per regenerated split: the three degradations and whether the tuned knobs still beat the default."""
    return pd.DataFrame({
        "split": [f"{s}{' (paper)' if s == 0 else ''}" for s in per_split["split"]],
        "master seed": per_split["master_seed"], "corpus": per_split["corpus"],
        "default $": per_split["default_gap"].round(2), "tuned $": per_split["tuned_gap"].round(2),
        "control $": per_split["control_gap"].round(2),
        "default degr. $": per_split["default_degradation"].map("{:+.2f}".format),
        "tuned degr. $": per_split["tuned_degradation"].map("{:+.2f}".format),
        "control degr. $": per_split["control_degradation"].map("{:+.2f}".format),
        "tuned beats default": per_split["tuned_beats_default"].map({True: "yes", False: "no"}),
        "tuned degrades more than control": per_split["tuned_degrades_more"].map({True: "yes", False: "no"}),
    })


def measures(tables: dict[str, pd.DataFrame]) -> dict:
    """Ours for each of the tuning claims (`data/paper_claims.csv`, experiment "tuning"), from the three
    tables (`TABLES`): Table VII's roles, the tuned and default knobs, the regenerated splits."""
    t7, per_split = tables["table7"], tables["tuning_splits"]
    tuned, dflt, ctrl = (t7.set_index("role").loc[r] for r in ("tuned", "default", "control"))
    n, k, m = len(per_split), int(per_split["tuned_beats_default"].sum()), int(per_split["tuned_degrades_more"].sum())
    src7, srcs = "tables/table7.csv", "tables/tuning_splits.csv"

    def vs_default(where):
        d = float(tuned[f"{where}_gap"] - dflt[f"{where}_gap"])
        lo, hi = float(tuned[f"{where}_vs_default_lo"]), float(tuned[f"{where}_vs_default_hi"])
        return Measure(d, lo, hi, source=src7,
                       shown=f"{tuned.policy} {tuned[f'{where}_gap']:.2f} - default {dflt[f'{where}_gap']:.2f} = "
                             f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}] (shared resample)")

    def degradation(r, other, whose):  # versus: the other role's (the tuned degrades more than the control)
        return Measure(float(r.degradation), source=src7, versus=float(other.degradation),
                       shown=f"{r.policy}: {r.regen_gap:.2f} - {r.public_gap:.2f} = {r.degradation:+.2f} "
                             f"[{r.degradation_lo:+.2f}, {r.degradation_hi:+.2f}]; {whose} {other.degradation:+.2f}")

    polls = float(tuned.poll_interval - dflt.poll_interval)
    ctrl_degr = per_split["control_degradation"].astype(float)
    return {
        "tuning_improves_public": vs_default("public"),
        "tuned_beats_default_regen": vs_default("regen"),
        "tuned_degradation": degradation(tuned, ctrl, f"control ({ctrl.policy})"),
        "control_degradation": degradation(ctrl, tuned, "tuned"),
        "tuned_polls_more_often": Measure(polls, source=src7,
                                          shown=f"{polls:+g}: tuned poll_interval={tuned.poll_interval:g}, "
                                                f"patience={tuned.patience:g}; default poll_interval="
                                                f"{dflt.poll_interval:g}, patience={dflt.patience:g}"),
        "control_split_variation": Measure(float(ctrl.splits_rms), source=src7,
                                           shown=f"{ctrl.policy}: RMS {ctrl.splits_rms:.2f} over {n} regenerated "
                                                 f"splits (degradations {ctrl_degr.min():+.2f} .. "
                                                 f"{ctrl_degr.max():+.2f})"),
        "tuned_beats_default_splits": Measure(k > n / 2, source=srcs,
                                              shown=f"on {k} of {n} ({100 * k / n:.0f}%); tuned - default over "
                                                    f"splits: {per_split['tuned_minus_default'].min():+.2f} .. "
                                                    f"{per_split['tuned_minus_default'].max():+.2f}"),
        "tuned_degrades_more_splits": Measure(m > n / 2, source=srcs,
                                              shown=f"on {m} of {n}; mean degradation over splits: tuned "
                                                    f"{tuned.splits_mean:+.2f} [{tuned.splits_t_lo:+.2f}, "
                                                    f"{tuned.splits_t_hi:+.2f}], control {ctrl.splits_mean:+.2f} "
                                                    f"[{ctrl.splits_t_lo:+.2f}, {ctrl.splits_t_hi:+.2f}] (95% t)"),
    }


def claims(tables: dict[str, pd.DataFrame]) -> list:
    """The paper's claims about Table VII, decided on ours (`measures`) by `data/paper_claims.csv`."""
    return claims_of(NAME, measures(tables))


def notes(grid: pd.DataFrame, t7: pd.DataFrame, per_split: pd.DataFrame, claims_list: list | None = None) -> list[str]:
    """Markdown notes under Table VII: the tuned choice, its ties, the intervals, the splits, the claims."""
    t = t7.set_index("role")
    b, tied = grid[grid["best"]].iloc[0], grid[grid["tied_with_best"] & ~grid["best"]]
    n = len(per_split)
    tie_text = ("no other configuration ties with it" if tied.empty else
                f"tied (same mean gap) with {', '.join(tied['policy'])}; the first in grid order is taken")
    reason = CONTROL_REASON if t.loc["control", "policy"] == CONTROL else ""
    lines = [
        f"Grid: {grid['poll_interval'].nunique()} poll intervals x {grid['patience'].nunique()} patiences = "
        f"{len(grid)} configurations on the public split. Tuned (lowest mean gap): {b['policy']} at "
        f"{b['mean_gap']:.2f} [{b['gap_lo']:.2f}, {b['gap_hi']:.2f}]; {tie_text}. Default: {DEFAULT} "
        f"(poll_interval={t.loc['default', 'poll_interval']:g}, patience={t.loc['default', 'patience']:g}).",
        "",
        f"Control: {t.loc['control', 'policy']} with its defaults, never tuned. {reason}".rstrip(),
        "",
        "Degradation = mean gap on the regenerated split - on the public split (positive: worse). Intervals: "
        "95% percentile bootstrap over units (twins together); a degradation's resamples the two corpora "
        "independently (the regenerated one from boot_seed + 1); 'vs default' is on a shared resample.",
        "",
        f"Over splits: the paper's regenerated split (split 0) and {n - 1} further corpora derived from it; mean "
        "degradation with a 95% t-interval over the splits (mean +/- t(0.975, N-1) sd / sqrt N), and their range.",
        "",
    ]
    return lines + (claims_notes(claims_list) if claims_list else [])


def meta(tables: dict[str, pd.DataFrame]) -> dict:
    """The stamp entries beyond the run's own: the regenerated splits, the tuned choice, the control."""
    s, t7 = tables["tuning_splits"], tables["table7"]
    return {"regenerated": f"{s.corpus[0]} (master seed {s.master_seed[0]})", "further_splits": len(s) - 1,
            "split_seeds": DERIVATION, "tuned": best(tables["tuning_grid"]), "control": t7.policy.iloc[-1]}


def figures(rows: dict, run, tables: dict | None = None) -> dict:
    """None: Table VII has no figure."""
    return {}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, TABLES)


PUBLISH = {
    "tuning_grid": TableSpec("The procedure's grid on the public split: mean gap $",
                             markdown=lambda t: grid_markdown(t["tuning_grid"]),
                             notes=lambda t, claims: notes(*(t[stem] for stem in TABLES))),
    "table7": TableSpec("Table VII: tuning transfer", markdown=lambda t: table7_markdown(t["table7"]),
                        notes=lambda t, claims: notes(*(t[stem] for stem in TABLES), claims)),
    "tuning_splits": TableSpec("Degradation on every regenerated split",
                               markdown=lambda t: splits_markdown(t["tuning_splits"]), bootstrap=False),
}
"""How each table is written (`publish_experiment`; their stamp entries are `meta`'s)."""
