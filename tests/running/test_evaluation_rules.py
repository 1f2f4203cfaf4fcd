"""Rules of the runner (`finbench.running.evaluation`): the `calls` string, derived truth-only rows,
the memo of truth-only episodes, the worker cap and the notes it prints.

Fast: a few tasks of a small corpus, no cache folder but `tmp_path`. Expected values are spelled by hand
from COLUMNS' doc and `run_chunk`'s docstring, never by running the same code twice.
"""
from __future__ import annotations

import os

import pytest

import finbench as fb
from finbench.agents.registry import PolicyRef, as_ref
from finbench.running import derivation as D
from finbench.running import evaluation as E
from finbench.sim import constants as C

O = "ord-1"
TASKS = fb.make_corpus(n_tasks=6).tasks


# --- calls: one `tool[@other][:args]` a call, ';'-joined ---------------------------------------------------

@pytest.mark.parametrize("actions, spelled", [
    ([], ""),
    ([("close", {"order_id": O})], "close"),
    ([("wait", {"order_id": O, "ticks": 30})], "wait:30"),
    ([("wait", {"ticks": 7, "order_id": O})], "wait:7"),                     # argument order does not matter
    ([("wait", {"order_id": O})], "wait"),
    ([("wait", {"order_id": O, "ticks": True})], "wait:True"),               # a bool is not ticks: spelled as given
    ([("wait", {"order_id": O, "ticks": ""})], "wait"),                      # nothing to spell
    ([("wait", {"order_id": O, "ticks": 5, "x": 1})], "wait:5,1"),           # every other argument, in order
    ([("escalate", {"order_id": O, "ticks": 3})], "escalate:3"),             # not a wait, though it has ticks
    ([("refund", {"order_id": O, "amount": 5, "ticks": 3})], "refund:5,3"),
    ([("retry_capture", {"order_id": O, "idempotency_key": "k-9"})], "retry_capture:k-9"),
    ([("read_ledger", {"order_id": "ord-2"})], "read_ledger@other"),
    ([("wait", {"order_id": "ord-2", "ticks": 5})], "wait@other:5"),
    ([("noop", {})], "noop@other"),                                          # no order at all: not the case's
    ([("x", {"a": 1, "b": "c"})], "x@other:1,c"),
    ([("probe_processor", {"order_id": O}), ("wait", {"order_id": O, "ticks": 2}), ("close", {"order_id": O})],
     "probe_processor;wait:2;close"),
    ([("wait", {"order_id": O, "ticks": 2}), ("read_bank", {"order_id": O}), ("wait", {"order_id": O, "ticks": 4})],
     "wait:2;read_bank;wait:4"),
])
def test_the_calls_string_spells_each_call(actions, spelled):
    assert E._calls([(t, tool, args) for t, (tool, args) in enumerate(actions)], O) == spelled


# --- the row of an episode, and the row derived from a truth-only one ----------------------------------------

def _played(task, label, seed, profile):
    return E.episode_row(task, as_ref(label), seed, profile, fb.Costs())


def test_an_episode_row_has_every_column_in_order():
    task = TASKS[0]
    row = _played(task, "sop", 3, fb.FaultProfile.default())
    assert len(row) == len(E.COLUMNS)
    got = dict(zip(E.COLUMNS, row))
    assert (got["task_id"], got["policy"], got["seed"]) == (task.task_id, "sop", 3)
    assert got["n_calls"] == len(got["calls"].split(";"))  # the budget used is the calls made


def test_a_derived_row_is_the_played_row_under_another_seed_and_profile():
    # the oracle-free gate reads no system: its episode is truth-only, so another seed or profile
    # changes only the seed and the firings
    ref = as_ref("finality_gate")
    for task in TASKS[:4]:
        env = E.play(E.FinalityEnv(task, 0, fb.FaultProfile.default(), fb.Costs()), ref.make())
        assert env.saw_only_truth
        blind = (E._row(env, ref.label), tuple(env.world.captures))
        for seed, profile in [(7, fb.FaultProfile.default()), (2, fb.FaultProfile.only("duplicate", "reorder",
                                                                                          intensity=0.9))]:
            derived = D.derive_seed(blind, task, seed, profile)
            assert derived == _played(task, "finality_gate", seed, profile)
            assert derived[E.COLUMNS.index("seed")] == seed and len(derived) == len(E.COLUMNS)


