"""Command line: ``python -m finbench COMMAND ...``.

Each command is a subparser whose ``func`` default takes the parsed arguments
and returns the process exit code, so another command is one more
``add_parser`` in :func:`build_parser` and one more ``_cmd_*`` function.

``grade`` exit codes:

====  ==========================================================
0     pass
1     violation
2     unscorable
3     malformed trace (``PATH: line N: what is wrong`` on stderr)
64    usage error (``EX_USAGE`` from sysexits.h): a bad option, a negative
      ``--amount``, an ``--op`` that neither a record of the trace nor the
      trace schema (capture, refund, ship) names
66    the trace file cannot be read (``EX_NOINPUT``)
70    an internal error: a bug, reported on stderr (``EX_SOFTWARE``)
====  ==========================================================

No failure ever exits 0, 1 or 2: those codes are the verdicts, and a script
that branches on them must never read a crash as "violation".

``eval AGENT`` (``PATH.py:NAME`` or ``module:NAME``, `finbench.eval_cli`) runs a policy beside the
nine and writes its report card (`finbench.card`). Every failure is one line on stderr, and is found before
the first episode when it can be:

====  ==========================================================
0     the card was written
64    a bad option value or AGENT spelling (a ``--task-ids`` id the public corpus does not hold is named);
      an ``--out`` that is not a folder the card can be written to (a
      file, ``/dev/null``, a path under a file, a folder without write permission, a name longer than a file
      name may be); without ``--out``, an agent's name too long for the folder ``build/eval/<name>/``
65    AGENT names nothing usable (``EX_DATAERR``): no such NAME, a file or module that does not import, not a
      policy (a class without ``begin``/``act``, a built-in function such as ``sys:exit``, a callable that
      takes arguments or makes no policy); AGENT is one of the nine's names (``finality_gate``), or a
      policy whose name reads as one of the nine's once controls and outer spaces are dropped
      (``' finality_gate '``), or as nothing
66    the file or module does not exist
70    the agent raised, called ``sys.exit`` or raised another `BaseException` (in its constructor, ``begin``
      or ``act``, in this process or a worker), or ran over ``--episode-timeout`` (its exception and the
      step, or the task and seed it ran over in); an internal error
73    the card could not be written after the run (``EX_CANTCREAT``: a full disk, a read-only file system)
====  ==========================================================

``eval --model NAME --base-url URL`` runs a language model (an OpenAI-compatible chat-completions endpoint)
instead of AGENT, with the same codes; its episodes overlap their waiting (``--max-connections``, 8 by default)
and its card holds a ``model`` section (requests, tokens, latency, where its episodes came from). A server that
refuses the first connection fails at once (70, naming the endpoint).

``mock-server`` serves a scripted model on 127.0.0.1 (`finbench.agents.mock_server`) until it has been idle
for ``--idle-exit`` seconds (0 when it stopped so, 64 a bad option or a port in use).

``inspect --model NAME`` runs the package's Inspect task (``finbench/finbench``) and exits 0 when every
sample was scored, 1 when any was left unscored (each named on stderr), 70 when Inspect could not run.

``reproduce [NAME ...]`` (``--paper``: the paper's notebooks only) and ``check`` are
``make reproduce`` and ``make check`` (`finbench.pipeline`): the same notebooks, the same files,
the same exit codes (0 done or every output matches, 1 stale outputs, 64 an unknown notebook).

A Ctrl-C still interrupts (``python -m finbench`` exits 130). ``python -m finbench`` exits with the code
once the command returns, even if the agent left a thread running (`finbench.__main__`).

argparse exits with 2 on a usage error, which would be indistinguishable from
"unscorable" to a script that branches on the code; :class:`_Parser` moves
usage errors to 64.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from finbench.errors import FinbenchError, show
from finbench.eval_cli import EXIT_NOINPUT, EXIT_SOFTWARE, EXIT_USAGE, TIMEOUT, cmd_eval, plain, unwritable
from finbench.grading import CHECKS, MAX_MONEY, Contract, TraceError, grade_trace, load_trace

__all__ = ["EXIT_CODES", "build_parser", "main"]

EXIT_MALFORMED = 3
SCHEMA_OPS = ("capture", "refund", "ship")
"""The effect ops of the trace schema (SPEC §9, docs/grading.md): `--op` may name one no record of a trace does."""
#: Exit code of ``grade`` for each verdict.
EXIT_CODES = {"pass": 0, "violation": 1, "unscorable": 2}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with 64, not 2."""

    one_line = False
    """Report a usage error in one line (with a pointer to --help) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = plain(message)  # an unrecognized argument is printed as given
        if self.one_line:
            self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _money(text: str) -> float:
    try:
        value = float(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a number: {show(text)}") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_MONEY:  # a contracted amount is never negative
        raise argparse.ArgumentTypeError(f"must be an amount in [0, {MAX_MONEY:g}], got {show(text)}")
    return value


def _text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def build_parser() -> argparse.ArgumentParser:
    """Builds the ``finbench`` parser with one subparser per command."""
    parser = _Parser(prog="finbench", description="FinalityBench command line.")
    # Subparsers inherit the parser class, so they exit with 64 too.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    grade = commands.add_parser(
        "grade",
        help="grade an effect trace against a contract",
        description=(
            "Grade a .jsonl effect trace check by check. Exit 0 pass, 1 violation, "
            "2 unscorable, 3 malformed trace, 64 usage error, 66 unreadable file, 70 internal error."
        ),
    )
    grade.add_argument("trace", type=Path, metavar="TRACE.jsonl", help="the effect trace")
    grade.add_argument("--order", required=True, type=_text, help="the order the contract is about")
    grade.add_argument("--amount", required=True, type=_money, help="the contracted amount")
    grade.add_argument("--op", default="refund", type=_text, help="the effect's operation (default: refund)")
    grade.add_argument(
        "--allow-reversal",
        action="store_true",
        help="a reversed effect does not count towards exactly_one_effect",
    )
    grade.set_defaults(func=_cmd_grade, parser=grade)
    _add_eval(commands)
    _add_mock_server(commands)
    _add_inspect(commands)
    reproduce = commands.add_parser(
        "reproduce", help="run the notebooks headless: every table and figure (make reproduce)",
        description="Run the notebooks headless, full size, regenerating tables/ and figures/ (as make reproduce).")
    reproduce.add_argument("names", nargs="*", metavar="NAME", help="notebooks to run (default: all), e.g. 01_headline")
    reproduce.add_argument("--paper", action="store_true",
                           help="only the notebooks behind the paper's tables and figures (as make reproduce-paper)")
    reproduce.set_defaults(func=_cmd_reproduce, parser=reproduce)
    check = commands.add_parser(
        "check", help="compare every table and figure with the committed file (make check)",
        description="Fail (exit 1) naming every generated file that differs from the committed one.")
    check.set_defaults(func=lambda args: _pipeline(["--check"]), parser=check)
    return parser


def _cmd_reproduce(args: argparse.Namespace) -> int:
    if args.paper and args.names:
        print("finbench reproduce: --paper runs the paper's notebooks; give it no NAME", file=sys.stderr)
        return EXIT_USAGE
    return _pipeline(["--paper"] if args.paper else list(args.names))


def _pipeline(argv: list[str]) -> int:
    from finbench import pipeline  # lazy: grading a trace loads no notebook machinery

    return pipeline.main(argv)


def _cmd_grade(args: argparse.Namespace) -> int:
    try:
        records = load_trace(args.trace)
    except TraceError as exc:
        print(plain(f"{args.trace}: line {exc.line}: {exc.problem}"), file=sys.stderr)
        return EXIT_MALFORMED
    except (OSError, MemoryError) as exc:
        print(plain(f"finbench grade: cannot read {args.trace}: {getattr(exc, 'strerror', None) or exc!r}"),
              file=sys.stderr)
        return EXIT_NOINPUT
    ops = sorted({r["op"] for r in records if isinstance(r, dict) and isinstance(r.get("op"), str)})
    if args.op not in ops and args.op not in SCHEMA_OPS:  # a typo would grade as "no such effect": a violation
        named = ", ".join(ops[:10]) + (", ..." if len(ops) > 10 else "") if ops else "none"
        print(plain(f"finbench grade: --op must be an operation a record of the trace names or one of the trace "
                    f"schema's ({', '.join(SCHEMA_OPS)}), got {show(args.op)}; the trace names {named}"),
              file=sys.stderr)
        return EXIT_USAGE
    contract = Contract(args.order, args.amount, op=args.op, allow_reversal=args.allow_reversal)
    verdict = grade_trace(records, contract)
    width = max(len(name) for name in CHECKS)
    for name in CHECKS:
        print(plain(f"{name:<{width}}  {verdict.checks[name]:<7}  {verdict.reasons[name]}"))
    print(plain(f"verdict: {verdict.verdict} ({verdict.reason})"))
    return EXIT_CODES[verdict.verdict]


# --- eval: its options (the command is finbench.eval_cli) -------------------------------------------------------

AGENT = "PATH.py:NAME or module:NAME"  # as finbench.agents.loading words it (not imported: it loads the simulator)
POLICY = "a class with begin(brief) and act(observation), a factory of no arguments returning one, or such an object"
_FAMILIES = ("delay", "duplicate", "loss", "reorder", "partial_commit", "stale_read")  # sim.constants.FAMILIES
_PROFILE = (f"default, none, only:FAMILIES or without:FAMILIES (comma-separated from {', '.join(_FAMILIES)}); all "
            "is default's other name (every family), as stamps print it")
N_TASKS = ("a corpus of N tasks generated from the public corpus's seed with its mix of archetypes scaled to N "
           "(make_corpus(n_tasks=N)); only N=321 is the public corpus: for any other N these are not the public "
           "corpus's first N tasks (ids from ord-0001 again, naming other tasks), so its numbers are not the "
           "public corpus's; to run tasks of the public corpus, give --task-ids (default: 321)")
TASK_IDS = ("run these tasks of the public corpus (321 tasks, make_corpus()) instead, comma-separated: a task "
            "id (ord-0007) or a twin pair's order id (ord-0005: both halves, ord-0005:settle and ord-0005:fail; "
            "a half alone is refused, as the card compares whole pairs); an id the corpus lacks exits 64")
_PROBE = "full, none, delayed[:D], rate_limited[:N] or identity_only"


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {show(text)}")
    return n


def _jobs(text: str) -> int:
    if text.strip() == "-1":
        return -1
    try:
        return _count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or -1 (every core), got {show(text)}") from None


def _task_ids(text: str) -> tuple[str, ...]:
    from finbench.sim.corpus import corpus_for  # lazy: `grade` loads no simulator

    tasks = corpus_for().tasks  # the public corpus
    ids = {t.task_id: t for t in tasks}
    units: dict[str, list[str]] = {}
    for t in tasks:
        units.setdefault(t.unit, []).append(t.task_id)
    chosen: list[str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part not in ids and part not in units:
            raise argparse.ArgumentTypeError(f"the public corpus has no task {show(part)} (its ids run from "
                                             f"{tasks[0].unit} to ord-{len(units):04d}; a twin pair's halves are "
                                             "ID:settle and ID:fail)")
        chosen += [i for i in units.get(part, [part]) if i not in chosen]
    half = next((i for i in chosen if any(j not in chosen for j in units[ids[i].unit])), None)
    if half is not None:
        raise argparse.ArgumentTypeError(f"{show(half)} is one half of the twin pair {ids[half].unit}: give "
                                         f"{ids[half].unit} for both halves (the card compares whole pairs)")
    if not chosen:
        raise argparse.ArgumentTypeError(f"must name at least one task, got {show(text)}")
    return tuple(chosen)


def _profile(text: str):
    from finbench.sim.faults import FaultProfile  # lazy: `grade` loads no simulator

    kind, colon, rest = text.strip().partition(":")
    families = [f for f in rest.replace("+", ",").split(",") if f]
    if not colon and kind in ("default", "all"):
        return FaultProfile.default()
    if not colon and kind == "none":
        return FaultProfile.none()
    if kind in ("only", "without") and families and set(families) <= set(_FAMILIES):
        return (FaultProfile.only if kind == "only" else FaultProfile.without)(*families)
    raise argparse.ArgumentTypeError(f"must be {_PROFILE}, got {show(text)}")


def _probe(text: str):
    from finbench.sim.probe import ProbeMode  # lazy: `grade` loads no simulator

    kind, colon, knob = text.strip().partition(":")
    try:
        if kind in ("full", "none", "identity_only") and not colon:
            return ProbeMode(kind)
        if kind == "delayed":
            return ProbeMode.delayed(int(knob)) if colon else ProbeMode.delayed()
        if kind == "rate_limited":
            return ProbeMode.rate_limited(int(knob)) if colon else ProbeMode.rate_limited()
    except (ValueError, FinbenchError):
        pass
    raise argparse.ArgumentTypeError(f"must be {_PROBE} (D in 1..1800 ticks, N in 0..40 answers), got {show(text)}")


def _costs(text: str):
    from finbench.sim.economics import Costs  # lazy: `grade` loads no simulator

    kinds = {f.name: f.type for f in dataclasses.fields(Costs)}
    allowed = f"key=value,... with keys from {', '.join(kinds)}"
    values = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or key not in kinds or key in values:
            raise argparse.ArgumentTypeError(f"must be {allowed} (each once), got {show(text)}")
        try:
            values[key] = int(value) if kinds[key] in (int, "int") else float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{key} must be a number, got {show(value)}") from None
    try:
        return Costs(**values)
    except FinbenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if value == 0:
        return None
    if not 0.01 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in [0.01, 86400], or 0 or none for no "
                                         f"limit, got {show(text)}")
    return value


def _out(text: str) -> Path:
    path = Path(text)
    why = unwritable(path) if text.strip() else "it is empty"
    if why:
        raise argparse.ArgumentTypeError(f"must be a folder the card can be written to, got {show(text)}: {why}")
    return path


def _nonneg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {show(text)}")
    return n


def _add_mock_server(commands) -> None:
    srv = commands.add_parser(
        "mock-server", help="serve a scripted model on 127.0.0.1 (OpenAI-compatible) to try the model path offline",
        description="Serve an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that plays a careful "
                    "strategy from the conversation alone (probe, wait, ship when settled, one fresh-key retry after "
                    "a confirmed failure, escalate near the deadline: finbench.agents.mock_server). It stops by "
                    "itself after --idle-exit seconds without a request.")
    srv.add_argument("--port", type=int, default=8765, help="the port (default: 8765; 0: any free port)")
    srv.add_argument("--latency", type=float, default=0.25, metavar="SECONDS",
                     help="seconds before each answer (default: 0.25)")
    srv.add_argument("--max-in-flight", type=_count, default=None, metavar="K",
                     help="answer 429 to a request that arrives while K are being answered (default: never)")
    srv.add_argument("--max-messages", type=_count, default=None, metavar="N",
                     help="refuse a conversation of more than N messages with a context-length 400 (default: never)")
    srv.add_argument("--wording", choices=("vllm", "llamacpp"), default="vllm",
                     help="whose words the context-length 400 uses (default: vllm)")
    srv.add_argument("--no-usage", action="store_true", help="answers carry no token usage")
    srv.add_argument("--idle-exit", type=float, default=600.0, metavar="SECONDS",
                     help="stop after this long without a request (default: 600)")
    srv.add_argument("--model", default="careful", help="the model name it lists (any name is answered)")
    srv.set_defaults(func=_cmd_mock_server, parser=srv)


def _cmd_mock_server(args: argparse.Namespace) -> int:
    from finbench.agents.mock_server import main as serve  # lazy: `grade` loads no server

    return serve(args)


def _add_inspect(commands) -> None:
    ins = commands.add_parser(
        "inspect", help="play the benchmark through Inspect AI and exit 1 if any sample is left unscored",
        description="Run the package's Inspect task (finbench/finbench: Table V's subset by default) with "
                    "inspect_ai.eval, as `inspect eval finbench/finbench` does, then exit 1 naming every sample left "
                    "without a score (a model error other than a context-length refusal, which closes and scores "
                    "its sample) and 0 when every sample was scored. docs/inspect.md.")
    ins.add_argument("--model", required=True, type=_text, help="Inspect's model name, e.g. openai-api/local/llama3.1")
    ins.add_argument("--task", choices=("finbench", "table5"), default="finbench", help="the task (default: finbench)")
    ins.add_argument("-T", dest="task_args", action="append", default=[], metavar="NAME=VALUE",
                     help="a task argument, as Inspect takes it (YAML value): -T n_tasks=30 -T \"seeds=[0,1]\"")
    ins.add_argument("--max-connections", type=_count, default=None, metavar="N",
                     help="requests in flight at once (Inspect's default: 10)")
    ins.add_argument("--limit", type=_count, default=None, metavar="N", help="the first N samples only")
    ins.add_argument("--log-dir", default=None, metavar="DIR", help="where Inspect writes its log (default: ./logs)")
    ins.set_defaults(func=_cmd_inspect, parser=ins)


def _cmd_inspect(args: argparse.Namespace) -> int:
    import yaml  # lazy: as Inspect reads -T values

    task_args = {}
    for item in args.task_args:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            print(plain(f"finbench inspect: -T takes NAME=VALUE, got {show(item)}"), file=sys.stderr)
            return EXIT_USAGE
        task_args[name.strip()] = yaml.safe_load(value)
    try:
        from inspect_ai import eval as inspect_eval
    except ModuleNotFoundError as exc:
        print(f"finbench inspect: needs inspect-ai (pip install inspect-ai): {exc}", file=sys.stderr)
        return EXIT_SOFTWARE
    from finbench.running.inspect_task import unscored  # lazy: `grade` loads no simulator

    kw = {k: v for k, v in (("max_connections", args.max_connections), ("limit", args.limit),
                            ("log_dir", args.log_dir)) if v is not None}
    try:
        logs = inspect_eval(f"finbench/{args.task}", model=args.model, task_args=task_args, fail_on_error=False, **kw)
    except Exception as exc:  # noqa: BLE001 - Inspect's own refusal (no such model, a missing variable): one line
        words = " ".join(re.sub(r"\[/?[a-z ]+\]", "", str(exc)).split())  # Inspect's rich markup dropped
        print(plain(f"finbench inspect: Inspect could not run: {type(exc).__name__}: {words[:300]}"), file=sys.stderr)
        return EXIT_SOFTWARE
    missing = unscored(logs)
    scored = sum(1 for log in logs for s in (log.samples or []) if (s.scores or {}).get("finbench"))
    if missing:
        print(plain(f"finbench inspect: {len(missing)} unscored ({scored} samples scored): " + "; ".join(missing[:5])
                    + ("; ..." if len(missing) > 5 else "")), file=sys.stderr)
        return 1
    print(plain(f"finbench inspect: every sample scored ({scored})"))
    return 0


def _add_eval(commands) -> None:
    ev = commands.add_parser(
        "eval",
        help="run your agent beside the nine policies and write its report card",
        description=(f"Run a policy ({POLICY}) beside SPEC's nine on the corpus, and write its report card: "
                     "report.md, card.json (docs/card.md), rows.csv and its worst twin pair's timeline. Invalid "
                     "calls above 5% of the agent's calls head the card and the summary printed."),
        epilog=("Exit codes: 0 the card was written; 64 a bad option value, AGENT spelling or --out (not a folder "
                "the card can be written to; or the default build/eval/<name>/ when the agent's name is too long "
                "for a folder; a --task-ids id the public corpus does not hold); 65 AGENT names nothing usable "
                "(no such NAME, a file or module that does not import, not a policy: a built-in function, a "
                "callable that takes arguments or makes no policy; AGENT is one of the nine, such as "
                "finality_gate, or a policy whose name reads as one of the nine, or as nothing); 66 no such file "
                "or module; 70 the agent "
                "raised, exited (sys.exit) or ran over --episode-timeout (its exception and the step, or the "
                "episode it ran over in), or an internal error; 73 the card could not be written after the run. "
                "Each is one line on stderr."),
    )
    ev.one_line = True
    ev.add_argument("agent", metavar="AGENT", nargs="?", help=f"{AGENT}: the policy class, factory or object (or "
                    "give --model instead)")
    which = ev.add_mutually_exclusive_group()
    which.add_argument("--n-tasks", type=_count, default=321, metavar="N", help=N_TASKS)
    which.add_argument("--task-ids", type=_task_ids, metavar="ID[,ID...]", help=TASK_IDS)
    ev.add_argument("--seeds", type=_count, default=5, help="fault seeds, 0..N-1 (default: 5)")
    ev.add_argument("--profile", type=_profile, default="default", help=f"the fault profile: {_PROFILE}")
    ev.add_argument("--probe", type=_probe, default="full", help=f"the probe mode: {_PROBE} (default: full)")
    ev.add_argument("--costs", type=_costs, default="", help="prices, e.g. dispute_fee=50,cogs_rate=0.4")
    ev.add_argument("--n-jobs", type=_jobs, default=-1, help="worker processes (default: -1, every core)")
    ev.add_argument("--max-connections", type=_count, default=argparse.SUPPRESS, metavar="N",
                    help="episodes of the agent in flight at once, each on a thread of its own with its own copy of "
                         "the agent, for an agent that waits on a server (a model): their waiting overlaps. Rows "
                         "are the same for any N. Default: 8 with --model (the server's 429s and 503s lower what "
                         "is in flight by themselves); 1 for AGENT, whose code may not be safe on several threads "
                         "at once: give N > 1 only if it is (one instance per thread, shared state locked)")
    ev.add_argument("--episode-timeout", type=_seconds, default=argparse.SUPPRESS, metavar="SECONDS",
                    help=f"wall-clock limit of one episode of the agent, in every process that plays one "
                         f"(default: {TIMEOUT:g} for AGENT, none for --model, whose healthy episodes may take "
                         f"minutes; 0 or none: no limit). On threads (--max-connections above 1) it is "
                         f"checked at the agent's next call")
    model = ev.add_argument_group("a language model instead of AGENT (an OpenAI-compatible chat-completions "
                                  "endpoint; transcripts make a run resumable and replayable)")
    model.add_argument("--model", type=_text, metavar="NAME", help="the model's name as the server knows it")
    model.add_argument("--base-url", type=_text, metavar="URL",
                       help="the endpoint, e.g. http://127.0.0.1:8000/v1 (without it: replay only, every episode "
                            "from its transcript)")
    model.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                       help="the environment variable holding the key (default: OPENAI_API_KEY; never written)")
    model.add_argument("--transcripts", default="data/model_runs", metavar="DIR",
                       help="the transcripts folder (default: data/model_runs)")
    model.add_argument("--temperature", type=float, default=0.0, help="sent with every request (default: 0)")
    model.add_argument("--max-tokens", type=_count, default=1024, metavar="N",
                       help="the reply limit sent with every request (default: 1024)")
    model.add_argument("--request-timeout", type=_seconds, default=120.0, metavar="SECONDS",
                       help="limit of one request attempt, in total: connect, send, the whole reply (default: 120; "
                            "0 or none: no limit)")
    model.add_argument("--max-retries", type=_nonneg, default=5, metavar="N",
                       help="retries of a request after a 408/409/429/5xx, a timeout or a dropped connection, with "
                            "exponential backoff (default: 5)")
    ev.add_argument("--out", type=_out, metavar="DIR", help="where the card goes (default: build/eval/<name>/)")
    ev.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                    help="read and write the episode cache data/cache/, shared with the notebooks (default: yes)")
    ev.set_defaults(func=cmd_eval, parser=ev)


_RAN: dict = {}  # the command `main` last ran (`console` words its exit for it)


def console() -> None:
    """The `finbench` command (and ``python -m finbench``): `main`, then exit with its code.

    Once the command has returned the process ends, even if the agent `eval` played left a thread running
    that is not a daemon (a normal exit would wait for it forever): it says so on stderr and exits."""
    import os
    import threading

    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C: one line and 128 + SIGINT, and the exit below (no thread holds it up)
        print("\nfinbench: interrupted", file=sys.stderr)
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon
            and not type(t).__module__.startswith("joblib.")]
    if left:
        if _RAN.get("command") == "eval":
            names = ", ".join(plain(t.name) for t in left[:3]) + (", ..." if len(left) > 3 else "")
            print(f"finbench: exiting although {len(left)} thread(s) the agent started still run ({names}); they "
                  "are stopped with the process", file=sys.stderr)
            sys.stderr.flush()
        # joblib's idle workers would outlive a hard exit by minutes: stopped first (finbench.eval_cli makes a
        # worker that holds such a thread leave without joining it)
        loky = sys.modules.get("joblib.externals.loky.reusable_executor")
        executor = getattr(loky, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True, kill_workers=True)
        import atexit

        atexit._run_exitfuncs()  # what a normal exit does after joining threads (joblib removes its temporary folder)
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line.

    Args:
        argv: The arguments after the program name; ``None`` reads
            ``sys.argv[1:]``.

    Returns:
        The exit code (see the module docstring); ``--help`` returns 0.
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the command's own parser (`eval`'s in one line)
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:
        # parse_args exits for --help (0) and for usage errors (64, see
        # _Parser); main returns codes rather than exiting so it can be tested.
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    _RAN["command"] = args.command
    try:
        return args.func(args)
    except KeyboardInterrupt:  # a Ctrl-C interrupts, as anywhere
        raise
    except FinbenchError as exc:  # input the library refused: the caller's to fix
        print(plain(f"finbench {args.command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except BaseException as exc:  # noqa: BLE001 - a bug (or a stray sys.exit) must never exit with a verdict's code
        print(plain(f"finbench {args.command}: internal error ({type(exc).__name__}: {show(str(exc))}); "
                    "please report it"), file=sys.stderr)
        return EXIT_SOFTWARE
