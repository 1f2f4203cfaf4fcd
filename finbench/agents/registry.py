"""Policy references: what `evaluate`, every experiment and replay accept as "a policy".

A reference is a label, a factory that makes a fresh policy for each episode,
and a cache identity. It is made from any of:

- a registered name, `"sop"`, or a label with knobs, `"sop[patience=60]"`;
- a `(name, knobs)` pair, `("sop", {"patience": 60})`;
- a policy class, or any zero-argument callable returning a policy (a factory);
- a policy object: each episode plays a deep copy of it, so state never leaks
  from one episode into the next;
- a `PolicyRef` built explicitly (to set the label or the cache identity).

What may be cached: the package's own policies, by the package's code (the
episode cache's source digest) and their knobs. A user's policy (a class,
object, factory, a registered name of the user's, a module installed under
`site-packages`) is played afresh on every evaluation unless it declares
`cache_id`, a version string its author bumps when its behaviour changes: its
behaviour may depend on what no digest of its code can see (an environment
variable, a file, a module it imports). A declared policy's key also holds the
computable identity of its code and state (`finbench.agents.identity`), taken
when its episodes are played (`PolicyRef.cache_key`), so an edit its author
forgot to declare still misses the cache.

The registry starts with SPEC's nine (`POLICIES`); `register_policy` adds more
(plans, a reconciler, model agents) without changing what "all policies"
means: `resolve_policies(None)` is always the nine, in SPEC's order.
"""
from __future__ import annotations

import copy
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from finbench.errors import PolicyError, show
from finbench.agents.identity import identity, packaged
from finbench.agents.policies import POLICIES

DEFAULT_POLICIES: tuple[str, ...] = tuple(POLICIES)
"""SPEC §7's nine, in SPEC's order: what `policies=None` means everywhere."""

REGISTRY: dict[str, Callable[..., Any]] = dict(POLICIES)
"""Every policy name a reference may use: the nine plus whatever is registered."""

_HOME: dict[str, str | None] = {}
"""The module that registered each extra name: a worker process that never imported it
imports it before making the policy (registration happens at import)."""

PACKAGED: dict[str, str] = {"reconciler": "finbench.agents.reconciler", "plan": "finbench.agents.plans",
                            "exploit": "finbench.agents.exploits", "exploit_watch": "finbench.agents.exploits",
                            "exploit_gated": "finbench.agents.exploits"}
"""Policies the package ships beyond the nine, by the module that registers them: a label
names them without importing anything first (the module is imported on first use)."""

_LABEL = re.compile(r"^(?P<name>[A-Za-z_][\w.-]*)(?:\[(?P<knobs>[^\[\]]*)\])?$")


def register_policy(name: str, factory: Callable[..., Any], *, replace: bool = False) -> None:
    """Make `name` (with knobs) usable wherever a policy reference is taken.

    Args:
        name: The registry name; must not be one of SPEC's nine.
        factory: Called with the knobs as keyword arguments; returns a fresh policy.
        replace: Allow re-registering a name already registered (not one of the nine).

    Raises:
        PolicyError: a bad name, one of the nine, or already registered without `replace`.
    """
    if not isinstance(name, str) or not _LABEL.match(name) or "[" in name:
        raise PolicyError(f"register_policy: name must be an identifier-like string, got {name!r}")
    if name in POLICIES:
        raise PolicyError(f"register_policy: {name!r} is one of SPEC's nine and cannot be replaced")
    if name in PACKAGED and not packaged(factory):  # importing its module later would silently undo it
        raise PolicyError(f"register_policy: {name!r} is one of the package's own policies; choose another name")
    if name in REGISTRY and not replace:
        raise PolicyError(f"register_policy: {name!r} is already registered (pass replace=True)")
    if not callable(factory):
        raise PolicyError(f"register_policy: factory for {name!r} is not callable")
    REGISTRY[name] = factory
    _HOME[name] = getattr(factory, "__module__", None)


