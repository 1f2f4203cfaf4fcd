"""Loading a user's agent named as `PATH.py:NAME` or `module:NAME`, and any policy reference with it.

    agent = load_agent("my_agent.py:EarlyEscalator")   # .obj: the class (or factory, or object) NAME names
    ref = policy_ref("my_agent.py:EarlyEscalator")      # a PolicyRef, as from any other reference

`policy_ref` takes every form a policy reference takes elsewhere (`finbench.agents.registry`: a name, a
label with knobs, a class, a factory, an object, a `PolicyRef`) and also this one, so any door that takes a
policy (the explorer, `finbench eval`) loads an agent's file one way. A file is imported under a name of its
own per path (outside `finbench`, so the cache identity walks its code) and registered with cloudpickle to
be sent by value, so joblib workers play what the file defined. What cannot be loaded is an
`AgentLoadError` (a `PolicyError`) in the one message shape; its `kind` and `reason` are what the command
line needs to keep its exit codes and its one line.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finbench.errors import PolicyError, show
from finbench.agents.registry import PolicyRef, as_ref

__all__ = ["AGENT", "POLICY", "Agent", "AgentLoadError", "cause", "is_agent_spec", "load_agent", "policy_ref"]

AGENT = "PATH.py:NAME or module:NAME"
POLICY = "a class with begin(brief) and act(observation), a factory of no arguments returning one, or such an object"
_ALLOWED = f"{AGENT} (NAME {POLICY} in it)"
REFERENCE = ("a policy name or label ('sop', 'sop[patience=60]'), a class, a factory, an object with begin(brief) "
             f"and act(observation), or {AGENT}")
"""Every form `policy_ref` takes, as its messages name them."""

_NATIVE = (types.BuiltinFunctionType, types.WrapperDescriptorType, types.MethodWrapperType,
           types.MethodDescriptorType, types.ClassMethodDescriptorType)


class AgentLoadError(PolicyError):
    """An agent that cannot be loaded. `kind`: 'usage' (not PATH.py:NAME nor module:NAME), 'missing' (no
    such file or module) or 'bad' (it does not import, has no NAME, or NAME is not a policy); `reason`: the
    cause alone, without the message's `<where>: agent must be ...` frame."""

    def __init__(self, where: str, spec: object, kind: str, reason: str):
        super().__init__(f"{where}: policy must be {_ALLOWED}, got {show(spec)} ({reason})")
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class Agent:
    """A loaded agent: `obj` (what NAME names), `what` ('PATH:NAME' as given), the module it came from, and
    `files`, the paths of its code (to name the agent's own line in a traceback: `cause`)."""

    obj: Any
    what: str
    module: types.ModuleType
    files: frozenset


def is_agent_spec(text: object) -> bool:
    """Whether `text` is written as PATH.py:NAME or module:NAME (a label never holds a ':' outside its knobs)."""
    if not isinstance(text, str):
        return False
    where, colon, name = text.rpartition(":")
    return bool(colon and where) and all(part.isidentifier() for part in name.split("."))


def load_agent(spec: str, where: str = "load_agent") -> Agent:
    """The object `spec` (PATH.py:NAME or module:NAME) names, checked to be usable as a policy.

    Raises:
        AgentLoadError: not such a spec, no such file or module, one that does not import, no NAME in
            it, or NAME is not a policy (a class without begin and act, a built-in, a callable that takes
            arguments).
    """
    if not is_agent_spec(spec):
        raise AgentLoadError(where, spec, "usage", f"AGENT must be {AGENT}, got {show(spec)}")
    path, _, name = spec.rpartition(":")
    if path.endswith(".py"):
        module = _import_file(where, spec, Path(path))
    elif "/" in path or os.sep in path or not all(part.isidentifier() for part in path.split(".")):
        raise AgentLoadError(where, spec, "usage", f"AGENT must be {AGENT} (a file's name ends in .py), got "
                                                   f"{show(spec)}")
    else:
        module = _import_module(where, spec, path)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(n for n, v in vars(module).items()
                           if not n.startswith("_") and hasattr(v, "begin") and hasattr(v, "act"))
            raise AgentLoadError(where, spec, "bad", f"{path} has no {name!r}" + (
                f"; policies it defines: {', '.join(found)}" if found else "; it defines no policy"))
        obj = getattr(obj, part)
    what = f"{path}:{name}"
    _check_policy(where, spec, what, obj)
    files = frozenset(str(Path(f).resolve()) for f in (getattr(module, "__file__", None),) if f) | {"<dynamic-code>"}
    return Agent(obj, what, module, files)


