"""The verdict rules one by one, on hand-made rows of a small claims file and hand-made measures:
what the loader refuses (with its whole message), each test's boundary, margin and basis as written,
the direction rules, the not-run record, and the renderings (notes, markdown, the paper's side).

Every expected value is written out by hand from the rule in `finbench.analysis.verdicts`'s docstrings
(test_verdicts.py holds the checks on the real data and the broad cases)."""
import csv
import math

import pandas as pd
import pytest

from finbench.analysis.verdicts import (PAPER_CLAIMS, VERDICTS, Claim, Measure, claims_frame, claims_markdown,
                                        claims_notes, claims_of, decide, from_tables, paper_claims, paper_text,
                                        verdict_counts)
from finbench.errors import FinbenchError

NAN = float("nan")
FIELDS = ["id", "section", "scope", "kind", "quote", "claim", "unit", "paper", "paper_lo", "paper_hi", "test", "tol",
          "favours", "comparison", "versus", "note"]


def row(**kw) -> dict:
    """A valid row: a $ level of 10 with the relative tolerance (2.5 either side)."""
    r = dict(id="x.y", section="§1", scope="paper", kind="level", quote="q", claim="c", unit="$", paper="10",
             paper_lo="", paper_hi="", test="tolerance", tol="25%", favours="", comparison="", versus="", note="")
    r.update(kw)
    return r


def write(tmp_path, *rows, name="claims.csv"):
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return path


def load(tmp_path, **kw):
    return paper_claims(path=write(tmp_path, row(**kw)))[0]


def refused(tmp_path, what, **kw):
    """The row is refused with exactly `<file>: claim <id>: <what>` (the whole message, so a changed
    word or a lost id is seen)."""
    path = write(tmp_path, row(**kw))
    cid = kw.get("id", "x.y")
    with pytest.raises(FinbenchError) as e:
        paper_claims(path=path)
    assert str(e.value) == f"{path}: claim {cid!r}: {what}"


def same(c: Claim, **want):
    """Every field of the record equals `want` (NaN equal to NaN)."""
    for k, v in want.items():
        got = getattr(c, k)
        if isinstance(v, float) and math.isnan(v):
            assert isinstance(got, float) and math.isnan(got), (k, got)
        else:
            assert got == v, (k, got, v)


# --------------------------------------------------------------------------- the loader


@pytest.mark.parametrize("kw, what", [
    (dict(scope="mine"), "scope must be one of ('paper', 'by construction', 'beyond the paper')"),
    (dict(kind="vibe"), "kind must be one of ('level with interval', 'level', 'comparison', 'ordering', 'count', "
                        "'qualitative')"),
    (dict(test="close"), "test must be one of ('interval', 'tolerance', 'equal', 'at_least', 'at_most', 'below', "
                         "'above', 'includes_zero', 'excludes_zero', 'holds')"),
    (dict(favours="up"), "favours must be empty, + or -"),
    (dict(paper=" "), "a numeric test needs the paper's value"),
    (dict(test="interval", tol="", paper_lo="11", paper_hi="12"),
     "the interval test needs paper_lo <= paper <= paper_hi"),
    (dict(tol="30%"), "the tolerance must follow TOLERANCE_RULES (5 or 25%), got '30%'"),
    (dict(tol="5"), "an absolute tolerance of 5 is for % only"),
    (dict(test="equal"), "only the tolerance test takes tol"),
    (dict(test="excludes_zero", tol="", paper="0.5"), "excludes_zero takes the side as paper: -1 or 1"),
    (dict(favours="", versus="the other"),
     "a comparison against another quantity (versus) needs favours: the side that keeps it"),
])
def test_a_bad_row_is_refused_with_its_whole_message(tmp_path, kw, what):
    refused(tmp_path, what, **kw)


@pytest.mark.parametrize("cid", ["nodot", ".y", "x.", "a.b.c", "."])
def test_an_id_is_exactly_experiment_dot_name_both_non_empty(tmp_path, cid):
    refused(tmp_path, "id must be <experiment>.<name>", id=cid)


