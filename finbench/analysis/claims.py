"""Claims as records: the paper's value, ours computed from a regenerated table, and a verdict.

Verdicts, in SPEC's words:

- ``reproduced``: ours is inside the paper's interval, or within the tolerance
  stated for the claim (for a qualitative claim: it holds);
- ``same direction``: outside that, but the direction the claim is about holds
  (the comparison, the sign, the ordering);
- ``differs``: neither;
- ``not run``: the table behind it was not produced (e.g. no model transcripts).

Tolerances, where the paper gives no interval, are stated per claim from the
constants below, each with its reason; a claim never gets a tolerance of its own
to make it hold.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from finbench.analysis.tables import read_table

VERDICTS = ("reproduced", "same direction", "differs", "not run")

RATE_TOL = 5.0
"""Percentage points: about the half-width of the paper's own 95% interval for an
exact rate on this corpus (85.4 [79.9, 90.2] is -5.5/+4.8)."""

DOLLAR_REL_TOL = 0.25
"""Relative, for dollar figures the paper gives without an interval: a quarter of
the value, narrower than the paper's interval for the gate's mean gap (about -48%/+54%)."""

REL_TOL = DOLLAR_REL_TOL
"""Relative, for any other level the paper gives without an interval (firings per
episode): the same quarter of the value, for the same reason."""


@dataclass(frozen=True)
class Claim:
    """One claim of the paper beside ours.

    Attributes:
        experiment: the experiment (and notebook) that checks it, e.g. "headline".
        id: a short stable identifier, unique within the experiment.
        claim: the claim in words.
        paper: the paper's value (NaN for a qualitative claim).
        paper_lo, paper_hi: the paper's interval, if it gives one (else NaN).
        ours: our value computed from the regenerated table (NaN if not run or qualitative).
        holds: for a qualitative claim, whether it holds here (None if numeric).
        verdict: one of `VERDICTS`.
        basis: how the verdict was decided (the interval, the tolerance, the direction).
        measured: what we measured, in words and numbers.
        source: the file under tables/ that "ours" comes from.
    """

    experiment: str
    id: str
    claim: str
    paper: float
    paper_lo: float
    paper_hi: float
    ours: float
    holds: bool | None
    verdict: str
    basis: str
    measured: str
    source: str


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def numeric(experiment: str, id: str, claim: str, paper: float, ours: float | None, *, source: str,
            ci: tuple[float, float] | None = None, tol: float | None = None, direction: bool | None = None,
            direction_text: str = "", unit: str = "") -> Claim:
    """A numeric claim: reproduced inside the paper's interval `ci` (or within `tol` of
    `paper`); else same direction if `direction` holds; else differs; not run if `ours` is None."""
    lo, hi = ci if ci is not None else (None, None)
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return Claim(experiment, id, claim, _num(paper), _num(lo), _num(hi), float("nan"), None, "not run",
                     "no regenerated value", "not run", source)
    ours = float(ours)
    if ci is not None:
        inside = lo <= ours <= hi
        basis = f"paper's interval [{lo:g}, {hi:g}]"
    else:
        t = 1e-9 if tol is None else tol
        inside = abs(ours - paper) <= t
        step = " pp" if unit == "%" else ""
        basis = f"within {t:g}{step} of {paper:g}" if tol else f"equal to {paper:g}"
    if inside:
        verdict = "reproduced"
    elif direction:
        verdict = "same direction"
    else:
        verdict = "differs"
    if direction is not None and direction_text:
        basis += f"; direction ({direction_text}) {'holds' if direction else 'does not hold'}"
    shown = f"{ours:.0f}" if ours == int(ours) and not unit else f"{ours:.2f}"
    return Claim(experiment, id, claim, float(paper), _num(lo), _num(hi), ours, None, verdict, basis,
                 f"{shown}{unit}", source)


def qualitative(experiment: str, id: str, claim: str, holds: bool | None, measured: str, *, source: str) -> Claim:
    """A claim that holds or not: reproduced if it holds, differs if not, not run if None."""
    nan = float("nan")
    if holds is None:
        return Claim(experiment, id, claim, nan, nan, nan, nan, None, "not run", "no regenerated value",
                     measured, source)
    return Claim(experiment, id, claim, nan, nan, nan, nan, bool(holds), "reproduced" if holds else "differs",
                 "qualitative", measured, source)


def claims_frame(claims: list[Claim]):
    """The records as a DataFrame (one row a claim), checking ids are unique."""
    import pandas as pd

    ids = [(c.experiment, c.id) for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids repeat: {sorted(i for i in ids if ids.count(i) > 1)[:3]}")
    for c in claims:
        if c.verdict not in VERDICTS:
            raise ValueError(f"claim {c.id}: verdict {c.verdict!r} is not one of {VERDICTS}")
    return pd.DataFrame([asdict(c) for c in claims], columns=list(Claim.__dataclass_fields__))


def _paper_text(c) -> str:
    if math.isnan(c.paper):
        return "qualitative"
    text = f"{c.paper:g}"
    if not math.isnan(c.paper_lo):
        text += f" [{c.paper_lo:g}, {c.paper_hi:g}]"
    return text


def claims_markdown(frame):
    """The human rendering: claim, paper, ours, verdict, basis."""
    import pandas as pd

    return pd.DataFrame({
        "claim": frame["claim"],
        "paper": [_paper_text(c) for c in frame.itertuples()],
        "ours": frame["measured"],
        "verdict": frame["verdict"],
        "basis": frame["basis"],
    })


def claims_notes(claims: list[Claim]) -> list[str]:
    """Markdown lines for a table's notes: each claim with its verdict."""
    lines = ["Claims of the paper checked against this table (all records: the claims_*.csv files):", ""]
    for c in claims:
        paper = "" if math.isnan(c.paper) else f"paper {c.paper:g}; "
        lines.append(f"- {c.verdict}: {c.claim} ({paper}ours {c.measured})")
    return lines


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    return {v: sum(c.verdict == v for c in claims) for v in VERDICTS}


def from_tables(tables, claims_fn, stems) -> list[Claim]:
    """`claims_fn` applied to the tables `<tables>/<stem>.csv` as written, as a dict stem -> table:
    how an experiment's claims are recomputed from the files under tables/ (what the claims
    report reads, never a typed value).

    Raises:
        FileNotFoundError: a table is missing, naming it.
    """
    folder = Path(tables)
    paths = {s: folder / f"{s}.csv" for s in stems}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"claims: no table {', '.join(missing)}; run its notebook first")
    return claims_fn({s: read_table(p) for s, p in paths.items()})
