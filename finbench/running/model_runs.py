"""A language model's episodes on a run's (task, seed) pairs: asked through its endpoint with episodes
overlapping their waiting (`run_model`), or replayed from the transcripts on disk (`model_episodes`). The
model arm (`experiments.model_arm`, Table V) and `finbench eval --model` read them.
"""
from __future__ import annotations

import copy
import threading
from pathlib import Path

import pandas as pd

from finbench.errors import note, warn_caller
from finbench.files import at_root
from finbench.agents.llm import (MAX_TOKENS, MODEL_CONNECTIONS, TIMEOUT, ModelAgent, ModelUnavailable,
                                 TranscriptWarning, header_model, is_transcript)
from finbench.agents.llm_traffic import Usage
from finbench.agents.registry import PolicyRef
from finbench.running import origin as O
from finbench.running.columns import COLUMNS
from finbench.running.evaluation import episode_row  # the runner's own episode: model rows have every column
from finbench.running.overlap import check_connections, overlapped
from finbench.running.run import Run

__all__ = ["EPISODE_COLUMNS", "model_episodes", "run_model", "transcript_models"]

EPISODE_COLUMNS = [*COLUMNS, "malformed", "ended", O.COLUMN]
"""A model episode's row: the runner's columns, malformed calls, why it ended early ("" if it did not), origin."""


# --- model episodes ---------------------------------------------------------------------

def _rows(run: Run, agent: ModelAgent, only_finished: bool, progress: bool, max_connections: int = 1
          ) -> pd.DataFrame:
    """Episode rows of `agent` on `run`'s (task, seed) pairs, in that order.

    Each episode is played holding its transcript's lock, up to `max_connections` at once, each thread with
    a copy of `agent` of its own (they share its `usage` and its endpoint's gate). With an endpoint, an
    episode another process is writing is left for later and played (replayed, if that process finished
    it) once its lock is free; replay only (`only_finished`), only finished transcripts give rows, and one
    that cannot be replayed is set aside (a `TranscriptWarning` names it) and gives none."""
    pairs = [(i, t, s) for i, (t, s) in enumerate((t, s) for t in run.corpus.tasks for s in run.seeds)]
    rows: dict[int, dict] = {}
    local = threading.local()

    def mine() -> ModelAgent:
        if max_connections == 1:
            return agent
        if getattr(local, "agent", None) is None:  # one copy per thread: its client serves its episodes
            local.agent = copy.copy(agent)
        return local.agent

    def one(item, wait: bool) -> bool:
        i, task, seed = item
        me = mine()
        if not me.claim(task.task_id, seed, wait=wait):
            return False
        try:
            if only_finished and me.inspect(task.task_id, seed) != "finished":
                return True
            me.bind(task.task_id, seed)
            try:
                row = dict(zip(COLUMNS, episode_row(task, PolicyRef(me.model, lambda: me), seed, run.profile,
                                                    run.costs)), **{O.COLUMN: O.PLAYED})  # replays are played
            except ModelUnavailable as e:
                if only_finished:  # a transcript that no longer replays (the environment changed): not a row
                    note(f"{me.model} {task.task_id} seed {seed}: transcript does not replay ({e})")
                    return True
                raise
            me.end({"position": row["position"], "gap": row["gap"], "exact": bool(row["exact"]),
                    "disposition": row["disposition"], "n_calls": row["n_calls"]})
            row["malformed"] = me.malformed
            row["ended"] = me.ended or ""  # "context_length": the server refused the conversation, closed
            rows[i] = row
        finally:
            me.release()
        return True

    def shown(results, total: int):
        if not progress:
            return results
        from tqdm import tqdm

        return tqdm(results, total=total, desc=f"{agent.model} episodes", leave=False)

    free = list(shown(overlapped(pairs, lambda item: one(item, wait=False), max_connections), len(pairs)))
    busy = [item for item, ok in zip(pairs, free) if not ok]
    for _ in overlapped(busy, lambda item: one(item, wait=True), max_connections):  # theirs, once they let go
        pass
    return pd.DataFrame([rows[i] for i in sorted(rows)], columns=EPISODE_COLUMNS)