def test_the_interval_test_accepts_the_paper_s_value_on_either_end(tmp_path):
    # paper_lo <= paper <= paper_hi: both ends are inside
    assert load(tmp_path, test="interval", tol="", paper="8", paper_lo="8", paper_hi="11").paper_lo == 8.0
    assert load(tmp_path, test="interval", tol="", paper="11", paper_lo="8", paper_hi="11").paper_hi == 11.0
    refused(tmp_path, "the interval test needs paper_lo <= paper <= paper_hi", test="interval", tol="", paper="12",
            paper_lo="8", paper_hi="11")


@pytest.mark.parametrize("side", ["1", "-1"])
def test_excludes_zero_takes_either_side_and_nothing_else(tmp_path, side):
    assert load(tmp_path, test="excludes_zero", tol="", paper=side).paper == float(side)


@pytest.mark.parametrize("side", ["2", "0", "-2"])
def test_excludes_zero_refuses_a_value_that_is_not_a_side(tmp_path, side):
    refused(tmp_path, "excludes_zero takes the side as paper: -1 or 1", test="excludes_zero", tol="", paper=side)


@pytest.mark.parametrize("kw", [
    dict(kind="comparison"),  # a numeric test, but not of a level
    dict(kind="level", test="holds", paper="", tol=""),  # a level, but no numeric test
    dict(kind="level", test="includes_zero", paper="0", tol=""),
    dict(kind="level", test="excludes_zero", paper="1", tol=""),
])
def test_versus_is_only_for_a_numeric_test_of_a_level(tmp_path, kw):
    refused(tmp_path, "versus is for a level the paper sets beside another quantity (a numeric test of a level)",
            favours="+", versus="the other", **kw)


def test_a_row_is_read_field_by_field(tmp_path):
    pc = load(tmp_path, id="exp.name", paper="-8", favours="-", comparison="less", versus="  the other  ",
              note="n", kind="level with interval")
    assert (pc.experiment, pc.name, pc.section, pc.scope, pc.kind, pc.quote, pc.claim, pc.unit) == (
        "exp", "name", "§1", "paper", "level with interval", "q", "c", "$")
    # the relative tolerance is a quarter of the paper's value's size, in the claim's unit
    assert (pc.paper, pc.tol, pc.favours, pc.comparison, pc.note, pc.versus) == (-8.0, 2.0, -1, "less", "n",
                                                                                   "the other")
    assert math.isnan(pc.paper_lo) and math.isnan(pc.paper_hi)
    assert load(tmp_path, favours="+").favours == 1 and load(tmp_path).favours == 0
    assert load(tmp_path, unit="%", tol="5").tol == 5.0


@pytest.mark.parametrize("test", ["equal", "interval", "at_least", "holds"])
def test_only_the_tolerance_test_carries_a_tolerance(tmp_path, test):
    kw = dict(test=test, tol="", paper_lo="8", paper_hi="11")
    if test == "holds":
        kw.update(paper="", kind="qualitative")
    pc = load(tmp_path, **kw)
    assert isinstance(pc.tol, float) and math.isnan(pc.tol)


def test_a_holds_row_needs_no_paper_value(tmp_path):
    pc = load(tmp_path, test="holds", paper="", tol="", kind="qualitative")
    assert isinstance(pc.paper, float) and math.isnan(pc.paper)


def test_repeated_ids_are_named(tmp_path):
    path = write(tmp_path, row(id="a.b"), row(id="x.y"), row(id="a.b"))
    with pytest.raises(FinbenchError) as e:
        paper_claims(path=path)
    assert str(e.value) == f"{path}: claim ids repeat: ['a.b']"


def test_paper_claims_keeps_file_order_and_filters_by_experiment(tmp_path):
    path = write(tmp_path, row(id="b.one"), row(id="a.two"), row(id="b.three"))
    assert [r.id for r in paper_claims(path=path)] == ["b.one", "a.two", "b.three"]
    assert [r.id for r in paper_claims("b", path=str(path))] == ["b.one", "b.three"]
    assert paper_claims("c", path=path) == []


