"""A Gymnasium environment over `FinalityEnv`, for people training agents: text in, tool call out.

    import gymnasium
    env = gymnasium.make("finbench.agents.gym:FinalityBench-v0")  # or FinalityGym(corpus, profile, costs)
    obs, info = env.reset(seed=0)                        # obs: the brief as JSON text; info["tools"]: the schemas
    obs, reward, terminated, truncated, info = env.step(
        '{"name": "probe_processor", "arguments": {"order_id": "ord-0001"}}')

An action is one tool call as a language model writes it: a JSON object with
`name` and `arguments` (a JSON string or an object), or the same as a dict.
Anything else (not JSON, an unknown tool, wrong arguments) is answered with an
error observation and costs a call, exactly as `FinalityEnv.step` does for a
bad call; the episode therefore always ends, by a disposition or by the call
budget. Every observation is inside `observation_space`: a string the caller
supplied that the environment echoes (a 20 KB tool name, say) is cut short,
marked with its length, so the JSON text fits `MAX_TEXT`. The reward is 0 until the case ends, then minus the gap to the
privileged reference (0 is the best possible; the position itself is in
`info["position"]`).
"""
from __future__ import annotations

import json
import string

import gymnasium
from gymnasium import spaces

from finbench.errors import bad, check_choice, check_int, cut, show
from finbench.sim.corpus import Corpus, corpus_for
from finbench.sim.economics import Costs
from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.faults import FaultProfile
from finbench.sim.tools import tool_schemas
from finbench.agents.llm import NO_TOOL

ENV_ID = "FinalityBench-v0"
"""The registered id: `gymnasium.make("finbench.agents.gym:FinalityBench-v0")` imports this module and makes one."""

MAX_TEXT = 16384
CHARSET = string.printable
_RESET_OPTIONS = ("task_id", "fault_seed")
_CLIPS = (1024, 256, 64, 16)  # the longest string kept, tried in turn until the text fits MAX_TEXT


def _text(obj: dict) -> str:
    # ensure_ascii (the default) escapes every character outside ' '..'~', so the
    # text is always within CHARSET; only its length needs watching
    return json.dumps(obj, sort_keys=True)


