"""Bad input to corpora, runs, the Gymnasium wrapper and the pipeline (found by the hostile pass of
issue 18): each reproduction gets its clear error, naming the argument, or its documented
behaviour. Table-driven: one row per reproduction; the deeper tests live with each module
(tests/agents/test_gym.py, tests/running/test_evaluation.py, tests/test_pipeline.py)."""
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.sim import corpus as corpus_mod
from finbench.sim.corpus import Corpus, load_corpus
from finbench.sim.task import CorpusError

ROOT = Path(__file__).resolve().parent.parent
SMALL = fb.make_corpus(n_tasks=40)


# --- corpus files hold whole twin pairs ------------------------------------------------------------

def _pair(corpus, archetype="pending_settle"):
    """(index of the settle half, index of the fail half) of the first twin pair whose settle half is `archetype`."""
    for i, t in enumerate(corpus.tasks):
        if t.twin_side == "settle" and t.archetype == archetype:
            j = next(j for j, u in enumerate(corpus.tasks) if u.twin_id == t.twin_id and u.twin_side == "fail")
            return i, j
    raise AssertionError(f"no {archetype} twin in the corpus")


def _drop(tasks, i):
    return tasks[:i] + tasks[i + 1:]


def _edit(tasks, i, **changes):
    return tasks[:i] + (dataclasses.replace(tasks[i], **changes),) + tasks[i + 1:]


def _no_fail_half(tasks):
    s, f = _pair(SMALL)
    return _drop(tasks, f), tasks[s].task_id, r"twin '[^']+' must have a settle and a fail half, got only the " \
                                              r"settle half \(the fail half is missing\)"


def _no_settle_half(tasks):
    s, f = _pair(SMALL)
    return _drop(tasks, s), tasks[f].task_id, r"twin '[^']+' must have a settle and a fail half, got only the fail half"


def _two_settle_halves(tasks):
    s, f = _pair(SMALL, "unresolvable")  # either outcome is allowed there, so only the twin check can object
    return (_edit(tasks, f, twin_side="settle", outcome="settled", task_id=tasks[s].task_id + "2"),
            tasks[s].task_id + "2", r"twin '[^']+' must have one settle half, got a second after task ")


def _halves_of_two_orders(tasks):
    s, f = _pair(SMALL)
    return (_edit(tasks, f, order_id="ord-9999", other_order_id="ord-9999-prev"), tasks[f].task_id,
            r"the halves of twin '[^']+' must share the order id and the unit, got 'ord-9999'/")


def _halves_of_two_units(tasks):
    s, f = _pair(SMALL)
    return (_edit(tasks, f, unit="u-elsewhere"), tasks[f].task_id,
            r"the halves of twin '[^']+' must share the order id and the unit, got '[^']+'/'u-elsewhere'")


def _fail_half_that_settles(tasks):
    s, f = _pair(SMALL, "unresolvable")
    return (_edit(tasks, f, outcome="settled"), tasks[f].task_id,
            r"outcome must be 'failed' on the fail half of twin '[^']+', got 'settled'")


def _other_order_is_the_order(tasks):
    i = next(i for i, t in enumerate(tasks) if t.twin_id is None)
    return (_edit(tasks, i, other_order_id=tasks[i].order_id), tasks[i].task_id,
            r"other_order_id must differ from order_id \(the unrelated order is another order\)")


def _twin_half_with_its_own_order_as_other(tasks):
    s, f = _pair(SMALL)
    return (_edit(tasks, s, other_order_id=tasks[s].order_id), tasks[s].task_id,
            r"other_order_id must differ from order_id")


BROKEN_CORPORA = {
    "no_fail_half": _no_fail_half,  # the reproduction: a re-sealed file missing one half
    "no_settle_half": _no_settle_half,
    "two_settle_halves": _two_settle_halves,
    "halves_of_two_orders": _halves_of_two_orders,
    "halves_of_two_units": _halves_of_two_units,
    "fail_half_that_settles": _fail_half_that_settles,
    "other_order_is_the_order": _other_order_is_the_order,
    "twin_half_with_its_own_order_as_other": _twin_half_with_its_own_order_as_other,
}


OWN_ORDER = ("other_order_is_the_order", "twin_half_with_its_own_order_as_other")
"""Refused already where the `Corpus` is built (every task is checked there), so no file can be sealed."""


@pytest.mark.parametrize("name", OWN_ORDER)
def test_a_task_whose_other_order_is_its_own_is_refused_where_the_corpus_is_built(name):
    tasks, culprit, _ = BROKEN_CORPORA[name](SMALL.tasks)
    with pytest.raises(CorpusError, match=rf"task '{re.escape(culprit)}': other_order_id must differ from order_id"):
        Corpus(tasks, SMALL.master_seed)


@pytest.mark.parametrize("tamper", [v for k, v in BROKEN_CORPORA.items() if k not in OWN_ORDER],
                         ids=[k for k in BROKEN_CORPORA if k not in OWN_ORDER])
