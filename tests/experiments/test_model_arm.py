"""The model arm (SPEC §10): a model's episodes through the real `openai` client against the loopback
chat-completions server of tests/agents/test_llm.py, Table V from transcripts alone, the stratified subset
and the notebook."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import finbench as fb
from finbench.analysis.verdicts import paper_claims
from finbench.experiments import model_arm as M
from finbench.agents.llm import model_dir_name, read_transcript, system_prompt
from tests.agents.test_llm import KEY, KEY_ENV, MODEL, Loopback, _direct, _no_key_anywhere, _transcripts_of_a_healthy_run
from tests.agents.test_llm import key, run  # noqa: F401 - the shared fixtures (API key, the subset's Run)


def test_ten_plus_episodes_through_the_real_client(run, tmp_path, key, capfd):
    srv = Loopback()
    try:
        rows = M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "runs", api_key_env=KEY_ENV)
    finally:
        srv.close()
    assert len(rows) == len(run.corpus) * len(run.seeds) >= 10
    assert srv.auth == {f"Bearer {key}"}  # the key was used ...
    # ... the scripted model decided exactly as the script run directly on FinalityEnv
    direct = _direct(run)
    assert {(r.task_id, r.seed): r.position for r in rows.itertuples()} == direct
    assert len(srv.seen) == rows["n_calls"].sum() and (rows["malformed"] == 0).all()
    # one transcript per (task, seed), keyed in its name, every request and response recorded
    files = sorted((tmp_path / "runs" / model_dir_name(MODEL)).glob("*.jsonl"))
    assert len(files) == len(rows)
    recs = read_transcript(files[0])
    assert recs[0]["kind"] == "header" and recs[0]["system"] == system_prompt() and recs[-1]["kind"] == "end"
    assert files[0].name.startswith(f"{recs[0]['task_id']}__seed0__{recs[0]['prompt_hash']}")
    assert sum(r["kind"] == "response" for r in recs) == sum(r["kind"] == "request" for r in recs) == recs[-1]["n_calls"]
    # Table V from the transcripts alone: no server, no request
    replayed = M.model_episodes(run, tmp_path / "runs")
    assert {(r.task_id, r.seed): r.position for r in replayed.itertuples()} == direct
    t5 = M.table5(run.evaluate(), replayed).set_index("policy")
    assert list(t5.index) == ["finality_gate", MODEL]
    row = t5.loc[MODEL]
    assert row.episodes == len(rows) and row.gate_episodes == len(rows)
    assert row.exact_pct == pytest.approx(100 * replayed["exact"].mean())
    assert row.probe_use_pct == 100.0 and row.premature_pct == pytest.approx(100 * replayed.premature_irreversible.mean())
    assert row.gate_exact_pct == t5.loc["finality_gate", "exact_pct"]
    claims = {c.id: c for c in M.claims({"table5": t5.reset_index()})}
    assert claims["model_exact"].verdict != "not run" and claims["model_exact"].ours == pytest.approx(row.exact_pct)
    assert all(c.verdict != "not run" for c in claims.values())
    # the model-only claims, straight from the replayed episodes
    by_arch = replayed.groupby("archetype").gap.mean()
    assert claims["model_zero_gap_archetypes"].ours == int((by_arch < 0.005).sum())
    halves = replayed[replayed.twin_side.notna()].groupby("twin_side").gap.mean()
    assert claims["model_settle_twin_asymmetry"].ours == pytest.approx(halves["settle"] - halves["fail"])
    gate = run.evaluate().set_index(["task_id", "seed"]).loc[list(zip(replayed.task_id, replayed.seed))]
    assert claims["gate_subset_exact"].ours == pytest.approx(100 * gate.exact.mean())
    assert claims["gate_subset_gap"].ours == pytest.approx(gate.gap.mean())
    fb.publish(t5.reset_index(), "table5", run, to=tmp_path / "tables", bootstrap=False)
    out = capfd.readouterr()
    _no_key_anywhere(tmp_path, out.out, out.err)


def test_table5_without_endpoint_or_transcripts(run, tmp_path):
    rows = M.episodes(run, tmp_path / "nothing")  # no model, no endpoint: nothing is asked
    assert rows["models"].empty and not rows["endpoint"]
    tables = M.tables(rows, run)
    t5 = tables["table5"]
    assert list(t5["policy"]) == ["finality_gate"]
    claims = {c.id: c for c in M.claims(tables)}
    # every claim the data lists is there; the models' are "not run", the gate's are judged on the whole subset,
    # which is fixed and which a model attempts whole (issue 45)
    assert list(claims) == [r.name for r in paper_claims("model_arm")] and set(M.measures(tables)) == set(claims)
    assert {c.verdict for i, c in claims.items() if not i.startswith("gate_subset")} == {"not run"}
    assert sum(i.startswith("model_") for i in claims) == 9
    g = rows["gate"]
    assert claims["gate_subset_exact"].ours == pytest.approx(100 * g.exact.mean())
    assert claims["gate_subset_gap"].ours == pytest.approx(g.gap.mean())
    assert "whole subset" in claims["gate_subset_gap"].measured
    assert claims["gate_subset_exact"].verdict in ("reproduced", "differs")
    # the twin halves Table V now carries, from the gate's episodes
    for side in ("settle", "fail"):
        half = g[g.twin_side == side]
        assert t5.loc[0, f"{side}_twin_episodes"] == len(half) > 0
        assert t5.loc[0, f"{side}_twin_gap"] == pytest.approx(half.gap.mean())
    assert "No model row" in M.notes(t5, run)[0]
    assert M.meta(tables, fb.PUBLIC_SEED, 30, 12, 0)["models"] == "none" and M.figures(rows, run, tables) == {}


def _planted() -> pd.DataFrame:
    """Table V with the gate and two models, every number planted."""
    base = {"tasks": 10, "wait_use_pct": 0.0, "archetypes": 3, "malformed_calls": 0}
    return pd.DataFrame([
        {**base, "policy": M.GATE, "kind": "reference policy", "episodes": 40, "exact_pct": 90.0, "mean_gap": 5.0,
         "probe_use_pct": 100.0, "premature_pct": 0.0, "zero_gap_archetypes": 3, "zero_gap_list": "a, b, c",
         "settle_twin_episodes": 4, "fail_twin_episodes": 4, "settle_twin_gap": 1.0, "fail_twin_gap": 3.0,
         "gate_episodes": 40, "gate_exact_pct": 90.0, "gate_mean_gap": 5.0},
        {**base, "policy": "m1", "kind": "model", "episodes": 10, "exact_pct": 80.0, "mean_gap": 10.0,
         "probe_use_pct": 100.0, "premature_pct": 10.0, "zero_gap_archetypes": 2, "zero_gap_list": "a, b",
         "settle_twin_episodes": 2, "fail_twin_episodes": 2, "settle_twin_gap": 30.0, "fail_twin_gap": 0.0,
         "gate_episodes": 10, "gate_exact_pct": 100.0, "gate_mean_gap": 2.0},
        {**base, "policy": "m2", "kind": "model", "episodes": 30, "exact_pct": 40.0, "mean_gap": 20.0,
         "probe_use_pct": 50.0, "premature_pct": 0.0, "zero_gap_archetypes": 2, "zero_gap_list": "b, c",
         "settle_twin_episodes": 6, "fail_twin_episodes": 2, "settle_twin_gap": 10.0, "fail_twin_gap": 40.0,
         "gate_episodes": 30, "gate_exact_pct": 80.0, "gate_mean_gap": 6.0},
    ])


def test_model_claims_pool_the_models_and_the_gate_reads_their_episodes():
    t5 = _planted()
    c = {c.id: c for c in M.claims({"table5": t5})}
    # weighted by episodes: (10 * 80 + 30 * 40) / 40 and so on
    assert c["model_exact"].ours == pytest.approx(50.0) and c["model_gap"].ours == pytest.approx(17.5)
    assert c["model_probe_use"].ours == pytest.approx(62.5) and c["model_premature"].ours == pytest.approx(2.5)
    # the gate on the models' episodes (not its own row over the whole subset)
    assert c["gate_subset_exact"].ours == pytest.approx(85.0) and c["gate_subset_gap"].ours == pytest.approx(5.0)
    # zero pooled gap only where every model's gap is zero: b alone
    assert c["model_zero_gap_archetypes"].ours == 1 and "(b)" in c["model_zero_gap_archetypes"].measured
    # settle: (2 * 30 + 6 * 10) / 8 = 15; fail: (2 * 0 + 2 * 40) / 4 = 20
    asym = c["model_settle_twin_asymmetry"]
    assert asym.ours == pytest.approx(-5.0) and asym.verdict == "differs" and asym.margin == pytest.approx(-5.0)
    # one model alone: its own numbers
    one = {c.id: c for c in M.claims({"table5": t5.iloc[:2]})}
    assert one["model_zero_gap_archetypes"].ours == 2 and one["model_settle_twin_asymmetry"].ours == pytest.approx(30.0)
    assert one["model_settle_twin_asymmetry"].verdict == "reproduced"
    assert one["gate_subset_exact"].ours == pytest.approx(100.0)
    # twice as much: the pooled mean gap over the gate's on the same episodes, 17.5 / 5.0
    assert c["model_loses_twice"].ours == pytest.approx(3.5) and c["model_loses_twice"].verdict == "differs"
    assert c["model_waited"].ours == 0.0 and c["model_waited"].verdict == "differs"  # planted: no model waited
    assert M.claims({"table5": t5.drop(columns="wait_use_pct")})[-1].id  # a table without the column still decides
    assert {c.id: c for c in M.claims({"table5": t5.drop(columns="wait_use_pct")})}["model_waited"].verdict == "not run"
    assert c["model_loses_only_on"].holds is False  # a non-zero gap on archetypes beyond the two
    # no model: the gate's claims are judged on its own row over the whole subset; the models' are not run
    none = {c.id: c for c in M.claims({"table5": t5.iloc[:1]})}
    assert {v.verdict for k, v in none.items() if not k.startswith("gate_subset")} == {"not run"}
    assert none["gate_subset_exact"].ours == pytest.approx(90.0) and none["gate_subset_gap"].ours == pytest.approx(5.0)


def test_stratified_subset_keeps_every_archetype_and_whole_pairs():
    corpus = fb.make_corpus()
    sub = M.stratified_subset(corpus, 60, 0)
    assert 50 <= len(sub) <= 70
    assert {t.archetype for t in sub.tasks} == {t.archetype for t in corpus.tasks}
    twins = [t for t in sub.tasks if t.twin_id]
    assert twins and len(twins) == 2 * len(sub.twin_pairs)
    assert sub.fingerprint == M.stratified_subset(corpus, 60, 0).fingerprint
    assert sub.fingerprint != M.stratified_subset(corpus, 60, 1).fingerprint


@pytest.mark.xdist_group("notebook-03_model_arm")  # on the worker that executes it for tests/test_notebooks.py
def test_notebook_without_network_or_transcripts_shows_the_gate_row_and_a_note(executed):
    from finbench.analysis.tables import read_table
    from tests.test_notebooks import NOTEBOOKS

    # tests/test_notebooks.py's execution: these parameters, no OPENAI_API_KEY, empty data and cache folders
    assert NOTEBOOKS["03_model_arm"][0] == {"n_tasks": 30, "subset_size": 12}
    tmp_path = executed("03_model_arm")
    t5 = read_table(tmp_path / "tables" / "table5.csv")
    assert list(t5["policy"]) == ["finality_gate"]
    md = (tmp_path / "tables" / "table5.md").read_text()
    assert "**No model row: no model was named.**" in md and fb.make_corpus(n_tasks=30).fingerprint in md
    claims = read_table(tmp_path / "tables" / "claims_model_arm.csv").set_index("id")
    assert (claims.loc[[i for i in claims.index if i.startswith("model_")], "verdict"] == "not run").all()
    assert list(claims.index) == [r.name for r in paper_claims("model_arm")]
    # the gate's are judged on the whole subset, which a model attempts whole
    assert claims.loc["gate_subset_exact", "verdict"] != "not run"
    assert claims.loc["gate_subset_exact", "ours"] == pytest.approx(t5.loc[0, "exact_pct"])
    assert f"{t5.loc[0, 'exact_pct']:.1f}%" in claims.loc["gate_subset_exact", "measured"]
    assert not (tmp_path / "data" / "model_runs").exists()  # nothing was asked, nothing recorded


@pytest.mark.slow  # executes the notebook
def test_notebook_builds_table5_from_transcripts_on_disk(tmp_path, key):
    from finbench.pipeline import ROOT, run_notebook
    from finbench.analysis.tables import read_table

    run = M.subset_run(fb.PUBLIC_SEED, 30, 12, 0, seeds=[0], cache=False)
    srv = Loopback()
    try:
        M.run_model(run, MODEL, srv.base_url, transcripts=tmp_path / "data" / "model_runs", api_key_env=KEY_ENV,
                    progress=False)
    finally:
        srv.close()
    params = {"n_tasks": 30, "subset_size": 12, "tables_dir": str(tmp_path / "tables"),
              "data_dir": str(tmp_path / "data"), "cache_dir": str(tmp_path / "cache")}
    nb = ROOT / "notebooks" / "03_model_arm.ipynb"
    run_notebook(nb, params, out_dir=tmp_path / "nb")  # no model named: the gate's row, transcripts or not
    t5 = read_table(tmp_path / "tables" / "table5.csv").set_index("policy")
    assert list(t5.index) == ["finality_gate"]
    committed = {p.name: p.read_bytes() for p in (tmp_path / "tables").iterdir()}
    run_notebook(nb, {**params, "models": MODEL}, out_dir=tmp_path / "nb2")  # named: replayed, no endpoint
    assert {p.name: p.read_bytes() for p in (tmp_path / "tables").iterdir()} == committed  # untouched
    out = M.output_folder(tmp_path / "tables", [MODEL], False)
    assert out.parent == tmp_path / "build" / "model_arm"
    t5 = read_table(out / "table5.csv").set_index("policy")
    assert list(t5.index) == ["finality_gate", MODEL] and t5.loc[MODEL, "episodes"] == len(run.corpus)
    assert "No model row" not in (out / "table5.md").read_text()
    run_notebook(nb, {**params, "models": MODEL, "publish": True}, out_dir=tmp_path / "nb3")  # asked to publish
    assert list(read_table(tmp_path / "tables" / "table5.csv")["policy"]) == ["finality_gate", MODEL]
    _no_key_anywhere(tmp_path)


def test_a_transcript_that_no_longer_replays_is_left_alone_and_not_a_row(run, tmp_path, key, capfd):
    runs = tmp_path / "runs"
    path = _transcripts_of_a_healthy_run(run, runs)[0]
    recs = read_transcript(path)
    recs[-2]["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "read_bank"  # last answer
    recs[3]["sha"] = "0" * 64  # the second request no longer matches the conversation
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = path.read_bytes()
    rows = M.model_episodes(run, runs)
    assert len(rows) == len(run.corpus) - 1 and path.name.split("__")[0] not in set(rows["task_id"])
    assert path.read_bytes() == before and "does not replay" in capfd.readouterr().err


@pytest.mark.slow  # executes the notebook
def test_the_notebooks_timeout_and_max_tokens_reach_the_server(tmp_path, key):
    from finbench.pipeline import ROOT, run_notebook
    from finbench.analysis.tables import read_table

    srv = Loopback(faults={1: "slow"})  # one reply slower than the timeout: the client gives up and retries
    params = {"n_tasks": 30, "subset_size": 12, "tables_dir": str(tmp_path / "tables"),
              "data_dir": str(tmp_path / "data"), "cache_dir": str(tmp_path / "cache"), "model": MODEL,
              "base_url": srv.base_url, "api_key_env": KEY_ENV, "timeout": 0.5, "max_tokens": 64,
              "max_connections": 1}  # one at a time: the slow reply is the second request
    try:
        run_notebook(ROOT / "notebooks" / "03_model_arm.ipynb", params, out_dir=tmp_path / "nb")
    finally:
        srv.close()
    assert srv.seen and {s["max_tokens"] for s in srv.seen} == {64}
    assert srv.seen[2]["turn"] == srv.seen[1]["turn"]  # the slow turn asked again: the 0.5 s timeout was used
    assert not (tmp_path / "tables").exists()  # a model's run writes no committed table
    t5 = read_table(M.output_folder(tmp_path / "tables", [MODEL], False) / "table5.csv").set_index("policy")
    assert list(t5.index) == ["finality_gate", MODEL]  # the episodes under max_tokens=64 are the ones replayed
    headers = [read_transcript(p)[0] for p in (tmp_path / "data" / "model_runs").rglob("*.jsonl")]
    assert {h["params"]["max_tokens"] for h in headers} == {64}
    _no_key_anywhere(tmp_path)


# --- the model runner's own rules (finbench.running.model_runs), with an agent that needs no server --------

class _Closer:
    """Stands in for `ModelAgent` in `model_runs`: closes every case at once. Every copy shares `seen` (what
    was claimed, where each episode was played) and `made` (the arguments each agent was made with); a pair
    in `busy` is held by another process until waited for."""

    made: list = []

    def __init__(self, model, base_url=None, busy=(), **kw):
        self.model = self.name = model
        self.malformed, self.ended = 0, None
        self.busy, self.seen, self.copies = set(busy), [], [0]
        self.made_with = (model, base_url, kw)
        _Closer.made.append(self)

    def __copy__(self):
        twin = object.__new__(_Closer)
        twin.__dict__.update(self.__dict__)
        self.copies[0] += 1
        return twin

    def claim(self, task_id, seed, wait=True):
        self.seen.append(("claim", task_id, seed, wait))
        return wait is True or (task_id, seed) not in self.busy

    def inspect(self, task_id, seed):
        return "finished"

    def bind(self, task_id, seed):
        self.key = (task_id, seed)

    def begin(self, brief):
        import threading

        self.order = brief["order_id"]
        self.seen.append(("played", self.key, threading.current_thread().name))

    def act(self, obs):
        return "close", {"order_id": self.order}

    def end(self, outcome):
        pass

    def release(self):
        pass


@pytest.fixture
def closer(monkeypatch):
    from finbench.running import model_runs as R

    _Closer.made = []
    monkeypatch.setattr(R, "ModelAgent", _Closer)
    return R


def _pairs(run):
    return [(t.task_id, s) for t in run.corpus.tasks for s in run.seeds]


def test_run_model_hands_its_usage_to_the_agent_and_plays_on_as_many_threads_as_asked(closer):
    run = fb.Run(fb.make_corpus(n_tasks=3), seeds=[0, 1], policies=["finality_gate"], cache=False)
    usage = object()
    rows = closer.run_model(run, "m", "http://127.0.0.1:9/v1", usage=usage, max_connections=2, progress=False,
                            transcripts="somewhere")
    agent, = _Closer.made
    model, url, kw = agent.made_with
    assert (model, url, kw["usage"], kw["transcripts"]) == ("m", "http://127.0.0.1:9/v1", usage, "somewhere")
    assert list(zip(rows["task_id"], rows["seed"])) == _pairs(run)
    assert {s[2].startswith("finbench-episode-") for s in agent.seen if s[0] == "played"} == {True}
    assert set(rows["disposition"]) == {"close"} and set(rows["policy"]) == {"m"}
    with pytest.raises(fb.FinbenchError, match="run_model"):
        closer.run_model(run, "m", "http://127.0.0.1:9/v1", max_connections=0, progress=False)


def test_each_thread_plays_its_episodes_on_one_copy_and_a_busy_episode_is_waited_for(closer):
    """`_rows` with two connections: the episodes run on worker threads, each thread with one copy of the
    agent (not one per episode); a transcript another process holds is left for later, then waited for."""
    run = fb.Run(fb.make_corpus(n_tasks=3), seeds=[0, 1], policies=["finality_gate"], cache=False)
    pairs = _pairs(run)
    agent = _Closer("m", "http://127.0.0.1:9/v1", busy=[pairs[1]])
    rows = closer._rows(run, agent, only_finished=False, progress=False, max_connections=2)
    assert list(zip(rows["task_id"], rows["seed"])) == pairs  # the busy one too, in its place
    played = [s for s in agent.seen if s[0] == "played"]
    assert sorted(p[1] for p in played) == sorted(pairs)
    assert all(p[2].startswith("finbench-episode-") for p in played if p[1] != pairs[1])  # the busy one: alone
    assert 1 <= agent.copies[0] <= 2 * 2  # a copy per worker thread, in each of the two passes
    assert [s for s in agent.seen if s[0] == "claim" and s[1:3] == pairs[1]] == [
        ("claim", *pairs[1], False), ("claim", *pairs[1], True)]


def test_model_episodes_read_data_model_runs_by_default(closer):
    run = fb.Run(fb.make_corpus(n_tasks=2), seeds=[0], policies=["finality_gate"], cache=False)
    rows = closer.model_episodes(run, models=["m"])
    agent, = _Closer.made
    model, url, kw = agent.made_with
    assert (model, url, kw["transcripts"]) == ("m", None, "data/model_runs")
    assert list(rows["task_id"]) == [t.task_id for t in run.corpus.tasks] and set(rows["policy"]) == {"m"}


def test_transcript_models_warn_of_a_whole_first_line_that_names_no_model(tmp_path):
    from finbench.agents.llm import TranscriptWarning
    from finbench.running.model_runs import transcript_models

    folder = tmp_path / "runs" / "m-0123"
    folder.mkdir(parents=True)
    (folder / "ord-0001__seed0__0123456789ab.jsonl").write_text(json.dumps({"kind": "header", "model": "m"}) + "\n")
    (folder / "ord-0002__seed0__0123456789ab.jsonl").write_text(json.dumps({"kind": "request"}) + "\n")
    (folder / "ord-0003__seed0__0123456789ab.jsonl").write_text('{"kind": "hea')  # being written right now
    (folder / "notes.jsonl").write_text("not a transcript\n")
    with pytest.warns(TranscriptWarning) as caught:
        assert transcript_models(tmp_path / "runs") == ["m"]
    assert [str(w.message) for w in caught] == [
        f"transcript {folder / 'ord-0002__seed0__0123456789ab.jsonl'} has no header naming its model; skipped"]
    assert transcript_models(tmp_path / "nowhere") == []
