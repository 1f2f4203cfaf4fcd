"""One direction rule for every claim (issue 45, point 4): a claim outside its test is "same direction" exactly
when ours keeps the comparison its row states, against the other quantity it names (`versus`), else the fixed
value (`than`), else the paper's value; "differs" otherwise. Checked on every row of data/paper_claims.csv by
values on either side of that reference, near it and far from it."""
from __future__ import annotations

import math

import pytest

from finbench.analysis.verdicts import PAPER_CLAIMS, Measure, decide, direction, paper_claims

ROWS = [pc for pc in paper_claims() if pc.favours and pc.test not in ("holds", "includes_zero", "excludes_zero")]


def _reference(pc) -> float:
    return 0.0 if pc.versus else pc.than if not math.isnan(pc.than) else pc.paper


@pytest.mark.parametrize("pc", ROWS, ids=[pc.id for pc in ROWS])
def test_a_value_outside_the_test_keeps_the_direction_exactly_on_the_stated_side(pc):
    ref = _reference(pc)
    judged = 0
    for step in (1e-3, 1.0, 1e6):
        for sign in (1, -1):
            x = ref + sign * step
            m = Measure(x, versus=0.0 if pc.versus else None)
            claim = decide(pc, m)
            if claim.verdict == "reproduced":
                continue
            judged += 1
            want = "same direction" if sign == pc.favours else "differs"
            assert claim.verdict == want, (pc.id, x, ref, claim.basis)
            assert direction(pc, m)[0] == (sign == pc.favours)
    assert judged >= 2, pc.id  # each row was judged outside its test at least twice


def test_the_rows_whose_comparison_is_against_zero_say_so():
    than = {pc.id: pc.than for pc in paper_claims() if not math.isnan(pc.than)}
    assert than == {"headline.gate_minus_react": 0.0, "twins.rank_disagreements": 0.0,
                    "ablation.majority_vote_duplicate": 0.0, "ablation.sop_interaction": 0.0}
    rows = {pc.id: pc for pc in paper_claims()}
    # the audit's cases: 5 places still rank the policies differently; a weaker negative interaction is negative
    assert decide(rows["twins.rank_disagreements"], Measure(5)).verdict == "same direction"
    assert decide(rows["twins.rank_disagreements"], Measure(0)).verdict == "differs"
    assert decide(rows["ablation.sop_interaction"], Measure(-2.0)).verdict == "same direction"
    assert decide(rows["ablation.sop_interaction"], Measure(2.0)).verdict == "differs"
    assert decide(rows["headline.gate_minus_react"], Measure(-20.0)).verdict == "same direction"
    assert decide(rows["ablation.majority_vote_duplicate"], Measure(3.0)).verdict == "same direction"


def test_a_row_naming_both_versus_and_than_is_refused(tmp_path):
    import csv

    from finbench.errors import FinbenchError

    with open(PAPER_CLAIMS, newline="") as fh:
        src = list(csv.DictReader(fh))
    row = next(r for r in src if r["versus"])
    row["than"] = "0"
    path = tmp_path / "claims.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(src[0]), lineterminator="\n")
        w.writeheader()
        w.writerow(row)
    with pytest.raises(FinbenchError, match="than"):
        paper_claims(path=path)
