"""Does it reproduce? Every experiment's claims, recomputed from the tables under tables/, in one record
(notebook `99_claims`, SPEC §10 "claims").

Nothing here is typed in: each experiment's `claims_from_tables` reads the
tables its notebook wrote and applies the experiment's own `claims`, so a table
that changes changes its rows. The splits experiment's counts (on how many
regenerated corpora each claim holds, `tables/splits_claims.csv`) are folded in
as columns beside the claims they count; its own records are those counts'
majority verdicts, so they are not repeated as rows.

    rows = claims.collect("tables")          # one row per claim, in the paper's order
    claims.stale("tables")                   # experiments whose claims_<name>.csv no longer matches its tables
    fig = claims.figure(rows)                # verdicts per section

This module reads every experiment's tables, loading each module through the
package's `experiment(name)` (experiment modules never import each other).
"""
from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.analysis.verdicts import VERDICTS, claims_frame, paper_text
from finbench.analysis.tables import read_table
from finbench.experiments import NAMES, experiment

NAME = "claims"
EXPERIMENTS = ("headline", "twins", "model_arm", "ablation", "tuning", "cost_sweep", "plan_search", "probe_arms",
               "exploits")
"""The experiments whose claims are rows, in the paper's order (beyond-the-paper last)."""
ASIDE = ("model_arm", "tuning")
"""The experiments whose claims are not counted across regenerated corpora: the model arm needs an endpoint,
the tuning is already over its own splits."""
ACROSS = "splits"
"""The experiment that counts claims across regenerated corpora (folded in as columns)."""
COLORS = {"reproduced": "#1b9e77", "same direction": "#e6ab02", "differs": "#d95f02", "not run": "#999999"}
__all__ = ["ACROSS", "ASIDE", "EXPERIMENTS", "README_BEGIN", "README_END", "as_written", "collect", "counts",
           "differing", "figure", "markdown", "modules", "notes", "readme", "stale", "stamp", "summary",
           "update_readme"]


def modules() -> dict:
    """Every experiment module that can recompute its claims from tables, by name (for checks)."""
    out = {}
    for name in NAMES:
        mod = experiment(name)
        if hasattr(mod, "claims_from_tables"):
            out[mod.NAME] = mod
    return out


def _module(name: str):
    return experiment(name)


def _across(tables: Path) -> pd.DataFrame | None:
    path = tables / "splits_claims.csv"
    if not path.is_file():
        return None
    c = read_table(path)
    return c.set_index(["experiment", "id"])


def collect(tables="tables") -> pd.DataFrame:
    """One row per claim: its section, the claim records' columns (`ours` recomputed from the tables),
    and across the regenerated corpora `corpora_n`, `corpora_holds` (reproduced there),
    `corpora_direction` (reproduced or same direction), `corpora_verdict` (splits' majority rule) —
    `corpora_n` is 0 where the claim was measured on the public split only.

    Raises:
        FileNotFoundError: a table an experiment's claims need is missing (naming it).
    """
    tables = Path(tables)
    frames = []
    for name in EXPERIMENTS:
        mod = _module(name)
        f = claims_frame(mod.claims_from_tables(tables))
        f.insert(0, "section", mod.SECTION)
        frames.append(f)
    rows = pd.concat(frames, ignore_index=True)
    counts = _across(tables)
    majority = {} if counts is None else {c.id: c.verdict for c in _module(ACROSS).claims_from_tables(tables)}
    across = []
    for key in zip(rows["experiment"], rows["id"]):
        if counts is None or key not in counts.index:
            across.append((0, 0, 0, ""))
        else:
            c = counts.loc[key]
            across.append((int(c["n"]), int(c["holds"]), int(c["direction_holds"]), majority[".".join(key)]))
    cols = ["corpora_n", "corpora_holds", "corpora_direction", "corpora_verdict"]
    return pd.concat([rows, pd.DataFrame(across, columns=cols)], axis=1)


def as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as `read_table` gives it back after `write_table` (floats at `%.10g`): what to compare
    a table on disk with."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False, float_format="%.10g")))


def stale(tables="tables") -> list[str]:
    """The `claims_<experiment>.csv` files under `tables` that differ from their claims recomputed
    from the tables beside them (a table edited or regenerated without its claims), or are missing."""
    tables = Path(tables)
    out = []
    for name in (*EXPERIMENTS, ACROSS):
        path = tables / f"claims_{name}.csv"
        fresh = claims_frame(_module(name).claims_from_tables(tables))
        if not path.is_file():
            out.append(str(path))
            continue
        try:
            pd.testing.assert_frame_equal(read_table(path), as_written(fresh), check_dtype=False)
        except AssertionError:
            out.append(str(path))
    return out


def counts(rows: pd.DataFrame, scope: str = "paper") -> pd.DataFrame:
    """Verdicts per section of the claims of one scope (default the paper's own: the reproduction
    rate counts those only); rows in the paper's order, columns `VERDICTS`, then `total`."""
    rows = rows[rows["scope"] == scope]
    sections = list(dict.fromkeys(rows["section"]))
    c = pd.crosstab(rows["section"], rows["verdict"]).reindex(index=sections, columns=list(VERDICTS), fill_value=0)
    c["total"] = c.sum(axis=1)
    c.loc["all"] = c.sum()
    return c.reset_index().rename(columns={"index": "section"})


