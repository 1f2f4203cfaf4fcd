"""Backtests: small Table II and III cells regenerated and compared with the committed ones."""
import pandas as pd
import pytest

from tests.backtest_cases import HERE, compute


@pytest.fixture(scope="module")
def regenerated():
    return compute()


@pytest.mark.parametrize("name", ["table2_small", "table3_small"])
def test_backtest(name, regenerated):
    expected = pd.read_csv(HERE / f"{name}.csv")
    got = regenerated[name].reset_index(drop=True).rename_axis(columns=None)
    # rtol covers the CSV's 10 significant digits; any behavioural change moves far more than that
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, rtol=1e-8, atol=1e-8)
