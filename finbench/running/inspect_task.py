"""The benchmark as an Inspect AI task: one sample per episode, the model playing it through the twelve tools.

    import finbench as fb
    from inspect_ai import eval as inspect_eval
    inspect_eval(fb.inspect_task(), model="openai/gpt-4o-mini")           # Table V's subset, seed 0

    inspect eval finbench/running/inspect_task.py@finbench --model openai/gpt-4o-mini -T n_tasks=30
    inspect eval finbench/running/inspect_task.py@finbench --model mockllm/model -T n_tasks=9 --limit 3  # offline

(A local OpenAI-compatible server, and the exit status of a run no sample of which completes: docs/inspect.md.)

Samples: the (task, seed) episodes of Table V's stratified subset (`finbench.sim.corpus.stratified_subset`: every archetype,
twin pairs whole) of a `make_corpus(master_seed, n_tasks)` corpus, or of the whole corpus
(`subset="all"`). The input is the brief as `ModelAgent` words it; the system prompt is its prompt.

Solver: a fresh `FinalityEnv` per sample; the twelve tools (`tool_schemas()`) are Inspect tools that
step it and answer with the observation as JSON. The model is asked until the case ends (`env.done`)
or it replies without a tool call; then the case is closed (`close` until done). Unlike `ModelAgent`,
which answers a reply without a tool call with an error and asks again, this follows Inspect's
convention that such a reply is the agent's last. A call Inspect refuses before it reaches a tool (an
unknown tool, arguments that do not fit the schema) still costs a call of the budget, as in `ModelAgent`.
Inspect's mock model is given token counts that need no download (`_offline_mock`), so it runs offline.

Scorer `finbench`: per episode `gap` (reference position - position), `exact` (gap <= 0.005) and the
effect verdict (`grade_episode` on the trace) as `violation` and `unscorable` (1 or 0); the answer is
the disposition, and the score's metadata holds the whole episode summary. Metrics: their means (and
the gap's standard error): mean gap, exact %, effect violation % and unscorable % as Table II counts.

`inspect_ai` is imported lazily: nothing here loads it until a task is made.
"""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

from finbench.agents.llm import NO_TOOL, brief_message, system_prompt
from finbench.agents.llm_reply import CONTEXT_LENGTH, causes, size_refusal
from finbench.errors import bad, check_int
from finbench.grading import CHECKS
from finbench.running.episode import grade_episode
from finbench.running.evaluation import check_inputs
from finbench.sim import constants as C
from finbench.sim.corpus import Corpus, corpus_for, stratified_subset
from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.probe import ProbeMode
from finbench.sim.tools import TOOL_NAMES, tool_schemas, validate

STORE_KEY = "finbench"
"""Where the solver leaves the episode's summary in the sample's store (the scorer reads it)."""
SUBSETS = ("table5", "all")
REFUSED = "__refused_by_inspect__"  # the argument a refused call is charged with (never a well-formed call)
__all__ = ["STORE_KEY", "SUBSETS", "context_refusal", "finbench", "inspect_task", "unscored"]


def _sample_id(task_id: str, seed: int) -> str:
    return f"{task_id}__seed{seed}"


