"""The cost sweep (issue 10): 45 configurations, re-priced; orderings and the gate's margin from the table."""
import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import metrics as M
from finbench.experiments import cost_sweep as S
from finbench.running.run import clear_memo
from finbench.analysis import ordering


@pytest.fixture(scope="module")
def table():
    clear_memo()
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


def test_claims_read_the_table(table):
    _, t = table
    c = {x.id: x for x in S.claims({"cost_sweep": t})}
    assert c["ordering_stable"].ours == t.same_as_default.sum()
    flipped = t.assign(gate_ahead=False)
    assert {x.id: x for x in S.claims({"cost_sweep": flipped})}["gate_ahead_everywhere"].verdict == "differs"


def test_the_table_is_the_orderings_of_the_re_priced_rows(table):
    run, t = table
    rows = S.episodes(run)
    assert len(rows) == 45 and "ordering" not in rows
    tables = S.tables(rows, run)
    assert tuple(tables) == S.TABLES
    pd.testing.assert_frame_equal(tables["cost_sweep"], t)