def test_an_edited_claims_file_is_read_again(tmp_path):
    path = write(tmp_path, row(id="a.one"))
    assert [r.id for r in paper_claims(path=path)] == ["a.one"]
    write(tmp_path, row(id="a.one"), row(id="a.two"))  # a different size: a different stamp
    assert [r.id for r in paper_claims(path=path)] == ["a.one", "a.two"]


def test_the_default_file_is_the_package_s_data():
    assert PAPER_CLAIMS.name == "paper_claims.csv" and PAPER_CLAIMS.parent.name == "data"
    assert paper_claims() == paper_claims(path=PAPER_CLAIMS)


# --------------------------------------------------------------------------- each test: boundary, margin, basis


@pytest.mark.parametrize("kw, value, verdict, margin, basis", [
    # tolerance, relative: 25% of 10 = 2.5; the boundary is inside
    (dict(), 12.5, "reproduced", 0.0, "within 25% (2.5) of 10"),
    (dict(), 7.0, "differs", -0.5, "not within 25% (2.5) of 10"),
    # tolerance, absolute: 5 percentage points
    (dict(unit="%", tol="5", paper="40"), 35.0, "reproduced", 0.0, "within 5 pp of 40"),
    (dict(unit="%", tol="5", paper="40"), 46.0, "differs", -1.0, "not within 5 pp of 40"),
    # interval [8, 11]: both ends inside
    (dict(test="interval", tol="", paper_lo="8", paper_hi="11"), 8.0, "reproduced", 0.0,
     "inside the paper's interval [8, 11]"),
    (dict(test="interval", tol="", paper_lo="8", paper_hi="11"), 11.0, "reproduced", 0.0,
     "inside the paper's interval [8, 11]"),
    (dict(test="interval", tol="", paper_lo="8", paper_hi="11"), 7.5, "differs", -0.5,
     "outside the paper's interval [8, 11]"),
    # equal: to 1e-9
    (dict(test="equal", tol=""), 10.0 + 1e-10, "reproduced", 0.0, "equal to 10"),
    (dict(test="equal", tol=""), 10.5, "differs", -0.5, "not equal to 10"),
    # |ours - paper| must be strictly below 1e-9 (1e-9 - 0 is exactly 1e-9 in floating point)
    (dict(test="equal", tol="", paper="0"), 1e-9, "differs", 0.0, "not equal to 0"),
    (dict(test="at_least", tol=""), 10.0, "reproduced", 0.0, "at least 10"),
    (dict(test="at_least", tol=""), 9.5, "differs", -0.5, "below 10"),
    (dict(test="at_most", tol=""), 10.0, "reproduced", 0.0, "at most 10"),
    (dict(test="at_most", tol=""), 10.5, "differs", -0.5, "above 10"),
    (dict(test="below", tol=""), 9.5, "reproduced", 0.5, "below 10"),
    (dict(test="below", tol=""), 10.0, "differs", 0.0, "not below 10"),
    (dict(test="above", tol=""), 10.5, "reproduced", 0.5, "above 10"),
    (dict(test="above", tol=""), 10.0, "differs", 0.0, "not above 10"),
])
def test_each_test_s_boundary_margin_and_basis(tmp_path, kw, value, verdict, margin, basis):
    c = decide(load(tmp_path, **kw), Measure(value))
    assert (c.verdict, c.basis) == (verdict, basis)
    assert c.margin == pytest.approx(margin, abs=1e-12)


def test_a_zero_margin_is_plus_zero_and_margins_are_rounded_to_six_places(tmp_path):
    # equal: margin -|ours - paper| = -0.0 at equality; the record shows +0.0
    c = decide(load(tmp_path, test="equal", tol=""), Measure(10.0))
    assert c.margin == 0.0 and math.copysign(1.0, c.margin) == 1.0
    c = decide(load(tmp_path, test="at_least", tol=""), Measure(10.123456789))
    assert c.margin == 0.123457


