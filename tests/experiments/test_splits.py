"""Splits (issue 10): derived split seeds, the headline on several corpora, per-claim counts, spreads, the notebook."""
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.analysis.verdicts import VERDICTS, Claim, claims_frame
from finbench.experiments import headline as H
from finbench.experiments import splits as S
from finbench.analysis.tables import read_table
from finbench.sim.splitseeds import regenerated_seeds, split_seeds

# tests marked slow use full-size regenerated corpora, subprocesses and a notebook (make test-fast leaves them out)

ROOT = Path(__file__).resolve().parents[2]
N_SPLITS = 3


# --- split seeds -----------------------------------------------------------------------

@pytest.mark.slow
def test_split_seeds_are_distinct_and_never_the_public_or_regenerated_seed():
    s = regenerated_seeds(500)
    assert len(set(s)) == 500
    assert C.PUBLIC_SEED not in s and C.REGEN_SEED not in s
    assert all(isinstance(x, int) and 0 <= x < 2**32 for x in s)
    assert split_seeds(3) == (C.REGEN_SEED, *s[:3])
    # prefix-stable: fewer splits are the first of more (so notebooks share episodes)
    assert regenerated_seeds(10) == s[:10] and regenerated_seeds(0) == ()
    # another base gives other seeds, never the base itself
    other = regenerated_seeds(20, base=7)
    assert 7 not in other and not set(other) & set(s[:20])


def test_split_seeds_are_the_same_in_another_process():
    code = "from finbench.sim.splitseeds import regenerated_seeds; print(list(regenerated_seeds(12)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "123", "PATH": ""})
    assert out.stdout.strip() == str(list(regenerated_seeds(12)))


@pytest.mark.slow
@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, 10**6])
def test_split_seeds_refuse_bad_counts(bad):
    with pytest.raises(fb.FinbenchError):
        regenerated_seeds(bad)


# --- the headline on several corpora -----------------------------------------------------

@pytest.fixture(scope="module")
def small():
    run = fb.Run.make(n_tasks=30, seeds=range(2), n_boot=60, cache=False)
    values, verdicts = S.across(run, split_seeds(N_SPLITS), H)
    return run, values, verdicts


@pytest.mark.slow
def test_corpora_in_parallel_give_the_same_frames_and_counts(tmp_path):
    """One corpus a worker: the frames of one process, the workers' episodes counted here, and
    their episodes cached where one process finds them."""
    from finbench.memo import clear_caches
    from finbench.running.stats import EPISODES

    # corpora no other test draws: the workers (reused across a session) hold none of their episodes
    run = fb.Run.make(master_seed=909, n_tasks=12, seeds=range(2), n_boot=20)
    seeds = split_seeds(2, 919)

    def counted(r):
        before = Counter(EPISODES)
        frames = S.across(r, seeds, H)
        d = {k: EPISODES[k] - before[k] for k in ("played", "derived", "loaded")}
        return frames, {"simulated": d["played"] + d["derived"], "loaded": d["loaded"]}

    clear_caches()
    (values, verdicts), one = counted(run.replace(cache=tmp_path / "one"))
    assert one["simulated"] >= 3 * run.episodes and one["loaded"] == 0
    (par_values, par_verdicts), par = counted(run.replace(n_jobs=2, cache=tmp_path / "par"))
    pd.testing.assert_frame_equal(par_values, values)
    pd.testing.assert_frame_equal(par_verdicts, verdicts)
    assert par == one
    clear_caches()
    # warm: each corpus's result is read from the results cache, no episode is loaded or played
    assert counted(run.replace(cache=tmp_path / "par"))[1] == {"simulated": 0, "loaded": 0}
    # without the kept results, the workers' episodes are in the episode cache for one process
    for kept in (tmp_path / "par").glob("results-*"):
        shutil.rmtree(kept)
    clear_caches()
    assert counted(run.replace(cache=tmp_path / "par"))[1] == {"simulated": 0, "loaded": one["simulated"]}


