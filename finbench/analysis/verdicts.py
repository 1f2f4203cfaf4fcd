"""The rules of a verdict: the paper's side of each claim is data, ours is computed, and a fixed test decides.

The paper's side of every claim (its quote, value, interval, kind, scope and the
test that decides it) is a row of `data/paper_claims.csv` (`paper_claims`); no
paper number is written in the package's code. An experiment computes only ours,
one `Measure` per claim it owns (`measures(tables)`), and `claims_of` applies each
row's test to its measure. Verdicts, in SPEC's words:

- ``reproduced``: the row's test holds (inside the paper's interval, within the
  stated tolerance, equal, on the stated side, or, for a qualitative claim, it holds);
- ``same direction``: it does not, but ours keeps the comparison the row states
  (`comparison`, on the side `favours`), by one rule (`direction`): against the other
  quantity the row names (`versus`: another policy's level, the other half, the other
  role), as measured here (the gate's paired loss still below optimistic's); else
  against the fixed value it names (`than`: 0 for "the interaction is negative");
  else against the paper's own value (a higher single-seed rate is a larger fall).
  For `excludes_zero`: the point estimate has the stated sign, its interval does not;
- ``differs``: neither;
- ``not run``: the measure could not be computed (e.g. no model transcripts).

Every numeric verdict carries a margin in the claim's own unit: how far inside
(positive) or outside (negative) its interval, tolerance or threshold ours lies.
Tolerances are stated per row from two rules (`TOLERANCE_RULES`), never chosen
to make a claim hold. Rows have a scope: ``paper`` (counted in the reproduction
rate), ``by construction`` (true by how the benchmark is built, whatever the
engine does) and ``beyond the paper``; the last two are listed apart.
"""
from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from finbench.analysis.tables import read_table
from finbench.errors import FinbenchError
from finbench.memo import memoised

VERDICTS = ("reproduced", "same direction", "differs", "not run")
SCOPES = ("paper", "by construction", "beyond the paper")
KINDS = ("level with interval", "level", "comparison", "ordering", "count", "qualitative")
TESTS = ("interval", "tolerance", "equal", "at_least", "at_most", "below", "above", "includes_zero", "excludes_zero",
         "holds")
"""What decides a claim, given ours (value, and for the zero tests its interval [lo, hi]) and the paper's row:
interval: paper_lo <= ours <= paper_hi; tolerance: |ours - paper| <= tol; equal: ours == paper;
at_least / at_most: ours >= / <= paper; below / above: ours < / > paper; includes_zero: lo <= 0 <= hi;
excludes_zero: the interval lies wholly on the side of zero that paper's sign names; holds: ours is True."""
PAPER_CLAIMS = Path(__file__).resolve().parents[2] / "data" / "paper_claims.csv"
TOLERANCE_RULES = {"%": "5 percentage points", "relative": "25% of the paper's value"}
"""The only tolerances a row may state (checked by the tests): see `RATE_TOL` and `DOLLAR_REL_TOL`."""

RATE_TOL = 5.0
"""Percentage points, for rates the paper gives without an interval: about the half-width of the paper's
own 95% interval for the gate's exact rate on this corpus."""

DOLLAR_REL_TOL = 0.25
"""Relative, for any other level the paper gives without an interval (dollars, firings per episode):
a quarter of the value, narrower than the paper's own interval for the gate's mean gap."""


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
    scope: str = "paper"
    margin: float = float("nan")
    unit: str = ""
    test: str = ""
    paper_section: str = ""


@dataclass(frozen=True)
class Measure:
    """Ours for one claim: `value` (a number; True/False for `holds`; None when not run), for the zero
    tests its interval `lo`..`hi`, `shown` (what was measured, in words and numbers; default the value),
    `source` (the table it comes from) and `versus` (the other side of the comparison its row names)."""

    value: float | bool | None
    lo: float | None = None
    hi: float | None = None
    shown: str = ""
    source: str = ""
    versus: float | None = None
    """The other side of the comparison the row names (its `versus`), measured here; None if it names none
    or it cannot be measured (a policy absent)."""


