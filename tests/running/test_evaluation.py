"""evaluate(): identical rows for any n_jobs and backend; a cache that resumes and cannot be fooled."""
import contextlib
import json
import os
import pickle
import signal
import warnings

import joblib
import pandas as pd
import pytest

import finbench as fb
from finbench.running import cache as K
from finbench.running import evaluation as runner
from finbench.agents.registry import PolicyError
from finbench.running.evaluation import CacheWarning, evaluate
from tests.rows import assert_same_rows, origins

SMALL = fb.make_corpus(n_tasks=40)
POLS = ["random", "sop", "finality_gate", "majority_vote"]


@pytest.mark.slow  # worker processes
def test_same_rows_for_any_n_jobs():
    a = evaluate(SMALL, POLS, seeds=range(3), n_jobs=1, cache=False)
    b = evaluate(SMALL, POLS, seeds=range(3), n_jobs=2, cache=False)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 40 * 3 * 4
    cols = {"task_id", "archetype", "unit", "twin_side", "policy", "seed", "position", "reference_position", "gap",
            "exact", "premature_irreversible", "n_calls", "end_t"} | {f"fired_{f}" for f in fb.FaultProfile().families}
    assert cols <= set(a.columns)
    # rows in (policy, corpus, seed) order
    order = {t.task_id: i for i, t in enumerate(SMALL.tasks)}
    key = list(zip(a.policy.map(POLS.index), a.task_id.map(order), a.seed))
    assert key == sorted(key)


@pytest.mark.slow  # a dask cluster's processes
def test_same_rows_through_dask():
    distributed = pytest.importorskip("distributed")
    a = evaluate(SMALL, POLS, seeds=range(2), n_jobs=1, cache=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        with joblib.parallel_config(backend="dask"):
            b = evaluate(SMALL, POLS, seeds=range(2), n_jobs=2, cache=False)
            c = evaluate(SMALL, POLS, seeds=range(2), n_jobs=-1, cache=False)
            # a cluster's workers are not this machine's cores: -1 is one worker per chunk of work
            assert runner.cap_jobs(-1, 500) == 500 and runner.cap_jobs(64, 500) == 64
            assert runner.cap_jobs(1, 500) == 1 and runner.cap_jobs(-1, 1) == 1
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)
    cores = os.cpu_count() or 1
    assert runner.cap_jobs(-1, 500) == cores  # locally, capped at the cores again
    with joblib.parallel_config(backend="threading"):
        assert runner.cap_jobs(-1, 500) == cores


def test_cached_rows_equal_fresh_rows_exactly(tmp_path):
    fb.clear_caches()  # the first run plays: this process's memos from earlier tests would derive every row
    fresh = evaluate(SMALL, POLS, seeds=range(2), cache=False)
    first = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    again = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    assert_same_rows(fresh, first)  # the first may derive rows from this process's memos: origins may differ
    assert_same_rows(fresh, again)
    assert set(again["origin"]) == {"cache"} and "played" in set(first["origin"])
    assert not list(tmp_path.rglob("*.pkl")) and list(tmp_path.rglob("*.json"))


def test_cache_resumes_and_is_reused(tmp_path):
    full = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    files = sorted(tmp_path.rglob("*.json"))
    # an interrupted run: some chunks missing, one torn
    for f in files[::3]:
        f.unlink()
    files[1].write_bytes(b'{"format": "finbench-episodes/1", "key": ')
    stamps = {f: f.stat().st_mtime_ns for f in files if f.exists() and f != files[1]}
    assert stamps
    with pytest.warns(CacheWarning, match="recomputed 1 cached chunk"):
        again = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    assert_same_rows(full, again)
    assert all(f.stat().st_mtime_ns == t for f, t in stamps.items())  # finished chunks were not recomputed
    # a subset of policies reuses the same files
    sub = evaluate(SMALL, ["sop"], seeds=range(2), cache=tmp_path)
    assert_same_rows(sub, full[full.policy == "sop"].reset_index(drop=True))


def test_cache_keys_separate_what_differs(tmp_path):
    a = evaluate(SMALL, ["react"], seeds=[0], cache=tmp_path)
    b = evaluate(SMALL, [("sop", {"poll_interval": 10})], seeds=[0], cache=tmp_path)
    c = evaluate(SMALL, ["react"], seeds=[0], profile=fb.FaultProfile.none(), cache=tmp_path)
    d = evaluate(SMALL, ["react"], seeds=[0], costs=fb.Costs(dispute_fee=50.0), cache=tmp_path)
    assert b.policy.iloc[0] == "sop[poll_interval=10]"
    assert not a.position.equals(c.position) and not a.gap.equals(d.gap)


