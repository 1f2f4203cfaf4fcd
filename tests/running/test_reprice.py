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
    ("end_t", "121.0", "end_t='121.0'"),  # a number as text is not a tick
    ("unrelated_effects", 1j, "unrelated_effects=1j"),
    ("retry_at", True, "retry_at=True"),  # a bool is not a tick
    ("retry_at", 1j, "retry_at=1j"),
    ("retry_at", -1.0, "retry_at=-1.0"),
    ("retry_at", 12.5, "retry_at=12.5"),
])
def test_a_row_whose_case_no_episode_can_hold_is_named(episodes, column, value, shown):
    corpus, df = episodes
    at = len(df) // 2
    bad = df.astype({column: object})
    bad.iloc[at, bad.columns.get_loc(column)] = value
    row = df.iloc[at]
    with pytest.raises(FinbenchError) as err:
        reprice(bad, corpus, CHEAPER, COSTS)
    assert str(err.value) == (f"reprice: the row of {row.task_id} (index {at}) holds {shown}, which no episode "
                              "has: end_t and unrelated_effects are whole numbers, retry_at ';'-separated ticks, "
                              "the positions numbers")


@pytest.mark.parametrize("missing", [None, np.nan, pandas.NA], ids=["None", "NaN", "NA"])
def test_a_missing_retry_list_is_an_empty_one(episodes, missing):
    corpus, df = episodes
    empty = df["retry_at"] == ""
    assert empty.any()
    rows = df.astype({"retry_at": object})
    rows.loc[empty, "retry_at"] = missing
    pandas.testing.assert_frame_equal(reprice(rows, corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(df, corpus, CHEAPER, COSTS)[list(PRICED)])


def test_a_bad_row_is_named_by_its_index_label(episodes):
    corpus, df = episodes
    shuffled = df.iloc[::-1]
    label = shuffled.index[3]
    bad = shuffled.astype({"end_t": object})
    bad.loc[label, "end_t"] = "x"
    with pytest.raises(FinbenchError, match=rf"the row of {df.loc[label, 'task_id']} \(index {label}\) holds end_t='x'"):
        reprice(bad, corpus, CHEAPER, COSTS)


def test_rows_read_back_from_a_csv_re_price_as_written(episodes, tmp_path):
    # without a ';' anywhere, a CSV reads the retry ticks back as numbers (121.0), NaN where none
    corpus, _ = episodes
    df = evaluate(corpus, None, seeds=[0], cache=False)  # the nine: some retry
    one_retry = df[~df["retry_at"].str.contains(";")]
    assert (one_retry["retry_at"] != "").any()
    one_retry.to_csv(tmp_path / "rows.csv", index=False)
    back = pandas.read_csv(tmp_path / "rows.csv")
    assert back["retry_at"].dtype.kind == "f"
    got = reprice(back, corpus, CHEAPER, COSTS)[list(PRICED)]
    want = reprice(one_retry, corpus, CHEAPER, COSTS)[list(PRICED)].reset_index(drop=True)
    pandas.testing.assert_frame_equal(got, want, check_dtype=False)


def test_rows_of_another_corpus_that_share_a_position_are_still_refused():
    # a row of B whose position A's task of that id happens to give too: its reference tells them apart
    a, b = fb.make_corpus(n_tasks=12, master_seed=0), fb.make_corpus(n_tasks=12, master_seed=1)
    rows = evaluate(b, None, seeds=[0], cache=False)
    rows = rows[rows["task_id"].isin({t.task_id for t in a.tasks})]
    from finbench.running.reprice import Repricer

    positions, references = Repricer(rows, a).columns(COSTS)[:2]
    alike = rows[(abs(positions - rows["position"]) <= 1e-6) & (abs(references - rows["reference_position"]) > 1e-6)]
    assert len(alike) > 0
    with pytest.raises(FinbenchError, match="another corpus or other costs"):
        reprice(alike, a, CHEAPER, COSTS)


def test_integer_price_columns_come_back_as_floats(episodes):
    corpus, df = episodes
    ints = df.astype({"gap": "int64", "position": "float64"})
    ints["gap"] = 0
    out = reprice(ints.assign(gap=ints["gap"]), corpus, CHEAPER, COSTS)
    assert out["gap"].dtype == "float64"
    pandas.testing.assert_series_equal(out["gap"], reprice(df, corpus, CHEAPER, COSTS)["gap"])


def test_a_column_given_twice_is_named(episodes):
    corpus, df = episodes
    twice = pandas.concat([df, df[["position", "cogs"]]], axis=1)
    with pytest.raises(FinbenchError, match=r"the rows hold column\(s\) position, cogs more than once"):
        reprice(twice, corpus, CHEAPER, COSTS)


def test_odd_values_of_mixed_types_are_named_not_sorted(episodes):
    corpus, df = episodes
    rows = df.iloc[:3].astype({"disposition": object})
    rows["disposition"] = [None, 5, "ship"]
    with pytest.raises(FinbenchError, match=r"unknown disposition\(s\) (5, None|None, 5)"):
        reprice(rows, corpus, CHEAPER, COSTS)
    ids = df.iloc[:2].astype({"task_id": object})
    ids["task_id"] = [7, "x"]  # not comparable with each other: sorted by how they are shown
    with pytest.raises(FinbenchError, match=r"rows of task\(s\) .* that the corpus does not hold"):
        reprice(ids, corpus, CHEAPER, COSTS)


def test_threads_adding_moneys_to_one_book_at_once_keep_each_money_at_its_own_index(episodes):
    # threads re-pricing one corpus share its book: a check-then-insert race would point a money's
    # index at another money, and every later price of that money would be wrong
    import dataclasses
    import sys
    import threading

    from finbench.running import reprice as module
    from finbench.sim.env import reference_money

    corpus, _ = episodes
    book = module._Book(corpus)
    money = reference_money(corpus.tasks[0], COSTS)
    start = threading.Barrier(8)

    def add(k):
        start.wait()
        for j in range(3000):
            book._indexed(dataclasses.replace(money, value=k * 10_000 + j))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible (45 of 24,000 wrong without the lock)
    try:
        threads = [threading.Thread(target=add, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert len(book.moneys) == len(book.index) == 8 * 3000
    assert [m for m, i in book.index.items() if book.moneys[i] != m] == []