def policy_label(name: str, knobs: dict | None = None) -> str:
    """'sop' or 'sop[patience=120,poll_interval=15]' (knobs sorted by name)."""
    if not knobs:
        return name
    return f"{name}[{','.join(f'{k}={v}' for k, v in sorted(knobs.items()))}]"


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_label(label: str) -> tuple[str, dict]:
    """'sop[patience=60]' -> ('sop', {'patience': 60}); the inverse of `policy_label`."""
    m = _LABEL.match(label.strip()) if isinstance(label, str) else None
    if m is None:
        raise PolicyError(f"not a policy name or label: {label!r}")
    knobs = {}
    inside = m.group("knobs")
    for part in (inside.split(",") if inside else ()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():  # an empty part ('sop[patience=60,]') is a typo, not nothing
            raise PolicyError(f"bad knob {part!r} in policy label {label!r}; expected name=value")
        if key.strip() in knobs:
            raise PolicyError(f"knob {key.strip()!r} given twice in policy label {label!r}")
        knobs[key.strip()] = _parse_value(value.strip())
    return m.group("name"), knobs


def get_policy(name: str, **knobs) -> Any:
    """A fresh policy by name (SPEC's nine or a registered one), with optional knobs.

    Example:
        >>> get_policy("sop", patience=60).patience
        60

    Raises:
        PolicyError: unknown name, or a knob the policy does not take.
    """
    if not isinstance(name, str):
        raise PolicyError(f"a policy name must be a string, got {show(name)}")
    if name not in REGISTRY and name in PACKAGED:
        importlib.import_module(PACKAGED[name])  # registers it (it imports this module: not at the top)
    if name not in REGISTRY:
        valid = [*REGISTRY, *sorted(set(PACKAGED) - set(REGISTRY))]
        raise PolicyError(f"unknown policy {name!r}; valid: {', '.join(valid)}")
    return _made(name, REGISTRY[name], knobs)


def _made(name: str, factory: Callable[..., Any], knobs: dict) -> Any:
    try:
        return factory(**knobs)
    except PolicyError:
        raise
    except TypeError as e:
        raise PolicyError(f"policy {name!r} does not take knob(s) {sorted(knobs)} ({e})") from None


@dataclass(frozen=True)
class PolicyRef:
    """A policy as the runner sees it.

    Attributes:
        label: The name in every row and table (unique within one evaluation).
        factory: Zero-argument callable returning a fresh policy for one episode.
        cache_id: The declared identity: for the package's own policies the whole
            cache key (`registry:<label>`); for a user's, the version its author
            declared, to which `cache_key` adds the identity of its code and state.
            None: never cached, played afresh on every evaluation.
        builtin: The package's own code (its key is `cache_id` alone).
        source: What a user's policy's identity is computed from (default: `factory`).
    """

    label: str
    factory: Callable[[], Any] = field(compare=False, repr=False)
    cache_id: str | None = None
    builtin: bool = False
    source: Any = field(default=None, compare=False, repr=False)

    def make(self) -> Any:
        """A fresh policy for one episode."""
        return self.factory()

    def cache_key(self) -> str | None:
        """What identifies this policy's episodes now, or None (play them afresh).

        Called when the episodes are about to be played, never earlier: a class
        edited after the reference was made (a class attribute, a method) gets
        the key of what it plays now.
        """
        if self.cache_id is None or self.builtin:
            return self.cache_id
        own = identity(self.factory if self.source is None else self.source)
        return None if own is None else f"{self.cache_id}:{own}"

    @classmethod
    def named(cls, name: str, knobs: dict | None = None) -> PolicyRef:
        """A registered policy by name and knobs (checked now, not in the first episode)."""
        knobs = dict(knobs or {})
        odd = [k for k in knobs if not (isinstance(k, str) and k.isidentifier())]
        if odd:
            raise PolicyError(f"knobs of {name!r} must be named by identifiers, got {', '.join(map(show, odd))}")
        probe = get_policy(name, **knobs)  # fail early and clearly
        label = policy_label(name, knobs)
        factory = REGISTRY[name]
        made = _Named(name, tuple(sorted(knobs.items())), _HOME.get(name), None if packaged(factory) else factory)
        if packaged(factory):
            return cls(label, made, cache_id=None if _opted_out(probe) else f"registry:{label}", builtin=True)
        # a user's registered factory: cached only by its own declaration, checked against its content
        declared = _declared(factory, probe)
        return cls(label, made, cache_id=None if declared is None else f"registry:{label}:{declared}",
                   source=factory)

    @classmethod
    def of(cls, obj: Any, label: str | None = None, cache_id: str | None = None) -> PolicyRef:
        """A user's policy: a class, a factory, or an object (deep-copied per episode).

        The label defaults to the policy's `name` attribute, else its class or
        function name. It is cached only if it declares a `cache_id` (the argument,
        else the policy's or the factory's `cache_id` attribute): a version string
        its author bumps when what it plays changes. The key then also holds the
        identity of its code and state, taken when its episodes are played
        (`cache_key`). A class or object of the package's own, holding plain data
        only, is keyed as the package's policies are.

        Raises:
            PolicyError: not a policy, a factory that fails or makes no policy, an
                object that cannot be copied, or a `cache_id` that is not a non-empty string.
        """
        if isinstance(obj, PolicyRef):
            return obj
        if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "act")):
            factory = obj
            probe = obj()  # one instance now: a bad factory fails here, named, not mid-run
        elif hasattr(obj, "act") and hasattr(obj, "begin"):
            try:  # every episode plays a deep copy of the object as it is now (a later edit changes nothing)
                obj = copy.deepcopy(obj)
            except Exception as e:  # noqa: BLE001 - whatever deepcopy raises, the remedy is the same
                raise PolicyError(f"policy object {show(obj)} cannot be deep-copied ({e}); each episode plays a "
                                  "fresh copy, so pass its class or a factory (a function returning a fresh "
                                  "policy) instead") from None
            factory, probe = _Copies(obj), obj
        else:
            raise PolicyError(f"not a policy: {obj!r}; give a name, (name, knobs), a class, a factory "
                              "or an object with begin(brief) and act(observation)")
        if not (hasattr(probe, "begin") and hasattr(probe, "act")):
            raise PolicyError(f"{obj!r} made {probe!r}, which lacks begin(brief) and act(observation)")
        if label is None:
            own = getattr(probe, "name", None)
            label = own if isinstance(own, str) and own and own != "policy" else (
                getattr(obj, "__name__", None) or type(probe).__name__)
        source = factory.prototype if isinstance(factory, _Copies) else factory
        if cache_id is None and _package_only(source):  # the package's own class or object: its code is covered
            own = None if _opted_out(probe) else identity(source)
            return cls(str(label), factory, cache_id=None if own is None else f"package:{own}", builtin=True)
        declared = _declared(obj, probe) if cache_id is None else _checked_id(cache_id, obj)
        return cls(str(label), factory, cache_id=None if declared is None else f"user:{label}:{declared}",
                   source=source)


