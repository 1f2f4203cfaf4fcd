"""What a policy would play, as a digest: the cache identity of a user's policy.

Two references share cached episodes only if they would play alike, so the
identity is built from the code that runs and the values it reads, never from
`id()`, a label or a file's text:

- a class: for every class of its MRO outside `finbench`, each attribute of its
  `__dict__`: a method by its code (bytecode, constants, names, nested code),
  defaults and closure values, any other attribute by its value;
- an object: its class's identity and its state (`__dict__` and slots), each
  value walked the same way (a function held by an object counts by its code);
  an object of a user's subclass of a C type (list, dict, str, set, deque...)
  also by what that type holds (elements, items, text), as pickle reduces it;
- a dict by its items in insertion order (the order a policy iterating it reads);
- a class's metaclass, if it is the user's, as a class;
- a function, lambda or closure: its code, defaults, closure values, its own
  attributes (`__dict__`: what `functools.wraps` and `f.limit = 3` set), and every
  global it names: a class or function by its identity, a plain value by
  `joblib.hash` (so `lambda: Patient(LIMIT)` changes when `Patient`, `LIMIT`
  or the lambda does); a module it names counts by name only;
- a `functools.partial`: the function's identity, its arguments and keywords.

Anything with no stable digest (a C extension function, state `joblib` cannot
hash, a walk deeper than `_DEPTH`) has no identity: `identity` returns None and
the caller runs the policy uncached rather than guess. Code defined in
`finbench` is named only: the episode cache's digest of the package source
covers it. Mutable module state that a worker process would not see (a global
changed in the parent after import) is hashed here but not shipped to workers:
`evaluate` documents that rows then follow each process's own modules.
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import os
import sys
import types
from typing import Any

import joblib

from finbench.memo import memoised

_DEPTH = 8
"""How deep the walk through referenced classes, functions and values goes before giving up."""

_CALLABLE = (type, types.FunctionType, types.MethodType, functools.partial)
_BOOKKEEPING = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "__annotations__",
                          "__slotnames__", "_abc_impl", "__abstractmethods__", "__parameters__"})
"""Class attributes Python keeps for itself, not behaviour (`copy` adds `__slotnames__` on first use)."""


_HEAPTYPE = 1 << 9
"""`type.__flags__` bit of a class made by a class statement; without it, a C type (list, dict, deque...)."""


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
        parts = _walk(obj, _DEPTH, {})
    except (_NoIdentity, RecursionError):
        return None
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _walk(obj: Any, depth: int, seen: dict[int, tuple]) -> Any:
    """The identity parts of `obj`; a cycle back to something already walked is its visit number."""
    if depth <= 0:
        raise _NoIdentity("too deep")
    if id(obj) in seen:
        return ("seen", seen[id(obj)][0])
    seen[id(obj)] = (len(seen), obj)  # held, so that no object made during the walk reuses its id
    if isinstance(obj, functools.partial):
        return ("partial", _walk(obj.func, depth - 1, seen), _value(obj.args, depth, seen),
                _value(obj.keywords, depth, seen))
    if isinstance(obj, type):
        return ("class", *_class(obj, depth, seen))
    if isinstance(obj, types.MethodType):
        return ("method", _walk(obj.__self__, depth - 1, seen), _walk(obj.__func__, depth - 1, seen))
    if isinstance(obj, types.FunctionType):
        return _function(obj, depth, seen)
    if isinstance(obj, (types.BuiltinFunctionType, types.ModuleType)):
        raise _NoIdentity(f"no code to read in {obj!r}")
    # an object: what its class plays, from which state
    return ("object", *_class(type(obj), depth, seen), _value(_attributes(obj), depth, seen),
            *_base_state(obj, depth, seen))


def _base_state(obj: Any, depth: int, seen: dict[int, tuple]) -> tuple:
    """What an object of a user's subclass of a C type (list, dict, str, int, set, deque, ...) holds in
    that type's own layout, outside `__dict__`: its elements, items, text or number, as pickle's reduction
    gives them. Its methods read it, so it counts; state that cannot be reduced has no identity."""
    if not any(b is not object and not b.__flags__ & _HEAPTYPE for b in type(obj).__mro__):
        return ()
    if isinstance(obj, (set, frozenset)):
        return (_state(frozenset(obj)),)  # sorted: a set's reduction follows the hash seed
    try:
        reduced = obj.__reduce_ex__(4)
    except Exception as exc:  # noqa: BLE001 - what pickle cannot reduce has no stable identity
        raise _NoIdentity(f"cannot read the state of {type(obj).__qualname__}: {exc}") from None
    if isinstance(reduced, str):  # pickled by a global's name: what that global holds is not read here
        raise _NoIdentity(f"{type(obj).__qualname__} reduces to the name {reduced!r}")
    _, args, state, items, pairs = (*reduced, None, None, None)[:5]
    args = tuple("cls" if a is type(obj) else a for a in args)  # the class itself is walked above
    return (_value((args, state, list(items or ()), list(pairs or ())), depth - 1, seen),)


def _class(cls: type, depth: int, seen: dict[int, tuple]) -> tuple:
    out: list = [f"{cls.__module__}.{cls.__qualname__}"]
    meta = type(cls)
    if meta is not type and not _library(meta):  # a class attribute may be the metaclass's
        out.append(("metaclass", _walk(meta, depth - 1, seen)))
    for base in cls.__mro__:
        if _library(base):
            out.append(f"{base.__module__}.{base.__qualname__}")
            continue
        members = []
        for name, member in sorted(vars(base).items()):
            if name in _BOOKKEEPING:
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if isinstance(member, property):
                member = (member.fget, member.fset)
            members.append((name, _value(member, depth - 1, seen)))
        out.append(tuple(members))
    return tuple(out)


def _function(fn, depth: int, seen: dict[int, tuple]) -> tuple:
    if _library(fn):
        return ("function", f"{fn.__module__}.{fn.__qualname__}")
    closure = tuple(_cell(c, depth, seen) for c in (fn.__closure__ or ()))
    own = {k: v for k, v in vars(fn).items() if k not in _BOOKKEEPING}
    return ("function", fn.__qualname__, _code(fn.__code__), _value(fn.__defaults__, depth, seen),
            _value(fn.__kwdefaults__, depth, seen), closure, _globals(fn, depth - 1, seen),
            _value(own, depth - 1, seen))


def _cell(cell, depth: int, seen: dict[int, tuple]) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell
        return ("empty",)
    return _value(value, depth - 1, seen)


def _globals(fn, depth: int, seen: dict[int, tuple]) -> tuple:
    """The identity of every global a function's code names (a module by its name only)."""
    out = []
    glob = fn.__globals__  # only functions come here
    for name in sorted(set(_all_names(fn.__code__))):
        if name not in glob:
            continue  # an attribute name, or a builtin
        value = glob[name]
        if isinstance(value, types.ModuleType):
            out.append((name, "module", value.__name__))
        else:
            out.append((name, _value(value, depth, seen)))
    return tuple(out)


