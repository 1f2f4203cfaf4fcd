"""``python -m finbench eval AGENT``: a user's agent beside SPEC's nine, and its report card (`finbench.card`).

Its options and exit codes are `finbench.cli`'s; AGENT is loaded as every door loads one
(`finbench.agents.loading`). What it cannot use is refused in one line, before the first episode when that
can be known, and nothing the agent names or raises reaches the terminal with a control byte (`plain`).

The agent is played through `Guarded`, a factory the command wraps around its policy: in whichever process
plays an episode (this one, or a joblib worker) it gives the episode a wall-clock limit (SIGALRM), and turns a
``sys.exit`` or bare `BaseException` of the agent's into an `Exception`, so it ends the run as any error does;
a Ctrl-C still interrupts. Importing this module loads no simulator nor pandas.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
from pathlib import Path

from finbench.files import root
from finbench.commands import guard as G
from finbench.errors import FinbenchError, PolicyError, show

__all__ = ["cmd_eval", "plain", "public_tasks"]

# sysexits.h, shared with `grade` (finbench.cli)
EXIT_USAGE = 64
EXIT_DATAERR = 65
EXIT_NOINPUT = 66
EXIT_SOFTWARE = 70
EXIT_CANTCREAT = 73

TIMEOUT = 300.0
"""The default limit of one episode, in seconds: far above any honest agent's (a language-model agent's 40
calls at several seconds each fit), so only an agent that hangs meets it."""

_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")


def plain(text: str, lines: bool = False) -> str:
    """`text` as the terminal may show it: escape sequences and invisible characters (C0, C1, bidi marks)
    dropped, a line break a space unless `lines`; an agent's name or message cannot move or clear the screen."""
    text = _ANSI.sub("", text)
    if text.isprintable():
        return text
    keep = "\n" if lines else ""
    return "".join(ch if ch.isprintable() or ch in keep else " " if ch.isspace() else "" for ch in text)