@pytest.mark.slow
def test_a_worker_s_warnings_reach_the_caller_and_a_bad_n_jobs_is_named():
    import warnings

    from finbench.errors import FinbenchError

    run = fb.Run.make(master_seed=909, n_tasks=12, seeds=range(1), n_boot=20, cache=False)

    class Warns:
        """An experiment that warns on every corpus."""

        @staticmethod
        def episodes(r):
            return r.evaluate()

        @staticmethod
        def tables(df, r):
            warnings.warn(f"odd corpus {r.corpus.master_seed}", UserWarning)
            return {}

        @staticmethod
        def claims(tables):
            return []

    seeds = split_seeds(1, 919)
    for n_jobs in (1, 2):
        with pytest.warns(UserWarning) as caught:
            S.across(run.replace(n_jobs=n_jobs), seeds, H, also=(Warns,))
        got = [str(w.message) for w in caught if str(w.message).startswith("odd corpus")]
        assert got == [f"odd corpus {s}" for s in (909, *seeds)], n_jobs
    for bad in (2.0, "2", 0):
        with pytest.raises(FinbenchError, match=r"splits: n_jobs must be a positive integer, or -1"):
            S.across(run.replace(n_jobs=bad), seeds, H)


class _Odd(Exception):
    def __init__(self, what, where):  # two arguments: pickle cannot build it back
        super().__init__(f"{what} at {where}")


@pytest.mark.slow  # worker processes
def test_an_error_in_a_worker_reaches_the_caller_named():
    run = fb.Run.make(master_seed=909, n_tasks=12, seeds=range(1), n_boot=20, cache=False, n_jobs=2)

    class Fails:
        episodes = staticmethod(lambda r: None)

        @staticmethod
        def tables(df, r):
            raise _Odd("no tables", r.corpus.master_seed)

    with pytest.raises(RuntimeError, match=r"splits: on corpus \d+: _Odd: no tables at \d+"):
        S.across(run, split_seeds(1, 919), H, also=(Fails,))
    with pytest.raises(_Odd, match="no tables at 909"):  # one process: the error itself
        S.across(run.replace(n_jobs=1), split_seeds(1, 919), H, also=(Fails,))


@pytest.mark.slow
def test_every_corpus_holds_table2_and_the_headline_claims(small):
    run, values, verdicts = small
    seeds = [C.PUBLIC_SEED, *split_seeds(N_SPLITS)]
    assert sorted(values.split.unique()) == list(range(N_SPLITS + 2))
    assert values.drop_duplicates("split").master_seed.tolist() == seeds
    assert values.drop_duplicates("split").kind.tolist() == ["public"] + ["regenerated"] * (N_SPLITS + 1)
    for s, fp in values.drop_duplicates("split")[["master_seed", "corpus"]].itertuples(index=False):
        assert fp == fb.make_corpus(int(s), 30).fingerprint
    assert (values.groupby("split").policy.apply(list) == [list(fb.POLICIES)] * (N_SPLITS + 2)).all()
    ids = [c.id for c in H.claims(_tables(run))]
    assert (verdicts.groupby("split").id.apply(list) == [ids] * (N_SPLITS + 2)).all()


def _tables(run):
    df = run.evaluate()
    return H.tables(df, run)


def _direct(run, seed):
    r = run if seed is None else run.replace(corpus=fb.make_corpus(seed, len(run.corpus)))
    tables = _tables(r)
    return tables["table2"], claims_frame(H.claims(tables)).set_index("id")


@pytest.mark.slow
def test_per_claim_counts_equal_a_direct_recount(small):
    run, _, verdicts = small
    counts = S.claim_counts(verdicts).set_index("id")
    direct: dict[str, Counter] = {}
    for seed in split_seeds(N_SPLITS):
        recs = _direct(run, seed)[1]
        for cid, v in recs.verdict.items():
            direct.setdefault(cid, Counter())[v] += 1
    assert set(direct) == set(counts.index)
    for cid, tally in direct.items():
        row = counts.loc[cid]
        assert row.n == N_SPLITS + 1
        for v in VERDICTS:
            assert row[v.replace(" ", "_")] == tally[v], (cid, v)
        assert row.holds == tally["reproduced"]
        assert row.direction_holds == tally["reproduced"] + tally["same direction"]
    pub = _direct(run, None)[1]
    assert (counts.public_verdict == pub.verdict.reindex(counts.index)).all()


