"""Probe arms (issue 12): the claims are decided on Table VIII and its paired differences as written, each
claim's measure is the quantity its data row names, and a planted table moves exactly the claim it should."""
import math

import pandas as pd
import pytest

from finbench.analysis import metrics as M
from finbench.analysis.verdicts import claims_frame, paper_claims
from finbench.experiments import probe_arms as P
from finbench.running.run import Run


@pytest.fixture(scope="module")
def run():
    return Run.make(n_tasks=30, seeds=range(2), n_boot=200, policies=P.POLICIES, cache=False)


@pytest.fixture(scope="module")
def rows(run):
    return P.episodes(run)


@pytest.fixture(scope="module")
def tables(rows, run):
    return P.tables(rows, run)


def _frame(tables):
    return claims_frame(P.claims(tables)).set_index("id")


def test_measures_name_exactly_the_claims_the_data_lists(tables):
    names = [pc.name for pc in paper_claims(P.NAME)]
    assert list(P.measures(tables)) == names and len(names) == 3
    frame = _frame(tables)
    assert list(frame.index) == names and (frame["scope"] == "beyond the paper").all()
    assert set(frame["verdict"]) <= {"reproduced", "same direction", "differs"}  # every table is there


def test_the_reconciler_against_the_gate_with_the_full_probe_is_the_paired_difference_of_the_rows(rows, run, tables):
    rec = rows[(rows["probe"] == "none") & (rows["policy"] == P.RECONCILER)].assign(policy="a")
    gate = rows[(rows["probe"] == "full") & (rows["policy"] == P.GATE)].assign(policy="b")
    d = M.bootstrap_diff(pd.concat([rec, gate], ignore_index=True), "a", "b", "gap", run.n_boot, run.boot_seed)
    m = P.measures(tables)["reconciler_none_within_gate_full"]
    assert (m.value, m.lo, m.hi) == pytest.approx((d["estimate"], d["lo"], d["hi"]))
    assert m.value == pytest.approx(rec["gap"].mean() - gate["gap"].mean())
    c = _frame(tables).loc["reconciler_none_within_gate_full"]
    inside = d["lo"] <= 0 <= d["hi"]
    assert c["verdict"] == ("reproduced" if inside else "differs") and c["test"] == "includes_zero"
    assert c["margin"] == pytest.approx(min(-d["lo"], d["hi"]), abs=1e-6)


def test_the_reconcilers_probe_use_is_its_mean_probe_calls_under_full(rows, tables):
    calls = rows[(rows["probe"] == "full") & (rows["policy"] == P.RECONCILER)]["probe_calls"].mean()
    m = P.measures(tables)["reconciler_uses_probe"]
    assert m.value == pytest.approx(calls) and calls > 0
    c = _frame(tables).loc["reconciler_uses_probe"]
    assert c["verdict"] == "reproduced" and c["ours"] == pytest.approx(calls) and c["margin"] == pytest.approx(calls)


def test_best_without_probe_reads_every_other_unprivileged_policy_under_none(rows, run, tables):
    none = rows[rows["probe"] == "none"]
    told = dict(zip(P._order(none), M.privileged(none, P._order(none))))
    others = [p for p, t in told.items() if not t and p != P.RECONCILER]
    d = M.bootstrap_diff_table(none, P.RECONCILER, "gap", others, run.n_boot, run.boot_seed)
    expect = bool((d["lo"] > 0).all())
    assert P.measures(tables)["reconciler_best_without_probe"].value is expect
    assert "finality_oracle" not in P.measures(tables)["reconciler_best_without_probe"].shown


def _planted(tables, estimate, lo, hi):
    diffs = tables["table8_differences"].copy()
    at = diffs["comparison"] == f"{P.RECONCILER}@none - {P.GATE}@full"
    diffs.loc[at, ["estimate", "lo", "hi"]] = [estimate, lo, hi]
    return {**tables, "table8_differences": diffs}


@pytest.mark.parametrize("estimate, lo, hi, verdict, margin", [
    (3.0, -2.0, 9.0, "reproduced", 2.0),    # the interval holds zero: indistinguishable
    (12.0, 4.0, 20.0, "differs", -4.0),     # the reconciler loses more, distinguishably
    (-12.0, -20.0, -1.5, "differs", -1.5),  # it loses less, distinguishably: not "within" either
])
def test_within_the_gate_is_decided_by_the_interval_not_the_point(tables, estimate, lo, hi, verdict, margin):
    c = _frame(_planted(tables, estimate, lo, hi)).loc["reconciler_none_within_gate_full"]
    assert (c["verdict"], c["ours"], c["margin"]) == (verdict, estimate, pytest.approx(margin))


def test_one_other_policy_not_distinguishably_worse_breaks_best_without_probe(tables):
    diffs = tables["table8_differences"].copy()
    at = (diffs["probe"] == "none") & (diffs["comparison"] == f"sop - {P.RECONCILER}")
    diffs.loc[at, ["estimate", "lo", "hi"]] = [5.0, -1.0, 11.0]
    c = _frame({**tables, "table8_differences": diffs}).loc["reconciler_best_without_probe"]
    assert c["verdict"] == "differs" and c["holds"] is not None and not c["holds"]
    assert "sop - reconciler 5.00 [-1.00, 11.00]" in c["measured"]


def test_a_reconciler_that_never_probes_differs_and_a_missing_arm_is_not_run(tables):
    t8 = tables["table8"].copy()
    t8.loc[(t8["probe"] == "full") & (t8["policy"] == P.RECONCILER), "probe_calls"] = 0.0
    c = _frame({**tables, "table8": t8}).loc["reconciler_uses_probe"]
    assert c["verdict"] == "differs" and c["margin"] == 0
    only_full = {"table8": tables["table8"][tables["table8"]["probe"] == "full"],
                 "table8_differences": tables["table8_differences"][tables["table8_differences"]["probe"] == "full"],
                 "table8_archetypes": tables["table8_archetypes"]}
    frame = _frame(only_full)
    assert frame.loc["reconciler_best_without_probe", "verdict"] == "not run"
    assert frame.loc["reconciler_none_within_gate_full", "verdict"] == "not run"
    assert frame.loc["reconciler_uses_probe", "verdict"] != "not run"
    assert math.isnan(frame.loc["reconciler_none_within_gate_full", "ours"])


def test_claims_come_from_the_tables_as_written(tables, run, tmp_path):
    from finbench.analysis.publish import publish_experiment

    frame = claims_frame(P.claims(tables))
    publish_experiment(P, run, tables, P.claims(tables), {}, tables_dir=tmp_path)
    again = claims_frame(P.claims_from_tables(tmp_path))
    for col in ("id", "verdict", "measured", "source"):
        assert list(again[col]) == list(frame[col]), col
    assert list(again["margin"].fillna(0)) == pytest.approx(list(frame["margin"].fillna(0)), abs=1e-6)
    assert set(frame["source"]) == {"tables/table8.csv", "tables/table8_differences.csv"}
