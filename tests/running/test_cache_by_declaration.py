"""A user's agent is never served rows it did not play: cached only by its declared `cache_id`.

Each case writes an agent whose deadline (590, then 125) reaches it through one channel no
digest of its code can be trusted to see, plays it, edits the channel, and plays it again:
the rows must be what a fresh `cache=False` evaluation gives, and differ from the first.
"""
from __future__ import annotations

import importlib
import sys
import textwrap

import pandas as pd
import pytest

import finbench as fb
from tests.rows import assert_same_rows
from finbench.agents.registry import PolicyRef
from finbench.memo import MEMOS, clear_caches

N_TASKS, SEEDS = 12, (0, 1)

_ACT = '''
    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        if obs["t"] >= {limit}:
            return "escalate", {{"order_id": self.order}}
        return "wait", {{"order_id": self.order, "ticks": 30}}
'''

# channel -> (files: name -> text with {v} for the deadline, the expression the agent reads)
CHANNELS = {
    "class_attribute": ({}, "self.LIMIT", "LIMIT = {v}"),
    "installed_module": ({}, "LIMIT", None),
    "sibling_module": ({"params_{tag}.py": "LIMIT = {v}\n"}, "params_{tag}.LIMIT", None),
    "globals_lookup": ({}, 'globals()["G"]', None),
    "function_attribute": ({}, "helper.limit", None),
    "metaclass_attribute": ({}, "type(self).LIMIT", None),
    "lru_cache_helper": ({"limit_{tag}.txt": "{v}"}, "cached_limit()", None),
    "environment_variable": ({}, 'int(os.environ["FB_TEST_LIMIT_{tag}"])', None),
    "data_file": ({"limit_{tag}.txt": "{v}"}, "int(open(DATA).read())", None),
}


def _agent_source(channel: str, tag: str, v: int, declared: str | None) -> str:
    files, expr, attr = CHANNELS[channel]
    head = ["import functools, os, pathlib", f"DATA = pathlib.Path(__file__).with_name('limit_{tag}.txt')"]
    if channel == "installed_module":
        head.append(f"LIMIT = {v}")
    if channel == "sibling_module":
        head.append(f"import params_{tag}")
    if channel == "globals_lookup":
        head.append(f"G = {v}")
    head += ["def helper():", "    return None", f"helper.limit = {v}"]
    head += ["@functools.lru_cache(maxsize=None)", "def cached_limit():", "    return int(DATA.read_text())"]
    meta = "Meta" if channel == "metaclass_attribute" else "type"
    head += ["class Meta(type):", f"    LIMIT = {v}"]
    body = [f"class Agent(metaclass={meta}):", f"    name = 'agent_{tag}'"]
    if attr:
        body.append("    " + attr.format(v=v))
    if declared:
        body.append(f"    cache_id = {declared!r}")
    return "\n".join(head + body) + _ACT.format(limit=expr.format(tag=tag))


class _Scene:
    """An agent module on disk, with its deadline changed through one channel."""

    def __init__(self, root, channel: str, declared: str | None, monkeypatch):
        self.channel, self.declared, self.mp = channel, declared, monkeypatch
        self.tag = f"{channel}_{declared or 'none'}"
        # an installed module lives under site-packages: the identity names it only
        self.dir = root / ("site-packages" if channel == "installed_module" else "src")
        self.dir.mkdir(parents=True, exist_ok=True)
        monkeypatch.syspath_prepend(str(self.dir))
        self.module = f"agent_{self.tag}"

    def write(self, v: int) -> None:
        files, _, _ = CHANNELS[self.channel]
        for name, text in files.items():
            (self.dir / name.format(tag=self.tag)).write_text(text.format(v=v))
        self.mp.setenv(f"FB_TEST_LIMIT_{self.tag}", str(v))
        (self.dir / f"{self.module}.py").write_text(_agent_source(self.channel, self.tag, v, self.declared))

    def load(self):
        for name in [self.module, f"params_{self.tag}"]:
            sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(self.module).Agent

    def edit(self, agent, v: int) -> None:
        """Change the deadline through the channel only (the agent's own module is not re-imported)."""
        files, _, _ = CHANNELS[self.channel]
        for name, text in files.items():
            (self.dir / name.format(tag=self.tag)).write_text(text.format(v=v))
        module = sys.modules[self.module]
        c = self.channel
        if c == "class_attribute":
            agent.LIMIT = v
        elif c == "installed_module":  # the installed file edited, the running module re-executed
            src = _agent_source(c, self.tag, v, self.declared)
            (self.dir / f"{self.module}.py").write_text(src)
            exec(compile(src.replace("class Agent", "class _Unused"), str(self.dir), "exec"), module.__dict__)  # noqa: S102
            module.LIMIT = v
        elif c == "sibling_module":
            importlib.reload(sys.modules[f"params_{self.tag}"])
        elif c == "globals_lookup":
            module.G = v
        elif c == "function_attribute":
            module.helper.limit = v
        elif c == "metaclass_attribute":
            module.Meta.LIMIT = v
        elif c == "lru_cache_helper":
            module.cached_limit.cache_clear()
        elif c == "environment_variable":
            self.mp.setenv(f"FB_TEST_LIMIT_{self.tag}", str(v))