def _opted_out(policy: Any) -> bool:
    """`cache_id = None` set on a policy says "never cache" (a model agent's episodes come from transcripts)."""
    return "cache_id" in dir(policy) and policy.cache_id is None


def _declared(obj: Any, policy: Any) -> str | None:
    """The `cache_id` a user's policy declares (on the instance, its class, or the factory), or None."""
    value = getattr(policy, "cache_id", None)
    if value is None and not isinstance(obj, type):
        value = getattr(obj, "cache_id", None)  # a factory function's attribute
    return None if value is None else _checked_id(value, obj)


def _checked_id(value: Any, obj: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"cache_id of {show(obj)} must be a non-empty string (a version you bump when the policy "
                          f"changes, e.g. 'v2'), got {show(value)}")
    return value


_PLAIN = (str, int, float, bool, type(None))


def _package_only(source: Any) -> bool:
    """A class of the package's own, or an object of one whose state is plain data (numbers, strings, and
    tuples, lists or dicts of them): nothing a user wrote can run inside it."""
    def plain(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return all(map(plain, v))
        if isinstance(v, dict):
            return all(plain(k) and plain(x) for k, x in v.items())
        return isinstance(v, _PLAIN)

    if isinstance(source, type):
        return packaged(source) and type(source) is type  # not a metaclass of the user's
    return (not callable(source) or hasattr(source, "act")) and packaged(type(source)) and \
        type(type(source)) is type and plain(list(getattr(source, "__dict__", {}).values()))


@dataclass(frozen=True)
class _Named:
    """A picklable factory for a registered policy with knobs. A user's registered factory travels
    with it (by value), so a worker process plays what the parent registered, whatever its own
    registry or imports say; the package's own names are looked up (and their module imported)."""

    name: str
    knobs: tuple
    home: str | None = None
    factory: Callable[..., Any] | None = None

    def __call__(self):
        if self.factory is not None:
            return _made(self.name, self.factory, dict(self.knobs))
        if self.name not in REGISTRY and self.home:
            importlib.import_module(self.home)
        return get_policy(self.name, **dict(self.knobs))


@dataclass(frozen=True)
class _Copies:
    """A factory that deep-copies a prototype policy object."""

    prototype: Any

    def __call__(self):
        return copy.deepcopy(self.prototype)


def as_ref(p: Any) -> PolicyRef:
    """Any accepted form of a policy (see the module docstring) as a `PolicyRef`."""
    if isinstance(p, PolicyRef):
        return p
    if isinstance(p, str):
        name, knobs = parse_label(p)
        return PolicyRef.named(name, knobs)
    if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str):
        if not isinstance(p[1], dict):
            raise PolicyError(f"knobs of {p[0]!r} must be a dict, got {p[1]!r}")
        return PolicyRef.named(p[0], p[1])
    return PolicyRef.of(p)