class _Refused(Exception):
    """An agent that cannot be run: the exit code and the one line that says why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def unwritable(path: Path) -> str:
    """Why the card cannot go into the folder `path`, or '' (asked before the first episode, not after the run):
    the folder is made and a file written in it and removed (so a path the permissions allow but the file
    system refuses, `/proc/x`, a read-only mount, is found now); what the probe made is removed again."""
    why = _unwritable_by_name(path)
    if why:
        return why
    made = []
    top = path
    while not os.path.lexists(top) and top != top.parent:
        made.append(top)
        top = top.parent
    try:
        for folder in reversed(made):
            os.mkdir(folder)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".finbench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for folder in made:  # the deepest first
            try:
                os.rmdir(folder)
            except OSError:
                pass
    return ""


def _unwritable_by_name(path: Path) -> str:
    if os.path.lexists(path) and not path.is_dir():
        return "it exists and is not a folder"
    top = path
    while not os.path.lexists(top) and top != top.parent:
        top = top.parent
    if not top.is_dir():
        return f"{top} is not a folder"
    try:
        most = os.pathconf(top, "PC_NAME_MAX")
    except (OSError, ValueError):
        most = 255
    longest = max(len(os.fsencode(part)) for part in path.parts)
    if longest > most:
        return f"a name in it is longer than a file name may be ({longest} bytes, at most {most})"
    if not os.access(top, os.W_OK | os.X_OK):  # root passes, but not on a read-only file system
        return f"{top} is not writable"
    return ""


# --- the command -------------------------------------------------------------------------------------------------

def cmd_eval(args: argparse.Namespace) -> int:
    with G.alarm_restored():
        try:
            return _eval(args)
        except _Refused as r:
            print(f"finbench eval: {plain(str(r))}", file=sys.stderr)
            return r.code


def _eval(args: argparse.Namespace) -> int:
    model = getattr(args, "model", None)
    if (args.agent is None) == (model is None):
        raise _Refused(EXIT_USAGE, "give AGENT (PATH.py:NAME or module:NAME) or --model NAME (with --base-url URL), "
                                   "one of the two" if model is None else
                       f"give AGENT or --model, not both (AGENT {args.agent!r}, --model {model!r})")
    limit = getattr(args, "episode_timeout", None if model else TIMEOUT)  # a model: no limit unless asked
    connections = getattr(args, "max_connections", None) or (_model_connections() if model else 1)
    agent = None
    if model:
        agent, ref, files = _model_ref(args, limit)
    else:
        ref, files = _agent_ref(args.agent, limit)
    out = args.out if args.out is not None else _default_out(ref.label)
    from finbench.agents.registry import DEFAULT_POLICIES  # lazy: `grade` loads no simulator nor pandas
    from finbench.card import card_of  # lazy: as above
    from finbench.running.episode import run_episode  # lazy: as above
    from finbench.running.run import Run  # lazy: as above

    how = dict(seeds=tuple(range(args.seeds)), profile=args.profile, costs=args.costs, probe=args.probe,
               policies=[*DEFAULT_POLICIES, ref], n_jobs=args.n_jobs, cache=args.cache, progress=True,
               max_connections=connections)
    task_ids = getattr(args, "task_ids", None)
    run = Run(public_tasks(task_ids), **how) if task_ids else Run.make(n_tasks=args.n_tasks, **how)
    task, seed = run.corpus.tasks[0], run.seeds[0]
    if agent is None:
        try:
            # one episode here first: an agent that fails at once is named with its own line of code
            run_episode(task, ref, seed, run.profile, run.costs, run.probe)
        except (Exception, SystemExit, G.Overtime) as exc:  # noqa: BLE001 - whatever the agent raises, as one line
            episode = "" if isinstance(exc, (G.AgentTimeout, G.Overtime)) else f" (task {task.task_id}, seed {seed})"
            raise _Refused(EXIT_SOFTWARE, G.raised(exc, ref.label, files) + episode) from None
        G.disarm()
    try:
        rows = run.evaluate()
    except (Exception, SystemExit, G.Overtime) as exc:  # noqa: BLE001 - as above, maybe from a worker process
        if agent is not None:  # the endpoint's error, as the client words it (the key scrubbed)
            raise _Refused(EXIT_SOFTWARE, f"model {model!r}: {type(exc).__name__}: {' '.join(str(exc).split())}"
                           ) from None
        raise _Refused(EXIT_SOFTWARE, G.raised(exc, ref.label, files)) from None
    facts = None if agent is None else model_facts(agent, connections)
    card = card_of(run, ref.label, rows, spec=args.agent, model=facts)
    try:
        paths = card.write(out)
    except OSError as exc:  # a full disk, a file system gone read-only: not the agent's, nor a bug
        raise _Refused(EXIT_CANTCREAT, f"cannot write the card into {out}: {exc.strerror or exc}") from None
    print(plain(card.summary(), lines=True))  # a warning (invalid calls above a few percent) comes first
    print(plain(f"report card: {', '.join(str(p) for p in paths if p.suffix != '.pdf')}"))
    return 0


def _model_connections() -> int:
    from finbench.agents.llm import MODEL_CONNECTIONS  # lazy: `grade` loads no simulator

    return MODEL_CONNECTIONS


def _model_ref(args: argparse.Namespace, limit: float | None):
    """A `ModelAgent` for `--model` (its options checked), and its guarded `PolicyRef`; `_Refused` (64) for an
    option it cannot take, (65) for a name that reads as one of the nine."""
    from finbench.agents.llm import ModelAgent  # lazy: `grade` loads no simulator
    from finbench.agents.registry import DEFAULT_POLICIES, as_ref  # lazy: as above

    try:
        agent = ModelAgent(args.model, args.base_url or None, api_key_env=args.api_key_env,
                           transcripts=args.transcripts, temperature=args.temperature, max_tokens=args.max_tokens,
                           max_retries=args.max_retries, timeout=args.request_timeout)
    except (FinbenchError, ValueError) as exc:
        raise _Refused(EXIT_USAGE, str(exc)) from None
    reads = " ".join(plain(agent.name).split())
    if reads in DEFAULT_POLICIES or not reads:
        raise _Refused(EXIT_DATAERR, f"--model {args.model!r} reads as {reads!r}" + (
            ", one of the nine it is compared with" if reads else "") + "; the card could not tell them apart")
    ref = as_ref(agent)
    return agent, dataclasses.replace(ref, factory=G.Guarded(ref.factory, limit)), frozenset()


def endpoint_of(base_url: str | None) -> str | None:
    """`base_url` as a card shows it: scheme, host, port and path; never a user, password or query (a key)."""
    if not base_url:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(not a URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}"


def model_facts(agent, max_connections: int) -> dict:
    """card.json's `model` object (docs/card.md): what the model is and what its run asked and cost."""
    from finbench.agents.llm_traffic import gate_for  # lazy: `grade` loads no simulator

    gate = gate_for(agent.base_url) if agent.base_url else None
    return {"name": agent.model, "endpoint": endpoint_of(agent.base_url), "api_key_env": agent.api_key_env,
            "params": dict(agent.params), "prompt_hash": agent.prompt_hash, "transcripts": str(agent.transcripts),
            "max_connections": max_connections, "request_timeout_s": agent.timeout,
            "max_retries": agent.max_retries, "peak_in_flight": gate.peak if gate else 0,
            **agent.usage.summary()}