def _fresh(agent) -> pd.DataFrame:
    clear_caches()
    return fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [agent], seeds=SEEDS, cache=False)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert_same_rows(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=False)


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_an_edited_agent_without_cache_id_gets_fresh_rows(channel, tmp_path, monkeypatch):
    scene = _Scene(tmp_path, channel, None, monkeypatch)
    scene.write(590)
    agent = scene.load()
    cache = tmp_path / "cache"
    run = fb.Run.make(n_tasks=N_TASKS, seeds=SEEDS, policies=[agent], cache=cache)
    first = run.evaluate()
    assert first.attrs["loaded"] == {agent.name: 0}
    later = fb.Run.make(n_tasks=N_TASKS, seeds=SEEDS, policies=[agent], cache=cache)  # made before the edit
    scene.edit(agent, 125)
    got = later.evaluate()
    _same(got, _fresh(agent))
    assert not got.end_t.equals(first.end_t)  # the edit really changed what it plays
    assert got.attrs["loaded"] == {agent.name: 0}
    again = fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [agent], seeds=SEEDS, cache=cache)
    _same(again, got)
    assert not list(cache.rglob("agent_*")), "a user's undeclared agent left rows on disk"


@pytest.mark.parametrize("channel", ["class_attribute", "function_attribute", "metaclass_attribute"])
def test_a_declared_agent_is_reused_and_a_code_edit_still_misses(channel, tmp_path, monkeypatch):
    scene = _Scene(tmp_path, channel, "v1", monkeypatch)
    scene.write(590)
    agent = scene.load()
    cache = tmp_path / "cache"
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    first = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=cache)
    assert first.attrs["loaded"] == {agent.name: 0}
    clear_caches()
    reused = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=cache)
    assert reused.attrs["loaded"] == {agent.name: len(first)}  # the declaration is honoured
    _same(reused, first)
    run = fb.Run.make(n_tasks=N_TASKS, seeds=SEEDS, policies=[agent], cache=cache)
    scene.edit(agent, 125)  # the author forgot to bump cache_id; the code's own identity still changes
    got = run.evaluate()
    assert got.attrs["loaded"] == {agent.name: 0}
    _same(got, _fresh(agent))
    assert not got.end_t.equals(first.end_t)


def test_a_declared_agent_whose_method_is_rewritten_misses(tmp_path, monkeypatch):
    scene = _Scene(tmp_path, "class_attribute", "v1", monkeypatch)
    scene.write(590)
    agent = scene.load()
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    first = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=tmp_path / "cache")
    agent.act = lambda self, obs: ("write_off", {"order_id": self.order})
    got = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=tmp_path / "cache")
    assert got.attrs["loaded"] == {agent.name: 0} and set(got.disposition) == {"write_off"}
    assert set(first.disposition) != {"write_off"}


def test_a_declared_agent_keeps_its_promise_for_what_no_digest_sees(tmp_path, monkeypatch):
    """An environment variable is the author's to declare: with cache_id the rows are reused."""
    scene = _Scene(tmp_path, "environment_variable", "v1", monkeypatch)
    scene.write(590)
    agent = scene.load()
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    first = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=tmp_path / "cache")
    scene.edit(agent, 125)
    kept = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=tmp_path / "cache")
    _same(kept, first)
    assert kept.attrs["loaded"] == {agent.name: len(first)}