def inspect_task(n_tasks: int | None = None, seeds=(0,), subset: str = "table5", *, subset_size: int = 60,
                 subset_seed: int = 0, master_seed: int = C.PUBLIC_SEED, corpus: Corpus | None = None,
                 profile=None, costs=None, probe: ProbeMode | None = None, prompt_path=None,
                 name: str = "finbench"):
    """The benchmark as an Inspect `Task`: one sample per (task, seed) episode.

    Args:
        n_tasks: The corpus the episodes come from (`make_corpus(master_seed, n_tasks)`; None: 321, the
            paper's); ignored when `corpus` is given.
        seeds: The fault seeds (Table V plays seed 0).
        subset: "table5": Table V's stratified subset of the corpus (`stratified_subset(corpus,
            subset_size, subset_seed)`); "all": every task.
        corpus: A corpus of your own instead of `make_corpus(master_seed, n_tasks)`.
        profile, costs, probe: As `FinalityEnv` takes them (defaults: the benchmark's).
        prompt_path: Another system prompt file (default `finbench/agents/prompts/system.txt`).
        name: The task's name in Inspect's logs.

    Returns:
        An `inspect_ai.Task` (solver and scorer described in the module docstring); its generation
        config asks for temperature 0 and one tool call per turn, as `ModelAgent` does.

    Raises:
        FinbenchError: a bad argument. ModuleNotFoundError: `inspect_ai` is not installed.

    Example:
        >>> import finbench as fb
        >>> task = fb.inspect_task(n_tasks=9)                   # doctest: +SKIP
        >>> len(task.dataset)                                   # doctest: +SKIP
        9
    """
    if subset not in SUBSETS:
        raise bad("inspect_task", "subset", subset, " or ".join(map(repr, SUBSETS)))
    if corpus is None:
        n = C.DEFAULT_TASKS if n_tasks is None else check_int("inspect_task", "n_tasks", n_tasks, 1)
        corpus = corpus_for(check_int("inspect_task", "master_seed", master_seed, 0), n)
    profile, costs, seeds = check_inputs("inspect_task", corpus, seeds, profile, costs)
    if subset == "table5":
        corpus = stratified_subset(corpus, subset_size, subset_seed)
    prompt = system_prompt(prompt_path)
    try:  # lazy: most users never need Inspect, and it is a heavy import
        from inspect_ai import Task
        from inspect_ai.dataset import MemoryDataset, Sample
        from inspect_ai.model import GenerateConfig
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"inspect_task needs inspect-ai (pip install inspect-ai): {e}") from e
    cases, samples = {}, []
    for task in corpus.tasks:
        ref = reference_position(task, costs)
        for seed in seeds:
            sid = _sample_id(task.task_id, seed)
            cases[sid] = (task, seed)
            brief = FinalityEnv(task, seed, profile, costs, probe=probe).reset()
            samples.append(Sample(input=brief_message(brief), target=f"{ref:.2f}", id=sid, metadata={
                "task_id": task.task_id, "seed": seed, "archetype": task.archetype, "twin_id": task.twin_id,
                "twin_side": task.twin_side, "order_id": task.order_id, "reference_position": ref}))
    meta = {"corpus": corpus.fingerprint, "tasks": len(corpus), "seeds": list(seeds), "subset": subset,
            "engine": C.ENGINE_VERSION}
    if subset == "table5":
        meta.update(subset_size=subset_size, subset_seed=subset_seed)
    return Task(dataset=MemoryDataset(samples, name=name), solver=_solver(cases, prompt, profile, costs, probe),
                scorer=_scorer(), config=GenerateConfig(temperature=0.0, parallel_tool_calls=False), name=name,
                metadata=meta)


def _tools(env: FinalityEnv) -> list:
    """The twelve tools as Inspect tools bound to `env`: each steps it and answers with the observation."""
    from inspect_ai.tool import ToolDef, ToolParams  # lazy: only when a task runs

    def executor(tool: str):
        async def execute(**kwargs: Any) -> str:
            return json.dumps(env.step(tool, **kwargs), sort_keys=True)
        return execute

    return [ToolDef(executor(f["name"]), name=f["name"], description=f["description"],
                    parameters=ToolParams(**f["parameters"])).as_tool()
            for f in (s["function"] for s in tool_schemas())]


def _charge(env: FinalityEnv, call) -> None:
    """Spend one call of the budget on a call Inspect refused before it reached a tool, as `ModelAgent`
    charges a malformed call: the environment answers it with an error, never executes it."""
    args = call.arguments if isinstance(call.arguments, dict) and all(isinstance(k, str) for k in call.arguments) \
        else {}
    tool = call.function if call.function in TOOL_NAMES else NO_TOOL
    if validate(tool, args) is None:  # refused (e.g. by an approver) yet well-formed: still not executed
        args = {**args, REFUSED: True}
    env.step(tool, **args)