def test_the_relative_tolerance_is_shown_with_its_value(tmp_path):
    # a % row with the relative rule: 25% of 12 = 3, not the 5 pp rule
    c = decide(load(tmp_path, unit="%", paper="12"), Measure(20.0))
    assert c.basis == "not within 25% (3) of 12" and c.margin == pytest.approx(-5.0)


@pytest.mark.parametrize("lo, hi, verdict, margin, basis", [
    (-1.0, 5.0, "reproduced", 1.0, "its interval holds zero"),
    (0.0, 5.0, "reproduced", 0.0, "its interval holds zero"),  # zero on the edge is inside
    (-4.0, 0.0, "reproduced", 0.0, "its interval holds zero"),
    (1.5, 5.0, "differs", -1.5, "its interval excludes zero"),
    (-5.0, -2.0, "differs", -2.0, "its interval excludes zero"),
])
def test_includes_zero_margin_is_the_nearer_end_s_distance_past_zero(tmp_path, lo, hi, verdict, margin, basis):
    c = decide(load(tmp_path, test="includes_zero", tol="", paper="0"), Measure(1.0, lo, hi))
    assert (c.verdict, c.margin, c.basis) == (verdict, pytest.approx(margin), basis)


@pytest.mark.parametrize("side, value, lo, hi, verdict, margin, basis", [
    ("1", 3.0, 1.0, 5.0, "reproduced", 1.0, "its interval lies above zero"),
    # touching zero is not excluding it; the point estimate still on the stated side
    ("1", 3.0, 0.0, 5.0, "same direction", 0.0,
     "its interval does not lie above zero; direction (the point estimate's sign) holds"),
    ("1", -3.0, -5.0, 1.0, "differs", -5.0,
     "its interval does not lie above zero; direction (the point estimate's sign) does not hold"),
    ("-1", -3.0, -5.0, -1.0, "reproduced", 1.0, "its interval lies below zero"),
    ("-1", -3.0, -5.0, 0.0, "same direction", 0.0,
     "its interval does not lie below zero; direction (the point estimate's sign) holds"),
    ("-1", 2.0, -1.0, 4.0, "differs", -4.0,
     "its interval does not lie below zero; direction (the point estimate's sign) does not hold"),
    # any positive point estimate is on the positive side, however small
    ("1", 0.5, -1.0, 2.0, "same direction", -1.0,
     "its interval does not lie above zero; direction (the point estimate's sign) holds"),
    # a point estimate of exactly zero is on neither side
    ("-1", 0.0, -1.0, 1.0, "differs", -1.0,
     "its interval does not lie below zero; direction (the point estimate's sign) does not hold"),
    ("1", 0.0, -1.0, 1.0, "differs", -1.0,
     "its interval does not lie above zero; direction (the point estimate's sign) does not hold"),
])
def test_excludes_zero_reads_the_side_from_the_paper_s_sign(tmp_path, side, value, lo, hi, verdict, margin, basis):
    c = decide(load(tmp_path, test="excludes_zero", tol="", paper=side, favours="+"), Measure(value, lo, hi))
    assert (c.verdict, c.margin, c.basis) == (verdict, pytest.approx(margin), basis)


@pytest.mark.parametrize("test", ["includes_zero", "excludes_zero"])
@pytest.mark.parametrize("lo, hi", [(None, 1.0), (-1.0, None)])
def test_the_zero_tests_need_both_ends_of_ours(tmp_path, test, lo, hi):
    pc = load(tmp_path, test=test, tol="", paper="1")
    with pytest.raises(FinbenchError) as e:
        decide(pc, Measure(0.5, lo, hi))
    assert str(e.value) == f"claim x.y: the {test} test needs an interval of ours (Measure lo, hi)"


# --------------------------------------------------------------------------- direction