class _Boom:
    """Unpickling this writes a marker file: the proof that a pickle would have run code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_pickle_never_runs(tmp_path):
    cache = tmp_path / "cache"
    fresh = evaluate(SMALL, ["eager"], seeds=[0], cache=cache)
    marker = tmp_path / "pwned"
    for f in cache.rglob("*.json"):
        f.write_bytes(pickle.dumps(_Boom(str(marker))))
        f.with_suffix(".pkl").write_bytes(pickle.dumps(_Boom(str(marker))))  # the old format's name too
    with pytest.warns(CacheWarning):
        again = evaluate(SMALL, ["eager"], seeds=[0], cache=cache)
    assert not marker.exists()
    assert_same_rows(fresh, again)


def test_duplicate_labels_are_refused():
    with pytest.raises(PolicyError, match="share the label 'sop'"):
        evaluate(SMALL, ["sop", "sop"], cache=False)
    with pytest.raises(PolicyError, match="share the label"):
        evaluate(SMALL, ["sop[patience=60]", ("sop", {"patience": 60})], cache=False)


def test_a_file_copied_over_another_policys_is_not_believed(tmp_path):
    eager = evaluate(SMALL, ["eager"], seeds=[0], cache=tmp_path)
    evaluate(SMALL, ["finality_gate"], seeds=[0], cache=tmp_path)
    here = tmp_path / K.version_folder()
    gate_files = sorted((here / "finality_gate").glob("*.json"))
    assert gate_files
    for f, g in zip(sorted((here / "eager").glob("*.json")), gate_files):
        f.write_bytes(g.read_bytes())
    with pytest.warns(CacheWarning, match="finality_gate"):
        again = evaluate(SMALL, ["eager"], seeds=[0], cache=tmp_path)
    # recomputed, not loaded; played or derived from this process's memos (which earlier tests fill): origins apart
    assert "cache" not in origins(again)
    assert_same_rows(eager, again)


@pytest.mark.parametrize("tamper", ["rows", "value", "seeds", "label_in_rows"])
def test_a_tampered_file_is_recomputed(tmp_path, tamper):
    fresh = evaluate(SMALL, ["sop"], seeds=[0, 1], cache=tmp_path)
    f = sorted(tmp_path.rglob("*.json"))[0]
    first, body = f.read_bytes().split(b"\n", 1)
    head, cols = json.loads(first), json.loads(body)
    if tamper == "rows":  # a consistent forgery of a shorter file: still not what was asked
        cols = {k: v[:-1] for k, v in cols.items()}
        head["rows"] -= 1
    elif tamper == "value":
        cols["gap"][0] = -1.0  # the digest no longer matches
    elif tamper == "seeds":
        head["seeds"] = [0, 2]
    else:
        cols["policy"] = ["react"] * len(cols["policy"])  # a consistent forgery, rows of another policy
    body = json.dumps(cols).encode()
    if tamper != "value":
        head["sha256"] = K._digest(body)
    f.write_bytes(json.dumps(head).encode() + b"\n" + body)
    with pytest.warns(CacheWarning):
        again = evaluate(SMALL, ["sop"], seeds=[0, 1], cache=tmp_path)
    # recomputed, not loaded; played or derived from this process's memos (which earlier tests fill): origins apart
    assert "cache" not in origins(again)
    assert_same_rows(fresh, again)


def test_the_cache_key_covers_the_engine_source(tmp_path):
    import shutil

    src = K.Path(K.__file__).resolve().parents[1]
    pkg = tmp_path / "pkg"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    base = K.source_digest(pkg)
    assert K.source_digest() == K.source_digest(src) == base
    plotting = pkg / "analysis" / "plotting.py"
    plotting.write_text(plotting.read_text() + "\n# a figure tweak\n")
    assert K.source_digest(pkg) == base  # presentation code does not invalidate episodes
    for edited in ("agents/policies.py", "sim/world.py", "grading/__init__.py", "running/evaluation.py",
                   "agents/prompts/system.txt"):
        f = pkg / edited
        keep = f.read_text()
        f.write_text(keep + "\n# an edit\n")
        assert K.source_digest(pkg) != base, edited
        f.write_text(keep)
    assert K.source_digest(pkg) == base


def test_an_edited_engine_does_not_meet_old_rows(tmp_path, monkeypatch):
    evaluate(SMALL, ["sop"], seeds=[0], cache=tmp_path)
    before = set(tmp_path.rglob("*.json"))
    monkeypatch.setattr(K, "source_digest", lambda pkg=None: "edited-source")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # a new key: a miss, not a rejected file
        evaluate(SMALL, ["sop"], seeds=[0], cache=tmp_path)
    assert set(tmp_path.rglob("*.json")) > before


def test_bad_policy_is_refused_before_any_work():
    with pytest.raises(PolicyError, match="unknown policy"):
        evaluate(SMALL, ["nope"], cache=False)
    with pytest.raises(PolicyError, match="does not take"):
        evaluate(SMALL, [("sop", {"nope": 1})], cache=False)


def test_n_jobs_is_capped_at_the_work(capsys):
    tiny = fb.make_corpus(n_tasks=6)
    a = evaluate(tiny, ["sop"], seeds=[0], n_jobs=1000, cache=False)
    assert "capped at 1" in capsys.readouterr().err
    pd.testing.assert_frame_equal(a, evaluate(tiny, ["sop"], seeds=[0], cache=False))


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _within(seconds):
    """Fail (not hang) if the block takes longer than `seconds`: a FIFO once hung the run."""
    def ring(signum, frame):
        raise _Timeout(f"took more than {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _chunk_paths(cache_dir, corpus, policy, seeds):
    """The path of every chunk, exactly as `evaluate` names them (default profile, costs and probe)."""
    from finbench.agents.registry import resolve_policies

    ref = resolve_policies([policy])[0]
    tasks = list(corpus.tasks)
    out = []
    size = runner.chunk_tasks(len(list(seeds)))
    for i in range(0, len(tasks), size):
        ids = [t.task_id for t in tasks[i:i + size]]
        key = K.chunk_key(corpus.fingerprint, ids, ref.cache_id, list(seeds), fb.FaultProfile.default(),
                          fb.Costs(), fb.ProbeMode.full())
        out.append((K.chunk_path(cache_dir, ref.label, key), K.size_bound(ref.label, ids, seeds)))
    return out


def _plant(path, kind, good, bound):
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink_to_dev_zero":
        os.symlink("/dev/zero", path)
    elif kind == "symlink_to_a_good_file":
        os.symlink(good, path)
    elif kind == "dangling_symlink":
        os.symlink(path.with_name("nowhere.json"), path)
    elif kind == "directory":
        path.mkdir()
        (path / "inside.json").write_text("{}")
    elif kind == "socket":
        import socket

        s, here = socket.socket(socket.AF_UNIX), os.getcwd()
        os.chdir(path.parent)  # a socket's path is limited to ~100 bytes; bind the name relative to its folder
        try:
            s.bind(path.name)
        finally:
            os.chdir(here)
        return s
    elif kind == "multi_gb_sparse_file":
        with open(path, "wb") as fh:
            fh.truncate(3 * 2 ** 30)
    elif kind == "just_over_the_bound":
        path.write_bytes(good.read_bytes().ljust(bound + 1, b" "))
    return None


ENTRY_KINDS = ["fifo", "symlink_to_dev_zero", "symlink_to_a_good_file", "dangling_symlink", "directory", "socket",
               "multi_gb_sparse_file", "just_over_the_bound"]


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(signal, "SIGALRM"), reason="POSIX only")
@pytest.mark.parametrize("kind", ENTRY_KINDS)
def test_an_entry_that_is_not_a_regular_file_is_skipped_and_recomputed(tmp_path, kind):
    seeds = [0, 1, 2]  # 24 tasks a chunk: the 40 tasks are two chunks
    fresh = evaluate(SMALL, ["sop"], seeds=seeds, cache=False)
    good_dir = tmp_path / "good"
    evaluate(SMALL, ["sop"], seeds=seeds, cache=good_dir)
    cache = tmp_path / "cache"
    paths, bounds = zip(*_chunk_paths(cache, SMALL, "sop", seeds))
    goods = [g for g, _ in _chunk_paths(good_dir, SMALL, "sop", seeds)]
    assert len(paths) == 2 and all(g.is_file() for g in goods)  # the names are the ones evaluate uses
    held = _plant(paths[0], kind, goods[0], bounds[0])
    try:
        with _within(60), pytest.warns(CacheWarning, match=f"recomputed 1 cached chunk.*{paths[0].name}"):
            again = evaluate(SMALL, ["sop"], seeds=seeds, cache=cache)
    finally:
        if held is not None:
            held.close()
    assert_same_rows(fresh, again, check_exact=True)
    if kind == "directory":
        assert paths[0].is_dir()  # left alone, not written into
    else:  # replaced by the recomputed chunk, which the next run believes
        assert paths[0].is_file() and not paths[0].is_symlink()
        assert paths[0].stat().st_size == goods[0].stat().st_size
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)
            assert_same_rows(fresh, evaluate(SMALL, ["sop"], seeds=seeds, cache=cache))
    assert not [p for p in cache.rglob("*.tmp")]


def test_load_chunk_says_what_the_entry_is(tmp_path):
    path = tmp_path / "sop" / "k.json"
    path.parent.mkdir()
    assert K.load_chunk(path, "k", "sop", ["t"], [0]) == (None, None)  # no entry: a plain miss
    os.mkfifo(path)
    assert K.load_chunk(path, "k", "sop", ["t"], [0]) == (None, "not a regular file: a FIFO")
    path.unlink()
    os.symlink("/dev/zero", path)
    assert K.load_chunk(path, "k", "sop", ["t"], [0]) == (None, "not a regular file: a symbolic link")
    path.unlink()
    path.mkdir()
    assert K.load_chunk(path, "k", "sop", ["t"], [0]) == (None, "not a regular file: a directory")
    path.rmdir()
    with open(path, "wb") as fh:
        fh.truncate(5 * 2 ** 30)
    cols, why = K.load_chunk(path, "k", "sop", ["t"], [0])
    assert cols is None and why.startswith(f"{5 * 2 ** 30} bytes, more than a chunk of this size can hold")


def test_the_size_bound_is_generous_and_capped():
    ids = [f"ord-{i:04d}" for i in range(runner.CHUNK_TASKS)]
    bound = K.size_bound("sop[patience=60]", ids, range(5))
    assert 2 ** 20 < bound < 8 * 2 ** 20  # ~550 bytes a row is real; this allows ~8 KB
    assert K.size_bound("x" * 10 ** 6, ids * 1000, range(1000)) == K.MAX_CHUNK_BYTES


class _Script:
    """A user's policy that plays fixed calls (some malformed), then closes."""

    name = "script"

    def begin(self, brief):
        self.order, other = brief["order_id"], brief["customer_orders"][0]
        self.calls = [("wait", {"order_id": self.order, "ticks": 30}), ("read_bank", {"order_id": self.order}),
                      ("wait", {"ticks": 7, "order_id": self.order}), ("wait", {"order_id": self.order, "ticks": True}),
                      ("wait", {"order_id": self.order, "ticks": ""}), ("wait", {"order_id": self.order}),
                      ("read_ledger", {"order_id": other}), ("wait", {"order_id": other, "ticks": 5}),
                      ("retry_capture", {"order_id": self.order, "idempotency_key": "key-9"})]

    def act(self, obs):
        return self.calls.pop(0) if self.calls else ("close", {"order_id": self.order})


