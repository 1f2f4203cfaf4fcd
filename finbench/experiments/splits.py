"""The headline on many corpora: how far each of its numbers and claims moves between draws of the generator
(SPEC §10, "splits").

Table II and the claims of the headline (and of the experiments passed as `also`: the twins', the
ablation's and the cost sweep's, these two on one seed a corpus) are recomputed on the public split and on regenerated corpora (`REGEN_SEED` and further ones derived from it,
`finbench.sim.splitseeds`) by the experiments' own `episodes`, `tables` and `claims`; the notebook passes
the modules in, since an experiment module never imports another. Notebook `10_splits`:

    run = Run.make(master_seed, n_tasks, seeds=range(n_seeds), n_boot=n_boot, ...)
    rows = splits.episodes(run, split_seeds(n_splits, regen_seed), headline,
                           also=(twins, (ablation, 1), (cost_sweep, 1)))
    tables = splits.tables(rows, run)       # splits, splits_claims, splits_corpora, splits_verdicts
    claims = splits.claims(tables)

A claim *holds* on a corpus when its verdict there is "reproduced" (inside the
paper's interval or the claim's tolerance; for a qualitative claim, it holds);
its *direction holds* when the verdict is "reproduced" or "same direction".
Both counts are reported, with the count of every verdict.
"""
from __future__ import annotations

import math
import pickle
import warnings
from collections import Counter

import numpy as np
import pandas as pd

from finbench.errors import warn_caller
from finbench.analysis.verdicts import VERDICTS, Claim, claims_frame, from_tables
from finbench.analysis import results_cache
from finbench.analysis.publish import TableSpec
from finbench.analysis.splits_plot import figure
from finbench.agents.registry import policy_order
from finbench.running.evaluation import cap_jobs
from finbench.running.run import corpus_for
from finbench.running.stats import EPISODES, KINDS

NAME = "splits"
SECTION = "Beyond the paper: regenerated corpora"
"""The part of the paper (or beyond it) these claims belong to, as the claims report groups them."""
HEADLINE = "headline"
GATE = "finality_gate"

CELLS: dict[str, tuple[str, str, int]] = {
    "gate_exact": (GATE, "exact_pct", 1),
    "gate_gap": (GATE, "mean_gap", 1),
    "optimistic_exact": ("optimistic", "exact_pct", 1),
    "react_exact": ("react", "exact_pct", 1),
    "react_passk": ("react", "passk_pct", 1),
    "sop_exact": ("sop", "exact_pct", 1),
    "sop_passk": ("sop", "passk_pct", 1),
    "gate_minus_react": ("react", "diff_to_gate", -1),
}
"""Headline claim id -> the Table II cell its number is (policy, column, sign: the paper reports
gate - ReAct, Table II holds ReAct - gate). Only where the paper's value attaches; the value itself
is always taken from the claims record, and `across` checks the record's number is that cell. (The gate's
pass^k is not one: its claim is pass^k minus the exact rate, which must be zero.)"""

METRICS = (("exact_pct", "exact %"), ("mean_gap", "mean gap $"), ("passk_pct", "pass^k %"),
           ("premature_pct", "premature-irreversible %"), ("diff_to_gate", "mean gap - gate's $"))
"""Table II's columns, in its order (pass^k: k = min(5, seeds))."""
INTERVALS = {"exact_pct": ("exact_lo", "exact_hi"), "mean_gap": ("gap_lo", "gap_hi"),
             "diff_to_gate": ("diff_lo", "diff_hi")}
__all__ = ["CELLS", "METRICS", "across", "claim_counts", "claims", "claims_from_tables", "counts_markdown", "figure",
           "notes", "spread", "spread_markdown", "verdicts_markdown"]


def _k(t2: pd.DataFrame) -> int:
    return int(next(c for c in t2.columns if c.startswith("pass") and c.endswith("_pct"))[4:-4])