@pytest.mark.slow
def test_spread_is_the_regenerated_corpora_values_beside_the_paper_records(small):
    run, values, verdicts = small
    sp = S.spread(values, verdicts).set_index(["policy", "metric"])
    t2s = [_direct(run, s)[0].set_index("policy") for s in split_seeds(N_SPLITS)]
    for policy in fb.POLICIES:
        v = np.array([t.loc[policy, "mean_gap"] for t in t2s])
        row = sp.loc[(policy, "mean_gap")]
        assert row.n == len(v) and row["min"] == pytest.approx(v.min()) and row["max"] == pytest.approx(v.max())
        assert row["median"] == pytest.approx(np.median(v))
        assert row.range_lo == pytest.approx(np.quantile(v, 0.025))
        inside = ((v >= row.public_lo - 1e-9) & (v <= row.public_hi + 1e-9)).sum()
        assert row.inside_public_ci == inside
    # the paper's values are the headline records', never retyped (gate - ReAct shown negated)
    recs = _direct(run, None)[1]
    gate = sp.loc[("finality_gate", "mean_gap")]
    assert (gate.paper, gate.paper_lo, gate.paper_hi) == tuple(recs.loc["gate_gap", ["paper", "paper_lo", "paper_hi"]])
    react = sp.loc[("react", "diff_to_gate")]
    assert react.paper == -recs.loc["gate_minus_react", "paper"]
    assert (react.paper_lo, react.paper_hi) == (-recs.loc["gate_minus_react", "paper_hi"],
                                                -recs.loc["gate_minus_react", "paper_lo"])
    assert np.isnan(sp.loc[("eager", "mean_gap"), "paper"])
    assert sp.loc[("sop", "passk_pct"), "claim_id"] == "sop_passk"


@pytest.mark.slow
def test_further_claims_join_on_every_corpus_under_their_experiment():
    run = fb.Run.make(n_tasks=30, seeds=range(2), n_boot=20, cache=False)
    calls = []

    class Other:
        """An experiment of the shared shape: episodes from the run, tables from the rows, claims from the tables."""

        @staticmethod
        def episodes(r):
            return r.evaluate()

        @staticmethod
        def tables(df, r):
            calls.append((r.corpus.fingerprint, len(r.seeds)))
            return {"t": df}

        @staticmethod
        def claims(tables):
            holds = bool(tables["t"].exact.mean() > 0)
            nan = float("nan")
            return [Claim("other", "gate_exact", "a claim sharing an id with the headline's", nan, nan, nan, nan,
                          holds, "reproduced" if holds else "differs", "holds", "m", "tables/x.csv")]

    _, verdicts = S.across(run, split_seeds(1), H, also=(Other,))
    assert len(calls) == 3 and len({c[0] for c in calls}) == 3 and {c[1] for c in calls} == {2}
    calls.clear()
    S.across(run, split_seeds(1), H, also=((Other, 1),))  # the run's first seed only, on every corpus
    assert [c[1] for c in calls] == [1, 1, 1]
    counts = S.claim_counts(verdicts)
    assert counts[counts.experiment == "other"].id.tolist() == ["gate_exact"]
    assert counts.groupby("experiment").size().to_dict() == {"headline": len(H.claims(_tables(run))), "other": 1}
    ids = [c.id for c in S.claims({"splits_claims": counts})]
    assert "other.gate_exact" in ids and "headline.gate_exact" in ids


def test_a_claim_whose_number_is_not_its_table_cell_is_refused():
    run = fb.Run.make(n_tasks=30, seeds=range(2), n_boot=20, cache=False)

    class Shifted:
        tables = staticmethod(H.tables)

        @staticmethod
        def claims(tables):
            return [c if c.id != "gate_exact" else c.__class__(**{**c.__dict__, "ours": c.ours + 1})
                    for c in H.claims(tables)]

    with pytest.raises(ValueError, match="gate_exact"):
        S.across(run, split_seeds(1), Shifted)
    with pytest.raises(ValueError, match="distinct"):
        S.across(run, [C.REGEN_SEED, C.REGEN_SEED], H)