@pytest.mark.parametrize("favours, value, verdict, basis", [
    ("+", 13.0, "same direction", "not within 25% (2.5) of 10; direction (more): ours is above the paper's, which "
                                  "keeps it"),
    ("+", 7.0, "differs", "not within 25% (2.5) of 10; direction (more): ours is below the paper's, which does not "
                          "keep it"),
    ("-", 7.0, "same direction", "not within 25% (2.5) of 10; direction (more): ours is below the paper's, which "
                                 "keeps it"),
    ("-", 13.0, "differs", "not within 25% (2.5) of 10; direction (more): ours is above the paper's, which does not "
                           "keep it"),
    # no favoured side: no direction to keep, the basis is the test alone
    ("", 13.0, "differs", "not within 25% (2.5) of 10"),
])
def test_without_versus_the_direction_is_the_sign_of_ours_minus_the_paper_s(tmp_path, favours, value, verdict, basis):
    c = decide(load(tmp_path, favours=favours, comparison="more"), Measure(value))
    assert (c.verdict, c.basis) == (verdict, basis)


def test_ours_equal_to_the_paper_s_value_is_level_with_it_not_below(tmp_path):
    # a strict test (above) that ours misses by being exactly the paper's value: neither side of it
    c = decide(load(tmp_path, test="above", tol="", favours="+", comparison="more"), Measure(10.0))
    assert (c.verdict, c.basis) == ("differs", "not above 10; direction (more): ours is level with the paper's, "
                                               "which does not keep it")


def test_the_sign_rule_reads_any_difference_however_small(tmp_path):
    # not above 10 by half a point: below the paper's, which "-" keeps
    c = decide(load(tmp_path, test="above", tol="", favours="-", comparison="less"), Measure(9.5))
    assert (c.verdict, c.basis) == ("same direction", "not above 10; direction (less): ours is below the paper's, "
                                                      "which keeps it")
    c = decide(load(tmp_path, test="below", tol="", favours="+", comparison="more"), Measure(10.5))
    assert (c.verdict, c.basis) == ("same direction", "not below 10; direction (more): ours is above the paper's, "
                                                      "which keeps it")


def test_the_sign_rule_keeps_nothing_at_a_tie(tmp_path):
    # ours equal to the paper's but the test is strict: no side of the paper's, so no direction kept
    for favours in ("+", "-"):
        c = decide(load(tmp_path, test="above", tol="", favours=favours, comparison="more"), Measure(10.0))
        assert c.verdict == "differs" and c.basis.endswith("which does not keep it")


def test_a_reproduced_claim_s_basis_names_no_direction(tmp_path):
    assert decide(load(tmp_path, favours="+", comparison="more"), Measure(11.0)).basis == "within 25% (2.5) of 10"
    c = decide(load(tmp_path, favours="+", comparison="more", versus="theirs"), Measure(11.0, versus=30.0))
    assert (c.verdict, c.basis) == ("reproduced", "within 25% (2.5) of 10")
    assert decide(load(tmp_path, favours="+", comparison="more", versus="theirs"), Measure(11.0)).basis == (
        "within 25% (2.5) of 10")


@pytest.mark.parametrize("favours, value, other, verdict, side, keeps", [
    ("+", 7.4, 5.0, "same direction", "above", "keeps"),
    ("+", 13.0, 14.0, "differs", "below", "does not keep"),
    ("+", 13.0, 13.0, "differs", "level with", "does not keep"),
    ("-", 13.0, 14.0, "same direction", "below", "keeps"),
    ("-", 0.25, 0.125, "differs", "above", "does not keep"),
])
def test_with_versus_the_direction_is_ours_against_the_other_as_measured(tmp_path, favours, value, other, verdict,
                                                                         side, keeps):
    c = decide(load(tmp_path, favours=favours, comparison="ahead", versus="theirs"), Measure(value, versus=other))
    # the numbers as _fmt shows them: whole numbers bare, below 1 to 4 significant figures, else 2 decimals
    shown = {7.4: "7.40", 5.0: "5", 13.0: "13", 14.0: "14", 0.25: "0.25", 0.125: "0.125"}
    assert c.verdict == verdict
    assert c.basis == (f"not within 25% (2.5) of 10; direction (ahead): ours ({shown[value]}) is {side} theirs "
                       f"({shown[other]}), which {keeps} it")