@pytest.mark.parametrize("entry", ["evaluate", "run", "sweep"])
def test_cache_false_reuses_nothing(entry, tmp_path, monkeypatch):
    """A declared agent evaluated once, its channel edited: cache=False plays it afresh at every entry point."""
    scene = _Scene(tmp_path, "environment_variable", "v1", monkeypatch)
    scene.write(590)
    agent = scene.load()
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    fb.Run(corpus, seeds=SEEDS, policies=[agent], cache=tmp_path / "cache").evaluate()  # fills disk and memo
    scene.edit(agent, 125)
    run = fb.Run(corpus, seeds=SEEDS, policies=[agent], cache=False)
    if entry == "evaluate":
        got = fb.evaluate(corpus, [agent], seeds=SEEDS, cache=False)
    elif entry == "run":
        got = run.evaluate()
    else:
        got = fb.sweep(run, {"costs": [fb.Costs()]}).drop(columns=["costs"])
    expected = _fresh(agent)
    _same(got, expected)
    assert (got.end_t <= 125 + 30).all() and len(got)


def test_an_object_edited_after_the_reference_plays_as_referenced_and_keys_so(tmp_path):
    """An object is copied when referenced: its key is of the copy that plays, not the edited original."""

    class Obj:
        cache_id = "v1"

        def __init__(self):
            self.limit = 590

        def begin(self, brief):
            self.order = brief["order_id"]

        def act(self, obs):
            if obs["t"] >= self.limit:
                return "escalate", {"order_id": self.order}
            return "wait", {"order_id": self.order, "ticks": 30}

    obj = Obj()
    ref = PolicyRef.of(obj)
    obj.limit = 125
    assert ref.cache_key() == PolicyRef.of(Obj()).cache_key() != PolicyRef.of(obj).cache_key()


def test_the_package_policies_are_cached_and_a_user_subclass_is_not(tmp_path, capsys):
    from finbench.agents.policies import FinalityGate

    class Mine(FinalityGate):
        pass

    assert PolicyRef.of(FinalityGate).cache_key() is not None
    assert PolicyRef.of(FinalityGate()).cache_key() is not None
    assert PolicyRef.of(Mine).cache_key() is None
    got = fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [PolicyRef.of(Mine, label="mine")], seeds=[0], cache=tmp_path)
    assert "note: playing mine afresh" in capsys.readouterr().err and len(got)


def test_a_bad_cache_id_is_refused():
    class Bad:
        cache_id = 3

        def begin(self, brief):
            pass

        def act(self, obs):
            return "close", {}

    with pytest.raises(fb.PolicyError, match="cache_id of .* must be a non-empty string"):
        PolicyRef.of(Bad)


def test_clear_caches_empties_every_memo():
    corpus = fb.make_corpus(n_tasks=N_TASKS)
    from finbench.analysis.verdicts import paper_claims
    from finbench.running.reprice import reprice

    rows = fb.evaluate(corpus, ["sop"], seeds=[0], cache=False)
    fb.Run(corpus, seeds=[0], policies=["sop"], cache=True).evaluate()
    fb.Run(corpus, seeds=[0], policies=["sop"], cache=True, costs=fb.Costs(cogs_rate=0.4)).evaluate()
    reprice(rows, corpus, fb.Costs(dispute_fee=50.0), fb.Costs())
    paper_claims()
    fb.run_episode(corpus.tasks[0], "finality_oracle")
    fb.Run.make(n_tasks=N_TASKS, seeds=[0], policies=["sop"], cache=False)
    filled = {name for name, m in MEMOS.items() if m.size() > 0}
    assert len(filled) >= 12, sorted(set(MEMOS) - filled)
    fb.clear_caches()
    assert {name: m.size() for name, m in MEMOS.items() if m.size()} == {}


