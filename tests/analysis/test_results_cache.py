"""The results cache (finbench/analysis/results_cache.py): a kept result is the computed one, exactly; nothing
is kept that its key does not decide; a warm splits run reads each corpus's tables instead of its rows."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import finbench as fb
from finbench.analysis import results_cache as R
from finbench.experiments import experiment
from finbench.sim.splitseeds import split_seeds


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "policy": ["gate", "react", "sop"],
        "gap": [0.1 + 0.2, math.nan, -1e-300],  # floats that a rounded encoding would change
        "episodes": np.array([3, 4, 5], dtype="int64"),
        "holds": [True, False, True],
        "mixed": ["a", None, math.nan],  # object: text, None and NaN kept apart
    })


class Counted:
    def __init__(self, *frames):
        self.frames, self.calls = frames, 0

    def __call__(self):
        self.calls += 1
        return tuple(df.copy() for df in self.frames)


def _assert_same(got: tuple, want: tuple) -> None:
    assert len(got) == len(want) > 0
    for a, b in zip(got, want):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert list(a.dtypes) == list(b.dtypes)
        assert [type(v) for v in a["mixed"]] == [type(v) for v in b["mixed"]] if "mixed" in b else True


def test_a_kept_result_comes_back_exactly_and_is_not_computed_again(tmp_path):
    compute = Counted(_frame(), _frame().iloc[:0].reset_index(drop=True))
    first = R.frames(tmp_path, "t", ["a"], compute)
    again = R.frames(tmp_path, "t", ["a"], compute)
    assert compute.calls == 1
    _assert_same(again, first)
    _assert_same(first, compute())
    assert again[0]["gap"].iloc[0] == 0.1 + 0.2 and math.isnan(again[0]["gap"].iloc[1])


def test_another_key_is_computed(tmp_path):
    compute = Counted(_frame())
    R.frames(tmp_path, "t", ["a", 1], compute)
    R.frames(tmp_path, "t", ["a", 2], compute)
    R.frames(tmp_path, "u", ["a", 1], compute)
    assert compute.calls == 3


@pytest.mark.parametrize("cache, cacheable", [(False, True), ("dir", False)])
def test_nothing_is_kept_without_cache_or_for_rows_played_afresh(cache, cacheable, tmp_path):
    compute = Counted(_frame())
    where = tmp_path if cache == "dir" else cache
    for _ in range(2):
        _assert_same(R.frames(where, "t", ["a"], compute, cacheable=cacheable), compute.frames)
    assert compute.calls == 2
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("edit", ["value", "cut", "garbage", "format"])
def test_an_altered_file_is_computed_again_and_rewritten(edit, tmp_path):
    compute = Counted(_frame())
    R.frames(tmp_path, "t", ["a"], compute)
    (path,) = list(tmp_path.glob("results-*/t/*.json"))
    text = path.read_text()
    if edit == "value":
        doc = json.loads(text)
        doc["frames"][0]["data"][2][0] = 999  # the first episode count
        text = json.dumps(doc)
    elif edit == "cut":
        text = text[: len(text) // 2]
    elif edit == "garbage":
        text = "not json"
    else:
        text = text.replace(R.FORMAT, "finbench-results/0")
    path.write_text(text)
    got = R.frames(tmp_path, "t", ["a"], compute)
    assert compute.calls == 2
    _assert_same(got, compute.frames)
    assert R.frames(tmp_path, "t", ["a"], compute) and compute.calls == 2  # rewritten whole


@pytest.mark.parametrize("odd", ["index", "dates", "int column names"])
def test_a_frame_that_would_not_come_back_exactly_is_never_kept(odd, tmp_path):
    df = _frame()
    if odd == "index":
        df = df.set_index("policy")
    elif odd == "dates":
        df = df.assign(when=pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-03"]))
    else:
        df.columns = range(len(df.columns))
    compute = Counted(df)
    for _ in range(2):
        got = R.frames(tmp_path, "t", ["a"], compute)
        pd.testing.assert_frame_equal(got[0], df, check_exact=True)
    assert compute.calls == 2


def test_the_digest_covers_every_module_the_claims_file_and_nothing_else(tmp_path):
    pkg = tmp_path / "finbench"
    for rel in ("sim/world.py", "analysis/metrics.py", "experiments/splits.py", "notes.md"):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(f"# {rel}\n")
    claims = tmp_path / "paper_claims.csv"
    claims.write_text("id,paper\nx,1\n")
    base = R.digest_of(pkg, claims)
    assert R.digest_of(pkg, claims) == base
    for rel in ("sim/world.py", "analysis/metrics.py", "experiments/splits.py"):
        before = (pkg / rel).read_text()
        (pkg / rel).write_text(before + "x = 1\n")
        assert R.digest_of(pkg, claims) != base, rel
        (pkg / rel).write_text(before)
    claims.write_text("id,paper\nx,2\n")
    assert R.digest_of(pkg, claims) != base
    claims.write_text("id,paper\nx,1\n")
    (pkg / "notes.md").write_text("edited\n")  # not code
    assert R.digest_of(pkg, claims) == base


def test_other_digests_folders_go_and_nothing_else(tmp_path):
    old = tmp_path / "results-0123456789abcdef"
    keep = [tmp_path / "episodes-e5-0123456789abcdef", tmp_path / "results-notadigest", tmp_path / "mine"]
    for d in [old, *keep]:
        d.mkdir()
        (d / "f.json").write_text("{}")
    R._PRUNED.discard(str(tmp_path.resolve()))
    R.frames(tmp_path, "t", ["a"], Counted(_frame()))
    assert not old.exists() and all(d.exists() for d in keep)
    assert (tmp_path / f"results-{R.package_digest()}").is_dir()


def test_packaged_is_the_package_s_own_files(tmp_path):
    assert R.packaged(experiment("headline")) and R.packaged(R)
    mine = tmp_path / "mine.py"
    mine.write_text("")
    import importlib.util

    spec = importlib.util.spec_from_file_location("mine", mine)
    module = importlib.util.module_from_spec(spec)
    assert not R.packaged(module) and not R.packaged(json)


# --- the splits experiment: each corpus's tables and verdicts ------------------------------------------------

@pytest.fixture(scope="module")
def modules():
    return experiment("splits"), experiment("headline"), (experiment("ablation"), 1)


def _splits(run, modules):
    splits, headline, also = modules
    return splits.episodes(run, split_seeds(1, fb.REGEN_SEED), headline, also=(also,))


def test_a_warm_splits_run_reads_what_a_cold_one_computed(modules, tmp_path, monkeypatch):
    run = fb.Run.make(fb.PUBLIC_SEED, 16, seeds=range(2), n_boot=20, cache=tmp_path, n_jobs=1)
    cold = _splits(run, modules)
    kept = list(tmp_path.glob("results-*/splits/*.json"))
    assert len(kept) == 1 + len(split_seeds(1, fb.REGEN_SEED))  # the public corpus and each regenerated one

    def refuse(*a, **k):
        raise AssertionError("a warm run evaluated episodes")

    monkeypatch.setattr(fb.Run, "evaluate", refuse)
    warm = _splits(run, modules)
    assert set(warm) == set(cold) == {"values", "verdicts"}
    for name in cold:
        assert len(cold[name]) > 0
        pd.testing.assert_frame_equal(warm[name], cold[name], check_exact=True)
    # another bootstrap is another key: computed
    with pytest.raises(AssertionError, match="evaluated episodes"):
        _splits(run.replace(n_boot=21), modules)


def test_a_user_policy_without_a_cache_id_keeps_no_splits_result(modules, tmp_path):
    class Shipper:
        def begin(self, brief):
            self.order = brief["order_id"]

        def act(self, obs):
            return "ship", {"order_id": self.order}

    run = fb.Run.make(fb.PUBLIC_SEED, 16, seeds=range(1), n_boot=20, cache=tmp_path, n_jobs=1,
                      policies=["finality_gate", Shipper])
    _splits(run, modules)
    assert not list(tmp_path.glob("results-*/splits/*.json"))


def test_a_module_from_outside_the_package_keeps_no_splits_result(modules, tmp_path):
    splits, headline, also = modules
    outside = tmp_path / "my_headline.py"
    shutil.copy(Path(headline.__file__), outside)
    import importlib.util

    spec = importlib.util.spec_from_file_location("my_headline", outside)
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    run = fb.Run.make(fb.PUBLIC_SEED, 30, seeds=range(1), n_boot=20, cache=tmp_path / "c", n_jobs=1)
    splits.episodes(run, split_seeds(1, fb.REGEN_SEED), mine)
    assert not list((tmp_path / "c").glob("results-*/splits/*.json"))


def test_a_results_folder_that_cannot_be_made_warns_once_and_computes(tmp_path):
    base = tmp_path / "cache"
    base.write_text("a file, not a folder")
    compute = Counted(_frame())

    def splits_corpus():  # frames' caller, as the splits experiment's is; the warning points past it
        return R.frames(base, "t", ["a"], compute)

    with pytest.warns(R.CacheWarning, match=rf"^the results cache folder {base} cannot be used \(.+\); "
                                            r"computing afresh$") as caught:
        got = splits_corpus()
    # the line that called the splits experiment's corpus (here), never one inside finbench
    assert len(caught) == 1 and caught[0].filename == __file__
    _assert_same(got, compute.frames)
    assert compute.calls == 1 and base.read_text() == "a file, not a folder"


# --- an experiment's tables: the ablation's and the exploit search's notebooks ---------------------------------

def _ablation_run(cache, **kw):
    from finbench.experiments import ablation
    return fb.Run.make(20260321, 12, seeds=range(1), policies=ablation.POLICIES[:2], n_boot=20, cache=cache, **kw)


def test_an_experiment_s_tables_are_kept_by_run_and_params_and_come_back_exactly(tmp_path, monkeypatch):
    from finbench.experiments import ablation
    run = _ablation_run(tmp_path)
    calls = []
    real = ablation.episodes
    monkeypatch.setattr(ablation, "episodes", lambda r, *params: calls.append(params) or real(r))

    first = R.experiment_tables(run, ablation, 3)
    assert list(first) == list(ablation.TABLES) and calls == [(3,)]
    pd.testing.assert_frame_equal(first["table6"], ablation.tables(real(run), run)["table6"], check_exact=True)
    again = R.experiment_tables(run, ablation, 3)
    assert len(calls) == 1  # read, not computed: no episode loaded either
    for name in ablation.TABLES:
        pd.testing.assert_frame_equal(again[name], first[name], check_exact=True)
    R.experiment_tables(run, ablation, 4)  # another parameter: computed
    R.experiment_tables(_ablation_run(tmp_path, costs=fb.Costs(dispute_fee=30.0)), ablation, 3)
    assert len(calls) == 3
    R.experiment_tables(_ablation_run(False), ablation, 3)
    R.experiment_tables(_ablation_run(False), ablation, 3)
    assert len(calls) == 5  # cache=False: nothing kept


def test_an_experiment_whose_tables_are_not_its_tables_stems_is_refused(tmp_path, monkeypatch):
    from finbench.experiments import ablation
    run = _ablation_run(tmp_path)
    monkeypatch.setattr(ablation, "episodes", lambda r: None)
    monkeypatch.setattr(ablation, "tables", lambda rows, r: {"table6": pd.DataFrame()})
    with pytest.raises(ValueError, match="not its TABLES"):
        R.experiment_tables(run, ablation)


def test_the_digest_follows_a_reloaded_module(monkeypatch):
    """Edit a module and reload it (as JupyterLab's autoreload does): the results are keyed by the code now,
    not by the code the process first imported (issue 43: the old table was served)."""
    import importlib

    import finbench.experiments.ablation as ablation
    from finbench.analysis import results_cache as R

    first = R.package_digest()
    monkeypatch.setattr(R, "digest_of", lambda pkg, claims: "as-edited-on-disk")
    assert R.package_digest() == first  # nothing reloaded: the code in this process is the code it hashed
    importlib.reload(ablation)
    assert R.package_digest() == "as-edited-on-disk"
