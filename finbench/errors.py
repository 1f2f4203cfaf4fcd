"""The project's own error for bad input, and the checks every public door uses.

Every message has one shape: ``<where>: <parameter> must be <what is allowed>,
got <value>``. `FinbenchError` is both a `ValueError` and a `TypeError`, so
code that caught either before still does, and a caller can catch the one
type for anything the public API refuses.

This module imports nothing from the package (the grader uses it standalone).
"""
from __future__ import annotations

import math
import operator
import os
import sys
import warnings
from numbers import Real

_SHOW = 60


class FinbenchError(ValueError, TypeError):
    """Input the public API refuses; the message names the parameter, the value and what is allowed."""


class PolicyError(FinbenchError):
    """A policy that cannot be used: unknown name or knob, colliding label, a bad object or a bad answer."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INSTALLED = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def _users(filename: str) -> bool:
    """Code of the user's: neither this package's nor Python's or an installed library's."""
    return not (filename.startswith((_PACKAGE, "<frozen")) or filename.startswith(_INSTALLED)
                or "site-packages" in filename)


def note(message: str) -> None:
    """Say something the user should know that is no error (`note: ...`): on stderr in a terminal, where stdout
    holds results; as a plain line of output in a Jupyter kernel, which shows stderr as a red error box."""
    out = sys.stdout if type(sys.stderr).__module__.startswith("ipykernel") else sys.stderr
    print(f"note: {message}", file=out)


def warn_caller(message: str, category: type[Warning]) -> None:
    """Warn at the user's line: the first frame up the stack that is neither the package's nor an installed
    library's, however many of those lie between (the package's helpers, a wrapper a tool puts around a
    function). With no such frame, the first frame outside the package."""
    frame, level, outside = sys._getframe(1), 2, None  # level 1 would name this function's line, 2 its caller's
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PACKAGE):
            if _users(name):
                break
            outside = level if outside is None else outside
        frame, level = frame.f_back, level + 1
    else:
        level = outside or 2
    warnings.warn(message, category, stacklevel=level)


def show(value: object) -> str:
    """A short, safe rendering of any value (a 10,000-digit integer is not printed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10 ** 4000 else 'over 4000'} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named by its type
        return f"a {type(value).__name__}"
    return text if len(text) <= _SHOW else text[:_SHOW - 3] + "..."


def cut(text: str, keep: int) -> str:
    """`text` cut to `keep` characters, saying how long it was (a bad call's echo, a wrapper's observation)."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def bad(where: str, name: str, value: object, allowed: str) -> FinbenchError:
    return FinbenchError(f"{where}: {name} must be {allowed}, got {show(value)}")


def check_int(where: str, name: str, value: object, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (not a bool, not a float) in [lo, hi]."""
    if value.__class__ is int:  # the usual case, checked first (a bool is not an int here)
        n = value
    elif isinstance(value, bool):
        raise bad(where, name, value, "an integer" + _range(lo, hi))
    else:
        try:
            n = operator.index(value)
        except TypeError:
            raise bad(where, name, value, "an integer" + _range(lo, hi)) from None
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise bad(where, name, value, "an integer" + _range(lo, hi))
    return n


def check_real(where: str, name: str, value: object, lo: float | None = None, hi: float | None = None,
               lo_open: bool = False) -> float:
    """A finite real number (not a bool, not a string) in [lo, hi] (or (lo, hi] if `lo_open`)."""
    allowed = "a finite number" + _range(lo, hi, lo_open)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise bad(where, name, value, allowed)
    try:
        x = float(value)
    except (OverflowError, ValueError):
        raise bad(where, name, value, allowed) from None
    if not math.isfinite(x) or (lo is not None and (x <= lo if lo_open else x < lo)) or (hi is not None and x > hi):
        raise bad(where, name, value, allowed)
    return x


def check_choice(where: str, name: str, value: object, choices) -> object:
    """One of `choices` (compared as given; a non-hashable value is simply not one)."""
    choices = tuple(choices)
    try:
        ok = value in choices
    except TypeError:
        ok = False
    if not ok:
        raise bad(where, name, value, "one of " + ", ".join(map(repr, choices)))
    return value


def _range(lo, hi, lo_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{_num(lo)}, {_num(hi)}]"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {_num(lo)}"
    if hi is not None:
        return f" <= {_num(hi)}"
    return ""


def _num(x) -> str:
    """A bound as a reader writes it: an integer in full (1000000, not 1e+06), a float shortest."""
    return str(x) if isinstance(x, int) else f"{x:g}"
