"""`finbench.agents.gym`: Gymnasium's own checker passes, and a tool call through it is a FinalityEnv step."""
import json

import pytest

gymnasium = pytest.importorskip("gymnasium")

import finbench as fb  # noqa: E402
from finbench.agents.gym import FinalityGym  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return fb.make_corpus(n_tasks=30)


def test_check_env_passes(corpus):
    from gymnasium.utils.env_checker import check_env

    check_env(FinalityGym(corpus), skip_render_check=True)


def test_a_gym_episode_is_the_finality_env_episode(corpus):
    task = corpus.tasks[3]
    env = FinalityGym(corpus)
    obs, info = env.reset(seed=1, options={"task_id": task.task_id, "fault_seed": 2})
    assert json.loads(obs)["order_id"] == task.order_id
    policy = fb.get_policy("finality_gate")
    policy.begin(info["observation"])
    o, done = info["observation"], False
    while not done:
        tool, args = policy.act(o)
        text, reward, done, truncated, info = env.step(json.dumps({"name": tool, "arguments": json.dumps(args)}))
        o = json.loads(text)
        assert o == info["observation"] and not truncated
    res = fb.run_episode(task, fb.get_policy("finality_gate"), 2)
    assert info["position"] == res.position and reward == -res.gap


def test_garbage_actions_are_errors_and_the_budget_ends_the_episode(corpus):
    env = FinalityGym(corpus)
    env.reset(seed=0)
    for i in range(40):
        text, reward, done, _, info = env.step("not a tool call")
        assert "not a tool call" in json.loads(text)["error"]
    assert done and info["disposition"] == "close" and info["calls_left"] == 0


_BIG = "x" * 20000
HOSTILE_ACTIONS = {
    "deep_brackets": "[" * 100000,
    "deep_braces": '{"a":' * 100000,
    "deep_arguments": json.dumps({"name": "wait", "arguments": "[" * 100000}),
    "huge_tool_name": json.dumps({"name": _BIG, "arguments": {}}),
    "huge_argument_name": json.dumps({"name": "wait", "arguments": {_BIG: 1}}),
    "huge_order_id": json.dumps({"name": "wait", "arguments": {"order_id": _BIG, "ticks": 3}}),
    "escaped_unicode_name": json.dumps({"name": "\u00e9\u2028" * 5000}),
    "lone_surrogates": json.dumps({"name": "\ud800" * 5000}),
    "huge_integer": '{"name": "wait", "arguments": {"order_id": "o", "ticks": ' + "9" * 5000 + "}}",
    "nested_ticks": '{"name": "wait", "arguments": {"order_id": "o", "ticks": ' + "[" * 500 + "]" * 500 + "}}",
    "non_string_argument_name": {"name": "wait", "arguments": {1: 2}},
    "non_string_tool_name": {"name": 5, "arguments": {}},
    "object_argument": {"name": "wait", "arguments": {"order_id": object(), "ticks": 1}},
    "not_utf8": b"\xff\xfe\xfd",
    "none": None,
    "number": 5,
    "list": [],
    "nul": "\x00",
    "empty": "",
    "non_ascii_text": "\u00e9" * 30000,
}


@pytest.mark.parametrize("action", HOSTILE_ACTIONS.values(), ids=HOSTILE_ACTIONS.keys())
def test_every_action_gives_an_error_observation_inside_the_space(corpus, action):
    env = FinalityGym(corpus)
    env.reset(seed=0)
    text, reward, done, truncated, info = env.step(action)
    assert env.observation_space.contains(text)
    obs = json.loads(text)
    assert obs == info["observation"] and "error" in obs and obs["calls_left"] == info["calls_left"] == 39
    assert reward == 0.0 and not done and not truncated


def test_a_long_echo_is_cut_short_saying_how_long_it_was(corpus):
    env = FinalityGym(corpus)
    env.reset(seed=0)
    text, *_ = env.step(json.dumps({"name": _BIG, "arguments": {}}))
    obs = json.loads(text)
    assert obs["tool"].startswith("x" * 100) and obs["tool"].endswith("(20000 characters)")
    # an ordinary observation is untouched
    env.reset(seed=0, options={"task_id": corpus.tasks[0].task_id})
    text, _, _, _, info = env.step(json.dumps({"name": "read_processor",
                                               "arguments": {"order_id": corpus.tasks[0].order_id}}))
    assert "result" in info["observation"] and "..." not in text