@pytest.mark.slow  # imports every module of the package
def test_the_architecture_lists_every_memo():
    """docs/ARCHITECTURE.md's table of memos and the register in finbench/memo.py name the same memos."""
    import importlib
    import pkgutil
    import re
    from pathlib import Path

    for m in pkgutil.walk_packages(fb.__path__, "finbench."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)
    text = (Path(fb.__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Memos and caches", 1)[1]
    listed = re.findall(r"^\| `([\w.]+)` \|[^|]*\| ([\d,]+) \|", table, flags=re.M)
    assert len(listed) >= 15
    assert {n: int(b.replace(",", "")) for n, b in listed} == {n: m.bound for n, m in MEMOS.items()}


# --- the cache folder: pruned of other versions, and never fatal ------------------------------------

def test_other_versions_and_the_flat_layout_are_pruned(tmp_path, monkeypatch):
    from finbench.running import cache as K

    monkeypatch.setattr(K, "_PRUNED", set())
    old = tmp_path / "episodes-e4-0123456789abcdef" / "sop"
    old.mkdir(parents=True)
    (old / f"{'a' * 32}.json").write_text("{}")
    flat = tmp_path / "sop"
    flat.mkdir()
    (flat / f"{'b' * 32}.json").write_text('{"format": "finbench-episodes/2", "key": "x"}\n{}')
    (flat / "notes.txt").write_text("mine")  # not ours: kept, and so is its folder
    other = tmp_path / "results"
    other.mkdir()
    (other / f"{'c' * 32}.json").write_text('{"not": "a cache file"}')
    fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), ["sop"], seeds=[0], cache=tmp_path)
    assert not (tmp_path / "episodes-e4-0123456789abcdef").exists()
    assert sorted(p.name for p in flat.iterdir()) == ["notes.txt"]
    assert (other / f"{'c' * 32}.json").exists()
    assert list((tmp_path / K.version_folder() / "sop").glob("*.json"))


@pytest.mark.parametrize("how", ["a_file", "full_disk"])
def test_a_cache_folder_that_cannot_be_used_warns_and_the_run_goes_on(how, tmp_path, monkeypatch):
    from finbench.running import cache as K

    cache = tmp_path / "cache"
    if how == "a_file":
        cache.write_text("not a folder")
    else:
        def full(*a, **k):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(K, "save_chunk", full)
    corpus = fb.make_corpus(n_tasks=30)  # two chunks: one warning, not one per chunk
    with pytest.warns(K.CacheWarning) as caught:
        got = fb.evaluate(corpus, ["sop"], seeds=[0], cache=cache)
    assert len(caught) == 1 and ("cannot be used" in str(caught[0].message) or "No space" in str(caught[0].message))
    _same(got, fb.evaluate(corpus, ["sop"], seeds=[0], cache=False))


@pytest.mark.slow  # finbench eval in a subprocess
def test_eval_of_an_edited_installed_agent_gets_fresh_rows(tmp_path):
    """The issue's reproduction through the command line: an agent installed under site-packages,
    edited between two `finbench eval` runs that share the default episode cache folder."""
    import os
    import subprocess

    site = tmp_path / "site-packages"
    site.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "FINBENCH_ROOT": str(tmp_path / "root")}
    rows = []
    for limit in (590, 125, 590):
        (site / "myagent_cli.py").write_text(_agent_source("installed_module", "cli", limit, None))
        out = tmp_path / f"card{len(rows)}"
        proc = subprocess.run([sys.executable, "-m", "finbench", "eval", "myagent_cli:Agent", "--n-tasks", "9",
                               "--seeds", "1", "--n-jobs", "1", "--out", str(out)], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        rows.append(pd.read_csv(out / "rows.csv", comment="#"))
    assert not rows[0].equals(rows[1])  # the edit is played, not the first run's rows
    _same(rows[2], rows[0])


def test_the_note_prints_no_control_bytes(capsys, tmp_path):
    agent = type("Odd", (), {"name": "odd\x1b[2J\nname", "begin": lambda self, b: setattr(self, "o", b["order_id"]),
                             "act": lambda self, obs: ("close", {"order_id": self.o})})
    fb.evaluate(fb.make_corpus(n_tasks=N_TASKS), [agent], seeds=[0], cache=tmp_path)
    err = capsys.readouterr().err
    assert "note: playing odd?[2J?name afresh" in err and "\x1b" not in err
