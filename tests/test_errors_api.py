"""Bad input to the public API (found by the hostile pass of issue 18), one row per reproduction: a
clear FinbenchError naming the argument, or the documented behaviour."""
from __future__ import annotations

import json
import threading

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis.publish import publish
from finbench.analysis.tables import write_table
from finbench.running.run import sweep

C = fb.make_corpus(n_tasks=9)


class Locked:
    def __init__(self):
        self.lock = threading.Lock()

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return "close", {"order_id": self.order}


def _rows(policy="sop"):
    return fb.evaluate(C, [policy], seeds=[0], cache=False)


REFUSED = {
    "knob-text": (lambda: fb.evaluate(C, ["finality_gate[wait=abc]"], seeds=[0], cache=False),
                  r"finality_gate: wait must be an integer in \[1, 600\], got 'abc'"),
    "knob-nan": (lambda: fb.evaluate(C, ["finality_gate[wait=nan]"], seeds=[0], cache=False), r"wait .* got nan"),
    "knob-empty": (lambda: fb.evaluate(C, ["finality_gate[wait=]"], seeds=[0], cache=False), r"wait .* got ''"),
    "knob-negative": (lambda: fb.evaluate(C, ["react[wait=-10]"], seeds=[0], cache=False), r"react: wait .* got -10"),
    "knob-fraction": (lambda: fb.get_policy("finality_gate", wait=0.5), r"wait .* got 0.5"),
    "knob-pause": (lambda: fb.get_policy("reflection", pause=-1), r"reflection: pause .* got -1"),
    "knob-poll": (lambda: fb.get_policy("optimistic", poll_interval=0), r"optimistic: poll_interval .* got 0"),
    "knob-key-not-text": (lambda: fb.evaluate(C, [("sop", {1: 2})], seeds=[0], cache=False),
                          r"knobs of 'sop' must be named by identifiers, got 1"),
    "sweep-empty": (lambda: sweep(fb.Run.make(n_tasks=9, seeds=[0]), {"costs": []}),
                    r"sweep: grid field\(s\) costs must be a non-empty list"),
    "sweep-unknown-field": (lambda: sweep(fb.Run.make(n_tasks=9, seeds=[0]), {"bogus": [1]}), r"unknown Run field"),
    "reprice-other-corpus": (lambda: fb.reprice(_rows(), fb.make_corpus(n_tasks=30, master_seed=5),
                                                fb.Costs(cogs_rate=0.5), fb.Costs()),
                             r"reprice: (rows of task|the row of).*corpus"),
    "reprice-teleport": (lambda: fb.reprice(_rows().assign(disposition="teleport"), C, fb.Costs(cogs_rate=0.5),
                                            fb.Costs()), r"unknown disposition\(s\) 'teleport'"),
    "reprice-not-a-corpus": (lambda: fb.reprice(_rows(), "corpus", fb.Costs(cogs_rate=0.5), fb.Costs()),
                             r"reprice: corpus must be the Corpus"),
    "evaluate-cache-empty": (lambda: fb.evaluate(C, ["sop"], seeds=[0], cache=""), r"evaluate: cache must be"),
    "uncopyable-object": (lambda: fb.evaluate(C, [Locked()], seeds=[0], cache=False),
                          r"cannot be deep-copied .*pass its class or a factory"),
    "costs-huge": (lambda: fb.Costs(dispute_fee=1e308), r"dispute_fee must be a finite number in \[0, 1e\+06\]"),
    "stamp-overwrite": (lambda: fb.Run.make(n_tasks=9, seeds=[0]).stamp(corpus="forged"),
                        r"may not replace the run's own corpus"),
}


@pytest.mark.parametrize("call, message", REFUSED.values(), ids=REFUSED.keys())
def test_each_door_answers_with_one_clear_error(call, message):
    with pytest.raises(fb.FinbenchError, match=message):
        call()


def test_a_run_with_profile_none_is_the_default_profile():
    none = fb.Run.make(n_tasks=9, seeds=[0], profile=None, cache=False)
    assert none.profile == fb.FaultProfile.default()
    pd.testing.assert_frame_equal(none.evaluate(), fb.Run.make(n_tasks=9, seeds=[0], cache=False).evaluate())


@pytest.mark.parametrize("tool", [42, None, object(), b"ship", ["ship"]], ids=["int", "none", "object", "bytes", "list"])
def test_a_tool_that_is_no_name_gets_a_json_error_observation(tool):
    env = fb.FinalityEnv(C.tasks[0])
    order = env.reset()["order_id"]
    obs = env.step(tool, order_id=order)
    assert "error" in obs and isinstance(obs["tool"], str)
    json.dumps(obs)  # observations are JSON, whatever came in
    assert env.calls_left == env.costs.step_budget - 1