@pytest.mark.parametrize("kwargs, match", [
    ({"options": {"task_id": "nope"}}, r"options\['task_id'\] must be a task id of the corpus .*got 'nope'"),
    ({"options": {"task_id": ["x"]}}, r"options\['task_id'\] must be .*got \['x'\]"),
    ({"options": {"fault_seed": -1}}, r"options\['fault_seed'\] must be an integer >= 0, got -1"),
    ({"options": {"fault_seed": "1"}}, r"options\['fault_seed'\] must be an integer >= 0, got '1'"),
    ({"options": {"taskid": "ord-0001"}}, r"an options key must be one of 'task_id', 'fault_seed', got 'taskid'"),
    ({"options": "ord-0001"}, r"options must be a dict"),
    ({"seed": -1}, r"seed must be an integer >= 0, got -1"),
    ({"seed": 1.5}, r"seed must be an integer >= 0, got 1.5"),
])
def test_bad_reset_arguments_are_named(corpus, kwargs, match):
    with pytest.raises(fb.FinbenchError, match=r"^FinalityGym\.reset: " + match):
        FinalityGym(corpus).reset(**kwargs)


def test_bad_constructor_arguments_are_named(corpus):
    with pytest.raises(fb.FinbenchError, match="FinalityGym: max_fault_seed must be an integer >= 1, got 0"):
        FinalityGym(corpus, max_fault_seed=0)
    with pytest.raises(fb.FinbenchError, match="FinalityGym: corpus must be a Corpus"):
        FinalityGym(corpus.tasks)


def test_registered_id_makes_the_environment_with_the_tool_schemas():
    import subprocess
    import sys

    code = ("import gymnasium; env = gymnasium.make('finbench.agents.gym:FinalityBench-v0'); "
            "obs, info = env.reset(seed=3); print(env.spec.id, len(info['tools']), "
            "sorted(t['function']['name'] for t in info['tools'])[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["FinalityBench-v0", "12", "close"]


def test_an_observation_nothing_can_cut_to_size_becomes_an_error_keeping_the_clock_and_the_budget():
    from finbench.agents.gym import MAX_TEXT, _fit

    big = {"t": 130, "tool": "read_ledger", "calls_left": 7, "done": False,
           "result": {f"line-{i}": "y" * 40 for i in range(2000)}}  # short keys: clipping cannot shrink it enough
    obs, text = _fit(big)
    assert set(obs) == {"t", "calls_left", "done", "error"} and (obs["t"], obs["calls_left"], obs["done"]) == (130, 7, False)
    size = int(obs["error"].split("(", 1)[1].split(" ", 1)[0])
    assert size > MAX_TEXT
    assert obs["error"] == f"the observation ({size} characters of JSON) does not fit the observation space (16384)"
    assert text == json.dumps(obs, sort_keys=True) and len(text) <= MAX_TEXT


def test_the_gym_plays_under_the_costs_it_is_given_and_says_the_budget_at_reset(corpus):
    costs = fb.Costs(step_budget=7)
    env = FinalityGym(corpus, costs=costs)
    assert env.costs is costs
    _, info = env.reset(seed=0)
    assert info["calls_left"] == 7 and info["observation"]["calls_left"] == 7
    for _ in range(7):
        text, reward, done, _, info = env.step("not a tool call")
    assert done and info["calls_left"] == 0 and info["disposition"] == "close"


def test_a_bad_profile_or_costs_and_a_step_before_reset_are_named(corpus):
    with pytest.raises(fb.FinbenchError, match=r"^FinalityGym: profile must be a FaultProfile, got 'high'"):
        FinalityGym(corpus, profile="high")
    with pytest.raises(fb.FinbenchError, match=r"^FinalityGym: costs must be a Costs, got 3"):
        FinalityGym(corpus, costs=3)
    with pytest.raises(fb.FinbenchError, match=r"\(e\.g\. 'ord-0001'\), got 'nope'"):
        FinalityGym(corpus).reset(options={"task_id": "nope"})
    with pytest.raises(RuntimeError, match=r"^FinalityGym\.step before reset\(\)$"):
        FinalityGym(corpus).step("{}")


@pytest.mark.parametrize("action, why", [
    ([1, 2], 'expected {"name": ..., "arguments": {...}}, got a JSON list'),
    ("5", 'expected {"name": ..., "arguments": {...}}, got a JSON int'),
    (object(), 'expected {"name": ..., "arguments": {...}}, got a object'),
    ({"name": "wait", "arguments": "[1]"}, "arguments are not a JSON object, got a JSON list"),
    ({"name": "wait", "arguments": 2.5}, "arguments are not a JSON object, got a JSON float"),
])
def test_an_action_that_is_no_tool_call_is_answered_saying_what_it_was(corpus, action, why):
    env = FinalityGym(corpus)
    env.reset(seed=0)
    _, _, _, _, info = env.step(action)
    assert info["observation"]["error"] == "not a tool call: " + why