def _check_policy(where: str, spec: str, what: str, obj: Any) -> None:
    """Refuse what cannot be a policy before calling anything (calling a stranger could do anything)."""
    policy = hasattr(obj, "begin") and hasattr(obj, "act")
    if isinstance(obj, type) and not policy:
        raise AgentLoadError(where, spec, "bad", f"{what} is a class without begin(brief) and act(observation): "
                                                 "not a policy")
    if isinstance(obj, _NATIVE):  # sys.exit, os.getcwd: calling one to see what it makes could do anything
        raise AgentLoadError(where, spec, "bad", f"{what} is a built-in function, not a policy: give {POLICY}")
    if not policy and not callable(obj):
        raise AgentLoadError(where, spec, "bad", f"{what} is {show(obj)}, not a policy: give {POLICY}")
    if callable(obj) and (isinstance(obj, type) or not policy):
        takes = _takes_nothing(obj)
        if takes is None and not isinstance(obj, type):  # a class makes an object: let the call decide
            raise AgentLoadError(where, spec, "bad", f"{what} is {show(obj)}, whose arguments cannot be read: "
                                                     f"give {POLICY}")
        if takes is False:
            raise AgentLoadError(where, spec, "bad", f"{what} takes arguments; give a class or factory callable "
                                                     "with none")


def _takes_nothing(obj) -> bool | None:
    """Whether `obj()` binds; None when its signature cannot be read."""
    try:
        inspect.signature(obj).bind()
    except TypeError:
        return False
    except ValueError:
        return None
    return True


def _import_file(where: str, spec: str, path: Path) -> types.ModuleType:
    """The module a policy file defines, importable by worker processes (pickled by value); imported
    afresh on every load, so an edited file is what plays."""
    if not path.is_file():
        raise AgentLoadError(where, spec, "missing", f"cannot read {path}: " + (
            "not a regular file" if path.exists() else "no such file"))
    path = path.resolve()
    # a name of its own per file (outside `finbench`, so the cache identity walks its code)
    name = f"agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and typing look their module up while the file runs
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # its sibling modules import as when it runs from its folder
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure to import is the file's
        del sys.modules[name]
        raise AgentLoadError(where, spec, "bad", f"{path} does not import: {cause(exc, {str(path)})}") from None
    import cloudpickle  # only to hand the file's classes to worker processes

    cloudpickle.register_pickle_by_value(module)
    return module


def _import_module(where: str, spec: str, name: str) -> types.ModuleType:
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: a module in the current folder is found
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise AgentLoadError(where, spec, "missing", f"no module named {name!r} (looked in the current "
                                                         "folder and sys.path)") from None
        raise AgentLoadError(where, spec, "bad", f"module {name} does not import: {cause(exc, set())}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure to import is the module's
        raise AgentLoadError(where, spec, "bad", f"module {name} does not import: {cause(exc, set())}") from None


def cause(exc: BaseException, files) -> str:
    """`Type: message` on one line, with the last line of the agent's `files` it passed through, if any."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    mine = [f for f in traceback.extract_tb(exc.__traceback__)
            if f.filename in files or (f.filename[:1] != "<" and str(Path(f.filename).resolve()) in files)]
    line = f" (line {mine[-1].lineno}, in {mine[-1].name})" if mine else ""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})" + line
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text[:200] + '...' if len(text) > 200 else text}" if text else type(exc).__name__
    return text + line


def policy_ref(policy: Any, where: str = "policy_ref") -> PolicyRef:
    """Any policy reference as a `PolicyRef`: every form `as_ref` takes, and PATH.py:NAME or module:NAME.

    Raises:
        PolicyError: an unknown name or knob, not a policy, an agent that cannot be loaded
            (`AgentLoadError`), or a class or factory that raised while making its first policy.
    """
    files: frozenset = frozenset()
    if is_agent_spec(policy):
        agent = load_agent(policy, where)
        obj, files = agent.obj, agent.files
    elif isinstance(policy, str) and (policy.strip().endswith(".py") or "/" in policy or os.sep in policy):
        raise AgentLoadError(where, policy, "usage", "a file needs the name of the policy in it, after a ':'")
    else:
        obj = policy
    if not (isinstance(obj, (str, tuple, PolicyRef)) or callable(obj) or hasattr(obj, "act")):
        raise PolicyError(f"{where}: policy must be {REFERENCE}, got {show(policy)}")
    try:
        return as_ref(obj)  # a class or factory is called once here: a bad one fails now, named
    except PolicyError as exc:
        text = str(exc) + (f" (or {AGENT}: an agent in a file or module)" if str(exc).startswith("unknown policy")
                           else "")
        raise PolicyError(text if text.startswith(f"{where}: ") else f"{where}: {text}") from None
    except Exception as exc:  # noqa: BLE001 - the agent's own constructor raised: say what and where
        raise PolicyError(f"{where}: policy must be a class or factory that makes a policy, got {show(policy)} "
                          f"({cause(exc, files)} while being made)") from None