@pytest.mark.parametrize("other", [None, NAN])
def test_with_versus_unmeasured_there_is_no_direction(tmp_path, other):
    c = decide(load(tmp_path, favours="+", comparison="ahead", versus="theirs"), Measure(13.0, versus=other))
    assert (c.verdict, c.basis) == ("differs", "not within 25% (2.5) of 10; direction (ahead): theirs not measured")


def test_a_measured_other_side_the_data_does_not_name_is_refused(tmp_path):
    with pytest.raises(FinbenchError) as e:
        decide(load(tmp_path, favours="+"), Measure(10.0, versus=3.0))
    assert str(e.value) == ("claim x.y: the code measured the other side of a comparison (versus) that the data "
                            "(paper_claims.csv) does not name")


def test_a_holds_claim_has_no_direction_even_with_favours(tmp_path):
    c = decide(load(tmp_path, test="holds", paper="", tol="", kind="qualitative", favours="+"), Measure(False))
    assert (c.verdict, c.basis) == ("differs", "does not hold")


# --------------------------------------------------------------------------- the record


def test_a_numeric_record_field_by_field(tmp_path):
    pc = load(tmp_path, id="exp.gap", section="§V", scope="beyond the paper", claim="the gap", unit="$")
    c = decide(pc, Measure(12.0), "tables/t.csv")
    same(c, experiment="exp", id="gap", claim="the gap", paper=10.0, paper_lo=NAN, paper_hi=NAN, ours=12.0,
         holds=None, verdict="reproduced", basis="within 25% (2.5) of 10", measured="12", source="tables/t.csv",
         scope="beyond the paper", margin=0.5, unit="$", test="tolerance", paper_section="§V")
    # the measure's own source and words win over the defaults
    c = decide(pc, Measure(12.0, shown="12 of 13", source="tables/own.csv"), "tables/t.csv")
    assert (c.measured, c.source) == ("12 of 13", "tables/own.csv")


def test_a_rate_is_shown_with_its_percent_sign(tmp_path):
    c = decide(load(tmp_path, unit="%", tol="5", paper="40"), Measure(41.25))
    assert c.measured == "41.25%"
    assert decide(load(tmp_path, unit="ratio"), Measure(0.123456)).measured == "0.1235"


@pytest.mark.parametrize("value, shown", [
    (0.123456, "0.1235"), (-0.5, "-0.5"),  # below 1 in size: 4 significant figures
    (1.5, "1.50"), (-1.5, "-1.50"), (12.345, "12.35"),  # from 1 up: 2 decimals
    (3.0, "3"), (-4.0, "-4"), (0.0, "0"),  # whole numbers bare
    (1e15, "1000000000000000.00"), (999999999999999.0, "999999999999999"),  # bare only below 1e15
])
def test_ours_is_shown_bare_if_whole_else_to_four_figures_below_one_else_two_decimals(tmp_path, value, shown):
    assert decide(load(tmp_path, unit="$"), Measure(value)).measured == shown


@pytest.mark.parametrize("value, verdict, shown", [(True, "reproduced", "holds"), (False, "differs", "does not hold")])
def test_a_qualitative_record_carries_holds_not_ours(tmp_path, value, verdict, shown):
    c = decide(load(tmp_path, test="holds", paper="", tol="", kind="qualitative", unit=""), Measure(value))
    same(c, ours=NAN, holds=value, verdict=verdict, basis=shown, measured=shown, margin=NAN, test="holds")


@pytest.mark.parametrize("value", [None, NAN])
def test_not_run_is_a_record_with_no_ours(tmp_path, value):
    pc = load(tmp_path, id="exp.gap", section="§V", note="needs model transcripts", paper_lo="", unit="$")
    c = decide(pc, Measure(value), "tables/t.csv")
    same(c, experiment="exp", id="gap", claim="c", paper=10.0, paper_lo=NAN, paper_hi=NAN, ours=NAN, holds=None,
         verdict="not run", basis="no regenerated value (needs model transcripts)", measured="not run",
         source="tables/t.csv", scope="paper", margin=NAN, unit="$", test="tolerance", paper_section="§V")
    c = decide(load(tmp_path), Measure(value, shown="no transcripts", source="tables/m.csv"))
    assert (c.basis, c.measured, c.source) == ("no regenerated value", "no transcripts", "tables/m.csv")


