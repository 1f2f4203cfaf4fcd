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

This module reads every experiment's tables; it is the one place that imports
the experiment modules (they never import each other).
"""
from __future__ import annotations

import importlib
import io
import math
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.analysis.claims import VERDICTS, claims_frame
from finbench.analysis.tables import read_table

NAME = "claims"
EXPERIMENTS = ("headline", "twins", "model_arm", "ablation", "tuning", "cost_sweep", "plan_search", "probe_arms",
               "exploits")
"""The experiments whose claims are rows, in the paper's order (beyond-the-paper last)."""
ACROSS = "splits"
"""The experiment that counts claims across regenerated corpora (folded in as columns)."""
COLORS = {"reproduced": "#1b9e77", "same direction": "#e6ab02", "differs": "#d95f02", "not run": "#999999"}
__all__ = ["ACROSS", "EXPERIMENTS", "as_written", "collect", "counts", "differing", "figure", "markdown", "modules",
           "notes", "stale", "stamp"]


def modules() -> dict:
    """Every experiment module that can recompute its claims from tables, by name (for checks)."""
    out = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        mod = importlib.import_module(f"finbench.experiments.{info.name}")
        if hasattr(mod, "claims_from_tables"):
            out[mod.NAME] = mod
    return out


def _module(name: str):
    return importlib.import_module(f"finbench.experiments.{name}")


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


def counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Verdicts per section (rows in the paper's order, columns `VERDICTS`, then `total`)."""
    sections = list(dict.fromkeys(rows["section"]))
    c = pd.crosstab(rows["section"], rows["verdict"]).reindex(index=sections, columns=list(VERDICTS), fill_value=0)
    c["total"] = c.sum(axis=1)
    c.loc["all"] = c.sum()
    return c.reset_index().rename(columns={"index": "section"})


def differing(rows: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict is "differs" (experiment, id, claim, paper, measured)."""
    return rows.loc[rows["verdict"] == "differs", ["experiment", "id", "claim", "paper", "measured", "source"]]


def _paper(r) -> str:
    if math.isnan(r.paper):
        return "qualitative"
    text = f"{r.paper:g}"
    return text if math.isnan(r.paper_lo) else f"{text} [{r.paper_lo:g}, {r.paper_hi:g}]"


def _corpora(r) -> str:
    if not r.corpora_n:
        return "public split only"
    return f"holds on {r.corpora_holds} of {r.corpora_n} (direction {r.corpora_direction}); {r.corpora_verdict}"


def markdown(rows: pd.DataFrame) -> pd.DataFrame:
    """The human rendering: section, claim, paper, ours, verdict, across corpora, source."""
    return pd.DataFrame({
        "section": rows["section"], "id": rows["experiment"] + "." + rows["id"], "claim": rows["claim"],
        "paper": [_paper(r) for r in rows.itertuples()], "ours": rows["measured"], "verdict": rows["verdict"],
        "across regenerated corpora": [_corpora(r) for r in rows.itertuples()],
        "source": rows["source"],
    })


def notes(rows: pd.DataFrame, stale_files: list[str] | None = None) -> list[str]:
    """Markdown notes: the counts per verdict, where the columns come from, the differing claims."""
    total = {v: int((rows["verdict"] == v).sum()) for v in VERDICTS}
    across = rows[rows["corpora_n"] > 0]
    n = int(across["corpora_n"].max()) if len(across) else 0
    lines = [
        f"{len(rows)} claims: " + ", ".join(f"{k} {v}" for v, k in total.items()) + ".",
        "",
        "Every 'ours' is recomputed here from the tables named in 'source' by the experiment's own `claims` "
        "(`claims_from_tables`); the verdict rules are in `finbench/analysis/claims.py` (reproduced: inside the paper's "
        "interval or the claim's stated tolerance; same direction: outside it, but the comparison or sign the "
        "claim is about holds; differs: neither; not run: the table behind it has no such row).",
        "",
        f"Across regenerated corpora: {len(across)} claims (the headline's and the twins', which come from the "
        f"same episodes) were recomputed on {n} regenerated corpora (`tables/splits_claims.csv`); 'holds on k of "
        f"n' counts the corpora where the claim is reproduced. The other claims were measured on the public "
        "split only: re-running the ablation's fourteen arms, the plan search or the probe arms on every corpus "
        "would multiply the whole reproduction's time; the tuning claims are already over their own splits.",
    ]
    d = differing(rows)
    if len(d):
        lines += ["", "Claims that differ (why each does: docs/RESULTS.md, the experiment's section):", ""]
        lines += [f"- `{r.experiment}.{r.id}`: {r.claim} (paper {_paper_short(r.paper)}; ours {r.measured})"
                  for r in d.itertuples()]
    if stale_files:
        lines += ["", "Stale: these claims files no longer match their tables (rerun their notebooks): "
                  + ", ".join(stale_files)]
    return lines


def _paper_short(x: float) -> str:
    return "qualitative" if math.isnan(x) else f"{x:g}"


def figure(rows: pd.DataFrame):
    """Verdicts per section of the paper: one stacked bar per section, counts written on the segments."""
    import matplotlib.pyplot as plt

    from finbench.analysis.plotting import PNG_DPI  # lazy: matplotlib loads only to draw

    c = counts(rows)
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
              title=f"Does it reproduce? {len(rows)} claims by section and verdict", title_fontsize=10)
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
            "claims": "recomputed from the tables by each experiment's claims_from_tables"}
