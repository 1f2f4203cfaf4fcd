"""The benchmark as an Inspect AI task, run offline with Inspect's `mockllm/model`.

The scripted models answer from the conversation (the brief in the first user message, then every
observation a tool returned), so samples run concurrently get the same turns as run alone, and a
model that plays a policy makes exactly the policy's calls: its episode must be `run_episode`'s.
Mock outputs carry their `usage` (one without is counted by the solver's estimate, never by tiktoken,
which would download its encoding), and a socket guard fails any attempt to reach the network.
"""
from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys

import pytest

import finbench as fb
from finbench.errors import FinbenchError
from finbench.experiments.model_arm import subset_run
from finbench.running.episode import grade_episode
from finbench.running.inspect_task import STORE_KEY, inspect_task
from finbench.sim.corpus import stratified_subset as table5_subset
from tests.agents.test_llm import Script  # the same small finality-checking agent the model-agent tests script
from finbench.sim.corpus import corpus_for
from finbench.sim.env import reference_position

inspect_ai = pytest.importorskip("inspect_ai")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import (ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage,  # noqa: E402
                              get_model)
from inspect_ai.tool import ToolCall  # noqa: E402

# tests marked slow run Inspect evaluations (make test-fast leaves them out)

USAGE = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """Logs under tmp, Inspect's data dir under tmp, and no socket may connect anywhere."""
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    attempts = []

    def refuse(self, address, *a, **k):
        attempts.append(address)
        raise OSError(f"test: no network ({address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield
    assert not attempts, f"network attempted: {attempts}"


def output(calls=(), text="ok") -> ModelOutput:
    """One reply: the tool calls `calls` ([(tool, args), ...]) or, with none, just `text`; usage included."""
    msg = ChatMessageAssistant(content=text, model="model", source="generate", tool_calls=[
        ToolCall(id=f"call-{i}-{tool}", function=tool, arguments=args) for i, (tool, args) in enumerate(calls)] or None)
    return ModelOutput(model="model", choices=[ChatCompletionChoice(message=msg, stop_reason="tool_calls" if calls
                                                                    else "stop")], usage=USAGE)


def conversation(messages) -> tuple[dict, list[dict]]:
    """The brief and every tool observation so far, as the scripted models read them."""
    brief = json.loads(messages[1].text.split("\n", 1)[1])
    return brief, [json.loads(m.text) for m in messages if m.role == "tool" and m.error is None]


def playing(policy_cls):
    """A mock model whose every reply is the call `policy_cls` makes on the conversation so far."""
    def reply(messages, tools, tool_choice, config):
        brief, seen = conversation(messages)
        policy = policy_cls()
        policy.begin(brief)
        call = None
        for obs in [brief, *seen]:
            call = policy.act(obs)
        return output([call])
    return reply


def run(task, custom_outputs, **kw):
    kw.setdefault("limit", 3)
    logs = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=custom_outputs), display="none", **kw)
    assert len(logs) == 1
    return logs[0]


def scores(log) -> dict:
    return {s.id: s.scores["finbench"] for s in log.samples}


def test_importing_the_module_leaves_inspect_unloaded():
    code = "import sys, finbench.running.inspect_task as m; print('inspect_ai' in sys.modules, m.finbench.__module__)"
    root = fb.__file__.rsplit("/finbench/", 1)[0]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": root})
    assert out.stdout.split() == ["False", "finbench.running.inspect_task"]


@pytest.mark.parametrize("n_tasks,size,seed", [(321, 60, 0), (30, 10, 3), (60, 12, 1)])
def test_table5_subset_is_the_model_arms_draw(n_tasks, size, seed):
    corpus = corpus_for(fb.PUBLIC_SEED, n_tasks)
    sub = table5_subset(corpus, size, seed)
    assert [t.task_id for t in sub] == [t.task_id for t in subset_run(fb.PUBLIC_SEED, n_tasks, size, seed).corpus]
    assert {t.archetype for t in sub} == {t.archetype for t in corpus}  # every archetype
    twins = [t for t in sub if t.twin_id]
    assert twins and all(sum(u.twin_id == t.twin_id for u in twins) == 2 for t in twins)  # pairs whole
    order = [t.task_id for t in corpus]
    assert [order.index(t.task_id) for t in sub] == sorted(order.index(t.task_id) for t in sub)


