"""Re-pricing's checks of what it is given (SPEC §8): the rows must be episodes of the corpus
under `simulated_with`, the costs must be `Costs` that differ only in prices, and each bad input
is refused with an error that names it. The rule itself (re-pricing equals simulating) is held
by tests/running/test_reprice_rules.py and tests/running/test_run.py.
"""
from __future__ import annotations

import numpy as np
import pandas.testing
import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.running.evaluation import evaluate
from finbench.running.reprice import PRICED, reprice
from finbench.sim.economics import Costs
from finbench.sim.tools import DISPOSITIONS

COSTS = Costs()
CHEAPER = Costs(cogs_rate=0.4, dispute_fee=50.0, escalation_cost=10.0)


@pytest.fixture(scope="module")
def episodes():
    corpus = fb.make_corpus(n_tasks=20)
    return corpus, evaluate(corpus, ["sop", "eager"], seeds=[0, 1], cache=False)


def test_repricing_across_what_policies_see_says_why(episodes):
    corpus, df = episodes
    with pytest.raises(ValueError, match=r"cannot re-price across step_budget, read_ticks or probe_ticks: "
                                         r"policies see them, so actions may change; simulate instead"):
        reprice(df, corpus, Costs(step_budget=39), COSTS)


def test_repricing_rows_whose_retry_list_reads_back_as_missing(episodes):
    # a row without retries has retry_at "", which a CSV round trip turns into NaN
    corpus, df = episodes
    assert (df["retry_at"] == "").any()
    missing = df.assign(retry_at=df["retry_at"].replace("", np.nan))
    pandas.testing.assert_frame_equal(reprice(missing, corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(df, corpus, CHEAPER, COSTS)[list(PRICED)])


def test_repricing_some_rows_prices_each_row_as_its_own(episodes):
    corpus, df = episodes
    some = df.iloc[::-3]  # not 0..n-1: prices must follow the rows' own index
    pandas.testing.assert_frame_equal(reprice(some, corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(df, corpus, CHEAPER, COSTS).loc[some.index, list(PRICED)])


def test_repriced_columns_keep_the_rows_dtypes(episodes):
    corpus, df = episodes
    out = reprice(df, corpus, CHEAPER, COSTS)
    assert out.dtypes.equals(df.dtypes)
    # rows read back from a file may hold a price column as float32 or object: kept as given
    narrow = df.astype({"cash": "float32", "exact": "object"})
    assert reprice(narrow, corpus, CHEAPER, COSTS).dtypes.equals(narrow.dtypes)


@pytest.mark.parametrize("name", ["corpus", "costs", "simulated_with"])
def test_each_bad_argument_is_named_with_what_it_must_be(episodes, name):
    corpus, df = episodes
    given = {"corpus": corpus, "costs": CHEAPER, "simulated_with": COSTS}
    given[name] = {"cogs_rate": 0.4}
    must = "the Corpus the rows were simulated on" if name == "corpus" else "a Costs"
    with pytest.raises(FinbenchError) as err:
        reprice(df, **given)
    assert str(err.value) == f"reprice: {name} must be {must}, got {{'cogs_rate': 0.4}}"


def test_rows_of_tasks_the_corpus_does_not_hold_are_named_three_at_most(episodes):
    corpus, df = episodes
    ids = sorted(df["task_id"].unique())
    assert len(ids) >= 4
    stranger = df.assign(task_id=df["task_id"].map({t: f"zz-{t}" for t in ids}))
    with pytest.raises(FinbenchError) as err:
        reprice(stranger, corpus, CHEAPER, COSTS)
    named = ", ".join(f"zz-{t}" for t in ids[:3])
    assert str(err.value) == (f"reprice: rows of task(s) {named} that the corpus does not hold; "
                              "give the corpus the rows were simulated on")


def test_unknown_dispositions_are_named_three_at_most(episodes):
    corpus, df = episodes
    odd = ["a", "b", "c", "d"]
    rows = df.iloc[:4].assign(disposition=odd)
    with pytest.raises(FinbenchError) as err:
        reprice(rows, corpus, CHEAPER, COSTS)
    assert str(err.value) == ("reprice: unknown disposition(s) 'a', 'b', 'c'; "
                              f"rows hold one of {', '.join(DISPOSITIONS)}")


def _tampered(df, at: int, by: float):
    """The rows with the position of the row at `at` moved by `by`."""
    out = df.copy()
    out.iloc[at, out.columns.get_loc("position")] += by
    return out


def test_a_row_that_does_not_re_price_to_its_own_position_is_refused_wherever_it_stands(episodes):
    corpus, df = episodes
    # episodes repeat cases (two seeds, policies that agree): the tampered row comes after a repeat
    first_repeat = int(np.flatnonzero(df.duplicated(["task_id", "disposition", "end_t", "retry_at",
                                                     "unrelated_effects", "position"]))[0])
    for at in (0, first_repeat + 1, len(df) - 1):
        row = df.iloc[at]
        with pytest.raises(FinbenchError) as err:
            reprice(_tampered(df, at, 0.5), corpus, CHEAPER, COSTS)
        assert str(err.value) == (
            f"reprice: the row of {row.task_id} ({row.disposition} at t={row.end_t}) does not re-price to its "
            "own position under simulated_with; these rows come from another corpus or other costs")


def test_a_position_within_a_micro_dollar_is_its_own(episodes):
    corpus, df = episodes
    pandas.testing.assert_frame_equal(reprice(_tampered(df, 0, 5e-7), corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(df, corpus, CHEAPER, COSTS)[list(PRICED)])
    with pytest.raises(FinbenchError, match="does not re-price to its own position"):
        reprice(_tampered(df, 0, 2e-6), corpus, CHEAPER, COSTS)


def test_the_reference_is_priced_as_it_plays_under_the_rows_own_call_budget():
    # a budget of one call cuts the reference's plan short on some tasks: re-pricing must price
    # the reference of that budget, as simulating does, not of the default one
    corpus = fb.make_corpus(n_tasks=20)
    tight, tight_cheaper = Costs(step_budget=1), Costs(step_budget=1, cogs_rate=0.4, dispute_fee=50.0)
    df = evaluate(corpus, ["sop"], seeds=[0], costs=tight, cache=False)
    want = evaluate(corpus, ["sop"], seeds=[0], costs=tight_cheaper, cache=False)
    default_ref = evaluate(corpus, ["sop"], seeds=[0], costs=CHEAPER, cache=False)["reference_position"]
    assert (default_ref != want["reference_position"]).any()  # the budget does move the reference
    pandas.testing.assert_frame_equal(reprice(df, corpus, tight_cheaper, tight)[list(PRICED)], want[list(PRICED)])


def test_the_books_of_the_last_corpora_are_kept_and_the_oldest_forgotten(monkeypatch, episodes):
    from finbench.running import reprice as module

    corpus, df = episodes
    monkeypatch.setattr(module, "_BOOKS", module.OrderedDict())
    monkeypatch.setattr(module, "_BOOKS_SIZE", 2)
    others = [fb.make_corpus(n_tasks=3, master_seed=s) for s in (1, 2)]
    prints = [corpus.fingerprint, *(c.fingerprint for c in others)]
    assert len(set(prints)) == 3
    for c in (corpus, *others):
        rows = evaluate(c, ["sop"], seeds=[0], cache=False)
        assert len(reprice(rows, c, CHEAPER, COSTS)) == len(rows)
    assert list(module._BOOKS) == prints[1:]  # the two latest, oldest first
    before = reprice(df, corpus, CHEAPER, COSTS)  # a forgotten corpus is booked again
    assert list(module._BOOKS) == [prints[2], prints[0]]
    pandas.testing.assert_frame_equal(before, reprice(df, corpus, CHEAPER, COSTS))


def test_rows_without_the_columns_re_pricing_reads_or_writes_are_named(episodes):
    corpus, df = episodes
    with pytest.raises(FinbenchError) as err:
        reprice(df.drop(columns=["retry_at", "cogs", "end_t"]), corpus, CHEAPER, COSTS)
    assert str(err.value) == ("reprice: the rows lack column(s) end_t, retry_at, cogs; give episode rows as "
                              "evaluate writes them")


@pytest.mark.parametrize("column, value, shown", [
    ("retry_at", "x;12", "retry_at='x;12'"),
    ("end_t", np.nan, "end_t=nan"),
    ("end_t", 12.5, "end_t=12.5"),
    ("unrelated_effects", np.nan, "unrelated_effects=nan"),
    ("unrelated_effects", "one", "unrelated_effects='one'"),
    ("position", "a", "position='a'"),
])
def test_a_row_whose_case_no_episode_can_hold_is_named(episodes, column, value, shown):
    corpus, df = episodes
    at = len(df) // 2
    bad = df.astype({column: object})
    bad.iloc[at, bad.columns.get_loc(column)] = value
    row = df.iloc[at]
    with pytest.raises(FinbenchError) as err:
        reprice(bad, corpus, CHEAPER, COSTS)
    assert str(err.value) == (f"reprice: the row of {row.task_id} (row {at}) holds {shown}, which no episode "
                              "has: end_t and unrelated_effects are whole numbers, retry_at ';'-separated ticks, "
                              "position a number")


@pytest.mark.parametrize("missing", [None, np.nan, pandas.NA], ids=["None", "NaN", "NA"])
def test_a_missing_retry_list_is_an_empty_one(episodes, missing):
    corpus, df = episodes
    empty = df["retry_at"] == ""
    assert empty.any()
    rows = df.astype({"retry_at": object})
    rows.loc[empty, "retry_at"] = missing
    pandas.testing.assert_frame_equal(reprice(rows, corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(df, corpus, CHEAPER, COSTS)[list(PRICED)])
