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
64    usage error (``EX_USAGE`` from sysexits.h)
66    the trace file cannot be read (``EX_NOINPUT``)
70    an internal error: a bug, reported on stderr (``EX_SOFTWARE``)
====  ==========================================================

No failure ever exits 0, 1 or 2: those codes are the verdicts, and a script
that branches on them must never read a crash as "violation".

``eval AGENT`` (``PATH.py:NAME`` or ``module:NAME``) runs a policy beside SPEC's
nine and writes its report card (`finbench.card`); it exits 0 with a
card, 64 on a bad option value or AGENT spelling, 65 (``EX_DATAERR``) when the
named thing cannot be used as a policy (no such name, a file that does not
import, no ``begin``/``act``), 66 when the file or module does not exist, and
70 when the agent raises (its exception and the step it raised at). Each is
one line on stderr.

argparse exits with 2 on a usage error, which would be indistinguishable from
"unscorable" to a script that branches on the code; :class:`_Parser` moves
usage errors to 64.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from finbench.errors import FinbenchError, PolicyError, show
from finbench.grading import CHECKS, MAX_MONEY, Contract, TraceError, grade_trace, load_trace

__all__ = ["EXIT_CODES", "build_parser", "main"]

EXIT_USAGE = 64
EXIT_DATAERR = 65
EXIT_NOINPUT = 66
EXIT_MALFORMED = 3
EXIT_SOFTWARE = 70
#: Exit code of ``grade`` for each verdict.
EXIT_CODES = {"pass": 0, "violation": 1, "unscorable": 2}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with 64, not 2."""

    one_line = False
    """Report a usage error in one line (with a pointer to --help) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if self.one_line:
            self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _money(text: str) -> float:
    try:
        value = float(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a number: {show(text)}") from None
    if not math.isfinite(value) or abs(value) > MAX_MONEY:
        raise argparse.ArgumentTypeError(f"not a finite amount below {MAX_MONEY:g}: {show(text)}")
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
    return parser


def _cmd_grade(args: argparse.Namespace) -> int:
    try:
        records = load_trace(args.trace)
    except TraceError as exc:
        print(f"{args.trace}: line {exc.line}: {exc.problem}", file=sys.stderr)
        return EXIT_MALFORMED
    except (OSError, MemoryError) as exc:
        print(f"finbench grade: cannot read {args.trace}: {getattr(exc, 'strerror', None) or exc!r}",
              file=sys.stderr)
        return EXIT_NOINPUT
    contract = Contract(args.order, args.amount, op=args.op, allow_reversal=args.allow_reversal)
    verdict = grade_trace(records, contract)
    width = max(len(name) for name in CHECKS)
    for name in CHECKS:
        print(f"{name:<{width}}  {verdict.checks[name]:<7}  {verdict.reasons[name]}")
    print(f"verdict: {verdict.verdict} ({verdict.reason})")
    return EXIT_CODES[verdict.verdict]


# --- eval: one agent's report card ------------------------------------------------------

_AGENT = "PATH.py:NAME or module:NAME"
_FAMILIES = ("delay", "duplicate", "loss", "reorder", "partial_commit", "stale_read")  # sim.constants.FAMILIES
_PROFILE = f"default, none, only:FAMILIES or without:FAMILIES (comma-separated from {', '.join(_FAMILIES)})"
_PROBE = "full, none, delayed[:D], rate_limited[:N] or identity_only"


class _Refused(Exception):
    """An agent that cannot be run: the exit code and the one line that says why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


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


def _add_eval(commands) -> None:
    ev = commands.add_parser(
        "eval",
        help="run your agent beside the nine policies and write its report card",
        description=("Run a policy (a class with begin(brief) and act(observation), a factory of no arguments "
                     "returning one, or such an object) beside SPEC's nine on the corpus, and write its report "
                     "card: report.md, rows.csv and its worst twin pair's timeline."),
        epilog=("Exit codes: 0 the card was written; 64 a bad option value or AGENT spelling; 65 AGENT names "
                "nothing usable (no such NAME, a file that does not import, not a policy, a label of the nine); "
                "66 no such file or module; 70 the agent raised (its exception and the step it raised at)."),
    )
    ev.one_line = True
    ev.add_argument("agent", metavar="AGENT", help=f"{_AGENT}: the policy class, factory or object")
    ev.add_argument("--n-tasks", type=_count, default=321, help="tasks of the public corpus (default: 321)")
    ev.add_argument("--seeds", type=_count, default=5, help="fault seeds, 0..N-1 (default: 5)")
    ev.add_argument("--profile", type=_profile, default="default", help=f"the fault profile: {_PROFILE}")
    ev.add_argument("--probe", type=_probe, default="full", help=f"the probe mode: {_PROBE} (default: full)")
    ev.add_argument("--costs", type=_costs, default="", help="prices, e.g. dispute_fee=50,cogs_rate=0.4")
    ev.add_argument("--n-jobs", type=_jobs, default=-1, help="worker processes (default: -1, every core)")
    ev.add_argument("--out", type=Path, metavar="DIR", help="where the card goes (default: build/eval/<name>/)")
    ev.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                    help="read and write the episode cache data/cache/, shared with the notebooks (default: yes)")
    ev.set_defaults(func=_cmd_eval, parser=ev)


def _cmd_eval(args: argparse.Namespace) -> int:
    try:
        ref, files = _agent_ref(args.agent)
    except _Refused as r:
        print(f"finbench eval: {r}", file=sys.stderr)
        return r.code
    from finbench.agents.registry import DEFAULT_POLICIES  # lazy: `grade` loads no simulator nor pandas
    from finbench.card import card_of  # lazy: as above
    from finbench.running.episode import run_episode  # lazy: as above
    from finbench.running.run import Run  # lazy: as above

    run = Run.make(n_tasks=args.n_tasks, seeds=tuple(range(args.seeds)), profile=args.profile, costs=args.costs,
                   probe=args.probe, policies=[*DEFAULT_POLICIES, ref], n_jobs=args.n_jobs, cache=args.cache,
                   progress=True)
    task, seed = run.corpus.tasks[0], run.seeds[0]
    try:
        # one episode here first: an agent that fails at once is named with its own line of code
        run_episode(task, ref, seed, run.profile, run.costs, run.probe)
    except Exception as exc:  # noqa: BLE001 - whatever the agent raises is reported, not a traceback
        print(f"finbench eval: {_raised(exc, ref.label, files)} (task {task.task_id}, seed {seed})", file=sys.stderr)
        return EXIT_SOFTWARE
    try:
        rows = run.evaluate()
    except Exception as exc:  # noqa: BLE001 - as above, from any episode (maybe in a worker process)
        print(f"finbench eval: {_raised(exc, ref.label, files)}", file=sys.stderr)
        return EXIT_SOFTWARE
    card = card_of(run, ref.label, rows)
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in ref.label).strip(".") or "agent"
    out = args.out if args.out is not None else Path("build") / "eval" / slug
    paths = card.write(out)
    print(card.summary())
    print(f"report card: {', '.join(str(p) for p in paths if p.suffix != '.pdf')}")
    return 0


def _agent_ref(spec: str):
    """The `PolicyRef` of AGENT, and the files its code came from; `_Refused` when it cannot be run."""
    from finbench.agents.registry import DEFAULT_POLICIES, as_ref  # lazy: `grade` loads no simulator

    where, colon, name = spec.rpartition(":")
    if not colon or not where or not all(part.isidentifier() for part in name.split(".")):
        raise _Refused(EXIT_USAGE, f"AGENT must be {_AGENT}, got {show(spec)}")
    if where.endswith(".py"):
        module = _import_file(Path(where))
    elif "/" in where or os.sep in where or not all(part.isidentifier() for part in where.split(".")):
        raise _Refused(EXIT_USAGE, f"AGENT must be {_AGENT} (a file's name ends in .py), got {show(spec)}")
    else:
        module = _import_module(where)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(n for n, v in vars(module).items()
                           if not n.startswith("_") and hasattr(v, "begin") and hasattr(v, "act"))
            raise _Refused(EXIT_DATAERR, f"{where} has no {name!r}" + (f"; policies it defines: {', '.join(found)}"
                                                                         if found else "; it defines no policy"))
        obj = getattr(obj, part)
    what = f"{where}:{name}"
    policy = hasattr(obj, "begin") and hasattr(obj, "act")
    if isinstance(obj, type) and not policy:
        raise _Refused(EXIT_DATAERR, f"{what} is a class without begin(brief) and act(observation): not a policy")
    if not policy and not callable(obj):
        raise _Refused(EXIT_DATAERR, f"{what} is {show(obj)}, not a policy: give a class with begin(brief) and "
                                     "act(observation), a factory of no arguments returning one, or such an object")
    if callable(obj) and (isinstance(obj, type) or not policy) and not _takes_nothing(obj):
        raise _Refused(EXIT_DATAERR, f"{what} takes arguments; give a class or factory callable with none")
    files = {str(Path(f).resolve()) for f in (getattr(module, "__file__", None),) if f}
    try:
        ref = as_ref(obj)  # makes one policy now (a class or factory is called once)
    except PolicyError as exc:
        raise _Refused(EXIT_DATAERR, f"{what}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the agent's own constructor raised
        raise _Refused(EXIT_SOFTWARE, f"{_raised(exc, what, files)} while being made") from None
    if ref.label in DEFAULT_POLICIES:
        raise _Refused(EXIT_DATAERR, f"{what} is labelled {ref.label!r}, one of the nine it is compared with; give "
                                     "it another name (its `name` attribute)")
    return ref, files


def _takes_nothing(obj) -> bool:
    try:
        inspect.signature(obj).bind()
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call decide
        return True
    return True


def _import_file(path: Path):
    """The module a policy file defines, importable by worker processes (pickled by value)."""
    if not path.is_file():
        raise _Refused(EXIT_NOINPUT, f"cannot read {path}: " + ("not a regular file" if path.exists() else
                                                                 "no such file"))
    path = path.resolve()
    # a name of its own per file (outside `finbench`, so the cache identity walks its code)
    name = f"agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing look their module up while the file runs
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # its sibling modules import as when it runs from its folder
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure to import is the file's
        del sys.modules[name]
        raise _Refused(EXIT_DATAERR, f"{path} does not import: {_cause(exc, {str(path)})}") from None
    import cloudpickle  # only to hand the file's classes to worker processes

    cloudpickle.register_pickle_by_value(module)
    return module


def _import_module(name: str):
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: a module in the current folder is found
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise _Refused(EXIT_NOINPUT, f"no module named {name!r} (looked in the current folder and sys.path)"
                           ) from None
        raise _Refused(EXIT_DATAERR, f"module {name} does not import: {_cause(exc, set())}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure to import is the module's
        raise _Refused(EXIT_DATAERR, f"module {name} does not import: {_cause(exc, set())}") from None


def _cause(exc: BaseException, files: set[str]) -> str:
    """`Type: message`, on one line, with the line of the agent's file it came from when known."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text[:200] + '...' if len(text) > 200 else text}" if text else type(exc).__name__
    mine = [f for f in traceback.extract_tb(exc.__traceback__) if str(Path(f.filename).resolve()) in files]
    return text + (f" (line {mine[-1].lineno}, in {mine[-1].name})" if mine else "")


def _raised(exc: BaseException, label: str, files: set[str]) -> str:
    """What the agent raised and where: its exception, play()'s note (policy, step, tick), its own line."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n.startswith("raised by policy")]
    if isinstance(exc, PolicyError) and not notes:  # a bad answer: the message names the policy and the step
        return f"the agent {label!r} broke the policy contract: {' '.join(str(exc).split())}"
    return f"the agent {label!r} raised {_cause(exc, files)}" + (f"; {notes[-1]}" if notes else "")


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
    try:
        return args.func(args)
    except FinbenchError as exc:  # input the library refused: the caller's to fix
        print(f"finbench {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - a bug must never exit with a verdict's code
        print(f"finbench {args.command}: internal error ({type(exc).__name__}: {show(str(exc))}); "
              "please report it", file=sys.stderr)
        return EXIT_SOFTWARE