def test_publish_meta_cannot_overwrite_the_runs_stamp(tmp_path):
    run = fb.Run.make(n_tasks=9, seeds=[0], cache=False)
    with pytest.raises(fb.FinbenchError, match="engine"):
        publish(pd.DataFrame({"a": [1]}), "t", run, to=tmp_path, meta={"engine": "99"})
    assert not (tmp_path / "t.csv").exists()


def test_a_table_is_replaced_whole_while_another_process_reads_it(tmp_path):
    """Readers see the old file or the new one, never a torn mix (1,553 of 5,714 reads were torn)."""
    frames = [pd.DataFrame({"x": [i] * 2000}) for i in range(2)]
    write_table(frames[0], "t", {"corpus": "c"}, tmp_path)
    wholes = {(tmp_path / "t.csv").read_text()}
    write_table(frames[1], "t", {"corpus": "c"}, tmp_path)
    wholes.add((tmp_path / "t.csv").read_text())
    seen, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            seen.append((tmp_path / "t.csv").read_text())

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(60):
        write_table(frames[i % 2], "t", {"corpus": "c"}, tmp_path)
    stop.set()
    reader.join()
    assert len(seen) > 0 and set(seen) <= wholes


class PrivilegedWithoutResolution:
    privileged = True

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return "close", {"order_id": self.order}


MORE = {
    "policies-an-int": (lambda: fb.evaluate(C, 5, seeds=[0], cache=False), r"policies must be a list"),
    "policies-a-dict": (lambda: fb.evaluate(C, {"sop": 1}, seeds=[0], cache=False), r"policies must be a list"),
    "policy-name-a-list": (lambda: fb.get_policy(["sop"]), r"a policy name must be a string"),
    "sweep-iterator": (lambda: sweep(fb.Run.make(n_tasks=9, seeds=[0], cache=False), {"costs": iter([fb.Costs()])}),
                       None),
    "sweep-summarise-text": (lambda: sweep(fb.Run.make(n_tasks=9, seeds=[0]), {"seeds": [[0]]}, "x"),
                             r"summarise must be f\(run, episodes\)"),
    "sweep-summarise-none": (lambda: sweep(fb.Run.make(n_tasks=9, seeds=[0], cache=False), {"seeds": [[0]]},
                                           lambda r, d: None), r"summarise must return a DataFrame"),
    "sweep-no-base": (lambda: sweep(None, {"seeds": [[0]]}), r"sweep: base must be a Run"),
    "privileged-begin": (lambda: fb.run_episode(C.tasks[0], PrivilegedWithoutResolution()),
                         r"is privileged .* begin must take \(brief, resolution\)"),
    "publish-no-run": (lambda: publish(pd.DataFrame({"a": [1]}), "x", None), r"publish: run must be the Run"),
    "publish-escaping-stem": (lambda: publish(pd.DataFrame({"a": [1]}), "../x", fb.Run.make(n_tasks=9, seeds=[0])),
                              r"stem must be a plain file name"),
    "grade-no-contract": (lambda: fb.grade_trace([], None), r"contract must be a Contract"),
    "load-trace-none": (lambda: fb.load_trace(None), r"load_trace: path must be a file path"),
    "load-corpus-none": (lambda: fb.load_corpus(None), r"load_corpus: path must be a file path"),
    "label-trailing-comma": (lambda: fb.evaluate(C, ["sop[patience=60,]"], seeds=[0], cache=False), r"bad knob ''"),
    "label-knob-twice": (lambda: fb.evaluate(C, ["sop[patience=60,patience=70]"], seeds=[0], cache=False),
                         r"knob 'patience' given twice"),
    "register-packaged-name": (lambda: fb.register_policy("plan", Locked, replace=True),
                               r"'plan' is one of the package's own policies"),
}


@pytest.mark.parametrize("call, message", MORE.values(), ids=MORE.keys())
def test_more_doors_from_the_hostile_pass(call, message):
    if message is None:  # the documented behaviour: an iterator of values is read once, like a list
        assert len(call()) == len(C) * len(fb.POLICIES)  # nine policies x 9 tasks x one seed
        return
    with pytest.raises(fb.FinbenchError, match=message):
        call()


def test_a_class_that_only_claims_to_be_built_in_takes_the_checked_path():
    from finbench.agents.policies import FinalityGate
    from finbench.sim.play import trusted

    Spoof = type("FinalityGate", (FinalityGate,), {"trusted": True, "__module__": "finbench.agents.policies"})
    assert trusted(FinalityGate()) and not trusted(Spoof())


def test_a_line_break_in_a_stamp_keeps_the_table_readable(tmp_path):
    from finbench.analysis.tables import read_table

    run = fb.Run.make(n_tasks=9, seeds=[0], cache=False)
    publish(pd.DataFrame({"a": [1, 2]}), "t", run, to=tmp_path, meta={"note": "a\nx,y"})
    assert read_table(tmp_path / "t.csv")["a"].tolist() == [1, 2]
    assert "# note: a x,y" in (tmp_path / "t.csv").read_text()