def test_without_a_source_the_record_s_source_is_empty(tmp_path):
    path = write(tmp_path, row(id="e.a"))
    assert claims_of("e", {"a": Measure(10.0)}, path=path)[0].source == ""
    assert decide(paper_claims(path=path)[0], Measure(10.0)).source == ""


def test_claims_of_decides_each_row_in_file_order_and_reads_none_as_not_run(tmp_path):
    path = write(tmp_path, row(id="e.b"), row(id="e.a", test="equal", tol=""), row(id="f.c"))
    got = claims_of("e", {"a": Measure(10.0), "b": None}, source="tables/e.csv", path=path)
    assert [(c.id, c.verdict, c.source) for c in got] == [("b", "not run", "tables/e.csv"),
                                                          ("a", "reproduced", "tables/e.csv")]


def test_claims_of_names_what_is_missing_and_what_is_extra(tmp_path):
    path = write(tmp_path, row(id="e.a"), row(id="e.b"), row(id="e.c"))
    with pytest.raises(FinbenchError) as e:
        claims_of("e", {"b": None, "z": None, "y": None}, path=path)
    assert str(e.value) == ("claims of e: the data (claims.csv) and the code disagree: not measured: a, c; "
                            "not in the data: z, y")
    with pytest.raises(FinbenchError) as e:
        claims_of("e", {"a": None, "b": None}, path=path)
    assert str(e.value) == "claims of e: the data (claims.csv) and the code disagree: not measured: c"
    with pytest.raises(FinbenchError) as e:
        claims_of("e", {"a": None, "b": None, "c": None, "d": None}, path=path)
    assert str(e.value) == "claims of e: the data (claims.csv) and the code disagree: not in the data: d"


# --------------------------------------------------------------------------- renderings


def record(**kw) -> Claim:
    c = dict(experiment="e", id="a", claim="the claim", paper=10.0, paper_lo=NAN, paper_hi=NAN, ours=12.0, holds=None,
             verdict="reproduced", basis="b", measured="12", source="s", test="tolerance")
    c.update(kw)
    return Claim(**c)


@pytest.mark.parametrize("paper, lo, hi, test, text", [
    (85.4, 79.9, 90.2, "interval", "85.4 [79.9, 90.2]"),
    (10.0, NAN, NAN, "tolerance", "10"),
    (NAN, NAN, NAN, "holds", "qualitative"),
    (NAN, NAN, NAN, "", "qualitative"),
    (-1.0, NAN, NAN, "excludes_zero", "below zero"),
    (1.0, NAN, NAN, "excludes_zero", "above zero"),
    (0.0, NAN, NAN, "includes_zero", "zero inside"),
    (0.0, NAN, NAN, "", "0"),
])
def test_the_paper_s_side_as_shown(paper, lo, hi, test, text):
    assert paper_text(paper, lo, hi, test) == text


def test_notes_list_each_claim_with_its_verdict_and_the_paper_s_side():
    claims = [record(),
              record(id="i", claim="in", paper=85.4, paper_lo=79.9, paper_hi=90.2, measured="86%", test="interval"),
              record(id="b", claim="it holds", paper=NAN, ours=NAN, holds=True, measured="holds", test="holds"),
              record(id="c", claim="below", paper=-1.0, verdict="same direction", measured="-3", test="excludes_zero"),
              record(id="d", claim="old record", paper=NAN, measured="7", test=""),
              # a record with no paper value and a zero test says no paper side at all
              record(id="f", claim="no side", paper=NAN, measured="1", test="includes_zero")]
    assert claims_notes(claims) == [
        "Claims of the paper checked against this table (all records: the claims_*.csv files):",
        "",
        "- reproduced: the claim (paper 10; ours 12)",
        "- reproduced: in (paper 85.4 [79.9, 90.2]; ours 86%)",
        "- reproduced: it holds (ours holds)",
        "- same direction: below (paper below zero; ours -3)",
        "- reproduced: old record (ours 7)",
        "- reproduced: no side (ours 1)",
    ]
    assert claims_notes([]) == claims_notes([])[:2]