def test_a_resealed_corpus_without_whole_twin_pairs_is_refused_naming_the_task(tmp_path, tamper, monkeypatch):
    tasks, culprit, what = tamper(SMALL.tasks)
    path = Corpus(tasks, SMALL.master_seed).save(tmp_path / "c.jsonl")  # save seals it: fingerprint and digest
    line = 1 + next(i for i, t in enumerate(tasks, start=1) if t.task_id == culprit)
    with pytest.raises(CorpusError, match=rf"^{re.escape(str(path))}:{line}: task '{re.escape(culprit)}': {what}"):
        load_corpus(path)
    # the seal holds: without the twin check the file would load (and fail later, e.g. KeyError: 'settle')
    monkeypatch.setattr(corpus_mod, "twin_problem", lambda tasks: None)
    assert load_corpus(path).fingerprint == Corpus(tasks).fingerprint


def test_whole_pairs_in_any_order_load(tmp_path):
    shuffled = tuple(reversed(SMALL.tasks))
    loaded = load_corpus(Corpus(shuffled, SMALL.master_seed).save(tmp_path / "c.jsonl"))
    assert len(loaded.twin_pairs) == len(SMALL.twin_pairs) > 0
    assert all(s.twin_side == "settle" and f.twin_side == "fail" for s, f in loaded.twin_pairs)
    for name in ("corpus_public.jsonl", "corpus_regen.jsonl"):  # the committed files hold whole pairs
        assert len(load_corpus(ROOT / "data" / name).twin_pairs) == 45


def test_a_corpus_built_in_memory_without_whole_pairs_says_so():
    tasks, culprit, _ = _no_fail_half(SMALL.tasks)
    with pytest.raises(CorpusError, match=rf"^Corpus: task '{culprit}': twin .* \(the fail half is missing\)$"):
        Corpus(tasks).twin_pairs  # noqa: B018 - was KeyError: 'settle'


# --- one row per reproduction of issue 18 (the doors of this pass) ----------------------------------

def _gym_deep_brackets():
    from finbench.agents.gym import FinalityGym

    env = FinalityGym(SMALL)
    env.reset(seed=0)
    text, *_ = env.step("[" * 100000)  # was RecursionError
    assert env.observation_space.contains(text) and "nest(s) too deeply" in json.loads(text)["error"]


def _gym_long_tool_name():
    from finbench.agents.gym import FinalityGym

    env = FinalityGym(SMALL)
    env.reset(seed=0)
    text, *_ = env.step(json.dumps({"name": "t" * 20000, "arguments": {}}))  # was outside observation_space
    assert env.observation_space.contains(text) and "unknown tool" in json.loads(text)["error"]


def _gym_unknown_task():
    from finbench.agents.gym import FinalityGym

    with pytest.raises(FinbenchError, match=r"^FinalityGym\.reset: options\['task_id'\] must be a task id of the "
                                            r"corpus \(e\.g\. '[^']+'\), got 'nope'$"):
        FinalityGym(SMALL).reset(options={"task_id": "nope"})  # was KeyError: 'nope'


def _cache_fifo(tmp_path):
    import signal
    import warnings

    from finbench.agents.registry import resolve_policies
    from finbench.running import cache as K
    from finbench.running.evaluation import CHUNK_TASKS, CacheWarning, evaluate

    tiny = fb.make_corpus(n_tasks=CHUNK_TASKS)  # one chunk
    ids = [t.task_id for t in tiny.tasks]
    ref = resolve_policies(["react"])[0]
    key = K.chunk_key(tiny.fingerprint, ids, ref.cache_id, [0], fb.FaultProfile.default(), fb.Costs(),
                      fb.ProbeMode.full())
    path = K.chunk_path(tmp_path, ref.label, key)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)

    def ring(signum, frame):
        raise TimeoutError("evaluate hung on a FIFO in the cache")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(60)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rows = evaluate(tiny, ["react"], seeds=[0], cache=tmp_path)  # was: hangs
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert any(issubclass(w.category, CacheWarning) and "not a regular file: a FIFO" in str(w.message) for w in seen)
    # every column equal; the origin may differ (what earlier tests of this process left in the memos)
    assert rows.drop(columns="origin").equals(evaluate(tiny, ["react"], seeds=[0], cache=False).drop(columns="origin"))


def _pipeline(*args):
    return subprocess.run([sys.executable, "-m", "finbench.pipeline", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _pipeline_misspelt_notebook():
    out = _pipeline("00_corpus", "01_headlin")  # was: ran 00_corpus, exit 0
    assert (out.returncode, out.stdout) == (64, "")
    assert re.fullmatch(r"pipeline: NAME must be a notebook, one of .*, got '01_headlin'\n", out.stderr)


def _pipeline_check_missing_folder():
    out = _pipeline("--check", "/nonexistent")  # was: exit 1 (= stale) with a traceback
    assert out.returncode == 66
    assert out.stderr == ("pipeline --check: ROOT must be an existing folder (a checkout of the repository), "
                          "got '/nonexistent'\n")


DOORS = {
    "gym.step('[' * 100000)": _gym_deep_brackets,
    "gym.step(20 KB tool name)": _gym_long_tool_name,
    "gym.reset(task_id='nope')": _gym_unknown_task,
    "evaluate over a FIFO in the cache": _cache_fifo,
    "pipeline 00_corpus 01_headlin": _pipeline_misspelt_notebook,
    "pipeline --check /nonexistent": _pipeline_check_missing_folder,
}


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
def test_door(door, tmp_path):
    if door is _cache_fifo:
        if not hasattr(os, "mkfifo"):
            pytest.skip("POSIX only")
        door(tmp_path)
    else:
        door()