def test_the_fired_columns_sit_between_unrelated_and_retry_at():
    i = E.COLUMNS.index("unrelated")
    assert E.COLUMNS[i + 1:i + 1 + len(C.FAMILIES)] == tuple(f"fired_{f}" for f in C.FAMILIES)
    assert E.COLUMNS[i + 1 + len(C.FAMILIES)] == "retry_at"


# --- run_chunk: rows in (task, seed) order; the memo of truth-only episodes -------------------------------------

def _rows(parts):
    """Each policy's rows as tuples of `COLUMNS` (its `origin` apart: `_origins`)."""
    return [list(zip(*(cols[c] for c in E.COLUMNS))) for cols in parts]


def _origins(parts):
    return [cols["origin"] for cols in parts]


def test_run_chunk_gives_columns_per_policy_in_task_then_seed_order():
    refs = [as_ref("sop"), as_ref("finality_gate")]
    # a profile and costs other than the defaults: what is played is what was asked
    profile = fb.FaultProfile.only("duplicate", "reorder", intensity=0.9)
    costs = fb.Costs(dispute_fee=50.0, step_budget=12)
    parts = E.run_chunk(TASKS[:2], refs, [4, 1], profile, costs)
    assert [list(p) for p in parts] == [[*E.COLUMNS, "origin"]] * 2
    for ref, cols in zip(refs, parts):
        assert cols["policy"] == [ref.label] * 4
        assert cols["task_id"] == [TASKS[0].task_id] * 2 + [TASKS[1].task_id] * 2
        assert cols["seed"] == [4, 1, 4, 1]
        expect = [E.episode_row(t, ref, s, profile, costs) for t in TASKS[:2] for s in (4, 1)]
        assert _rows([cols])[0] == expect and set(cols["origin"]) <= {"played", "derived_seed"}
    default = E.run_chunk(TASKS[:2], refs[:1], [4, 1], fb.FaultProfile.default(), fb.Costs())
    assert default[0] != parts[0]  # the check above can fail: the arguments change the rows


def test_only_a_sharing_run_keeps_episodes_that_saw_only_the_truth_and_keys_them_fully():
    gate = as_ref("finality_gate")
    fb.clear_caches()
    E.run_chunk(TASKS[:3], [gate], [0, 1], fb.FaultProfile.default(), fb.Costs())
    assert not D.TRUTH_ONLY  # not shared by default
    E.run_chunk(TASKS[:3], [as_ref("sop"), gate], [0, 1], fb.FaultProfile.default(), fb.Costs(), None, True)
    # one entry per task, for the gate only (sop reads systems), keyed by task, policy, label, costs and probe
    assert set(D.TRUTH_ONLY) == {(t, gate.cache_key(), gate.label, fb.Costs().key(), None) for t in TASKS[:3]}
    for (task, *_), (row, captures) in D.TRUTH_ONLY.items():
        assert row == _played(task, "finality_gate", 0, fb.FaultProfile.default())
    fb.clear_caches()