def test_the_calls_column_spells_each_call_as_tool_where_and_arguments():
    # COLUMNS' doc: one `tool[@other][:args]` a call, ';'-joined, arguments other than order_id in order
    df = evaluate(fb.make_corpus(n_tasks=1), [_Script], seeds=[0], cache=False)
    assert df.calls.tolist() == [
        "wait:30;read_bank;wait:7;wait:True;wait;wait;read_ledger@other;wait@other:5;retry_capture:key-9;close"]


def _rewrite(path, change) -> None:
    """Rewrite a cache file's columns with `change` and a digest made anew (as a hand edit would)."""
    head, body = path.read_bytes().split(b"\n", 1)
    cols = json.loads(body)
    change(cols)
    body = json.dumps(cols, separators=(",", ":")).encode()
    meta = json.loads(head)
    meta["sha256"] = K._digest(body)
    path.write_bytes(json.dumps(meta).encode() + b"\n" + body)


def _drop_unit(cols):
    del cols["unit"]


def _gap_as_text(cols):
    cols["gap"] = [str(g) for g in cols["gap"]]


def _rows_swapped(cols):
    for c in cols:
        cols[c][0], cols[c][1] = cols[c][1], cols[c][0]


def _columns_reordered(cols):
    moved = cols.pop("task_id")
    cols["task_id"] = moved


@pytest.mark.parametrize("change, why", [
    (_drop_unit, "columns other than this version's"), (_gap_as_text, "gap ... NaN|wrong type in column 'gap'"),
    (_rows_swapped, "rows out of"), (_columns_reordered, "columns other than this version's, or in another order"),
], ids=["a-missing-column", "string-gaps", "reordered-rows", "reordered-columns"])
def test_a_chunk_with_a_digest_made_anew_but_the_wrong_shape_is_recomputed_with_a_warning(tmp_path, change, why):
    fresh = evaluate(SMALL, ["sop"], seeds=[0, 1], cache=tmp_path)
    files = sorted(tmp_path.rglob("*.json"))
    assert files
    _rewrite(files[0], change)
    fb.clear_caches()
    with pytest.warns(CacheWarning, match="recomputed 1 cached chunk") as caught:
        again = evaluate(SMALL, ["sop"], seeds=[0, 1], cache=tmp_path)
    words = str(caught[0].message)
    assert any(w.strip() in words for w in why.split("|")) or "wrong type" in words or "rows" in words, words
    assert_same_rows(fresh, again)
    assert set(again["origin"]) == {"played"}  # the one chunk, played again