def test_samples_are_the_episodes():
    corpus = fb.make_corpus(n_tasks=9)
    task = inspect_task(n_tasks=9, seeds=(0, 2), subset="all")
    samples = list(task.dataset)
    assert [s.id for s in samples] == [f"{t.task_id}__seed{s}" for t in corpus for s in (0, 2)]
    first = samples[1]
    brief = fb.FinalityEnv(corpus.tasks[0], 2).reset()
    assert first.input == "A new case. The brief:\n" + json.dumps(brief, sort_keys=True)
    assert first.metadata["reference_position"] == reference_position(corpus.tasks[0], fb.Costs())
    assert task.metadata["tasks"] == 9 and task.metadata["seeds"] == [0, 2]
    sub = inspect_task(n_tasks=30, subset_size=8)
    assert [s.metadata["task_id"] for s in sub.dataset] == [t.task_id for t in table5_subset(corpus_for(
        fb.PUBLIC_SEED, 30), 8)]


@pytest.mark.slow
def test_a_model_playing_a_policy_scores_as_the_policy_plays():
    """The acceptance run: tool calls (probe, wait, ship...) through Inspect's tools, scores for every sample,
    each equal to the same policy's episode played directly."""
    log = run(inspect_task(n_tasks=9), playing(Script))
    assert log.status == "success", log.error
    by_id = {t.task_id: t for t in fb.make_corpus(n_tasks=9)}
    got = scores(log)
    assert len(got) == 3
    for sid, score in got.items():
        task = by_id[sid.split("__seed")[0]]
        res = fb.run_episode(task, Script, seed=0)
        assert score.value == pytest.approx({"gap": res.gap, "exact": float(res.exact),
                                             "violation": float(grade_episode(task, res.trace)["verdict"]
                                                                == "violation"),
                                             "unscorable": 0.0})
        assert score.answer == res.disposition and score.metadata["n_calls"] == res.n_calls
        assert score.metadata["ended"] == "case ended" and res.n_calls >= 2
    means = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert means["gap"] == pytest.approx(sum(s.value["gap"] for s in got.values()) / 3)
    assert set(means) == {"gap", "exact", "violation", "unscorable"}


@pytest.mark.slow
def test_a_model_that_never_calls_a_tool_closes_the_case():
    log = run(inspect_task(n_tasks=9), [output(text="I will not use tools.") for _ in range(3)])
    assert log.status == "success", log.error
    by_id = {t.task_id: t for t in fb.make_corpus(n_tasks=9)}
    for sid, score in scores(log).items():
        task = by_id[sid.split("__seed")[0]]
        res = fb.run_episode(task, _Closer(), seed=0)  # what closing at once gives, played directly
        assert res.disposition == "close" and res.n_calls == 1
        assert score.answer == "close" and score.value["gap"] == pytest.approx(res.gap) and res.gap > 0
        assert score.value["exact"] == 0.0 and score.metadata["ended"] == "no tool call"
        assert score.metadata["verdict"] == grade_episode(task, res.trace)["verdict"]


class _Closer:
    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return "close", {"order_id": self.order}