def test_a_shared_episode_is_derived_not_played_and_equals_a_played_one(monkeypatch):
    gate = as_ref("finality_gate")
    fb.clear_caches()
    E.run_chunk(TASKS[:2], [gate], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    played = []
    real = E.play
    monkeypatch.setattr(E, "play", lambda env, policy: played.append(env.seed) or real(env, policy))
    none = fb.FaultProfile.none()
    parts = E.run_chunk(TASKS[:2], [gate], [5, 6], none, fb.Costs(), None, True)
    assert played == []  # both tasks' episodes came from the memo
    assert _origins(parts) == [["derived_seed"] * 4]
    monkeypatch.undo()
    assert _rows(parts)[0] == [_played(t, "finality_gate", s, none) for t in TASKS[:2] for s in (5, 6)]
    fb.clear_caches()


def test_the_memo_of_episodes_that_saw_only_the_truth_is_cleared_when_full(monkeypatch):
    gate = as_ref("finality_gate")
    fb.clear_caches()
    monkeypatch.setattr(D, "TRUTH_ONLY_SIZE", 2)
    E.run_chunk(TASKS[:3], [gate], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    # two entries filled it; the third task's entry found it full, cleared it and went in alone
    assert [k[0] for k in D.TRUTH_ONLY] == [TASKS[2]]
    fb.clear_caches()


def test_a_user_policy_is_never_kept_even_in_a_sharing_run():
    from tests.user_policies import Closer

    fb.clear_caches()
    parts = E.run_chunk(TASKS[:2], [as_ref(Closer)], [0, 1], fb.FaultProfile.default(), fb.Costs(), None, True)
    assert not D.TRUTH_ONLY and not D.SAME_READS and parts[0]["calls"] == ["close"] * 4


# --- the same-reads memo: episodes that added no capture, by what their reads saw ------------------------------

def test_only_a_sharing_run_keeps_episodes_by_their_reads():
    sop = as_ref("sop")
    fb.clear_caches()
    E.run_chunk(TASKS[:3], [sop], [0, 1], fb.FaultProfile.default(), fb.Costs())
    assert not D.SAME_READS
    E.run_chunk(TASKS[:3], [sop], [0, 1], fb.FaultProfile.default(), fb.Costs(), None, True)
    keys = {(t, sop.cache_key(), sop.label, fb.Costs().key()) for t in TASKS[:3]}  # no probe mode: checked apart
    kept = {k for k, _ in D.SAME_READS}
    assert kept and kept <= keys and {s for _, s in D.SAME_READS} <= {0, 1}
    for (key, seed), variants in D.SAME_READS.items():
        kept, = variants  # one profile played: one variant
        assert kept._signature is None  # what its reads saw is worked out only when another profile asks
        captures, until, reads = kept.record
        assert captures == ()  # sop never retries
        assert kept.row == _played(key[0], "sop", seed, fb.FaultProfile.default())
        assert sum(reads) > 0 and all(t >= 0 for _, t in until)
        assert kept.profile == fb.FaultProfile.default() and kept.probe is None and not kept.probed
    fb.clear_caches()


def test_an_episode_that_added_a_capture_is_kept_with_its_captures():
    fb.clear_caches()
    tasks = fb.make_corpus(n_tasks=40).tasks
    E.run_chunk(tasks, [as_ref("react")], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    variants = [v for vs in D.SAME_READS.values() for v in vs]
    made = [v for v in variants if v.record[0]]
    assert made and len(made) < len(variants)  # some episodes retried, some did not
    for kept in made:
        assert all(isinstance(k, str) and k and isinstance(t, int) for k, t in kept.record[0])
    fb.clear_caches()


def test_a_capture_whose_deliveries_differ_under_another_profile_is_played_again(monkeypatch):
    """The same reads of the base are not enough: the agent's captures' deliveries draw the profile's faults,
    so an episode is derived only where those read are the same too; every row equals a played one."""
    fb.clear_caches()
    tasks, react = fb.make_corpus(n_tasks=60).tasks, as_ref("react")
    E.run_chunk(tasks, [react], [0], fb.FaultProfile.none(), fb.Costs(), None, True)
    derived = []
    real = D.same_reads
    monkeypatch.setattr(D, "same_reads", lambda *a: derived.append(r := real(*a)) or r)
    loss = fb.FaultProfile.only("loss")
    parts = E.run_chunk(tasks, [react], [0], loss, fb.Costs(), None, True)
    monkeypatch.undo()
    retry_at = E.COLUMNS.index("retry_at")
    assert any(r is not None and r[retry_at] for r in derived)  # derived with a capture of its own
    assert any(r is None for r in derived)
    assert _rows(parts)[0] == [_played(t, "react", 0, loss) for t in tasks]
    fb.clear_caches()


def test_the_same_reads_memo_is_cleared_when_full(monkeypatch):
    fb.clear_caches()
    monkeypatch.setattr(D, "SAME_READS_SIZE", 2)
    E.run_chunk(TASKS[:3], [as_ref("sop")], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    assert [k[0][0] for k in D.SAME_READS] == [TASKS[2]]
    fb.clear_caches()


def test_a_read_that_saw_other_deliveries_is_played_not_derived(monkeypatch):
    """Under a profile where some system holds other deliveries by the time it was read, the episode is
    played again: derived only where every read would return the same payload."""
    fb.clear_caches()
    sop, tasks = as_ref("sop"), fb.make_corpus(n_tasks=40).tasks
    loss = fb.FaultProfile.only("loss")
    E.run_chunk(tasks, [sop], [0], fb.FaultProfile.none(), fb.Costs(), None, True)
    played = []
    real = E.play
    monkeypatch.setattr(E, "play", lambda env, policy: played.append(env.task) or real(env, policy))
    parts = E.run_chunk(tasks, [sop], [0], loss, fb.Costs(), None, True)
    monkeypatch.undo()
    assert 0 < len(played) < len(tasks)
    assert _rows(parts)[0] == [_played(t, "sop", 0, loss) for t in tasks]
    how = _origins(parts)[0]  # each row says which it was
    assert how.count("played") == len(played) and how.count("derived_reads") == len(tasks) - len(played)
    fb.clear_caches()


# --- cap_jobs: at most one worker per piece of work and per core ----------------------------------------------

def test_cap_jobs_caps_at_the_work_and_the_cores(capsys, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert E.cap_jobs(1, 10) == 1 and E.cap_jobs(-1, 10) == 4 and E.cap_jobs(-1, 2) == 2
    assert E.cap_jobs(3, 10) == 3 and E.cap_jobs(4, 10) == 4
    assert capsys.readouterr().err == ""  # nothing capped, nothing said (-1 is never "capped")
    assert E.cap_jobs(8, 10) == 4
    assert capsys.readouterr().err == "note: n_jobs=8 capped at 4 (10 chunks of work, 4 cores)\n"
    assert E.cap_jobs(3, 2, where="x", pieces="tasks") == 2
    assert capsys.readouterr().err == "note: n_jobs=3 capped at 2 (2 tasks of work, 4 cores)\n"
    assert E.cap_jobs(2, 0) == 1  # never fewer than one worker
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: one core
    assert E.cap_jobs(-1, 10) == 1


@pytest.mark.parametrize("bad", [0, -2, True, 1.0, "2", None])
def test_cap_jobs_refuses_what_is_not_a_worker_count(bad):
    with pytest.raises(fb.FinbenchError, match="n_jobs"):
        E.cap_jobs(bad, 10, where="evaluate")


def test_a_label_is_shown_without_control_characters():
    assert E._shown("odd\x1b[2J\nname\t") == "odd?[2J?name?"
    assert E._shown("sop[patience=60]") == "sop[patience=60]"


class _Retrier:
    """Captures again under two fresh keys (one of them twice), then closes."""

    name = "retrier"

    def begin(self, brief):
        o = self.o = brief["order_id"]
        self.q = [("wait", {"order_id": o, "ticks": 10}), ("retry_capture", {"order_id": o, "idempotency_key": "k1"}),
                  ("wait", {"order_id": o, "ticks": 5}), ("retry_capture", {"order_id": o, "idempotency_key": "k2"}),
                  ("retry_capture", {"order_id": o, "idempotency_key": "k2"})]

    def act(self, obs):
        return self.q.pop(0) if self.q else ("close", {"order_id": self.o})


def test_retry_at_lists_the_ticks_of_fresh_key_captures():
    task = TASKS[0]
    env = E.play(E.FinalityEnv(task, 0, fb.FaultProfile.none(), fb.Costs()), _Retrier())
    row = dict(zip(E.COLUMNS, E._row(env, "retrier")))
    # by hand from the calls made: the tick each retry_capture under a key not used before took effect,
    # which is the tick the next call was issued at (calls are sequential; no fault charges twice here)
    calls = env.calls()
    seen, fresh = set(), []
    for (_, tool, args), (after, _, _) in zip(calls, calls[1:]):
        if tool == "retry_capture" and args["idempotency_key"] not in seen:
            seen.add(args["idempotency_key"])
            fresh.append(str(after))
    assert len(fresh) == 2
    assert row["retry_at"] == ";".join(fresh)
    assert row["calls"] == "wait:10;retry_capture:k1;wait:5;retry_capture:k2;retry_capture:k2;close"
    assert row["n_calls"] == 6


@pytest.mark.parametrize("bad, shown", [(0, "0"), (True, "True"), ("2", "'2'"), (-2, "-2")])
def test_a_bad_worker_count_is_named_with_its_caller_and_value(bad, shown):
    with pytest.raises(fb.FinbenchError) as raised:
        E.cap_jobs(bad, 10)  # the default caller is evaluate
    assert str(raised.value) == f"evaluate: n_jobs must be a positive integer, or -1 for every core, got {shown}"
    with pytest.raises(fb.FinbenchError, match=r"^run: n_jobs must be"):
        E.cap_jobs(bad, 10, where="run")


def test_under_a_cluster_backend_the_cap_is_the_work_only(monkeypatch, capsys):
    monkeypatch.setattr(E, "_cluster_backend", lambda: True)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert E.cap_jobs(-1, 500) == 500 and E.cap_jobs(64, 500) == 64 and E.cap_jobs(64, 10) == 10
    assert E.cap_jobs(1, 500) == 1 and E.cap_jobs(-1, 1) == 1 and E.cap_jobs(8, 1) == 1
    assert "capped at 1 (1 chunks of work, 2 cores)" in capsys.readouterr().err


def test_a_cluster_is_not_capped_at_this_machines_cores(monkeypatch):
    monkeypatch.setattr(E, "_cluster_backend", lambda: True)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert E.cap_jobs(2, 500) == 2 and E.cap_jobs(-1, 2) == 2 and E.cap_jobs(-1, 3) == 3


def test_a_memo_entry_of_the_full_probe_never_serves_another_probe_mode():
    # the gate is truth-only under the full probe; under a delayed probe it plays differently and must be played
    from finbench.sim.probe import ProbeMode

    gate = as_ref("finality_gate")
    fb.clear_caches()
    E.run_chunk(TASKS[:4], [gate], [0], fb.FaultProfile.default(), fb.Costs(), None, True)
    assert len(D.TRUTH_ONLY) == 4
    delayed = ProbeMode.delayed()
    parts = E.run_chunk(TASKS[:4], [gate], [0, 1], fb.FaultProfile.default(), fb.Costs(), delayed, True)
    expect = [E._row(E.play(E.FinalityEnv(t, s, fb.FaultProfile.default(), fb.Costs(), probe=delayed), gate.make()),
                     gate.label) for t in TASKS[:4] for s in (0, 1)]
    assert _rows(parts)[0] == expect
    fb.clear_caches()


def test_episode_row_plays_under_the_given_costs_and_probe():
    from finbench.sim.probe import ProbeMode

    costs, probe, profile = fb.Costs(dispute_fee=50.0, step_budget=12), ProbeMode.delayed(), fb.FaultProfile.none()
    ref = as_ref("finality_gate")
    for task in TASKS[:3]:
        row = E.episode_row(task, ref, 2, profile, costs, probe)
        env = E.FinalityEnv(task, 2, profile, costs, probe=probe)
        assert row == E._row(E.play(env, ref.make()), ref.label)
        assert env.costs is costs and env.probe is probe


# --- evaluate's own doors: the names its errors give, what it prints by default --------------------------------

def test_a_bad_probe_is_named_as_evaluate_s_argument():
    with pytest.raises(fb.FinbenchError, match=r"^evaluate: probe must be"):
        fb.evaluate(fb.make_corpus(n_tasks=2), ["sop"], seeds=[0], probe="loud", cache=False)


def test_a_bad_cache_says_what_it_may_be():
    with pytest.raises(fb.FinbenchError, match=r"^evaluate: cache must be True \(data/cache\), False \(no cache\) "
                                              r"or a folder path, got ''$"):
        fb.evaluate(fb.make_corpus(n_tasks=2), ["sop"], seeds=[0], cache="")


def test_evaluate_shows_no_progress_bar_unless_asked(capsys):
    fb.evaluate(fb.make_corpus(n_tasks=2), ["sop"], seeds=[0], cache=False)
    assert capsys.readouterr().err == ""


def test_a_declared_cache_id_that_cannot_be_hashed_is_noted_once(capsys):
    E.note_uncached([as_ref("sop")], ["registry:sop"])  # a built-in with its key: nothing to say
    assert capsys.readouterr().err == ""

    class Ref:
        label, builtin, cache_id = "mine", False, "v1"

    E.note_uncached([Ref()], [None])
    assert capsys.readouterr().err == ("note: playing mine afresh (not cached): it declares a cache_id, but its code "
                                       "or state cannot be read or hashed to check it\n")


# --- check_inputs names each argument in its message ------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(corpus=[1]), "evaluate: corpus must be a Corpus (make_corpus, load_corpus), got [1]"),
    (dict(profile="loud"), "evaluate: profile must be a FaultProfile (FaultProfile.default(), .none(), .only(...), "
                           ".without(...)), got 'loud'"),
    (dict(costs=3), "evaluate: costs must be a Costs, got 3"),
    (dict(seeds=5), "evaluate: seeds must be an iterable of integers >= 0, e.g. range(5), got 5"),
])
def test_check_inputs_names_the_argument_and_what_it_may_be(kwargs, message):
    args = dict(corpus=fb.make_corpus(n_tasks=2), seeds=[0], profile=None, costs=None)
    args.update(kwargs)
    with pytest.raises(fb.FinbenchError) as e:
        E.check_inputs("evaluate", args["corpus"], args["seeds"], args["profile"], args["costs"])
    assert str(e.value) == message


def test_an_empty_corpus_and_a_bad_seed_are_named():
    from finbench.sim.corpus import Corpus

    with pytest.raises(fb.FinbenchError) as e:
        E.check_inputs("evaluate", Corpus((), None), [0], None, None)
    assert str(e.value).startswith("evaluate: corpus must be a Corpus with at least one task, got ")
    with pytest.raises(fb.FinbenchError, match=r"^evaluate: each seed must be"):
        E.check_inputs("evaluate", fb.make_corpus(n_tasks=2), [-1], None, None)


# --- evaluate's counts, default cache folder, rejected files, progress -------------------------------------------

def test_cache_true_is_the_default_folder_and_the_counts_say_played_then_loaded(tmp_path, monkeypatch):
    from finbench.running.stats import EPISODES

    monkeypatch.setattr(E, "CACHE_DIR", tmp_path / "default")
    corpus = fb.make_corpus(n_tasks=3)
    fb.clear_caches()  # played, not derived from what earlier tests left in this process's memos
    before = dict(EPISODES)
    fb.evaluate(corpus, ["sop"], seeds=[0, 1], cache=True)
    assert (EPISODES["played"] - before.get("played", 0), EPISODES["loaded"] - before.get("loaded", 0)) == (6, 0)
    assert list((tmp_path / "default").glob("episodes-*/sop/*.json"))  # written under the default folder
    fb.clear_caches()
    before = dict(EPISODES)
    df = fb.evaluate(corpus, ["sop"], seeds=[0, 1], cache=True)
    assert (EPISODES["played"] - before.get("played", 0), EPISODES["loaded"] - before.get("loaded", 0)) == (0, 6)
    assert set(df["origin"]) == {"cache"}


def test_a_rejected_cache_file_warns_at_the_callers_line(tmp_path):
    corpus = fb.make_corpus(n_tasks=3)
    fb.evaluate(corpus, ["sop"], seeds=[0], cache=tmp_path)
    (path,) = list(tmp_path.glob("episodes-*/sop/*.json"))
    path.write_bytes(path.read_bytes()[:-5])  # cut short: its digest no longer matches
    fb.clear_caches()
    with pytest.warns(E.CacheWarning, match="recomputed 1 cached chunk") as caught:
        fb.evaluate(corpus, ["sop"], seeds=[0], cache=tmp_path)
    assert caught[0].filename == __file__


def test_progress_shows_the_chunks(capsys):
    fb.evaluate(fb.make_corpus(n_tasks=2), ["sop"], seeds=[0], cache=False, progress=True)
    import re

    assert re.search(r"(^|\r)chunks: ", capsys.readouterr().err)


class _Escalator:
    """A user's policy (played through the public step): escalates at once."""

    name = "escalator"

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return "escalate", {"order_id": self.order}


def test_progress_over_overlapped_episodes_counts_them_out_of_their_total(capsys):
    """A user's episodes on threads (max_connections > 1) show an `episodes` bar out of all of them: 2 tasks x 2
    seeds = 4."""
    fb.evaluate(fb.make_corpus(n_tasks=2), [_Escalator], seeds=[0, 1], cache=False, progress=True,
                max_connections=2)
    import re

    assert re.search(r"(^|\r)episodes: +\d+%\|.*\| \d/4 ", capsys.readouterr().err)


class _Cyclic:
    """A user's policy whose every episode leaves a reference cycle behind (a node that points at itself)."""

    name = "cyclic"
    made = 0

    def begin(self, brief):
        node = {"brief": brief}
        node["self"] = node
        self.node = node
        self.order = brief["order_id"]

    def act(self, obs):
        return "escalate", {"order_id": self.order}


def test_evaluate_leaves_nothing_frozen_so_a_users_cycles_are_collected():
    """`batch_mode` freezes what a batch left alive; `evaluate` hands it back to the collector on the way out
    (issue 43: one small evaluate once left 60,894 objects frozen for good, a user's cycles among them)."""
    import gc
    import weakref

    gc.unfreeze()  # what earlier tests' direct `run_chunk` calls froze (a caller's own freeze is left alone)
    corpus = fb.make_corpus(n_tasks=6)
    fb.evaluate(corpus, [_Cyclic, "sop"], seeds=[0, 1], cache=False)
    assert gc.get_freeze_count() == 0

    class Box:
        pass

    box = Box()  # a cycle made outside, kept alive across an evaluate, then dropped
    box.me = box
    gone = weakref.ref(box)
    fb.evaluate(corpus, ["sop"], seeds=[0], cache=False)
    del box
    gc.collect()
    assert gone() is None and gc.get_freeze_count() == 0


def test_a_trusted_class_is_derived_across_seeds_only_if_it_says_it_ignores_the_seed():
    """`ignores_seed` is opt-in: a package class that takes the fast path but does not say it ignores the seed
    is played under every seed, never derived (a new built-in that read the seed would be silently wrong)."""
    from finbench.agents.policies import Policy
    from finbench.sim.play import fast_path

    class Unsaid(Policy):  # reads no system (truth-only) and says nothing of the seed
        name = "unsaid"

        def act(self, obs):
            return self.call("close")

    class Said(Unsaid):
        name = "said"
        ignores_seed = True

    fast_path(Unsaid)
    fast_path(Said)
    refs = [PolicyRef("unsaid", Unsaid, cache_id="registry:unsaid", builtin=True),
            PolicyRef("said", Said, cache_id="registry:said", builtin=True)]
    fb.clear_caches()
    parts = E.run_chunk(TASKS[:6], refs, [0, 1, 2], fb.FaultProfile.default(), fb.Costs(), None, True)
    unsaid, said = _origins(parts)
    assert set(unsaid) == {"played"} and "derived_seed" in said
    label = E.COLUMNS.index("policy")
    assert [r[:label] + r[label + 1:] for r in _rows(parts)[0]] == [r[:label] + r[label + 1:] for r in _rows(parts)[1]]
    fb.clear_caches()


def test_what_a_batch_froze_outside_evaluate_is_handed_back_by_the_next_evaluate_and_a_callers_freeze_is_kept():
    """A batch run alone (`batch_mode`, as a direct `run_chunk` does) freezes its survivors with no `evaluate`
    around it to hand them back: the next `evaluate` does (they were kept for good, and every later evaluate
    counted them, a walk over each frozen object: 3.5 s of one test after a worker's earlier tests). An
    object frozen by the caller itself stays frozen."""
    import gc

    from finbench.sim.play import batch_mode

    gc.unfreeze()
    corpus = fb.make_corpus(n_tasks=6)
    with batch_mode():
        kept = [fb.run_episode(task, "sop", 0) for task in corpus.tasks]
    assert gc.get_freeze_count() > 0  # the batch's survivors
    fb.evaluate(corpus, ["sop"], seeds=[0], cache=False)
    assert gc.get_freeze_count() == 0 and len(kept) == 6

    gc.freeze()  # the caller's own (as a server does before it forks)
    mine = gc.get_freeze_count()
    try:
        assert mine > 0
        fb.evaluate(corpus, ["sop"], seeds=[0], cache=False)
        # still frozen (handed back, the count would be 0); frozen objects freed meanwhile move it a little
        assert gc.get_freeze_count() > mine // 2
    finally:
        gc.unfreeze()
