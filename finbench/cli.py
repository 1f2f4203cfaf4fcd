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

``verify`` (``make verify``) replays a seeded sample of rows of every origin alone and exits 0 when every
replay equals its row, 1 naming each difference (`finbench.running.verify`).

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
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from finbench.errors import FinbenchError, show
from finbench.eval_cli import EXIT_NOINPUT, EXIT_SOFTWARE, EXIT_USAGE, TIMEOUT, cmd_eval, plain
from finbench.commands import model as M
from finbench.commands import options as O
from finbench.commands.sharing import add_sharing
from finbench.commands.verify import add_verify
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
    grade.add_argument("--order", required=True, type=O.text, help="the order the contract is about")
    grade.add_argument("--amount", required=True, type=_money, help="the contracted amount")
    grade.add_argument("--op", default="refund", type=O.text, help="the effect's operation (default: refund)")
    grade.add_argument(
        "--allow-reversal",
        action="store_true",
        help="a reversed effect does not count towards exactly_one_effect",
    )
    grade.set_defaults(func=_cmd_grade, parser=grade)
    _add_eval(commands)
    M.add_mock_server(commands)
    M.add_inspect(commands)
    add_verify(commands)
    add_sharing(commands)
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


def _add_eval(commands) -> None:
    ev = commands.add_parser(
        "eval",
        help="run your agent beside the nine policies and write its report card",
        description=(f"Run a policy ({O.POLICY}) beside SPEC's nine on the corpus, and write its report card: "
                     "report.md, report.html (one page with figures, opens from disk), card.json (docs/card.md), rows.csv and its "
                     "worst twin pair's timeline. Invalid "
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
    ev.add_argument("agent", metavar="AGENT", nargs="?", help=f"{O.AGENT}: the policy class, factory or object (or "
                    "give --model instead)")
    which = ev.add_mutually_exclusive_group()
    which.add_argument("--n-tasks", type=O.count, default=321, metavar="N", help=O.N_TASKS)
    which.add_argument("--task-ids", type=O.task_ids, metavar="ID[,ID...]", help=O.TASK_IDS)
    ev.add_argument("--seeds", type=O.count, default=5, help="fault seeds, 0..N-1 (default: 5)")
    ev.add_argument("--profile", type=O.profile, default="default", help=f"the fault profile: {O.PROFILE}")
    ev.add_argument("--probe", type=O.probe, default="full", help=f"the probe mode: {O.PROBE} (default: full)")
    ev.add_argument("--costs", type=O.costs, default="", help="prices, e.g. dispute_fee=50,cogs_rate=0.4")
    ev.add_argument("--n-jobs", type=O.jobs, default=-1, help="worker processes (default: -1, every core)")
    ev.add_argument("--max-connections", type=O.count, default=argparse.SUPPRESS, metavar="N",
                    help="episodes of the agent in flight at once, each on a thread of its own with its own copy of "
                         "the agent, for an agent that waits on a server (a model): their waiting overlaps. Rows "
                         "are the same for any N. Default: 8 with --model (the server's 429s and 503s lower what "
                         "is in flight by themselves); 1 for AGENT, whose code may not be safe on several threads "
                         "at once: give N > 1 only if it is (one instance per thread, shared state locked)")
    ev.add_argument("--episode-timeout", type=O.seconds, default=argparse.SUPPRESS, metavar="SECONDS",
                    help=f"wall-clock limit of one episode of the agent, in every process that plays one "
                         f"(default: {TIMEOUT:g} for AGENT, none for --model, whose healthy episodes may take "
                         f"minutes; 0 or none: no limit). On threads (--max-connections above 1) it is "
                         f"checked at the agent's next call")
    model = ev.add_argument_group("a language model instead of AGENT (an OpenAI-compatible chat-completions "
                                  "endpoint; transcripts make a run resumable and replayable)")
    model.add_argument("--model", type=O.text, metavar="NAME", help="the model's name as the server knows it")
    model.add_argument("--base-url", type=O.text, metavar="URL",
                       help="the endpoint, e.g. http://127.0.0.1:8000/v1 (without it: replay only, every episode "
                            "from its transcript)")
    model.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                       help="the environment variable holding the key (default: OPENAI_API_KEY; never written)")
    model.add_argument("--transcripts", default="data/model_runs", metavar="DIR",
                       help="the transcripts folder (default: data/model_runs)")
    model.add_argument("--temperature", type=float, default=0.0, help="sent with every request (default: 0)")
    model.add_argument("--max-tokens", type=O.count, default=1024, metavar="N",
                       help="the reply limit sent with every request (default: 1024)")
    model.add_argument("--request-timeout", type=O.seconds, default=120.0, metavar="SECONDS",
                       help="limit of one request attempt, in total: connect, send, the whole reply (default: 120; "
                            "0 or none: no limit)")
    model.add_argument("--max-retries", type=O.nonneg, default=5, metavar="N",
                       help="retries of a request after a 408/409/429/5xx, a timeout or a dropped connection, with "
                            "exponential backoff (default: 5)")
    ev.add_argument("--out", type=O.out, metavar="DIR",
                    help="where the card goes (default: build/eval/<name>/ of the clone when run inside it, else of "
                         "the current folder; the path is printed at the end)")
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
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as a shell command would (128 + SIGPIPE)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush into the pipe
        return 141
    except FinbenchError as exc:  # input the library refused: the caller's to fix
        print(plain(f"finbench {args.command}: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except BaseException as exc:  # noqa: BLE001 - a bug (or a stray sys.exit) must never exit with a verdict's code
        print(plain(f"finbench {args.command}: internal error ({type(exc).__name__}: {show(str(exc))}); "
                    "please report it"), file=sys.stderr)
        return EXIT_SOFTWARE