def public_tasks(task_ids):
    """The public corpus's tasks named by `task_ids` (checked by the parser), in the corpus's order, as a corpus
    of their own (its stamp lists them: it is not `make_corpus(PUBLIC_SEED, n)` for any n)."""
    from finbench.sim import constants as C  # lazy: `grade` loads no simulator
    from finbench.sim.corpus import Corpus, corpus_for  # lazy: as above

    chosen = set(task_ids)
    return Corpus(tuple(t for t in corpus_for(C.PUBLIC_SEED).tasks if t.task_id in chosen), C.PUBLIC_SEED)


def default_home() -> Path:
    """The folder `build/eval/` goes under: the clone's root when the command runs inside the clone (whichever
    subfolder), else the current folder (a project of the user's, with the package installed)."""
    here, top = Path.cwd().resolve(), root().resolve()
    return top if here == top or top in here.parents else here


def _default_out(label: str) -> Path:
    """build/eval/<name>/ under `default_home()`, refused (64) when the name cannot be a folder's or the
    folder cannot be written."""
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label).strip(".") or "agent"
    out = default_home() / "build" / "eval" / slug
    size = len(os.fsencode(slug))
    if size > 255:
        raise _Refused(EXIT_USAGE, f"the agent's name {show(label)} is {size} bytes, too long for the folder "
                                   "build/eval/<name>/ the card goes to by default (at most 255); give --out DIR")
    why = unwritable(out)
    if why:
        raise _Refused(EXIT_USAGE, f"cannot write the card into {out}: {why}; give --out DIR")
    return out


def _agent_ref(spec: str, limit: float | None):
    """The guarded `PolicyRef` of AGENT, and the files its code came from; `_Refused` when it cannot be run."""
    from finbench.agents.loading import AgentLoadError, load_agent  # lazy: `grade` loads no simulator
    from finbench.agents.registry import DEFAULT_POLICIES, as_ref  # lazy: as above

    if " ".join(plain(spec).split()) in DEFAULT_POLICIES:  # the help's 65: a name that reads as one of the nine
        raise _Refused(EXIT_DATAERR, f"AGENT {spec!r} is one of the nine it is compared with, on every card already; "
                                     "give your own agent as PATH.py:NAME or module:NAME")
    try:
        agent = load_agent(spec, "finbench eval")  # nothing of the agent's is called yet but its import
    except AgentLoadError as exc:
        raise _Refused({"usage": EXIT_USAGE, "missing": EXIT_NOINPUT}.get(exc.kind, EXIT_DATAERR), exc.reason
                       ) from None
    obj, what, files = agent.obj, agent.what, agent.files
    guard = G.Guarded(None, limit, files)
    G.arm(limit)
    try:
        ref = guard.run(as_ref, obj)  # makes one policy now (a class or factory is called once)
    except PolicyError as exc:
        raise _Refused(EXIT_DATAERR, f"{what}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the agent's own constructor raised, exited or hung
        raise _Refused(EXIT_SOFTWARE, f"{G.raised(exc, what, files)} while being made") from None
    finally:
        G.disarm()
    reads = " ".join(plain(ref.label).split())  # as the card and the terminal show it
    if reads in DEFAULT_POLICIES or not reads:
        seen = ref.label != reads and (f", which reads as {reads!r}" if reads else ", which reads as nothing")
        raise _Refused(EXIT_DATAERR, f"{what} is labelled {ref.label!r}{seen or ''}" + (
            ", one of the nine it is compared with; give it another name" if reads else "; give it a name")
            + " (its `name` attribute)")
    played = {"factory": dataclasses.replace(guard, factory=ref.factory)}
    if getattr(ref, "source", False) is None:
        played["source"] = ref.factory  # its cache identity is the agent's code, not the guard's
    return dataclasses.replace(ref, **played), files
