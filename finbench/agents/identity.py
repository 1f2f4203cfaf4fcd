"""What a policy would play, as a digest: the cache identity of a user's policy.

Two references share cached episodes only if they would play alike, so the
identity is built from content, never from `id()` or a label:

- a class: its module and qualified name, the source of every class in its MRO
  outside `finbench` (or, where the source is unavailable, as for a class typed
  into a notebook, its methods' code and its attributes' values);
- an object: its class's identity and a digest of its state (`__dict__` and
  slots, through `joblib.hash`);
- a function, lambda or closure: its code (bytecode, constants, names, nested
  code), defaults, closure values, and the identity of every class or function
  it names from its globals (so `lambda: Patient(130)` changes when `Patient`
  does, or when 130 does);
- a `functools.partial`: the function's identity, its arguments and keywords.

Anything else (a C extension, state joblib cannot hash, a recursion deeper than
`_DEPTH`) has no identity: `identity` returns None and the caller runs the
policy without a cache rather than guess. The package's own code is covered by
the cache's digest of its source, so a class defined in `finbench` is named only.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import types
from typing import Any

import joblib

_DEPTH = 6
"""How deep the walk through referenced classes and functions goes before giving up (no identity)."""


class _NoIdentity(Exception):
    """Raised inside the walk when some part has no stable identity."""


def identity(obj: Any) -> str | None:
    """A 16-hex digest of what `obj` (a class, an object, a function or a partial) would play, or None.

    Example:
        >>> class Ship:
        ...     def begin(self, brief): self.order = brief["order_id"]
        ...     def act(self, obs): return "ship", {"order_id": self.order}
        >>> identity(Ship) == identity(Ship), identity(Ship()) == identity(Ship())
        (True, True)
        >>> identity(lambda: Ship()) == identity(lambda: Ship())   # same code, same names
        True
    """
    try:
        parts = _walk(obj, _DEPTH, set())
    except (_NoIdentity, RecursionError):
        return None
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _walk(obj: Any, depth: int, seen: set[int]) -> tuple:
    if depth <= 0:
        raise _NoIdentity("too deep")
    if isinstance(obj, functools.partial):
        return ("partial", _walk(obj.func, depth - 1, seen), _state(obj.args), _state(obj.keywords))
    if isinstance(obj, type):
        return ("class", *_class(obj, depth, seen))
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        return _function(obj, depth, seen)
    if isinstance(obj, (types.BuiltinFunctionType, types.ModuleType)):
        raise _NoIdentity(f"no source for {obj!r}")
    # an object: what its class plays, from which state
    return ("object", *_class(type(obj), depth, seen), _state(_attributes(obj)))


def _class(cls: type, depth: int, seen: set[int]) -> tuple:
    out = [f"{cls.__module__}.{cls.__qualname__}"]
    for base in cls.__mro__:
        if base is object or base.__module__ == "builtins" or packaged(base):
            out.append(f"{base.__module__}.{base.__qualname__}")
            continue
        out.append(_source(base))
        if id(base) not in seen:  # what its methods name from their globals
            seen.add(id(base))
            for name, member in sorted(vars(base).items()):
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, types.FunctionType):
                    out.append((name, _names(member, depth - 1, seen)))
    return tuple(out)


def _function(fn, depth: int, seen: set[int]) -> tuple:
    if isinstance(fn, types.MethodType):
        return ("method", _walk(fn.__self__, depth - 1, seen), fn.__func__.__name__)
    if packaged(fn):
        return ("function", f"{fn.__module__}.{fn.__qualname__}")
    closure = tuple(_cell(c, depth, seen) for c in (fn.__closure__ or ()))
    return ("function", fn.__module__, fn.__qualname__, _code(fn.__code__), _state(fn.__defaults__),
            _state(fn.__kwdefaults__), closure, _names(fn, depth - 1, seen))


def _cell(cell, depth: int, seen: set[int]) -> tuple:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell
        return ("empty",)
    if isinstance(value, (type, types.FunctionType, functools.partial)):
        return _walk(value, depth - 1, seen)
    return ("value", _state(value))


def _names(fn, depth: int, seen: set[int]) -> tuple:
    """The identity of each class or function a function's code names from its module's globals."""
    out = []
    glob = getattr(fn, "__globals__", {})
    for name in sorted(set(_all_names(fn.__code__))):
        value = glob.get(name)
        if isinstance(value, (type, types.FunctionType, functools.partial)) and id(value) not in seen:
            if isinstance(value, type) and (packaged(value) or value.__module__ == "builtins"):
                continue
            seen.add(id(value))
            out.append((name, _walk(value, depth, seen)))
    return tuple(out)


def _all_names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_names(const)


def _code(code: types.CodeType) -> tuple:
    consts = tuple(_code(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts)
    return (code.co_code.hex(), consts, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)


def _source(cls: type):
    """A class's own source; where it is unavailable (a class typed into a notebook cell or
    an `exec`), its methods' code and its other attributes' values."""
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        pass
    out = []
    for name, member in sorted(vars(cls).items()):
        if name in ("__dict__", "__weakref__", "__module__", "__qualname__", "__doc__"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if isinstance(member, property):
            member = member.fget
        if isinstance(member, types.FunctionType):
            out.append((name, _code(member.__code__), _state(member.__defaults__)))
        else:
            out.append((name, _state(member)))
    return tuple(out)


def _attributes(obj: Any) -> dict:
    state = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    return state


def _state(value: Any) -> str:
    """A stable digest of plain state (joblib's hash of its pickle), or no identity."""
    try:
        return joblib.hash(value)
    except Exception as exc:  # noqa: BLE001 - unpicklable state has no stable identity
        raise _NoIdentity(f"state cannot be hashed: {exc}") from None


def packaged(obj: Any) -> bool:
    """Defined in this package: the episode cache's digest of the package source covers it."""
    return (getattr(obj, "__module__", "") or "").split(".")[0] == "finbench"
