"""A Gymnasium environment over `FinalityEnv`, for people training agents: text in, tool call out.

    import gymnasium
    from finbench.agents.gym import FinalityGym
    env = FinalityGym()                                  # the public corpus, default faults and costs
    obs, info = env.reset(seed=0)                        # obs: the brief as JSON text
    obs, reward, terminated, truncated, info = env.step(
        '{"name": "probe_processor", "arguments": {"order_id": "ord-0001"}}')

An action is one tool call as a language model writes it: a JSON object with
`name` and `arguments` (a JSON string or an object), or the same as a dict.
Anything else (not JSON, an unknown tool, wrong arguments) is answered with an
error observation and costs a call, exactly as `FinalityEnv.step` does for a
bad call; the episode therefore always ends, by a disposition or by the call
budget. The reward is 0 until the case ends, then minus the gap to the
privileged reference (0 is the best possible; the position itself is in
`info["position"]`).
"""
from __future__ import annotations

import json
import string

import gymnasium
from gymnasium import spaces

from finbench.sim.corpus import Corpus, corpus_for
from finbench.sim.economics import Costs
from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.faults import FaultProfile
from finbench.agents.llm import NO_TOOL

MAX_TEXT = 16384
CHARSET = string.printable


def _text(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True)


class FinalityGym(gymnasium.Env):
    """`FinalityEnv` as a `gymnasium.Env`: observations are JSON text, actions are tool calls as JSON text.

    Args:
        corpus: The tasks (default: `make_corpus()`); `reset` draws one from `np_random`
            unless `options={"task_id": ...}`.
        profile, costs: As `FinalityEnv`.
        max_fault_seed: Fault seeds are drawn from [0, max_fault_seed); `options={"fault_seed": s}` fixes one.

    Returns of `step`: `(observation, reward, terminated, truncated, info)`; `info` holds
    the observation as a dict (`"observation"`), `"calls_left"` and, at the end, `"position"`,
    `"gap"`, `"exact"`, `"disposition"`.
    """

    metadata = {"render_modes": []}

    def __init__(self, corpus: Corpus | None = None, profile: FaultProfile | None = None, costs: Costs | None = None,
                 max_fault_seed: int = 5):
        if corpus is None:
            corpus = corpus_for()
        self.corpus = corpus
        self.profile = profile if profile is not None else FaultProfile.default()
        self.costs = costs if costs is not None else Costs()
        self.max_fault_seed = int(max_fault_seed)
        self.observation_space = spaces.Text(max_length=MAX_TEXT, min_length=1, charset=CHARSET)
        self.action_space = spaces.Text(max_length=1024, min_length=1, charset=CHARSET)
        self._env: FinalityEnv | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "task_id" in options:
            task = self.corpus[options["task_id"]]
        else:
            task = self.corpus.tasks[int(self.np_random.integers(len(self.corpus)))]
        fault_seed = int(options.get("fault_seed", self.np_random.integers(self.max_fault_seed)))
        self._env = FinalityEnv(task, fault_seed, self.profile, self.costs)
        brief = self._env.reset()
        return _text(brief), {"observation": brief, "calls_left": brief["calls_left"], "task_id": task.task_id}

    def step(self, action):
        if self._env is None:
            raise RuntimeError("FinalityGym.step before reset()")
        tool, args, problem = self._parse(action)
        obs = self._env.step(tool, **args)
        if problem is not None:
            obs.pop("result", None)
            obs["error"] = problem
        info = {"observation": obs, "calls_left": self._env.calls_left}
        reward = 0.0
        terminated = bool(self._env.done)
        if terminated:
            res = self._env.result("gym", reference_position(self._env.task, self._env.costs))
            reward = -float(res.gap)
            info.update(position=res.position, gap=res.gap, exact=res.exact, disposition=res.disposition)
        return _text(obs), reward, terminated, False, info

    @staticmethod
    def _parse(action) -> tuple[str, dict, str | None]:
        """(tool, args, an error text or None) from a tool call given as JSON text or a dict."""
        try:
            call = json.loads(action) if isinstance(action, (str, bytes)) else action
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError('expected {"name": ..., "arguments": {...}}')
            args = call.get("arguments", {})
            args = json.loads(args) if isinstance(args, str) else args
            if not isinstance(args, dict):
                raise ValueError("arguments are not a JSON object")
            return call["name"], args, None
        except (ValueError, TypeError) as e:
            return NO_TOOL, {}, f"not a tool call: {e}"
