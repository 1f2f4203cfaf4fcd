"""More rules of the policy identity walk (finbench.agents.identity), at the helpers where they live:

- a walk that reaches depth 0 gives up with the reason "too deep" (so `identity` is None);
- an object of a user's subclass of a C type whose state pickle cannot reduce has no identity, and the reason
  names its type and pickle's complaint; one reduced to a global's name says so too;
- a module a function's code names is recorded as (the name the code uses, "module", the module's name):
  by its name only, never walked;
- Python's own classes and functions count as library code (named, not walked): `object`, a builtin such
  as `len`, and a builtin class made as a heap type (`ExceptionGroup`); a class `exec` made under
  `__module__ = "builtins"` that is not the builtin of its name is the user's.
"""
from __future__ import annotations

import builtins
import sys

import pytest

from finbench.agents.identity import _NoIdentity, _base_state, _globals, _library, _walk, identity


def test_a_walk_at_depth_zero_gives_up_as_too_deep():
    for depth in (0, -1):
        with pytest.raises(_NoIdentity) as e:
            _walk(lambda: 0, depth, {})
        assert str(e.value) == "too deep"
    assert _walk(1, 1, {})  # depth 1 is still inside the limit


class _Unreducible(list):
    def __reduce_ex__(self, protocol):
        raise TypeError("no reduction")


class _Named(list):
    def __reduce_ex__(self, protocol):
        return "SINGLETON"


def test_state_that_cannot_be_reduced_names_its_type_and_the_reason():
    with pytest.raises(_NoIdentity) as e:
        _base_state(_Unreducible([1]), 8, {})
    assert str(e.value) == "cannot read the state of _Unreducible: no reduction"
    assert identity(_Unreducible([1])) is None


def test_a_reduction_to_a_name_says_which_type_and_name():
    with pytest.raises(_NoIdentity) as e:
        _base_state(_Named([1]), 8, {})
    assert str(e.value) == "_Named reduces to the name 'SINGLETON'"


def test_a_module_a_function_names_is_recorded_by_its_name_as_a_module():
    ns: dict = {}
    exec("import json as codec\ndef f():\n    return codec.dumps(1)\n", ns)  # noqa: S102 - the user's code
    # `dumps` is an attribute name, not a global: only `codec` is recorded
    assert _globals(ns["f"], 8, {}) == (("codec", "module", "json"),)


@pytest.mark.parametrize("obj", [object, len, list, *([ExceptionGroup] if sys.version_info >= (3, 11) else [])])
def test_pythons_own_classes_and_functions_are_library_code(obj):
    assert getattr(builtins, obj.__name__) is obj  # a builtin by its own name
    assert _library(obj) is True


def test_a_heap_type_builtin_is_pythons_own_not_the_users():
    """`ExceptionGroup` is a builtin made as a heap type under `__module__ == "builtins"`: only its being the
    builtin of its name tells it from a class a user `exec`s under that module."""
    if sys.version_info < (3, 11):
        pytest.skip("ExceptionGroup is new in Python 3.11")
    assert ExceptionGroup.__module__ == "builtins" and ExceptionGroup.__flags__ & (1 << 9)
    assert _library(ExceptionGroup) is True
    ns = {"__name__": "builtins"}
    exec("class ExceptionGroup2(Exception):\n    pass\n", ns)  # noqa: S102
    assert ns["ExceptionGroup2"].__module__ == "builtins" and _library(ns["ExceptionGroup2"]) is False