def differing(rows: pd.DataFrame, scope: str = "paper") -> pd.DataFrame:
    """The claims of `scope` whose verdict is "differs" (experiment, id, claim, paper, measured, basis, margin)."""
    sel = rows[(rows["verdict"] == "differs") & (rows["scope"] == scope)]
    return sel[["experiment", "id", "claim", "paper", "paper_lo", "paper_hi", "measured", "basis", "margin", "unit",
                "source"]]


def _paper(r) -> str:
    return paper_text(r.paper, r.paper_lo, r.paper_hi, getattr(r, "test", ""))


def _corpora(r) -> str:
    if not r.corpora_n:
        return "public split only"
    return f"holds on {r.corpora_holds} of {r.corpora_n} (direction {r.corpora_direction}); {r.corpora_verdict}"


def _margin(r) -> str:
    if math.isnan(r.margin):
        return ""
    unit = {"%": " pp", "$": " $"}.get(r.unit, f" {r.unit}" if r.unit else "")
    return f"{r.margin:+.4g}{unit}"


def markdown(rows: pd.DataFrame) -> pd.DataFrame:
    """The human rendering: scope, section, claim, paper, ours, verdict, margin, across corpora, source."""
    return pd.DataFrame({
        "scope": rows["scope"], "section": rows["section"], "id": rows["experiment"] + "." + rows["id"],
        "claim": rows["claim"], "paper": [_paper(r) for r in rows.itertuples()], "ours": rows["measured"],
        "verdict": rows["verdict"], "margin": [_margin(r) for r in rows.itertuples()],
        "test": rows["basis"], "across regenerated corpora": [_corpora(r) for r in rows.itertuples()],
        "source": rows["source"],
    })


def _differs_line(r) -> str:
    """One differing claim as a Markdown list item: its id, claim, the paper's value and ours, the test, the margin."""
    margin = f"; margin {_margin(r)}" if _margin(r) else ""
    return f"- `{r.experiment}.{r.id}`: {r.claim}; paper {_paper(r)}, ours {r.measured} ({r.basis}{margin})"


def summary(rows: pd.DataFrame) -> dict:
    """The report's counts: the paper's claims by verdict, the claims listed apart by scope, and how many
    of the paper's claims (the model arm's and the tuning's aside) were measured on regenerated corpora."""
    paper = rows[rows["scope"] == "paper"]
    pool = paper[~paper["experiment"].isin(ASIDE)]
    across = pool[pool["corpora_n"] > 0]
    return {
        "paper": len(paper), **{v: int((paper["verdict"] == v).sum()) for v in VERDICTS},
        "by construction": int((rows["scope"] == "by construction").sum()),
        "beyond the paper": int((rows["scope"] == "beyond the paper").sum()),
        "pool": len(pool), "across": len(across), "corpora": int(across["corpora_n"].min()) if len(across) else 0,
        "across_reproduced": int((across["corpora_verdict"] == "reproduced").sum()),
    }


def notes(rows: pd.DataFrame, stale_files: list[str] | None = None) -> list[str]:
    """Markdown notes: the counts per verdict, where the columns come from, the differing claims."""
    s = summary(rows)
    lines = [
        f"{s['paper']} claims of the paper: " + ", ".join(f"{v} {s[v]}" for v in VERDICTS) + ". Listed apart and "
        f"not counted: {s['by construction']} true by construction, {s['beyond the paper']} beyond the paper.",
        "",
        "The paper's side of every row (its quote, value, interval and the test that decides it) is "
        "`data/paper_claims.csv`; every 'ours' is recomputed here from the tables named in 'source' by the "
        "experiment's own `measures` (`claims_from_tables`), and the row's test decides (`finbench/analysis/verdicts.py`: "
        "reproduced: the test holds; same direction: it does not, but ours keeps the comparison the paper draws "
        "from its value: where the row names the other side (`versus`: another policy's level, the other half, "
        "the other role), ours against it as measured here, else the sign of ours minus the paper's; differs: "
        "neither; not run: no value). "
        "'margin': how far inside (+) or outside (-) the interval, tolerance or threshold ours lies, in the claim's unit.",
        "",
        f"Across regenerated corpora: {s['across']} of the paper's {s['pool']} claims (the model arm's and the "
        f"tuning's aside: they need an endpoint, or are over their own splits) were recomputed on at least "
        f"{s['corpora']} regenerated corpora (`tables/splits_claims.csv`); 'holds on k of n' counts the corpora "
        "where the claim is reproduced.",
    ]
    d = differing(rows)
    if len(d):
        lines += ["", "The paper's claims that differ (the why of each: docs/RESULTS.md, the experiment's section):", ""]
        lines += [_differs_line(r) for r in d.itertuples()]
    if stale_files:
        lines += ["", "Stale: these claims files no longer match their tables (rerun their notebooks): "
                  + ", ".join(stale_files)]
    return lines


