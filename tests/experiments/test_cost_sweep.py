"""The cost sweep (issue 10): 45 configurations, re-priced; orderings and the gate's margin from the table."""
import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import metrics as M
from finbench.analysis.verdicts import paper_claims
from finbench.experiments import cost_sweep as S
from finbench.memo import clear_caches
from finbench.analysis import ordering


@pytest.fixture(scope="module")
def table():
    clear_caches()
    run = fb.Run.make(n_tasks=40, seeds=range(2), cache=False)
    return run, S.sweep_costs(run)


def test_the_45_configurations():
    cs = S.configurations()
    assert len(cs) == 45 and len({c.key() for c in cs}) == 45
    assert {c.cogs_rate for c in cs} == {0.4, 0.5, 0.6, 0.7, 0.8}


def test_each_row_equals_simulating_under_its_costs(table):
    run, t = table
    row = t[(t.cogs_rate == 0.8) & (t.dispute_fee == 50) & (t.escalation_cost == 10)].iloc[0]
    direct = fb.evaluate(run.corpus, None, seeds=run.seeds, costs=fb.Costs(0.8, 50.0, 10.0), cache=False)
    gaps = M.mean_gap(direct)
    for p in fb.POLICIES:
        assert row[p] == pytest.approx(gaps[p], abs=1e-9)
    assert row.ordering.split(" < ") == ordering.rank_policies(gaps, ascending=True)


def test_orderings_margins_and_swaps_come_from_the_gaps(table):
    _, t = table
    assert len(t) == 45
    ungated = [p for p in fb.POLICIES if p not in ("finality_gate", "finality_oracle")]
    assert (t.gate_margin == t[ungated].min(axis=1) - t.finality_gate).all()
    assert (t.gate_ahead == (t.gate_margin > 0)).all()
    default = t[(t.cogs_rate == 0.6) & (t.dispute_fee == 25) & (t.escalation_cost == 18)].iloc[0]
    assert default.same_as_default and default.rank_changes == 0
    assert (t.same_as_default == (t.ordering == default.ordering)).all()
    sw = S.swaps(t)
    assert len(sw) == len(fb.POLICIES) - 1
    first = sw.iloc[0]
    orders = [o.split(" < ") for o in t.ordering]
    assert first.configurations_swapped == sum(o.index(first.better) > o.index(first.worse) for o in orders)


def _claims(t):
    return {x.id: x for x in S.claims({"cost_sweep": t})}


def test_claims_read_the_table_and_name_every_row(table):
    _, t = table
    names = [r.name for r in paper_claims("cost_sweep")]
    assert sorted(S.measures({"cost_sweep": t})) == sorted(names)
    claims = S.claims({"cost_sweep": t})
    assert [c.id for c in claims] == names  # headline_robust (a duplicate of gate_ahead_everywhere) is gone
    c = {x.id: x for x in claims}
    assert c["ordering_stable"].ours == (t.ordering == t.ordering[(t.cogs_rate == 0.6) & (t.dispute_fee == 25)
                                                                   & (t.escalation_cost == 18)].iloc[0]).sum()
    assert c["gate_ahead_everywhere"].ours == (t.gate_margin > 0).sum()
    flipped = t.assign(gate_ahead=False)
    assert _claims(flipped)["gate_ahead_everywhere"].verdict == "differs"
    assert _claims(t.drop(columns=["gate_ahead", "gate_margin"]))["gate_ahead_everywhere"].verdict == "not run"


def test_ordering_stable_is_a_count_that_favours_fewer(table):
    """A count of configurations: equal to the paper's reproduces; fewer keeps "the middle is not stable";
    more does not."""
    _, t = table
    row = next(r for r in paper_claims("cost_sweep") if r.name == "ordering_stable")
    k = int(row.paper)
    for n, verdict in ((k, "reproduced"), (k - 3, "same direction"), (k + 3, "differs")):
        planted = t.assign(same_as_default=[i < n for i in range(len(t))])
        c = _claims(planted)["ordering_stable"]
        assert (c.ours, c.verdict, c.margin) == (n, verdict, -abs(n - k)), n
    c = _claims(t.assign(gate_ahead=[i != 7 for i in range(len(t))]))["gate_ahead_everywhere"]
    assert (c.ours, c.verdict, c.margin) == (len(t) - 1, "differs", -1)


def test_the_table_is_the_orderings_of_the_re_priced_rows(table):
    run, t = table
    rows = S.episodes(run)
    assert len(rows) == 45 and "ordering" not in rows
    tables = S.tables(rows, run)
    assert tuple(tables) == S.TABLES
    pd.testing.assert_frame_equal(tables["cost_sweep"], t)
