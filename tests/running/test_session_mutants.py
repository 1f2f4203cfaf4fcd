"""Survivors of this session's sampled mutation run, each pinned by what it changes: a user's episode on
threads under other prices, the end told to an agent, the counters' summary line, a probe arm's draw command,
the cache-id wording of a card's source, and the columns of an empty verification."""
from __future__ import annotations

import pandas as pd

import finbench as fb
from finbench.analysis import card_tables as T
from finbench.running import stats
from finbench.running.verify import verify

CORPUS = fb.make_corpus(n_tasks=6)


class Teller:
    """Waits once, ships; remembers the end it is told (`episode_end`, as a model agent closes a transcript)."""

    name = "teller"
    told: list = []

    def begin(self, brief):
        self.order, self.n = brief["order_id"], 0

    def act(self, obs):
        self.n += 1
        return ("wait", {"order_id": self.order, "ticks": 200}) if self.n == 1 else ("ship", {"order_id": self.order})

    def episode_end(self, outcome):
        Teller.told.append(outcome)


def test_episodes_on_threads_are_priced_with_the_run_s_costs():
    costs = fb.Costs(dispute_fee=50.0, cogs_rate=0.5)
    one = fb.evaluate(CORPUS, [Teller], seeds=[0, 1], costs=costs, cache=False)
    many = fb.evaluate(CORPUS, [Teller], seeds=[0, 1], costs=costs, cache=False, max_connections=3)
    pd.testing.assert_frame_equal(one, many)
    plain = fb.evaluate(CORPUS, [Teller], seeds=[0, 1], cache=False)
    assert not one["cogs"].equals(plain["cogs"])  # the costs do move the rows


def test_each_episode_s_end_is_told_to_the_agent():
    Teller.told.clear()
    rows = fb.evaluate(CORPUS, [Teller], seeds=[0], cache=False)
    assert len(Teller.told) == len(rows) > 0
    assert [round(o["gap"], 9) for o in Teller.told] == [round(g, 9) for g in rows["gap"]]


def test_the_counters_summary_line():
    line = stats.summary()
    assert line.startswith("episodes in this process: played ") and ", re-priced " in line


def test_a_probe_arm_s_draw_command_imports_its_probe_name():
    run = fb.Run(CORPUS, seeds=(0,), probe=fb.ProbeMode.none(), cache=False)
    line = T.draw_command(run, [CORPUS.tasks[0].task_id], 0, '"sop"', "finality_gate", "x.png")
    assert "from finbench.analysis.explore import probe_named" in line and "probe=probe_named" in line


def test_a_card_s_source_names_a_declared_cache_id_only_when_there_is_one():
    rows = pd.DataFrame({"policy": ["me"] * 4})
    rows.attrs["loaded"] = {"me": 3}
    assert T.source(rows, "me", None)["text"] == "3 of 4 episodes from the cache"
    assert T.source(rows, "me", "v1")["text"] == "3 of 4 episodes from the cache (declared cache_id 'v1')"


def test_an_empty_verification_has_its_columns():
    run = fb.Run(CORPUS, seeds=(0,), policies=["sop"], cache=False)
    bad = verify(run, per_origin=2)
    assert bad.empty and list(bad.columns) == ["row", "origin", "policy", "task_id", "seed", "column", "row_value",
                                               "replayed"]