async def _estimate(text: str) -> int:
    return max(1, len(text) // 4)


def _offline_mock(model) -> None:
    """Let Inspect's mock model count tokens without tiktoken. The mock gives a reply without a usage (every
    reply of `--model mockllm/model` from the shell) one counted with tiktoken, whose encoding is downloaded
    on first use: offline, every sample would fail. A mock's usage is made up anyway, so it gets an estimate
    that needs no file (four characters a token); any other model, or a mock's own usage, is left alone."""
    try:  # lazy; the class is not exported, and a version that moves it must not fail every other model
        from inspect_ai.model._providers.mockllm import MockLLM
    except ImportError:
        return
    api = getattr(model, "api", None)
    if isinstance(api, MockLLM) and "count_text_tokens" not in vars(api):
        api.count_text_tokens = _estimate  # this instance only: shadows the method that loads tiktoken


def _solver(cases: dict, prompt: str, profile, costs, probe):
    from inspect_ai.model import ChatMessageSystem, get_model  # lazy: only when a task is made
    from inspect_ai.solver import solver

    @solver(name="finbench_episode")
    def finbench_episode():
        async def solve(state, generate):
            _offline_mock(get_model())  # the model `generate` asks
            task, seed = cases[str(state.sample_id)]
            env = FinalityEnv(task, seed, profile, costs, probe=probe)
            env.reset()
            state.messages.insert(0, ChatMessageSystem(content=prompt))
            state.tools = _tools(env)
            state.tool_choice = "auto"
            ended, refused, turns = "limit or error", 0, 0
            try:
                while not env.done:
                    before = len(state.messages)
                    try:
                        state = await generate(state, tool_calls="single")
                    except Exception as exc:  # noqa: BLE001 - a refusal for the context length ends the case
                        refusal = context_refusal(exc)
                        if refusal is None or turns == 0:  # another error, or the prompt alone does not fit
                            raise
                        ended = f"{CONTEXT_LENGTH}: {refusal}"
                        break
                    turns += 1
                    if getattr(state.output, "stop_reason", None) == "model_length" and \
                            not state.output.message.tool_calls:
                        ended = f"{CONTEXT_LENGTH}: the conversation is too long for the model (stop reason model_length)"
                        break
                    calls = {c.id: c for c in state.output.message.tool_calls or []}
                    if not calls:
                        ended = "no tool call"
                        break
                    for msg in state.messages[before:]:
                        if msg.role == "tool" and msg.error is not None and msg.tool_call_id in calls:
                            refused += 1
                            _charge(env, calls[msg.tool_call_id])
                else:
                    ended = "case ended"
            finally:  # a limit or an error still leaves a finished, scored episode
                while not env.done:
                    env.step("close", order_id=task.order_id)
                state.store.set(STORE_KEY, _summary(env, str(state.model), ended, refused, turns))
            return state
        return solve

    return finbench_episode()


def context_refusal(exc: BaseException) -> str | None:
    """The server's words when `exc` (what Inspect's `generate` raised, or what caused it) is a refusal of the
    conversation as too long for the model's context (a 413, or a 4xx about the context: vLLM's and llama.cpp's
    wordings, `finbench.agents.llm_reply.size_refusal`); None for any other error."""
    for cause in causes(exc):
        status = getattr(cause, "status_code", None)
        words = getattr(cause, "provider_message", None)  # Inspect's ModelGenerateError: the provider's own
        probe = cause if words is None else SimpleNamespace(status_code=status, message=words)
        found = size_refusal(probe, None)
        if found is not None:
            return found["error"]
    return None


def _summary(env: FinalityEnv, model: str, ended: str, refused: int, turns: int) -> dict:
    """The ended episode as plain JSON: its result, its effect verdict and how the solver ended it."""
    task = env.task
    res = env.result(model, reference_position(task, env.costs))
    grade = grade_episode(task, res.trace)
    return {"task_id": task.task_id, "seed": res.seed, "archetype": task.archetype, "disposition": res.disposition,
            "end_t": int(res.end_t), "position": float(res.position),
            "reference_position": float(res.reference_position), "gap": float(res.gap), "exact": bool(res.exact),
            "premature_irreversible": bool(res.premature_irreversible), "n_calls": int(res.n_calls),
            "probe_calls": int(res.probe_calls), "wait_calls": int(res.wait_calls),
            "unrelated_effects": int(res.unrelated_effects), "verdict": grade["verdict"],
            "capture_effects": int(grade["capture_effects"]),
            "checks": {k: grade[f"check_{k}"] for k in CHECKS}, "ended": ended, "refused_calls": refused,
            "turns": turns}


def _scorer():
    from inspect_ai.scorer import Score, mean, scorer, stderr  # lazy: only when a task is made

    @scorer(name="finbench", metrics={"gap": [mean(), stderr()], "exact": [mean()], "violation": [mean()],
                                      "unscorable": [mean()]})
    def finbench_score():
        async def score(state, target):
            ep = state.store.get(STORE_KEY)
            if ep is None:
                raise RuntimeError(f"sample {state.sample_id}: no episode in the store (the finbench solver "
                                   "did not run)")
            failed = [k for k, v in ep["checks"].items() if v == "fail"]
            effects = ep["verdict"] + (f" (failed: {', '.join(failed)})" if failed else "")
            return Score(value={"gap": ep["gap"], "exact": float(ep["exact"]),
                                "violation": float(ep["verdict"] == "violation"),
                                "unscorable": float(ep["verdict"] == "unscorable")},
                         answer=ep["disposition"],
                         explanation=(f"{ep['disposition']} at t={ep['end_t']} after {ep['n_calls']} calls "
                                      f"({ep['ended']}): position {ep['position']:.2f}, reference "
                                      f"{ep['reference_position']:.2f}, gap {ep['gap']:.2f}; effects {effects}"),
                         metadata=ep)
        return score

    return finbench_score()


def task(fn):
    """Inspect's `@task` when Inspect is what loads this file (`inspect eval finbench/running/inspect_task.py`),
    else `fn` as it is: lazy, importing this module never imports inspect_ai. Inspect finds the task by
    this decorator's name."""
    inspect_ai = sys.modules.get("inspect_ai")
    return inspect_ai.task(fn) if inspect_ai is not None else fn


@task
def finbench(n_tasks: int | None = None, seeds: list[int] = (0,), subset: str = "table5", subset_size: int = 60,
             subset_seed: int = 0, master_seed: int = C.PUBLIC_SEED):
    """The task `inspect eval finbench/running/inspect_task.py@finbench` runs (`-T n_tasks=30 -T seeds=[0,1]`)."""
    return inspect_task(n_tasks, seeds, subset, subset_size=subset_size, subset_seed=subset_seed,
                        master_seed=master_seed)


def unscored(logs) -> list[str]:
    """What of Inspect's eval `logs` was not scored, one line each: a log that did not finish (its status and
    error) and every sample without a `finbench` score (its id and the first line of its error). Empty when
    every sample of every log was scored."""
    out = []
    for log in logs:
        samples = log.samples or []
        if log.status != "success":
            why = getattr(log.error, "message", None) or ""
            out.append(f"{log.eval.task}: log status {log.status}" + (f" ({why.splitlines()[0][:200]})" if why else ""))
        for sample in samples:
            if not (sample.scores or {}).get(STORE_KEY):
                error = str(getattr(sample.error, "message", None) or "no score").replace("\\n", "\n")
                lines = [line.strip(" '\")") for line in error.splitlines() if line.strip(" '\")")]
                out.append(f"sample {sample.id}: {lines[-1][:200] if lines else 'no score'}")
    return out
