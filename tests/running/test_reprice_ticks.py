"""Re-pricing reads a row's retry list as text ("121;300", what `evaluate` writes) or, after a CSV
round trip without a ';' in the column, as a number (121.0): the two spellings of one list are held
to the same rule, tick 0 included (a whole tick, as the text "0" is). Before this test nothing held
the number 0 to it, and a check refusing 0 as a number while accepting "0" as text went unnoticed
(mutation testing; issue 32)."""
from __future__ import annotations

import numpy as np
import pandas.testing
import pytest

import finbench as fb
from finbench.running.evaluation import evaluate
from finbench.running.reprice import PRICED, _ticks, reprice
from finbench.sim.economics import Costs

COSTS = Costs()
CHEAPER = Costs(cogs_rate=0.4, dispute_fee=50.0, escalation_cost=10.0)


@pytest.mark.parametrize("text,number", [("0", 0), ("0", 0.0), ("1", 1), ("121", 121.0), ("1800", 1800),
                                         ("0", np.int64(0)), ("0", np.float64(0.0))])
def test_a_tick_written_as_text_or_as_a_number_is_judged_alike(text, number):
    assert (bool(_ticks(text)), bool(_ticks(number))) == (True, True)


@pytest.mark.parametrize("text,number", [("-1", -1), ("-1", -1.0), ("0.5", 0.5), ("1e400", float("inf"))])
def test_what_is_no_tick_is_refused_in_either_spelling(text, number):
    assert (bool(_ticks(text)), bool(_ticks(number))) == (False, False)


def test_a_row_retrying_at_tick_0_is_priced_alike_as_text_and_as_a_number():
    # the same rows, each retry moved to tick 0 and written "0" or 0.0: both are priced, and alike
    corpus = fb.make_corpus(n_tasks=9)
    df = evaluate(corpus, ["finality_gate"], seeds=[0], cache=False)
    as_text = df.assign(retry_at=df["retry_at"].where(df["retry_at"] == "", "0"))
    assert (as_text["retry_at"] == "0").any()
    as_number = as_text.assign(retry_at=as_text["retry_at"].map(lambda r: 0.0 if r == "0" else np.nan))
    assert as_number["retry_at"].dtype.kind == "f"
    pandas.testing.assert_frame_equal(reprice(as_text, corpus, CHEAPER, COSTS)[list(PRICED)],
                                      reprice(as_number, corpus, CHEAPER, COSTS)[list(PRICED)])