@pytest.mark.slow
def test_claims_across_corpora_follow_the_majority():
    def row(**kw):
        base = {"experiment": "headline", "id": "x", "claim": "c", "paper": 1.0, "paper_lo": np.nan, "paper_hi": np.nan, "public_ours": 1.0,
                "public_verdict": "reproduced", "n": 5, "reproduced": 0, "same_direction": 0, "differs": 0,
                "not_run": 0, "ours_min": 1.0, "ours_median": 1.0, "ours_max": 1.0}
        base.update(kw)
        base["holds"], base["direction_holds"] = base["reproduced"], base["reproduced"] + base["same_direction"]
        return base

    counts = pd.DataFrame([row(id="a", reproduced=3, differs=2), row(id="b", reproduced=2, same_direction=1,
                                                                      differs=2),
                           row(id="c", reproduced=2, differs=3), row(id="d", not_run=5)])
    got = {c.id: c.verdict for c in S.claims({"splits_claims": counts})}
    assert got == {"headline.a": "reproduced", "headline.b": "same direction", "headline.c": "differs",
                   "headline.d": "not run"}


# --- the notebook ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def notebook(executed):
    """The notebook's execution by tests/test_notebooks.py (the same parameters; run once per session)."""
    from tests.test_notebooks import NOTEBOOKS

    assert NOTEBOOKS["10_splits"][0] == {"n_tasks": 30, "n_seeds": 2, "n_boot": 50, "n_jobs": 1,
                                         "n_splits": N_SPLITS}
    return executed("10_splits")


@pytest.mark.slow
@pytest.mark.xdist_group("notebook-10_splits")  # on the worker that executes it for tests/test_notebooks.py
def test_notebook_tables_agree_with_each_other(notebook):
    t = notebook / "tables"
    values, verdicts = read_table(t / "splits_corpora.csv"), read_table(t / "splits_verdicts.csv")
    counts = read_table(t / "splits_claims.csv")
    counts = counts.set_index(counts.experiment + "." + counts.id)
    claims = read_table(t / "claims_splits.csv").set_index("id")
    spread = read_table(t / "splits.csv").set_index(["policy", "metric"])
    assert values.split.nunique() == N_SPLITS + 2
    reg = verdicts[verdicts.split > 0]
    recount = reg.assign(id=reg.experiment + "." + reg.id).groupby(["id", "verdict"]).size().unstack(fill_value=0)
    for cid, row in counts.iterrows():
        for v in VERDICTS:
            assert row[v.replace(" ", "_")] == (recount.loc[cid, v] if v in recount.columns else 0)
        assert f"reproduced on {row.reproduced}," in claims.loc[cid, "measured"]
        assert claims.loc[cid, "paper"] == row.paper or (np.isnan(row.paper) and np.isnan(claims.loc[cid, "paper"]))
    gaps = values[(values.split > 0) & (values.policy == "finality_gate")].mean_gap
    assert spread.loc[("finality_gate", "mean_gap"), "median"] == pytest.approx(np.median(gaps))
    assert spread.loc[("finality_gate", "mean_gap"), "paper"] == 31.37  # from the headline's record
    assert (notebook / "figures" / "splits.png").stat().st_size > 10_000
    # the twins', the ablation's and the cost sweep's claims are counted across the same corpora, in that order
    assert list(dict.fromkeys(counts.experiment)) == ["headline", "twins", "ablation", "cost_sweep"]
    assert (counts.n == N_SPLITS + 1).all()


def test_neither_experiment_imports_another_experiment_module():
    import ast

    for name in ("splits", "tuning"):
        tree = ast.parse((ROOT / "finbench" / "experiments" / f"{name}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not [m for m in imported if m.startswith("finbench.experiments")], name
        froms = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "finbench"
                 for a in n.names]
        assert "experiments" not in froms, name