def resolve_policies(policies: Any = None) -> tuple[PolicyRef, ...]:
    """References for `policies` (None: SPEC's nine), refusing labels that collide.

    Raises:
        PolicyError: an unusable reference, an empty list, or two references with one label.
    """
    if policies is None:
        policies = DEFAULT_POLICIES
    elif isinstance(policies, (str, PolicyRef)) or (isinstance(policies, tuple) and len(policies) == 2
                                                     and isinstance(policies[0], str)
                                                     and isinstance(policies[1], dict)):
        policies = [policies]  # one policy given bare, not a sequence of characters
    elif isinstance(policies, type) or hasattr(policies, "act") or callable(policies):
        policies = [policies]
    elif isinstance(policies, dict) or not hasattr(policies, "__iter__"):
        raise PolicyError(f"policies must be a list of policies (names, (name, knobs) pairs, classes, factories "
                          f"or objects) or None for SPEC's nine, got {show(policies)}")
    refs = tuple(as_ref(p) for p in policies)
    if not refs:
        raise PolicyError("policies is empty; give at least one (None means SPEC's nine)")
    seen: dict[str, int] = {}
    for i, r in enumerate(refs):
        if r.label in seen:
            raise PolicyError(f"policies {seen[r.label]} and {i} share the label {r.label!r}; rows could not "
                              "be told apart (give one a label: PolicyRef.of(obj, label=...))")
        seen[r.label] = i
    return refs


def policy_order(labels) -> list[str]:
    """SPEC's nine in SPEC's order, then any other label in first-seen order."""
    unique = getattr(labels, "unique", None)  # a pandas column: first-seen order without a Python loop over rows
    present = unique().tolist() if callable(unique) else list(dict.fromkeys(labels))
    return [p for p in DEFAULT_POLICIES if p in present] + [p for p in present if p not in DEFAULT_POLICIES]
