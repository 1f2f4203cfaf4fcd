"""evaluate(): identical rows for any n_jobs and backend; the cache resumes (issue 3: acceptance 3)."""
import joblib
import pandas as pd
import pytest

import finbench as fb
from finbench.runner import evaluate

SMALL = fb.make_corpus(n_tasks=40)
POLS = ["random", "sop", "finality_gate", "majority_vote"]


def test_same_rows_for_any_n_jobs():
    a = evaluate(SMALL, POLS, seeds=range(3), n_jobs=1, cache=False)
    b = evaluate(SMALL, POLS, seeds=range(3), n_jobs=2, cache=False)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 40 * 3 * 4
    cols = {"task_id", "archetype", "unit", "twin_side", "policy", "seed", "position", "reference_position", "gap",
            "exact", "premature_irreversible", "n_calls", "end_t"} | {f"fired_{f}" for f in fb.FaultProfile().families}
    assert cols <= set(a.columns)


def test_same_rows_through_dask():
    distributed = pytest.importorskip("distributed")
    a = evaluate(SMALL, POLS, seeds=range(2), n_jobs=1, cache=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        with joblib.parallel_config(backend="dask"):
            b = evaluate(SMALL, POLS, seeds=range(2), n_jobs=2, cache=False)
    pd.testing.assert_frame_equal(a, b)


def test_cache_resumes_and_is_reused(tmp_path):
    full = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    files = sorted(tmp_path.rglob("*.pkl"))
    assert files
    # an interrupted run: some chunks missing, one torn
    for f in files[::3]:
        f.unlink()
    files[1].write_bytes(b"torn")
    stamps = {f: f.stat().st_mtime_ns for f in files if f.exists() and f != files[1]}
    again = evaluate(SMALL, POLS, seeds=range(2), cache=tmp_path)
    pd.testing.assert_frame_equal(full, again)
    assert all(f.stat().st_mtime_ns == t for f, t in stamps.items())  # finished chunks were not recomputed
    # a subset of policies reuses the same files
    sub = evaluate(SMALL, ["sop"], seeds=range(2), cache=tmp_path)
    pd.testing.assert_frame_equal(sub, full[full.policy == "sop"].reset_index(drop=True))


def test_cache_keys_separate_what_differs(tmp_path):
    a = evaluate(SMALL, ["react"], seeds=[0], cache=tmp_path)
    b = evaluate(SMALL, [("sop", {"poll_interval": 10})], seeds=[0], cache=tmp_path)
    c = evaluate(SMALL, ["react"], seeds=[0], profile=fb.FaultProfile.none(), cache=tmp_path)
    d = evaluate(SMALL, ["react"], seeds=[0], costs=fb.Costs(dispute_fee=50.0), cache=tmp_path)
    assert b.policy.iloc[0] == "sop[poll_interval=10]"
    assert not a.position.equals(c.position) and not a.gap.equals(d.gap)


def test_bad_policy_is_refused_before_any_work():
    with pytest.raises(ValueError, match="unknown policy"):
        evaluate(SMALL, ["nope"], cache=False)
    with pytest.raises(ValueError, match="does not take"):
        evaluate(SMALL, [("sop", {"nope": 1})], cache=False)