README_BEGIN = "<!-- claims: generated by notebooks/99_claims.ipynb from tables/claims.csv (finbench.experiments.claims.readme); do not edit by hand -->"
README_END = "<!-- /claims -->"


def readme(rows: pd.DataFrame) -> str:
    """README's "Does it reproduce?" block: the counts, then every claim of the paper that differs or was
    not run, one line each with its test and margin (what `update_readme` writes between the markers)."""
    s = summary(rows)
    n = f"{s['paper']} claims of the paper"
    lines = [
        f"{n} ([`data/paper_claims.csv`](data/paper_claims.csv): each quoted, with the test that decides it), "
        f"each recomputed from the regenerated tables: **{s['reproduced']} reproduced, {s['same direction']} same "
        f"direction, {s['differs']} differ, {s['not run']} not run** ([`tables/claims.md`](tables/claims.md), one "
        "row per claim: the paper's value, ours, the verdict, its margin, the table it comes from). Listed apart "
        f"and not counted: {s['by construction']} claims true by construction and {s['beyond the paper']} beyond "
        "the paper (Table VIII, the exploit search, the tuning over many splits).",
        "",
        f"{s['across']} of the paper's {s['pool']} claims (all but the model arm's and the tuning's) were also "
        f"recomputed on at least {s['corpora']} regenerated corpora "
        f"([`tables/splits_claims.md`](tables/splits_claims.md)); {s['across_reproduced']} of them are reproduced "
        "on more than half of those corpora.",
        "",
        '<a href="figures/claims.png"><img src="figures/claims.png" width="560" alt="verdicts per section"></a>',
    ]
    d = differing(rows)
    if len(d):
        lines += ["", "The paper's claims that differ (why each does: [`docs/RESULTS.md`](docs/RESULTS.md)):", ""]
        lines += [_differs_line(r) for r in d.itertuples()]
    nr = rows[(rows["verdict"] == "not run") & (rows["scope"] == "paper")]
    if len(nr):
        lines += ["", "Not run (they need a model endpoint and its transcripts): "
                  + ", ".join(f"`{r.experiment}.{r.id}`" for r in nr.itertuples()) + "."]
    return "\n".join(lines) + "\n"


def update_readme(rows: pd.DataFrame, path="README.md") -> bool:
    """Rewrite the block between `README_BEGIN` and `README_END` in `path` with `readme(rows)`;
    True if it changed.

    Raises:
        ValueError: the file does not hold the two markers, in order.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    a, b = text.find(README_BEGIN), text.find(README_END)
    if a < 0 or b < a:
        raise ValueError(f"{path}: no '{README_BEGIN[:30]}...' and '{README_END}' markers, in order")
    new = text[:a + len(README_BEGIN)] + "\n" + readme(rows) + text[b:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def figure(rows: pd.DataFrame):
    """Verdicts per section of the paper: one stacked bar per section, counts written on the segments."""
    import matplotlib.pyplot as plt

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    c = counts(rows)  # the paper's own claims (the others are listed apart)
    c = c[c["section"] != "all"]
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * len(c) + 1.6), layout="constrained", dpi=PNG_DPI)
    y = np.arange(len(c))
    left = np.zeros(len(c))
    for v in VERDICTS:
        w = c[v].to_numpy(dtype=float)
        ax.barh(y, w, left=left, color=COLORS[v], label=v, height=0.62, edgecolor="white", linewidth=0.8)
        for yi, (l0, wi) in enumerate(zip(left, w)):
            if wi:
                ax.text(l0 + wi / 2, yi, f"{int(wi)}", ha="center", va="center", fontsize=8,
                        color="white" if v != "same direction" else "black")
        left += w
    ax.set_yticks(y, c["section"])
    ax.set_ylim(len(c) - 0.5, -0.5)
    ax.set_xlabel("claims")
    ax.grid(axis="y", visible=False)
    ax.tick_params(labelsize=8)
    fig.legend(loc="outside upper center", ncol=4, frameon=False, fontsize=8,
              title=f"Does it reproduce? The paper's {int(c['total'].sum())} claims by section and verdict",
              title_fontsize=10)
    return fig


def stamp(tables="tables") -> dict:
    """What the report stands on, read from the claims files' own stamps (never typed): the engine,
    and each corpus fingerprint with the experiments measured on it."""
    tables = Path(tables)
    corpora: dict[str, list[str]] = {}
    engines = set()
    for name in (*EXPERIMENTS, ACROSS):
        meta = {}
        for line in (tables / f"claims_{name}.csv").read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            key, _, value = line[1:].strip().partition(": ")
            meta[key] = value
        corpora.setdefault(meta.get("corpus", "?"), []).append(name)
        engines.add(meta.get("engine", "?"))
    return {"engine": ", ".join(sorted(engines)),
            **{f"corpus {fp}": ", ".join(names) for fp, names in corpora.items()},
            "claims": "recomputed from the tables by each experiment's claims_from_tables",
            "made_by": f"{__name__}.collect"}