def _clip(value, limit: int):
    """`value` with every string longer than `limit` characters cut to `limit`, saying how long it was."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        return {_clip(k, limit) if isinstance(k, str) else k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip(v, limit) for v in value]
    return value


def _fit(obs: dict) -> tuple[dict, str]:
    """(observation, its JSON text) with the text inside the observation space: long strings
    are cut short; should that not do, an error observation keeping the clock and the budget."""
    text = _text(obs)
    for limit in _CLIPS:
        if len(text) <= MAX_TEXT:
            return obs, text
        obs = _clip(obs, limit)
        text = _text(obs)
    if len(text) <= MAX_TEXT:
        return obs, text
    size = len(text)
    obs = {k: obs[k] for k in ("t", "calls_left", "note", "done") if isinstance(obs.get(k), (int, str))}
    obs["error"] = f"the observation ({size} characters of JSON) does not fit the observation space ({MAX_TEXT})"
    return obs, _text(obs)


class FinalityGym(gymnasium.Env):
    """`FinalityEnv` as a `gymnasium.Env`: observations are JSON text, actions are tool calls as JSON text.

    Args:
        corpus: The tasks (default: `make_corpus()`); `reset` draws one from `np_random`
            unless `options={"task_id": ...}`.
        profile, costs: As `FinalityEnv`.
        max_fault_seed: Fault seeds are drawn from [0, max_fault_seed); `options={"fault_seed": s}` fixes one.

    Returns of `step`: `(observation, reward, terminated, truncated, info)`; `info` holds
    the observation as a dict (`"observation"`), `"calls_left"` and, at the end, `"position"`,
    `"gap"`, `"exact"`, `"disposition"`. The `info` of `reset` also holds `"task_id"` and
    `"tools"`, the twelve tools' schemas in the function-calling format (`tool_schemas()`).
    """

    metadata = {"render_modes": []}

    def __init__(self, corpus: Corpus | None = None, profile: FaultProfile | None = None, costs: Costs | None = None,
                 max_fault_seed: int = 5):
        if corpus is None:
            corpus = corpus_for()
        if not isinstance(corpus, Corpus) or not len(corpus):
            raise bad("FinalityGym", "corpus", corpus, "a Corpus with at least one task (make_corpus, load_corpus)")
        self.corpus = corpus
        self.profile = profile if profile is not None else FaultProfile.default()
        self.costs = costs if costs is not None else Costs()
        if not isinstance(self.profile, FaultProfile):
            raise bad("FinalityGym", "profile", profile, "a FaultProfile")
        if not isinstance(self.costs, Costs):
            raise bad("FinalityGym", "costs", costs, "a Costs")
        self.max_fault_seed = check_int("FinalityGym", "max_fault_seed", max_fault_seed, 1)
        self._by_id = {t.task_id: t for t in corpus.tasks}
        self.observation_space = spaces.Text(max_length=MAX_TEXT, min_length=1, charset=CHARSET)
        self.action_space = spaces.Text(max_length=1024, min_length=1, charset=CHARSET)
        self._env: FinalityEnv | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode: `(observation, info)`.

        Raises:
            FinbenchError: `options` is not a dict of `task_id` (a task id of the
                corpus) and `fault_seed` (an integer >= 0), or `seed` is neither
                None nor an integer >= 0.
        """
        where = "FinalityGym.reset"
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise bad(where, "options", options, "a dict (keys: task_id, fault_seed) or None")
        for key in options:
            check_choice(where, "an options key", key, _RESET_OPTIONS)
        if seed is not None:
            seed = check_int(where, "seed", seed, 0)
        task = None
        if "task_id" in options:
            task_id = options["task_id"]
            task = self._by_id.get(task_id) if isinstance(task_id, str) else None
            if task is None:
                raise bad(where, "options['task_id']", task_id,
                          f"a task id of the corpus (e.g. {self.corpus.tasks[0].task_id!r})")
        fault_seed = None
        if "fault_seed" in options:
            fault_seed = check_int(where, "options['fault_seed']", options["fault_seed"], 0)
        super().reset(seed=seed)
        if task is None:
            task = self.corpus.tasks[int(self.np_random.integers(len(self.corpus)))]
        if fault_seed is None:
            fault_seed = int(self.np_random.integers(self.max_fault_seed))
        self._env = FinalityEnv(task, fault_seed, self.profile, self.costs)
        brief, text = _fit(self._env.reset())
        return text, {"observation": brief, "calls_left": self._env.calls_left, "task_id": task.task_id,
                      "tools": tool_schemas()}

    def step(self, action):
        if self._env is None:
            raise RuntimeError("FinalityGym.step before reset()")
        tool, args, problem = self._parse(action)
        obs = self._env.step(tool, **args)
        if problem is not None:
            obs.pop("result", None)
            obs["error"] = problem
        obs, text = _fit(obs)
        info = {"observation": obs, "calls_left": self._env.calls_left}
        reward = 0.0
        terminated = bool(self._env.done)
        if terminated:
            res = self._env.result("gym", reference_position(self._env.task, self._env.costs))
            reward = -float(res.gap)
            info.update(position=res.position, gap=res.gap, exact=res.exact, disposition=res.disposition)
        return text, reward, terminated, False, info

    @staticmethod
    def _parse(action) -> tuple[str, dict, str | None]:
        """(tool, args, an error text or None) from a tool call given as JSON text or a dict.

        Never raises: whatever `action` is, a call that cannot be made comes back as
        `(NO_TOOL, {}, why)`, and `step` answers it with an error observation."""
        try:
            call = _loads(action, "the action") if isinstance(action, (str, bytes, bytearray)) else action
            if not isinstance(call, dict):
                raise ValueError('expected {"name": ..., "arguments": {...}}, got ' + _kind(call))
            if not isinstance(call.get("name"), str):
                raise ValueError(f'"name" must be a string, got {show(call.get("name"))}')
            args = call.get("arguments", {})
            args = _loads(args, "arguments") if isinstance(args, (str, bytes, bytearray)) else args
            if not isinstance(args, dict):
                raise ValueError("arguments are not a JSON object, got " + _kind(args))
            odd = next((k for k in args if not isinstance(k, str)), None)
            if odd is not None:
                raise ValueError(f"argument names must be strings, got {show(odd)}")
            return call["name"], dict(args), None
        except Exception as e:  # noqa: BLE001 - the documented contract: any action is an error observation
            return NO_TOOL, {}, f"not a tool call: {e}"


def _loads(text, what: str):
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} nest(s) too deeply to read") from None
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text") from None


def _kind(value) -> str:
    return f"a JSON {type(value).__name__}" if isinstance(value, (list, str, int, float, bool, type(None))) \
        else f"a {type(value).__name__}"


if ENV_ID not in gymnasium.registry:  # registered once, however often the module is reloaded
    gymnasium.register(id=ENV_ID, entry_point="finbench.agents.gym:FinalityGym")
