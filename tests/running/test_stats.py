"""`running.stats`: the process's episode counters, by origin and by kind, and the summary line read back."""
from __future__ import annotations

from collections import Counter

import pytest

from finbench.running import stats


@pytest.fixture()
def fresh(monkeypatch):
    """Empty counters for the test (the process's own are left as they were)."""
    monkeypatch.setattr(stats, "EPISODES", Counter())
    monkeypatch.setattr(stats, "BY_ORIGIN", Counter())


def test_rows_are_counted_by_origin_and_by_kind(fresh):
    stats.add("derived_reads", 3)
    stats.count(["played", "cache", "played", "derived_seed"])
    assert stats.BY_ORIGIN == Counter({"derived_reads": 3, "played": 2, "cache": 1, "derived_seed": 1})
    assert stats.EPISODES == Counter({"derived": 4, "played": 2, "loaded": 1})


def test_parse_reads_the_last_summary_line_with_its_thousands_separators():
    text = ("episodes in this process: played 1, derived 2, loaded 3, re-priced 4\n"
            "something else\n"
            "episodes in this process: played 14,445, derived 3,210, loaded 0, re-priced 1,000,000\n")
    assert stats.parse(text) == {"played": 14445, "derived": 3210, "loaded": 0, "repriced": 1000000}
    assert stats.parse("no counts here\n") is None