def test_markdown_shows_claim_paper_ours_verdict_basis():
    frame = claims_frame([record(), record(id="b", paper=NAN, test="holds", measured="holds", verdict="differs",
                                           basis="does not hold")])
    md = claims_markdown(frame)
    assert list(md.columns) == ["claim", "paper", "ours", "verdict", "basis"]
    assert md.values.tolist() == [["the claim", "10", "12", "reproduced", "b"],
                                  ["the claim", "qualitative", "holds", "differs", "does not hold"]]


def test_markdown_reads_a_frame_written_before_the_test_column():
    frame = claims_frame([record(paper=1.0, test="excludes_zero")])
    assert claims_markdown(frame)["paper"].tolist() == ["above zero"]
    # without the column the paper's value is shown as a number
    assert claims_markdown(frame.drop(columns="test"))["paper"].tolist() == ["1"]


def test_the_frame_is_one_row_a_claim_in_field_order():
    frame = claims_frame([record(), record(id="b")])
    assert list(frame.columns) == list(Claim.__dataclass_fields__)
    assert frame["id"].tolist() == ["a", "b"] and frame["ours"].tolist() == [12.0, 12.0]
    # the same id in two experiments is two claims
    assert len(claims_frame([record(), record(experiment="f")])) == 2
    # no claims: an empty frame that still has the columns
    empty = claims_frame([])
    assert len(empty) == 0 and list(empty.columns) == list(Claim.__dataclass_fields__)


def test_the_frame_refuses_repeated_ids_and_unknown_verdicts():
    with pytest.raises(ValueError) as e:
        claims_frame([record(), record(id="b"), record()])
    assert str(e.value).startswith("claim ids repeat: [('e', 'a')") and "'b'" not in str(e.value)
    # at most three repeated ids are shown, sorted
    with pytest.raises(ValueError) as e:
        claims_frame([record(id=i) for i in "dcbadcba"])
    assert str(e.value).startswith("claim ids repeat: [('e', 'a'), ")
    assert str(e.value).count("('e', ") == 3
    with pytest.raises(ValueError) as e:
        claims_frame([record(verdict="kind of")])
    assert str(e.value) == f"claim a: verdict 'kind of' is not one of {VERDICTS}"


def test_verdict_counts_counts_every_verdict_even_absent_ones():
    claims = [record(), record(id="b", verdict="differs"), record(id="c")]
    got = verdict_counts(claims)
    assert got == {"reproduced": 2, "same direction": 0, "differs": 1, "not run": 0}
    assert list(got) == list(VERDICTS)


def test_from_tables_hands_each_written_table_to_the_claims(tmp_path):
    (tmp_path / "one.csv").write_text("# a stamp line\npolicy,x\na,1.5\n", encoding="utf-8")
    (tmp_path / "two.csv").write_text("k\n3\n", encoding="utf-8")
    seen = {}

    def claims_fn(tables):
        seen.update(tables)
        return ["done"]

    assert from_tables(str(tmp_path), claims_fn, ["one", "two"]) == ["done"]
    assert list(seen) == ["one", "two"]
    pd.testing.assert_frame_equal(seen["one"], pd.DataFrame({"policy": ["a"], "x": [1.5]}))
    assert seen["two"]["k"].tolist() == [3]


def test_from_tables_names_every_missing_table(tmp_path):
    (tmp_path / "one.csv").write_text("k\n1\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError) as e:
        from_tables(tmp_path, lambda t: t, ["one", "two", "three"])
    assert str(e.value) == (f"claims: no table {tmp_path / 'two.csv'}, {tmp_path / 'three.csv'}; "
                            "run its notebook first")
