"""One way to write results: tables (CSV + Markdown), figures (PNG + PDF), claims; all stamped by the run.

    publish(t2, "table2", run, to=tables_dir, title="Table II", markdown=..., notes=...)
    publish(fig, "figure1", run, to=figures_dir)
    publish(claims, "headline", run, to=tables_dir)      # -> tables/claims_headline.{csv,md}

An experiment module has one shape (`finbench.experiments`): `episodes(run)` ->
`tables(rows, run)` -> `claims(tables)` -> `figures(rows, run, tables)`, with
`TABLES` naming its tables and `PUBLISH` saying how each is written
(`TableSpec`); `publish_experiment` writes all of it.

No stamp is typed by hand: tables print `run.stamp()` (corpus fingerprint,
seeds, profile, costs, ...) and figures `run.caption()`; `publish_experiment` adds
`made_by`, the function that made each table or figure (`made_by`), so a reader goes
from `tables/table2.md` to `finbench.experiments.headline.table2` in one step.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from finbench.errors import FinbenchError, show
from finbench.analysis.verdicts import Claim, claims_frame, claims_markdown, verdict_counts
from finbench.analysis.tables import write_table
from finbench.running import stats


def publish(obj, stem: str, run, *, to: str | Path | None = None, title: str | None = None,
            notes: list[str] | None = None, markdown=None, floatfmt: str = ".2f", bootstrap: bool = True,
            meta: dict | None = None, caption_extra: str = "") -> list[Path]:
    """Write `obj` stamped by `run`; returns the paths written.

    Args:
        obj: a pandas DataFrame (a table), a matplotlib Figure, or a list of `Claim`s
            (written as `claims_<stem>`).
        stem: the file name without extension.
        run: the `Run` the result comes from.
        to: the folder (default "tables", or "figures" for a figure).
        title, notes, markdown, floatfmt: for tables, as `finbench.analysis.tables.write_table`.
        bootstrap: whether the stamp names the bootstrap (replicates, seed).
        meta: extra stamp entries after the run's own.
        caption_extra: a line added under a figure's caption.
    """
    import pandas as pd
    from matplotlib.figure import Figure

    if not hasattr(run, "stamp") or not hasattr(run, "caption"):
        raise FinbenchError(f"publish: run must be the Run the result comes from (it stamps the file), got {show(run)}")
    if meta is not None and not isinstance(meta, dict):
        raise FinbenchError(f"publish: meta must be a dict of stamp entries, got {show(meta)}")
    if not isinstance(stem, str) or not stem or stem != Path(stem).name or stem.startswith("."):
        # a stem is a file name: '../x' or '/abs' would write outside `to`
        raise FinbenchError(f"publish: stem must be a plain file name, got {show(stem)}")
    extra = dict(meta or {})
    if isinstance(obj, Figure):
        from finbench.analysis.plotting import caption, save  # lazy: matplotlib loads only to draw

        text = run.caption() + (f"\n{caption_extra}" if caption_extra else "")
        return save(caption(obj, text), stem, to or "figures")
    if isinstance(obj, list) and all(isinstance(c, Claim) for c in obj):
        frame = claims_frame(obj)
        counts = verdict_counts(obj)
        lines = ["Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()), "",
                 "Reproduced: inside the paper's interval or within the stated tolerance (qualitative: holds); "
                 "same direction: outside that, but the direction it is about holds; differs: neither; "
                 "not run: the table behind it was not produced."]
        return write_table(frame, f"claims_{stem}", run.stamp(bootstrap, **extra), to or "tables",
                           title=title or f"Claims checked by {stem}", markdown=claims_markdown(frame),
                           notes=lines + list(notes or []))
    if isinstance(obj, pd.DataFrame):
        return write_table(obj, stem, run.stamp(bootstrap, **extra), to or "tables", title=title,
                           floatfmt=floatfmt, notes=notes, markdown=markdown)
    raise TypeError(f"publish: cannot write a {type(obj).__name__}; give a DataFrame, a Figure or a list of Claims")


def made_by(experiment, stem: str, fallback: str) -> str:
    """The dotted name of the function that made `stem`: the experiment's function of that name,
    else its `fallback` (`tables`, `claims`, `figures`), which made it among others."""
    name = stem if callable(getattr(experiment, stem, None)) else fallback
    return f"{experiment.__name__}.{name}"


@dataclass(frozen=True)
class TableSpec:
    """How an experiment writes one of its tables (see `publish`).

    Attributes:
        title: the Markdown title.
        markdown: the human rendering, from the experiment's tables (None: the table itself).
        notes: Markdown lines under the table, from the experiment's tables and claims.
        floatfmt: number format of the Markdown rendering.
        bootstrap: whether the stamp names the bootstrap.
        meta: extra stamp entries, from the run.
    """

    title: str | None = None
    markdown: Callable | None = None
    notes: Callable | None = None
    floatfmt: str = ".2f"
    bootstrap: bool = True
    meta: Callable | None = None


def publish_experiment(experiment, run, tables: dict, claims: list, figures: dict | None = None, *,
                       tables_dir: str | Path = "tables", figures_dir: str | Path = "figures",
                       caption_extra: dict | None = None, meta: dict | None = None) -> list[Path]:
    """Write an experiment's tables (as its `PUBLISH` says), its claims and its figures, stamped by `run`.

    Args:
        experiment: the experiment module (its `NAME`, `TABLES`, `PUBLISH`, and `CLAIMS`, a
            `TableSpec` for its claims file, if it is stamped otherwise than by default).
        tables: `experiment.tables(...)`; claims: `experiment.claims(tables)` (none: no claims file);
        figures: `experiment.figures(...)`, stem -> figure.
        caption_extra: a line under a figure's caption, by stem.
        meta: stamp entries of every table and the claims beyond the run's own, before each spec's:
            what decides the result that the `Run` does not hold (a sample's seed, the regenerated
            splits, the tuned configuration).

    Returns:
        Every path written.
    """
    def stamp(spec: TableSpec, maker: str) -> dict:
        return {**(meta or {}), **(spec.meta(run) if spec.meta else {}), "made_by": maker}

    paths: list[Path] = []
    for stem in experiment.TABLES:
        spec = experiment.PUBLISH.get(stem, TableSpec())
        paths += publish(tables[stem], stem, run, to=tables_dir, title=spec.title,
                         markdown=spec.markdown(tables) if spec.markdown else None,
                         notes=spec.notes(tables, claims) if spec.notes else None, floatfmt=spec.floatfmt,
                         bootstrap=spec.bootstrap, meta=stamp(spec, made_by(experiment, stem, "tables")))
    if claims:
        spec = getattr(experiment, "CLAIMS", TableSpec())
        paths += publish(claims, experiment.NAME, run, to=tables_dir, bootstrap=spec.bootstrap,
                         meta=stamp(spec, made_by(experiment, "claims", "claims")))
    for stem, fig in (figures or {}).items():
        extra = "\n".join(filter(None, [(caption_extra or {}).get(stem, ""),
                                         f"made by {made_by(experiment, stem, 'figures')}"]))
        paths += publish(fig, stem, run, to=figures_dir, caption_extra=extra)
    print(stats.summary())  # `make reproduce` reads this line from the executed notebook
    return paths
