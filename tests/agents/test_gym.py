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