def test_calls_inspect_refuses_still_cost_a_call():
    """An unknown tool and an out-of-range wait never reach the environment's tools, but each is charged."""
    def reply(messages, tools, tool_choice, config):
        brief, _ = conversation(messages)
        order = brief["order_id"]
        turn = sum(m.role == "assistant" for m in messages)
        plan = [[("fly", {"order_id": order})], [("wait", {"order_id": order, "ticks": 0})],
                [("read_erp", {"order_id": order})]]
        return output(plan[turn] if turn < len(plan) else ())

    log = run(inspect_task(n_tasks=9, subset="all"), reply, limit=1)
    sample = log.samples[0]
    refusals = [m for m in sample.messages if m.role == "tool" and m.error is not None]
    assert len(refusals) == 2
    read = json.loads([m for m in sample.messages if m.role == "tool" and m.error is None][0].text)
    assert read["tool"] == "read_erp" and read["calls_left"] == 40 - 3
    ep = sample.store[STORE_KEY]
    assert ep["refused_calls"] == 2 and ep["n_calls"] == 4 and ep["disposition"] == "close"  # 2 refused, read, close


def test_a_sample_stopped_by_a_limit_is_still_closed_and_scored():
    def reads(messages, tools, tool_choice, config):
        brief, _ = conversation(messages)
        return output([("read_bank", {"order_id": brief["order_id"]})])

    log = run(inspect_task(n_tasks=9), reads, limit=1, message_limit=6)
    ep = log.samples[0].store[STORE_KEY]
    assert ep["ended"] == "limit or error" and ep["disposition"] == "close"
    assert 1 <= ep["n_calls"] < 40 and "finbench" in log.samples[0].scores


@pytest.mark.slow
@pytest.mark.parametrize("kw,word", [({"subset": "most"}, "subset"), ({"seeds": []}, "seeds"),
                                     ({"n_tasks": 0}, "n_tasks"), ({"seeds": 3}, "seeds"),
                                     ({"subset_size": 0}, "size")])
def test_bad_arguments_name_themselves(kw, word):
    with pytest.raises(FinbenchError, match=word):
        inspect_task(**{"n_tasks": 9, **kw})


