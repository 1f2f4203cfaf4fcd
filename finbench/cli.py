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
from finbench.grading import CHECKS, MAX_MONEY, Contract, TraceError, grade_trace, load_trace

__all__ = ["EXIT_CODES", "build_parser", "main"]

EXIT_USAGE = 64
EXIT_NOINPUT = 66
EXIT_MALFORMED = 3
EXIT_SOFTWARE = 70
#: Exit code of ``grade`` for each verdict.
EXIT_CODES = {"pass": 0, "violation": 1, "unscorable": 2}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with 64, not 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
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
    grade.set_defaults(func=_cmd_grade)
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
        args = parser.parse_args(argv)
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