@dataclass(frozen=True)
class PaperClaim:
    """One row of `data/paper_claims.csv` (see the module docstring); `tol` is resolved to the claim's unit."""

    id: str
    section: str
    scope: str
    kind: str
    quote: str
    claim: str
    unit: str
    paper: float
    paper_lo: float
    paper_hi: float
    test: str
    tol: float
    favours: int
    comparison: str
    note: str
    versus: str = ""
    """The other side of `comparison` in words, when it is another quantity of ours (another policy's
    level, the other half, the other role): the direction is then ours against it (see `direction`)."""
    than: float = float("nan")
    """The fixed value `comparison` is drawn against when it is no other quantity (0 for "the interaction is
    negative", "duplication costs majority vote"); NaN: the paper's own value (see `direction`)."""

    @property
    def experiment(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split(".", 1)[1]


def _float(text: str) -> float:
    return float(text) if text.strip() else float("nan")


def _row(r: dict, where: str) -> PaperClaim:
    def need(ok: bool, what: str):
        if not ok:
            raise FinbenchError(f"{where}: claim {r.get('id')!r}: {what}")

    need(r["id"].count(".") == 1 and all(r["id"].split(".")), "id must be <experiment>.<name>")
    need(r["scope"] in SCOPES, f"scope must be one of {SCOPES}")
    need(r["kind"] in KINDS, f"kind must be one of {KINDS}")
    need(r["test"] in TESTS, f"test must be one of {TESTS}")
    need(r["favours"] in ("", "+", "-"), "favours must be empty, + or -")
    paper = _float(r["paper"])
    need(r["test"] == "holds" or not math.isnan(paper), "a numeric test needs the paper's value")
    lo, hi = _float(r["paper_lo"]), _float(r["paper_hi"])
    need(r["test"] != "interval" or (lo <= paper <= hi), "the interval test needs paper_lo <= paper <= paper_hi")
    tol = float("nan")
    if r["test"] == "tolerance":
        t = r["tol"].strip()
        rate, rel = f"{RATE_TOL:g}", f"{DOLLAR_REL_TOL:.0%}"
        need(t in (rate, rel), f"the tolerance must follow TOLERANCE_RULES ({rate} or {rel}), got {t!r}")
        need(t != rate or r["unit"] == "%", f"an absolute tolerance of {rate} is for % only")
        tol = DOLLAR_REL_TOL * abs(paper) if t == rel else RATE_TOL
    else:
        need(not r["tol"].strip(), "only the tolerance test takes tol")
    need(r["test"] != "excludes_zero" or paper in (-1.0, 1.0), "excludes_zero takes the side as paper: -1 or 1")
    versus = (r.get("versus") or "").strip()
    than = _float(r.get("than") or "")
    need(math.isnan(than) or (r["favours"] != "" and not versus),
         "than (the fixed value a comparison is drawn against) needs favours and no versus")
    if versus:
        need(r["favours"] != "", "a comparison against another quantity (versus) needs favours: the side that keeps it")
        need(r["test"] not in ("holds", "includes_zero", "excludes_zero") and r["kind"] in ("level", "level with interval"),
             "versus is for a level the paper sets beside another quantity (a numeric test of a level)")
    return PaperClaim(r["id"], r["section"], r["scope"], r["kind"], r["quote"], r["claim"], r["unit"], paper, lo, hi,
                      r["test"], tol, {"": 0, "+": 1, "-": -1}[r["favours"]], r["comparison"], r["note"], versus,
                      than)


@memoised("analysis.verdicts.paper_claims", keys="(path, the file's mtime and size)", bound=8)
def _load(path: str, stamp: tuple) -> tuple[PaperClaim, ...]:  # stamp: the file's (mtime, size), so an edit is read
    with open(path, newline="", encoding="utf-8") as f:
        rows = [_row(r, path) for r in csv.DictReader(f)]
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise FinbenchError(f"{path}: claim ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return tuple(rows)


def paper_claims(experiment: str | None = None, path: str | Path = PAPER_CLAIMS) -> list[PaperClaim]:
    """The rows of `data/paper_claims.csv` (of one experiment, in file order), checked.

    Raises:
        FinbenchError: a row with an unknown scope, kind or test, a missing value, a tolerance
            that does not follow `TOLERANCE_RULES`, or a repeated id (naming it).
    """
    st = Path(path).stat()
    rows = _load(str(path), (st.st_mtime_ns, st.st_size))
    return [r for r in rows if experiment is None or r.experiment == experiment]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if x == int(x) and abs(x) < 1e15 else f"{x:.4g}" if abs(x) < 1 else f"{x:.2f}"


def _test(pc: PaperClaim, m: Measure) -> tuple[bool, float, str]:
    """(inside, margin in the claim's unit, basis: the test as it came out) of `pc`'s test on ours."""
    inside, margin, holds, fails = _outcome(pc, m)
    return inside, margin, holds if inside else fails


def _outcome(pc: PaperClaim, m: Measure) -> tuple[bool, float, str, str]:
    t, p = pc.test, pc.paper
    if t == "holds":
        return bool(m.value), float("nan"), "holds", "does not hold"
    x = float(m.value)
    if t in ("includes_zero", "excludes_zero"):
        if m.lo is None or m.hi is None:
            raise FinbenchError(f"claim {pc.id}: the {t} test needs an interval of ours (Measure lo, hi)")
        lo, hi = float(m.lo), float(m.hi)
        if t == "includes_zero":
            margin = min(-lo, hi)
            return margin >= 0, margin, "its interval holds zero", "its interval excludes zero"
        side = "above" if p > 0 else "below"
        margin = lo if p > 0 else -hi
        return margin > 0, margin, f"its interval lies {side} zero", f"its interval does not lie {side} zero"
    if t == "interval":
        margin = min(x - pc.paper_lo, pc.paper_hi - x)
        iv = f"the paper's interval [{pc.paper_lo:g}, {pc.paper_hi:g}]"
        return margin >= 0, margin, f"inside {iv}", f"outside {iv}"
    if t == "tolerance":
        margin = pc.tol - abs(x - p)
        rule = f"{pc.tol:g} pp" if pc.unit == "%" and pc.tol == RATE_TOL else f"{DOLLAR_REL_TOL:.0%} ({pc.tol:.4g})"
        return margin >= 0, margin, f"within {rule} of {p:g}", f"not within {rule} of {p:g}"
    if t == "equal":
        return abs(x - p) < 1e-9, -abs(x - p), f"equal to {p:g}", f"not equal to {p:g}"
    if t == "at_least":
        return x >= p, x - p, f"at least {p:g}", f"below {p:g}"
    if t == "at_most":
        return x <= p, p - x, f"at most {p:g}", f"above {p:g}"
    if t == "below":
        return x < p, p - x, f"below {p:g}", f"not below {p:g}"
    return x > p, x - p, f"above {p:g}", f"not above {p:g}"  # above


def direction(pc: PaperClaim, m: Measure) -> tuple[bool, str]:
    """Whether ours keeps the comparison the row states (its `comparison`, on the side `favours`), and why in
    words ('' when the row states none): the one rule by which a claim outside its test is "same direction"
    rather than "differs". The comparison is drawn against the other quantity the row names (`versus`, as
    measured here), else the fixed value it names (`than`), else the paper's own value; for `excludes_zero`
    it is the point estimate's sign."""
    if pc.test == "excludes_zero":
        keeps = (float(m.value) > 0) == (pc.paper > 0) and float(m.value) != 0
        return keeps, f"direction (the point estimate's sign) {'holds' if keeps else 'does not hold'}"
    if not pc.favours or pc.test == "holds":
        return False, ""
    if pc.versus:
        other = None if m.versus is None else float(m.versus)
        if other is None or math.isnan(other):
            return False, f"direction ({pc.comparison}): {pc.versus} not measured"
        against, named = other, f"{pc.versus} ({_fmt(other)})"
    elif not math.isnan(pc.than):
        against, named = pc.than, _fmt(pc.than)
    else:
        against, named = pc.paper, "the paper's"
    diff = float(m.value) - against
    keeps = diff * pc.favours > 0
    side = "above" if diff > 0 else "below" if diff < 0 else "level with"
    ours = "ours" if against == pc.paper and not pc.versus and math.isnan(pc.than) else f"ours ({_fmt(float(m.value))})"
    return keeps, f"direction ({pc.comparison}): {ours} is {side} {named}, which {'keeps' if keeps else 'does not keep'} it"


def decide(pc: PaperClaim, m: Measure, source: str = "") -> Claim:
    """The record of one claim: `pc`'s test applied to ours (`m`); see the module docstring."""
    nan = float("nan")
    src = m.source or source
    if m.value is None or (isinstance(m.value, float) and math.isnan(m.value)):
        return Claim(pc.experiment, pc.name, pc.claim, pc.paper, pc.paper_lo, pc.paper_hi, nan, None, "not run",
                     "no regenerated value" + (f" ({pc.note})" if pc.note else ""), m.shown or "not run", src,
                     pc.scope, nan, pc.unit, pc.test, pc.section)
    if m.versus is not None and not pc.versus:
        raise FinbenchError(f"claim {pc.id}: the code measured the other side of a comparison (versus) that the "
                            f"data ({PAPER_CLAIMS.name}) does not name")
    inside, margin, basis = _test(pc, m)
    keeps, why = direction(pc, m)
    if not inside and why:
        basis += f"; {why}"
    verdict = "reproduced" if inside else "same direction" if keeps else "differs"
    holds = bool(m.value) if pc.test == "holds" else None
    ours = nan if pc.test == "holds" else float(m.value)
    shown = m.shown or (("holds" if m.value else "does not hold") if pc.test == "holds"
                        else _fmt(float(m.value)) + (pc.unit if pc.unit in ("%",) else ""))
    return Claim(pc.experiment, pc.name, pc.claim, pc.paper, pc.paper_lo, pc.paper_hi, ours, holds, verdict, basis,
                 shown, src, pc.scope, round(margin, 6) + 0.0 if not math.isnan(margin) else margin, pc.unit, pc.test,
                 pc.section)


def claims_of(experiment: str, measures: dict, source: str = "", path: str | Path = PAPER_CLAIMS) -> list[Claim]:
    """Every claim `data/paper_claims.csv` lists for `experiment`, in its order, decided on `measures`
    (name -> `Measure`; None for a claim whose table is absent: not run).

    Raises:
        FinbenchError: `measures` misses a claim the data lists, or holds one it does not (a claim
            can be neither dropped nor added in code).
    """
    rows = paper_claims(experiment, path)
    names = [r.name for r in rows]
    missing = [n for n in names if n not in measures]
    extra = [n for n in measures if n not in names]
    if missing or extra:
        raise FinbenchError(f"claims of {experiment}: the data ({Path(path).name}) and the code disagree: "
                            + "; ".join(p for p in (f"not measured: {', '.join(missing)}" if missing else "",
                                                    f"not in the data: {', '.join(extra)}" if extra else "") if p))
    return [decide(r, measures[r.name] if measures[r.name] is not None else Measure(None), source) for r in rows]


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


def paper_text(paper: float, lo: float, hi: float, test: str = "") -> str:
    """The paper's side as shown: its value with its interval, "qualitative", or for the zero tests
    the side it states ("below zero", "zero inside")."""
    if test == "excludes_zero":
        return "below zero" if paper < 0 else "above zero"
    if test == "includes_zero":
        return "zero inside"
    if math.isnan(paper):
        return "qualitative"
    text = f"{paper:g}"
    if not math.isnan(lo):
        text += f" [{lo:g}, {hi:g}]"
    return text


def _paper_text(c) -> str:
    return paper_text(c.paper, c.paper_lo, c.paper_hi, getattr(c, "test", ""))


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
        paper = "" if math.isnan(c.paper) and c.test != "holds" else f"paper {_paper_text(c)}; "
        paper = "" if paper == "paper qualitative; " else paper
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
