"""The effects table (issue 4): every policy's verdicts and failed checks over a corpus, its notes, and the
example trace it writes."""
import pandas as pd
import pytest

import finbench as fb
from finbench.experiments import effects as E
from finbench.grading import CHECKS, grade_trace, load_trace
from finbench.running.evaluation import evaluate
from finbench.running.episode import episode_contract

SMALL = fb.make_corpus(n_tasks=20)


@pytest.fixture(scope="module")
def small_df():
    return evaluate(SMALL, seeds=range(2), cache=False)


def test_effects_table_adds_up(small_df):
    t = E.effects_table(small_df, SMALL)
    assert list(t.columns) == [
        "policy", "episodes", "pass", "violation", "unscorable",
        *[f"fail_{c}_pct" for c in CHECKS], "unknown_pct", "captured_twice_pct", "captured_zero_pct",
        "zero_lost_pct", "zero_recoverable_pct", "other_order_pct", "before_auth_pct"]
    assert list(t.policy) == list(fb.POLICIES)
    assert (t.episodes == 20 * 2).all()
    assert (t["pass"] + t.violation + t.unscorable == t.episodes).all()
    counts = pd.crosstab(small_df.policy, small_df.verdict).reindex(columns=list(E.VERDICTS), fill_value=0)
    pd.testing.assert_frame_equal(t.set_index("policy")[list(E.VERDICTS)], counts.reindex(t.policy),
                                  check_names=False, check_dtype=False)
    # on complete logs exactly_one_effect fails exactly when the order was captured twice or never
    assert t.fail_exactly_one_effect_pct.to_numpy() == pytest.approx(
        (t.captured_twice_pct + t.captured_zero_pct).to_numpy())
    assert t.captured_zero_pct.to_numpy() == pytest.approx((t.zero_lost_pct + t.zero_recoverable_pct).to_numpy())
    # the payment lost for good is the same share for every policy: it is the task's, not the policy's
    assert t.zero_lost_pct.nunique() == 1
    oracle = t.set_index("policy").loc["finality_oracle"]
    assert oracle.captured_twice_pct == 0 and oracle.zero_recoverable_pct == 0
    assert oracle.fail_exactly_one_effect_pct == oracle.zero_lost_pct
    # without the corpus there is no lost/recoverable split
    assert "zero_lost_pct" not in E.effects_table(small_df).columns


def test_effects_table_and_notes_on_hand_made_rows():
    def row(policy, captures=1, unrelated=0, **checks):
        c = {f"check_{k}": checks.get(k, "pass") for k in CHECKS}
        bad = [k for k, s in c.items() if s == "fail"]
        return {"policy": policy, "task_id": "x", "verdict": "violation" if bad else "pass",
                "capture_effects": captures, "unrelated_effects": unrelated, **c}

    df = pd.DataFrame([
        row("eager", captures=2, exactly_one_effect="fail"),
        row("eager"), row("eager"), row("eager"),
        row("sop", unrelated=1, unrelated_unchanged="fail"),
        row("sop", auth_precedes_effect="fail"),
        row("sop", captures=0, exactly_one_effect="fail"),
        row("sop"),
    ])
    t = E.effects_table(df).set_index("policy")
    assert list(t.index) == ["eager", "sop"]
    assert t.loc["eager", "captured_twice_pct"] == 25.0 and t.loc["sop", "captured_twice_pct"] == 0.0
    assert t.loc["sop", "other_order_pct"] == 25.0 and t.loc["sop", "before_auth_pct"] == 25.0
    assert t.loc["sop", "captured_zero_pct"] == 25.0 and t.loc["sop", "fail_exactly_one_effect_pct"] == 25.0
    assert (t.loc["sop", "violation"], t.loc["sop", "pass"]) == (3, 1)
    notes = "\n".join(E.effects_notes(t.reset_index()))
    assert "Captured twice (two or more capture effects on the order): eager 25.0% (1 of 4); " \
           "the other 1 policies never." in notes
    assert "Acted on another order" in notes and "sop 25.0% (1 of 4)" in notes
    md = E.effects_markdown(t.reset_index())
    assert "captured twice %" in md.columns and "captured 0 %" in md.columns


def test_example_trace_round_trips(tmp_path, small_df):
    row = E.example_row(small_df)
    assert row.capture_effects >= 2  # random captures twice somewhere in this corpus
    task = SMALL[row.task_id]
    records = E.replay_trace(task, row.policy, int(row.seed))
    path = E.write_trace(records, tmp_path / "episode.jsonl")
    again = grade_trace(load_trace(path), episode_contract(task))
    assert again.verdict == row.verdict == "violation"
    assert again.checks["exactly_one_effect"] == row.check_exactly_one_effect == "fail"