def run_model(run: Run, model: str, base_url: str, *, transcripts: str | Path = "data/model_runs",
              api_key_env: str = "OPENAI_API_KEY", progress: bool = True, timeout: float | None = TIMEOUT,
              max_tokens: int | None = MAX_TOKENS, max_connections: int = MODEL_CONNECTIONS,
              usage: Usage | None = None, **agent_kw) -> pd.DataFrame:
    """Play every (task, seed) of `run` with a model at `base_url`; finished episodes are replayed, not asked.

    Args:
        run: the subset run (`subset_run`).
        model, base_url: the model name and the OpenAI-compatible endpoint.
        transcripts: the transcripts folder (`<transcripts>/<model folder>/...jsonl`, the folder
            `finbench.agents.llm.model_dir_name(model)`).
        api_key_env: the environment variable holding the key.
        progress: a progress bar over episodes.
        timeout: seconds per request attempt, in total (None: no limit).
        max_tokens: the reply limit sent with every request (None: not sent, the server's own,
            often none on a local server). Part of the prompt hash: `model_episodes` counts the
            transcripts recorded under the same value.
        max_connections: episodes in flight at once (default `MODEL_CONNECTIONS`, 8), each with its own
            copy of the agent; the endpoint's gate lowers the requests in flight while the server
            answers 429 or 503. Rows and transcripts are the same for any value.
        usage: the tally to add this run's requests, tokens and latencies to (default: a new one).
        **agent_kw: passed to `ModelAgent` (temperature, max_retries, ...).

    Returns:
        Episode rows (`EPISODE_COLUMNS`: the runner's columns, `malformed`, `ended`), policy = the
        model name. Every reply is a turn or a counted malformed call; a conversation the server
        refuses as too long is closed there (`ended` "context_length") and the run goes on.
        Several processes may run this on one folder at once (each transcript has one writer; an
        episode another process is writing is taken up, replayed, once it lets go).

    Raises:
        FinbenchError: a bad `timeout`, `max_tokens` (or other agent argument).
        openai.APIError: the endpoint failed after the client's retries (a 5xx, refused
            connection, a 401/403 key, a 4xx not about the conversation's size); the episodes
            finished so far are kept and the next call resumes.
        ModelUnavailable: the server refused an episode's first request as too long (the prompt
            alone does not fit its context, or `max_tokens` is over it).
    """
    max_connections = check_connections("run_model", max_connections)
    agent = ModelAgent(model, base_url, api_key_env=api_key_env, transcripts=transcripts, timeout=timeout,
                       max_tokens=max_tokens, usage=usage, **agent_kw)
    return _rows(run, agent, only_finished=False, progress=progress, max_connections=max_connections)


def _whole_first_line(path: Path) -> bool:
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.readline(4 * 2**20).endswith(b"\n")
    except OSError:
        return False


def transcript_models(transcripts: str | Path) -> list[str]:
    """The model names with at least one transcript under `transcripts` (from the headers), sorted.

    A transcript whose first line is not a header naming a model is skipped with a `TranscriptWarning`
    (its model's agent sets it aside when it comes to that episode)."""
    root = at_root(transcripts)
    names = set()
    if root.is_dir():
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            for f in sorted(d.glob("*.jsonl")):
                if not is_transcript(f):
                    continue
                model = header_model(f)
                if model is not None:
                    names.add(model)
                elif _whole_first_line(f):  # not one being started right now
                    warn_caller(f"transcript {f} has no header naming its model; skipped", TranscriptWarning)
    return sorted(names)


def model_episodes(run: Run, transcripts: str | Path = "data/model_runs", models: list[str] | None = None,
                   progress: bool = False, *, max_tokens: int | None = MAX_TOKENS) -> pd.DataFrame:
    """Every finished transcript on disk for `run`'s episodes, replayed (no request is made).

    Only transcripts under the current system prompt, tools and sampling parameters
    (their prompt hash: `max_tokens` is the one recorded) count. `models` restricts to those names
    (None: every model found).
    """
    frames = []
    for model in (models if models is not None else transcript_models(transcripts)):
        agent = ModelAgent(model, None, transcripts=transcripts, max_tokens=max_tokens)
        df = _rows(run, agent, only_finished=True, progress=progress)
        if len(df):
            frames.append(df)
    if not frames:
        return pd.DataFrame(columns=EPISODE_COLUMNS)
    return pd.concat(frames, ignore_index=True)