def _check_cells(t2: pd.DataFrame, frame: pd.DataFrame, where: str) -> None:
    """Every mapped claim's number must be its Table II cell (else the headline changed under us)."""
    t = t2.set_index("policy")
    for r in frame.itertuples():
        if r.id not in CELLS or math.isnan(r.ours):
            continue
        policy, col, sign = CELLS[r.id]
        cell = sign * float(t.loc[policy, col])
        if not math.isclose(cell, r.ours, rel_tol=1e-12, abs_tol=1e-9):
            raise ValueError(f"splits: claim {r.id!r} on {where} is {r.ours}, but its Table II cell "
                             f"({policy}, {col}) gives {cell}; update splits.CELLS")


def across(run, seeds, headline, also=()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table II and the headline's claims on the public split and on each regenerated corpus.

    Args:
        run: the public split's `Run` (seeds, profile, costs, policies, bootstrap, execution);
            each regenerated corpus replaces its corpus and has as many tasks.
        seeds: master seeds of the regenerated corpora (`splitseeds.split_seeds(n, regen_seed)`).
        headline: the headline experiment module: its `tables(rows, run)` holds `table2`, whose
            cells are the values, and its `claims(tables)` the first claims.
        also: further experiment modules, each through its own `episodes`, `tables` and `claims`, in
            that order after the headline's: a module (its episodes under the run's seeds: the twins',
            which are the headline's own), or `(module, n)` to use the run's first n seeds on every
            corpus, for time (the ablation's fifteen arms; the experiment's own notebook gives its
            full public-split verdicts).

    Returns:
        `(values, verdicts)`. `values`: one row per (corpus, policy), columns `split` (0 the
        public split, 1 the first seed, ...), `kind` ("public" or "regenerated"),
        `master_seed`, `corpus` (fingerprint), then Table II's columns with `pass{k}_pct`
        named `passk_pct`. `verdicts`: one row per (corpus, claim): the same four columns,
        then `experiment`, `id`, `claim`, `paper`, `paper_lo`, `paper_hi`, `ours`, `holds`, `verdict`, `source`.

    Raises:
        ValueError: a seed repeats or is the public split's; a claim's number is not its Table II cell.
    """
    seeds = [int(s) for s in seeds]
    if len(set(seeds)) != len(seeds) or run.corpus.master_seed in seeds:
        raise ValueError(f"splits: seeds must be distinct and differ from the public split's "
                         f"({run.corpus.master_seed}), got {seeds}")
    corpora = [run.corpus, *(corpus_for(s, len(run.corpus)) for s in seeds)]
    jobs = [(run.replace(corpus=corpus), i, headline, also) for i, corpus in enumerate(corpora)]
    workers = cap_jobs(run.n_jobs, len(jobs), "splits", "corpora")
    if workers > 1:
        # one corpus a worker, each simulating its own chunks in turn (the rows, and so the cache
        # files, do not depend on n_jobs): the tables and figures of a warm run, which are most of
        # its time, run beside each other too; only the small per-corpus frames come back
        from joblib import Parallel, delayed  # lazy: loaded only when corpora run in parallel

        done = Parallel(n_jobs=workers)(delayed(_in_worker)(r.replace(n_jobs=1), *rest) for r, *rest in jobs)
    else:
        done = [_counted(*job) for job in jobs]
    for _, _, counts, caught in done:
        EPISODES.update(counts)
        for message, category in caught:
            warn_caller(message, category)
    return (pd.concat([d[0] for d in done], ignore_index=True),
            pd.concat([d[1] for d in done], ignore_index=True))


def _in_worker(r, i: int, headline, also) -> tuple:
    """`_counted` in a worker process: an error that cannot cross back whole (pickled and read
    back) comes back as a RuntimeError that names it, not as a broken process pool."""
    try:
        return _counted(r, i, headline, also)
    except Exception as e:
        try:
            pickle.loads(pickle.dumps(e))
        except Exception:  # noqa: BLE001 - whatever stops it crossing, say what it was
            raise RuntimeError(f"splits: on corpus {r.corpus.master_seed}: {type(e).__name__}: {e}") from None
        raise


def _counted(r, i: int, headline, also) -> tuple[pd.DataFrame, pd.DataFrame, Counter, list]:
    """`_corpus`, the episodes it simulated, loaded and re-priced (taken off this process's counts)
    and the warnings it raised (held back): the caller adds the counts and repeats the warnings,
    whichever process ran it, so a worker's are not lost."""
    before = Counter(EPISODES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values, verdicts = _corpus(r, i, headline, also)
    counts = Counter({k: EPISODES[k] - before[k] for k in KINDS})
    EPISODES.subtract(counts)
    return values, verdicts, counts, [(str(w.message), w.category) for w in caught]


def _corpus(r, i: int, headline, also) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One corpus's Table II (`values`) and claims (`verdicts`) under `r`, the `i`-th split: computed, or
    read from the results cache (a warm run), keyed by the run, the split, the experiments and the package."""
    modules = [headline, *(item[0] if isinstance(item, tuple) else item for item in also)]
    parts = [r.key(), i, [m.__name__ for m in modules],
             [item[1] if isinstance(item, tuple) else None for item in also]]
    # the package's digest covers its own experiments' code, not a module passed in from elsewhere, and
    # a policy without a cache key has its rows played afresh: then nothing computed from them is kept
    cacheable = (all(results_cache.packaged(m) for m in modules)
                 and all(ref.cache_key() is not None for ref in r.policies))
    return results_cache.frames(r.cache, NAME, parts, lambda: _computed(r, i, headline, also), cacheable)


def _computed(r, i: int, headline, also) -> tuple[pd.DataFrame, pd.DataFrame]:
    corpus = r.corpus
    df = r.evaluate()
    tables = headline.tables(df, r)
    t2 = tables["table2"]
    recs = claims_frame(headline.claims(tables))
    _check_cells(t2.rename(columns={f"pass{_k(t2)}_pct": "passk_pct"}), recs, f"corpus {corpus.fingerprint}")
    for item in also:
        experiment, n = item if isinstance(item, tuple) else (item, None)
        r_m = r if n is None else r.replace(seeds=r.seeds[:n])
        tables_m = experiment.tables(experiment.episodes(r_m), r_m)
        recs = pd.concat([recs, claims_frame(experiment.claims(tables_m))], ignore_index=True)
    head = {"split": i, "kind": "public" if i == 0 else "regenerated", "master_seed": corpus.master_seed,
            "corpus": corpus.fingerprint}
    t2 = t2.rename(columns={f"pass{_k(t2)}_pct": "passk_pct"})
    keep = ["experiment", "id", "claim", "scope", "paper", "paper_lo", "paper_hi", "ours", "holds", "verdict",
            "margin", "source"]
    return (pd.DataFrame({**head, **{c: t2[c] for c in t2.columns}}),
            pd.DataFrame({**head, **{c: recs[c] for c in keep}}))


def _paper(verdicts: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(policy, column) -> the paper's value, interval and claim id, from the public split's records."""
    pub = verdicts[(verdicts["split"] == 0) & (verdicts["experiment"] == HEADLINE)].set_index("id")
    out = {}
    for cid, (policy, col, sign) in CELLS.items():
        if cid not in pub.index:
            continue
        r = pub.loc[cid]
        lo, hi = sign * r["paper_lo"], sign * r["paper_hi"]
        out[(policy, col)] = {"claim_id": cid, "paper": sign * r["paper"], "paper_lo": min(lo, hi),
                              "paper_hi": max(lo, hi)}
    return out


def spread(values: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per headline number (policy x Table II column): the paper, the public split, and the spread
    over the regenerated corpora.

    Returns:
        One row per (policy, metric), policies in SPEC's order, metrics as `METRICS`:
        `policy`, `metric`, `label`; `claim_id`, `paper`, `paper_lo`, `paper_hi` (from the
        headline's claims records, NaN where the paper gives no value; gate - ReAct shown as
        ReAct - gate, negated with its interval); `public` with `public_lo`/`public_hi` (Table
        II's 95% bootstrap interval, where it has one); over the N regenerated corpora `n`,
        `min`, `range_lo` and `range_hi` (2.5th and 97.5th percentiles, linear interpolation),
        `median`, `max`, `mean`, `sd`; `inside_public_ci` (corpora whose value lies in the public
        split's interval).
    """
    paper = _paper(verdicts)
    pub = values[values["split"] == 0].set_index("policy")
    reg = values[values["split"] > 0]
    rows = []
    for policy in policy_order(values["policy"]):
        mine = reg[reg["policy"] == policy]
        for col, label in METRICS:
            v = mine[col].to_numpy(dtype=float)
            lo_c, hi_c = INTERVALS.get(col, (None, None))
            plo = float(pub.loc[policy, lo_c]) if lo_c else math.nan
            phi = float(pub.loc[policy, hi_c]) if hi_c else math.nan
            p = paper.get((policy, col), {})
            rows.append({
                "policy": policy, "metric": col, "label": label,
                "claim_id": p.get("claim_id", ""), "paper": p.get("paper", math.nan),
                "paper_lo": p.get("paper_lo", math.nan), "paper_hi": p.get("paper_hi", math.nan),
                "public": float(pub.loc[policy, col]), "public_lo": plo, "public_hi": phi,
                "n": len(v), "min": v.min(), "range_lo": np.quantile(v, 0.025), "median": np.median(v),
                "range_hi": np.quantile(v, 0.975), "max": v.max(), "mean": v.mean(),
                "sd": v.std(ddof=1) if len(v) > 1 else math.nan,
                "inside_public_ci": int(((v >= plo - 1e-9) & (v <= phi + 1e-9)).sum()) if lo_c else -1,
            })
    return pd.DataFrame(rows)


def _nan_or(f, x: np.ndarray) -> float:
    return float(f(x)) if len(x) and not np.isnan(x).all() else math.nan


def claim_counts(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per claim (by experiment and id, in the order of `across`): its verdict on the public split and
    how many regenerated corpora give each verdict.

    Returns:
        `experiment`, `id`, `claim`, `paper`, `paper_lo`, `paper_hi`, `public_ours`, `public_verdict`, `n`
        (regenerated corpora), one count per verdict (`reproduced`, `same_direction`, `differs`,
        `not_run`), `holds` (= reproduced), `direction_holds` (reproduced + same direction),
        and over the regenerated corpora `ours_min`, `ours_median`, `ours_max`, `margin_min`,
        `margin_median` (the claim's margin, in its unit; NaN for a qualitative claim).
    """
    pub = verdicts[verdicts["split"] == 0].set_index(["experiment", "id"])
    reg = verdicts[verdicts["split"] > 0]
    rows = []
    for key in dict.fromkeys(zip(verdicts["experiment"], verdicts["id"])):
        exp, cid = key
        mine = reg[(reg["experiment"] == exp) & (reg["id"] == cid)]
        n = {v: int((mine["verdict"] == v).sum()) for v in VERDICTS}
        ours = mine["ours"].to_numpy(dtype=float)
        numeric = len(ours) and not np.isnan(ours).all()
        margins = mine["margin"].to_numpy(dtype=float) if "margin" in mine.columns else np.array([])
        first = verdicts[(verdicts["experiment"] == exp) & (verdicts["id"] == cid)].iloc[0]
        rows.append({
            "experiment": exp, "id": cid, "claim": first["claim"], "paper": first["paper"], "paper_lo": first["paper_lo"],
            "paper_hi": first["paper_hi"],
            "public_ours": pub.loc[key, "ours"] if key in pub.index else math.nan,
            "public_verdict": pub.loc[key, "verdict"] if key in pub.index else "not run",
            "n": len(mine), **{v.replace(" ", "_"): n[v] for v in VERDICTS},
            "holds": n["reproduced"], "direction_holds": n["reproduced"] + n["same direction"],
            "ours_min": np.nanmin(ours) if numeric else math.nan,
            "ours_median": np.nanmedian(ours) if numeric else math.nan,
            "ours_max": np.nanmax(ours) if numeric else math.nan,
            "margin_min": _nan_or(np.nanmin, margins), "margin_median": _nan_or(np.nanmedian, margins),
        })
    return pd.DataFrame(rows)


def _majority(r) -> str:
    """The verdict a claim earns across corpora: reproduced if it is on more than half, else same
    direction if its direction holds on more than half, else differs (not run if nowhere run)."""
    if r.n == 0 or r.not_run == r.n:
        return "not run"
    if r.reproduced > r.n / 2:
        return "reproduced"
    if r.direction_holds > r.n / 2:
        return "same direction"
    return "differs"


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def claims(tables: dict[str, pd.DataFrame]) -> list[Claim]:
    """One record per claim counted (id `<experiment>.<id>`) in `tables["splits_claims"]`: the paper's
    value beside ours across the regenerated corpora.

    `ours` is the median over the regenerated corpora (NaN for a qualitative claim, whose
    `holds` says whether it holds on more than half); the verdict is the majority rule of
    `_majority`, and `measured` gives every count.
    """
    out = []
    for r in tables["splits_claims"].itertuples(index=False):
        verdict = _majority(r)
        tally = (f"reproduced on {r.reproduced}, same direction on {r.same_direction}, differs on {r.differs}"
                 + (f", not run on {r.not_run}" if r.not_run else "") + f" of {r.n} regenerated corpora")
        qual = math.isnan(r.ours_median)
        measured = tally if qual else (f"median {_fmt(r.ours_median)} (range {_fmt(r.ours_min)} .. "
                                       f"{_fmt(r.ours_max)}); {tally}")
        measured += f"; public split: {r.public_verdict}"
        out.append(Claim(NAME, f"{r.experiment}.{r.id}", f"{r.claim} (across regenerated corpora)", float(r.paper),
                         float(r.paper_lo), float(r.paper_hi), float(r.ours_median),
                         (r.reproduced > r.n / 2) if qual and verdict != "not run" else None, verdict,
                         "the verdict on more than half of the corpora (reproduced, else reproduced or same "
                         "direction, else differs); per corpus the claim's own interval, tolerance and "
                         "direction", measured, "tables/splits_claims.csv"))
    return out


# --- renderings ------------------------------------------------------------------------

def _ci(x, lo, hi) -> str:
    if math.isnan(x):
        return ""
    return f"{x:.2f}" if math.isnan(lo) else f"{x:.2f} [{lo:.2f}, {hi:.2f}]"


def spread_markdown(sp: pd.DataFrame, k: int | None = None) -> pd.DataFrame:
    """The human rendering of `spread` (pass^k's label with its k, if given)."""
    label = sp["label"] if k is None else sp["label"].str.replace("pass^k", f"pass^{k}", regex=False)
    return pd.DataFrame({
        "policy": sp["policy"], "number": label,
        "paper": [_ci(*v) for v in zip(sp["paper"], sp["paper_lo"], sp["paper_hi"])],
        "public [95% CI]": [_ci(*v) for v in zip(sp["public"], sp["public_lo"], sp["public_hi"])],
        "regenerated: median": sp["median"].map(_fmt),
        "min .. max": [f"{a:.2f} .. {b:.2f}" for a, b in zip(sp["min"], sp["max"])],
        "95% range": [f"{a:.2f} .. {b:.2f}" for a, b in zip(sp["range_lo"], sp["range_hi"])],
        "in public CI": [f"{i} of {n}" if i >= 0 else "" for i, n in zip(sp["inside_public_ci"], sp["n"])],
    })


def counts_markdown(counts: pd.DataFrame) -> pd.DataFrame:
    """Per claim: the paper, the public verdict, and the verdict counts over the regenerated corpora."""
    paper = ["qualitative" if math.isnan(p) else (f"{p:g}" if math.isnan(lo) else f"{p:g} [{lo:g}, {hi:g}]")
             for p, lo, hi in zip(counts["paper"], counts["paper_lo"], counts["paper_hi"])]
    ours = ["" if math.isnan(m) else f"{m:.2f} ({a:.2f} .. {b:.2f})"
            for m, a, b in zip(counts["ours_median"], counts["ours_min"], counts["ours_max"])]
    return pd.DataFrame({
        "experiment": counts["experiment"], "id": counts["id"], "claim": counts["claim"], "paper": paper, "public": counts["public_verdict"],
        "reproduced": [f"{a} of {n}" for a, n in zip(counts["reproduced"], counts["n"])],
        "same direction": counts["same_direction"], "differs": counts["differs"],
        "direction holds": [f"{a} of {n}" for a, n in zip(counts["direction_holds"], counts["n"])],
        "ours over corpora: median (min .. max)": ours,
    })


_CODE = {"reproduced": "R", "same direction": "S", "differs": "D", "not run": "-"}


def verdicts_markdown(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Claims (rows) x corpora (columns, by split number): R reproduced, S same direction, D differs, - not run."""
    label = verdicts["experiment"] + "." + verdicts["id"]
    wide = verdicts.assign(code=verdicts["verdict"].map(_CODE), id=label).pivot(index="id", columns="split",
                                                                              values="code")
    wide = wide.reindex(index=list(dict.fromkeys(label)))
    wide.columns = ["public" if c == 0 else str(c) for c in wide.columns]
    return wide.reset_index()


def notes(values: pd.DataFrame, counts: pd.DataFrame, sp: pd.DataFrame, claims_list: list | None = None) -> list[str]:
    """Markdown notes: the corpora, how counts and ranges are defined, and the claims."""
    reg = values[values["split"] > 0].drop_duplicates("split")
    n = len(reg)
    lines = [
        f"Corpora: the public split (split 0, master seed {values.loc[values['split'] == 0, 'master_seed'].iloc[0]})"
        f" and {n} regenerated corpora: split 1 is the paper's regenerated split (master seed "
        f"{reg['master_seed'].iloc[0]}), splits 2..{n} are derived from it (`finbench.sim.splitseeds`).",
        "",
        "Spread: over the regenerated corpora; the 95% range is the 2.5th to 97.5th percentile of their values "
        f"(linear interpolation; with {n} corpora it lies close to the min and max). 'In public CI': regenerated "
        "corpora whose value lies inside the public split's own 95% bootstrap interval (over units), i.e. how "
        "well one corpus's interval describes another draw of the generator. Paper values and intervals come "
        "from the headline's claims records.",
        "",
        "A claim holds on a corpus when its verdict there is reproduced; its direction holds when the verdict is "
        "reproduced or same direction. Counts are over the regenerated corpora; the public split's verdict is "
        "beside them.",
        "",
    ]
    if claims_list:
        lines += ["Across corpora (claims_splits: the verdict on more than half of the corpora):", ""]
        lines += [f"- {c.verdict}: {c.claim} ({c.measured})" for c in claims_list]
    return lines


# --- figure ----------------------------------------------------------------------------

def episodes(run, seeds, headline, also=()) -> dict[str, pd.DataFrame]:
    """`across`, as a dict: `values` (Table II per corpus) and `verdicts` (every claim per corpus)."""
    values, verdicts = across(run, seeds, headline, also)
    return {"values": values, "verdicts": verdicts}


def tables(rows: dict, run) -> dict:
    """The spread of every number, the per-claim counts, Table II per corpus and every verdict, by stem
    (`TABLES`), and `k`, the run's pass^k (for the renderings; not a table)."""
    values, verdicts = rows["values"], rows["verdicts"]
    return {"splits": spread(values, verdicts), "splits_claims": claim_counts(verdicts), "splits_corpora": values,
            "splits_verdicts": verdicts, "k": run.k}


def figures(rows: dict, run, tables: dict) -> dict:
    """Per policy, the spread over the regenerated corpora (`figure`)."""
    return {"splits": figure(tables["splits"], tables["splits_corpora"], tables["k"])}


def claims_from_tables(folder="tables") -> list:
    """`claims` recomputed from the tables the notebook wrote under `folder` (what the claims report reads)."""
    return from_tables(folder, claims, ("splits_claims",))


TABLES = ("splits", "splits_claims", "splits_corpora", "splits_verdicts")
"""The tables this experiment writes, by stem."""
PUBLISH = {
    "splits": TableSpec("The headline's numbers across corpora",
                        markdown=lambda t: spread_markdown(t["splits"], t["k"]),
                        notes=lambda t, claims: notes(t["splits_corpora"], t["splits_claims"], t["splits"], claims)),
    "splits_claims": TableSpec("The headline's and the twins' claims across corpora",
                               markdown=lambda t: counts_markdown(t["splits_claims"]),
                               notes=lambda t, claims: notes(t["splits_corpora"], t["splits_claims"], t["splits"])),
    "splits_corpora": TableSpec("Table II on every corpus"),
    "splits_verdicts": TableSpec("The headline's and the twins' verdicts on every corpus",
                                 markdown=lambda t: verdicts_markdown(t["splits_verdicts"]),
                                 notes=lambda t, claims: ["R reproduced, S same direction, D differs, - not run; "
                                                          "columns: corpora by split number."]),
}
"""How each table is written (`publish_experiment`)."""