@pytest.mark.slow
def test_replies_without_a_usage_run_offline(monkeypatch, tmp_path):
    """The mock counts a reply's missing usage without tiktoken's download (the socket guard would see one);
    a usage a reply carries is kept."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))  # empty: no cached encoding
    bare = [ModelOutput.from_content(model="model", content="No tools.") for _ in range(2)]
    log = run(inspect_task(n_tasks=9), bare, limit=2)
    assert log.status == "success", log.error
    assert len(log.samples) == 2 and log.stats.model_usage["mockllm/model"].input_tokens > 0
    log = run(inspect_task(n_tasks=9), [output(text="No tools.") for _ in range(2)], limit=2)
    assert log.stats.model_usage["mockllm/model"].input_tokens == 2 * USAGE.input_tokens


def test_the_inspect_eval_command_line(monkeypatch, tmp_path):
    """`inspect eval finbench/running/inspect_task.py@finbench --model mockllm/model -T ...`, in process and
    offline: the mock's default reply (no tool call) carries no usage, and the solver spares the mock the
    tiktoken download counting it would take (the socket guard would see one). In a subprocess, as a user
    types it: tests/running/test_inspect_cli.py."""
    from click.testing import CliRunner
    from inspect_ai._cli.main import inspect
    from inspect_ai.log import read_eval_log

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))  # empty: no cached encoding to hide behind
    monkeypatch.chdir(fb.__file__.rsplit("/finbench/", 1)[0])
    logs = tmp_path / "cli"
    res = CliRunner().invoke(inspect, ["eval", "finbench/running/inspect_task.py@finbench", "--model",
                                       "mockllm/model", "-T", "n_tasks=9", "-T", "seeds=[0,1]", "--limit", "3",
                                       "--display", "none", "--log-format", "json", "--log-dir", str(logs)])
    assert res.exit_code == 0, res.output
    log = read_eval_log(glob.glob(str(logs / "*.json"))[0])
    assert log.status == "success" and log.eval.task == "finbench"
    assert log.eval.task_args["seeds"] == [0, 1]
    assert [s.id for s in log.samples] == ["ord-0001__seed0", "ord-0001__seed1", "ord-0002__seed0"]
    assert all(s.scores["finbench"].answer == "close" for s in log.samples)


# --- the task's parts, without running an evaluation ----------------------------------------------------

def test_the_task_carries_its_draw_its_name_and_its_generation_config():
    from finbench.sim.constants import ENGINE_VERSION

    corpus = fb.make_corpus(n_tasks=9)
    sub = table5_subset(corpus, 4, 1)
    task = inspect_task(corpus=corpus, subset_size=4, subset_seed=1, name="mine")
    assert task.metadata == {"corpus": sub.fingerprint, "tasks": len(sub), "seeds": [0], "subset": "table5",
                             "engine": ENGINE_VERSION, "subset_size": 4, "subset_seed": 1}
    assert task.name == "mine" and task.dataset.name == "mine"
    assert task.config.temperature == 0.0 and task.config.parallel_tool_calls is False
    whole = inspect_task(corpus=corpus, subset="all")
    assert "subset_size" not in whole.metadata and whole.metadata["tasks"] == 9


def test_a_refused_call_is_charged_with_its_own_arguments_and_executes_nothing():
    """`_charge` (a call Inspect refused before any tool): a known tool with well-formed arguments is charged
    with them plus the refusal mark, so the environment answers an error and runs nothing; an unknown tool is
    charged as no tool call with its arguments; arguments that are not an object as none."""
    from types import SimpleNamespace

    from finbench.agents.llm import NO_TOOL
    from finbench.running.inspect_task import REFUSED, _charge

    task = fb.make_corpus(n_tasks=1).tasks[0]
    order = task.order_id
    env = fb.FinalityEnv(task, 0)
    env.reset()
    _charge(env, SimpleNamespace(function="wait", arguments={"order_id": order, "ticks": 5}))
    _charge(env, SimpleNamespace(function="fly", arguments={"order_id": order}))
    _charge(env, SimpleNamespace(function="ship", arguments=["not", "an", "object"]))
    assert [(tool, args) for _, tool, args in env.calls()] == [
        ("wait", {"order_id": order, "ticks": 5, REFUSED: True}), (NO_TOOL, {"order_id": order}), ("ship", {})]
    assert env.wait_calls == 0 and not env.done and env.calls_left == 40 - 3
    assert sum(env.errors.values()) == 3


def test_the_mock_model_counts_tokens_without_tiktoken():
    """`_offline_mock`: Inspect's mock model counts four characters a token (at least one); any other model,
    or a mock that has its own count, is left alone."""
    import asyncio

    from finbench.running.inspect_task import _estimate, _offline_mock

    mock = get_model("mockllm/model", custom_outputs=[output(text="x")])
    _offline_mock(mock)
    assert vars(mock.api)["count_text_tokens"] is _estimate
    assert [asyncio.run(mock.api.count_text_tokens(t)) for t in ("", "abc", "a" * 8, "a" * 43)] == [1, 1, 2, 10]
    own = get_model("mockllm/model", custom_outputs=[output(text="x")])

    async def count(text):
        return 7

    own.api.count_text_tokens = count
    _offline_mock(own)
    assert own.api.count_text_tokens is count


def test_unscored_names_each_log_and_sample_that_was_not_scored():
    from types import SimpleNamespace as NS

    from finbench.running.inspect_task import unscored

    scored = NS(id="a", scores={STORE_KEY: 1}, error=None)
    bare = NS(id="b", scores=None, error=None)
    failed = NS(id="c", scores={}, error=NS(message="Traceback (most recent call last):\\n  ...\\n"
                                                    "ValueError: 'bad thing'\\n"))
    ok = NS(status="success", error=None, eval=NS(task="finbench"), samples=[scored, bare, failed])
    broken = NS(status="error", error=NS(message="RuntimeError: gone\nmore"), eval=NS(task="t5"), samples=None)
    assert unscored([ok, broken]) == ["sample b: no score", "sample c: ValueError: 'bad thing",
                                      "t5: log status error (RuntimeError: gone)"]
    assert unscored([NS(status="success", error=None, eval=NS(task="x"), samples=[scored])]) == []