def _value(value: Any, depth: int, seen: dict[int, tuple]) -> Any:
    """A value's identity: code for what runs, `joblib.hash` for plain data, containers element-wise."""
    if isinstance(value, _CALLABLE):
        return _walk(value, depth, seen)
    wrapped = getattr(value, "__wrapped__", None) if callable(value) else None
    if isinstance(wrapped, types.FunctionType):  # a decorated helper (`functools.lru_cache`, `wraps`): its code
        return ("wrapped", _walk(wrapped, depth, seen))
    if not _library(type(value)):
        # an object of a user's class (slotted, or a subclass of list, dict, str...): its code and state
        return _walk(value, depth, seen)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_value(v, depth - 1, seen) for v in value))
    if isinstance(value, dict):  # in insertion order: a policy iterating a dict reads it in that order
        return ("dict", *((_state(k), _value(v, depth - 1, seen)) for k, v in value.items()))
    return _state(value)


def _all_names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_names(const)


def _code(code: types.CodeType) -> tuple:
    consts = tuple(_code(c) if isinstance(c, types.CodeType) else _state(c) for c in code.co_consts)
    return (code.co_code.hex(), consts, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount)


def _attributes(obj: Any) -> dict:
    state = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    return state


def _state(value: Any) -> str:
    """A stable digest of plain data (joblib's hash of its pickle), or no identity."""
    if isinstance(value, (frozenset, set)):  # their iteration order follows the hash seed
        value = sorted(value, key=repr)
    try:
        return joblib.hash(value)
    except Exception as exc:  # noqa: BLE001 - unpicklable state has no stable identity
        raise _NoIdentity(f"state cannot be hashed: {exc}") from None


def _library(obj: Any) -> bool:
    """A class or function whose code is not the user's: Python's own, an installed library's, or this
    package's (named only). A class `exec` made under `__module__ = "builtins"` is the user's."""
    if obj is object or getattr(builtins, obj.__name__, None) is obj or packaged(obj):  # classes, functions
        return True
    if isinstance(obj, type) and not obj.__flags__ & _HEAPTYPE:  # a C type (NoneType, a C extension's)
        return True
    module = obj.__module__ or ""
    return module != "builtins" and _installed(module)  # "builtins" and not Python's own: exec made it


@memoised("agents.identity.installed", keys="a module's name (where it was imported from)", bound=1024)
def _installed(module: str) -> bool:
    """A module of the standard library or an installed package (its file under the interpreter's prefix)."""
    if module in sys.builtin_module_names:
        return True
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        return False  # __main__ in a notebook, an exec'd namespace: the user's
    path = os.path.realpath(path)
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return any(path.startswith(root + os.sep) for root in roots) or "site-packages" in path


def packaged(obj: Any) -> bool:
    """Defined in this package: the episode cache's digest of the package source covers it."""
    return (getattr(obj, "__module__", "") or "").split(".")[0] == "finbench"
