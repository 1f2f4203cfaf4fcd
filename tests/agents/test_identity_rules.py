"""Rules of the policy identity walk (finbench.agents.identity): each hop through a closure cell is one
level of the walk, and a walk deeper than `_DEPTH` (8) has no identity."""
from __future__ import annotations

import abc
import functools
import json
import threading
import types

import pytest

from finbench.agents.identity import identity, packaged


def _closure_chain(hops: int):
    """A function reaching `hops` further functions through closure cells only (no globals, no defaults),
    so every level of the walk is one closure hop: f0 -> f1 -> ... -> f_hops."""
    f = lambda: 0  # noqa: E731 - the innermost function, closing over nothing
    for _ in range(hops):
        f = (lambda g: (lambda: g()))(f)  # a new function whose one cell holds the previous one
    return f


def test_a_closure_hop_costs_one_level_of_the_walk():
    """f0 is walked at depth 8 and f_k at 8 - k: seven hops end at depth 1, still inside the limit."""
    assert identity(_closure_chain(7)) is not None


def test_a_walk_past_eight_closure_hops_has_no_identity():
    """The eighth hop reaches depth 0: too deep, so None (the caller then runs uncached)."""
    assert identity(_closure_chain(8)) is None
    assert identity(_closure_chain(20)) is None  # deeper still: the limit does not wear off


# --- every kind of hop costs the walk one level (two for an own attribute: the dict, then its value) ----

def _partial_chain(hops: int):
    """partial(f_k) over a closure chain f_k -> ... -> f0 (nested partials flatten, so one partial): the
    partial walks its function one level down, then each closure hop one more."""
    return functools.partial(_closure_chain(hops))


def _self_chain(hops: int):
    """A method bound to a method bound to ... an int: each method walks its `__self__` one level down."""
    m = types.MethodType(_plain, 5)
    for _ in range(hops):
        m = types.MethodType(_plain, m)
    return m


def _func_chain(hops: int):
    """A method whose function is a method whose function is ...: `__func__` one level down."""
    m = types.MethodType(_plain, _Empty())
    for _ in range(hops):
        m = types.MethodType(m, _Empty())
    return m


def _plain(self):
    return 0


class _Empty:
    pass


def _class_chain(hops: int):
    """Classes whose attribute `nxt` is the previous class: a member is walked one level down."""
    cls = type("C0", (), {})
    for i in range(hops):
        cls = type(f"C{i + 1}", (), {"nxt": cls})
    return cls


def _metaclass_chain(hops: int):
    """A class of a metaclass of a metaclass ...: the user's metaclass is walked one level down."""
    meta = type("M0", (type,), {})
    for i in range(hops):
        meta = meta(f"M{i + 1}", (type,), {})
    return meta("C", (), {})


def _global_chain(hops: int):
    """g_k() calls g_{k-1}() by its global name: a global the code names is walked one level down."""
    src = "def g0():\n    return 0\n" + "".join(f"def g{i}():\n    return g{i - 1}()\n" for i in range(1, hops + 1))
    ns: dict = {}
    exec(src, ns)  # noqa: S102 - the user's code (no module file), as a notebook makes it
    return ns[f"g{hops}"]


def _attribute_chain(hops: int):
    """f_k.nxt = f_{k-1}: a function's own attributes are a dict (one level) of values (another)."""
    f = lambda: 0  # noqa: E731
    for _ in range(hops):
        g = lambda: 0  # noqa: E731
        g.nxt = f
        f = g
    return f


def _list_chain(hops: int):
    """An object holding [[...[f]...]]: each list walks its elements one level down."""
    value = lambda: 0  # noqa: E731
    for _ in range(hops):
        value = [value]
    return _Holder(value)


def _dict_chain(hops: int):
    """An object holding {"k": {"k": ... f}}: each dict walks its values one level down."""
    value = lambda: 0  # noqa: E731
    for _ in range(hops):
        value = {"k": value}
    return _Holder(value)


class _Holder:
    def __init__(self, value):
        self.value = value


# the deepest chain each kind of hop allows under _DEPTH = 8, worked out by hand (the top is walked at 8):
# - class member, global: the innermost at 8 - k, so k = 7 is the most;
# - partial over k closure hops: f_k at 7, f0 at 7 - k: k = 6;
# - metaclass: C at 8, M_k at 7, ..., M0 at 7 - k: k = 6;
# - method's __self__: the int 5 below M0 at 7 - k: k = 6; __func__ likewise (_plain at 7 - k);
# - own attribute: 2 levels a hop, f0 at 8 - 2k: k = 3;
# - list: the object at 8, its state dict's value at 7, each list one more: f at 7 - k: k = 6;
# - dict: likewise f at 7 - k: k = 6.
@pytest.mark.parametrize("chain, most", [
    (_partial_chain, 6), (_self_chain, 6), (_func_chain, 6), (_class_chain, 7), (_metaclass_chain, 6),
    (_global_chain, 7), (_attribute_chain, 3), (_list_chain, 6), (_dict_chain, 6), (_closure_chain, 7),
], ids=lambda x: getattr(x, "__name__", str(x)))
def test_each_hop_costs_its_levels_and_one_more_hop_has_no_identity(chain, most):
    assert identity(chain(most)) is not None
    assert identity(chain(most + 1)) is None
    assert identity(chain(most + 8)) is None


# --- what enters the identity ---------------------------------------------------------------

def test_a_partial_counts_its_arguments_and_keywords():
    f = lambda *a, **k: 0  # noqa: E731
    assert identity(functools.partial(f, 1)) == identity(functools.partial(f, 1)) != identity(functools.partial(f, 2))
    assert identity(functools.partial(f, t=1)) == identity(functools.partial(f, t=1)) != \
        identity(functools.partial(f, t=2))
    assert identity(functools.partial(f, 1)) != identity(functools.partial(f, t=1))


def test_a_partial_counts_its_function():
    assert identity(functools.partial(lambda: 1)) != identity(functools.partial(lambda: 2))


def test_a_bound_method_counts_its_object_and_its_function():
    class A:
        def __init__(self, n):
            self.n = n

        def act(self):
            return 1

        def other(self):
            return 2

    assert identity(A(1).act) == identity(A(1).act) != identity(A(2).act)
    assert identity(A(1).act) != identity(A(1).other)


def test_a_user_metaclass_enters_the_identity():
    def make(tool):
        class Meta(type):
            def pick(cls):
                return tool
        return Meta("P", (), {})

    assert identity(make("ship")) == identity(make("ship")) != identity(make("write_off"))


def test_a_user_base_after_a_library_base_still_counts():
    """The MRO goes on past a library class: `class P(json.JSONEncoder, Mixin)` reads Mixin's code."""
    def make(tool):
        class Mixin:
            def act(self, obs):
                return tool, {}

        class P(json.JSONEncoder, Mixin):
            pass
        return P

    assert identity(make("ship")) == identity(make("ship")) != identity(make("write_off"))


def test_static_and_class_methods_and_properties_count_by_their_code():
    def make(k):
        class S:
            @staticmethod
            def helper(t):
                return t > k
        return S

    def make_c(k):
        class S:
            @classmethod
            def helper(cls, t):
                return t > k
        return S

    def make_p(k):
        class S:
            @property
            def limit(self):
                return k
        return S

    def make_setter(k):
        class S:
            def get(self):
                return 0

            def put(self, v):
                self.v = v + k
            limit = property(get, put)
        return S

    for make_ in (make, make_c, make_p, make_setter):
        assert identity(make_(1)) == identity(make_(1)) != identity(make_(2)), make_.__name__


def test_a_functions_own_attributes_count_but_not_the_bookkeeping_wraps_adds():
    def make(limit):
        f = lambda t: t  # noqa: E731
        f.limit = limit
        return f

    assert identity(make(3)) == identity(make(3)) != identity(make(4))

    def wrapped_by(doc):
        def inner():
            return 0

        @functools.wraps(inner)
        def outer():
            return inner()
        outer.__doc__ = doc  # bookkeeping a reader sets: not behaviour
        return outer

    assert identity(wrapped_by("a")) == identity(wrapped_by("b")) is not None


def test_keyword_only_defaults_count():
    def make(k):
        def f(*, limit=k):
            return limit
        return f

    assert identity(make(1)) == identity(make(1)) != identity(make(2))


def test_a_decorated_helper_counts_by_the_code_it_wraps():
    """`functools.lru_cache` hides the function; its `__wrapped__` code is what runs."""
    def make(body):
        ns: dict = {}
        exec(f"import functools\n@functools.lru_cache\ndef helper(t):\n    return {body}\n", ns)  # noqa: S102
        return _Holder(ns["helper"])

    assert identity(make("t > 1")) == identity(make("t > 1")) != identity(make("t > 2"))


def test_a_cycle_is_named_by_the_visit_number_it_points_back_to():
    """A back-reference to the root and one to the node itself are different structures."""
    def build(back_to_root):
        root, node = _Node(), _Node()
        root.child = node
        node.back = root if back_to_root else node
        return root

    assert identity(build(True)) is not None  # a cycle ends the walk, not the depth limit
    assert identity(build(True)) == identity(build(True)) != identity(build(False))


class _Node:
    pass


def test_a_set_counts_whatever_the_order_it_iterates_in():
    a, b = _Holder({"x", "y", "z"}), _Holder({"z", "y", "x"})
    assert identity(a) == identity(b) != identity(_Holder({"x", "y"}))
    assert identity(_Holder(frozenset({"p", "q"}))) == identity(_Holder(frozenset({"q", "p"})))


def test_dict_items_count_in_their_insertion_order():
    """A policy iterating a dict reads its items in insertion order (`next(iter(rules))` is its first key):
    the same items inserted in another order may play otherwise, so they are another identity."""
    assert identity(_Holder({"a": 1, "b": 2})) == identity(_Holder({"a": 1, "b": 2}))
    assert identity(_Holder({"a": 1, "b": 2})) != identity(_Holder({"b": 2, "a": 1}))
    assert identity(_Holder({"a": 1, "b": 2})) != identity(_Holder({"a": 2, "b": 1}))


class _FirstRule:
    """Plays the action of its rules' first key: the order of a dict's items decides what it does."""

    cache_id = "v1"

    def __init__(self, rules):
        self.rules = rules

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return next(iter(self.rules)), {"order_id": self.order}


def test_a_policy_reading_a_dict_s_order_gets_the_rows_of_that_order(tmp_path):
    import finbench as fb
    corpus = fb.make_corpus(n_tasks=4)
    one = _FirstRule({"ship": 1, "close": 2})
    other = _FirstRule({"close": 2, "ship": 1})
    fb.clear_caches()
    a = fb.evaluate(corpus, [fb.PolicyRef.of(one, label="p")], seeds=[0], cache=tmp_path)
    b = fb.evaluate(corpus, [fb.PolicyRef.of(other, label="p")], seeds=[0], cache=tmp_path)
    assert len(a) == len(b) == 4
    assert list(a["calls"]) != list(b["calls"])  # played, not served the other's rows


class Slotted:
    """Slots, at module level (a slot's descriptor is hashed by reference to its class)."""
    __slots__ = ("limit", "unset")

    def __init__(self, limit):
        self.limit = limit


def test_slots_count_as_state():
    assert identity(Slotted(1)) == identity(Slotted(1)) != identity(Slotted(2))


def test_a_c_function_or_a_module_has_no_identity():
    assert identity(len) is None
    assert identity(json) is None
    assert identity(functools.partial(len)) is None


def test_a_module_a_function_names_counts_by_its_name_only():
    ns_a, ns_b = {}, {}
    exec("import json\ndef f():\n    return json.dumps(1)\n", ns_a)  # noqa: S102
    exec("import json\ndef f():\n    return json.dumps(1)\n", ns_b)  # noqa: S102
    ns_b["json"] = types.ModuleType("json")  # another module object, the same name
    assert identity(ns_a["f"]) == identity(ns_b["f"]) is not None
    ns_b["json"] = types.ModuleType("other")
    assert identity(ns_a["f"]) != identity(ns_b["f"])


def test_a_library_function_a_function_names_counts_by_its_name():
    """`textwrap.dedent` is named, not walked: the same name, the same identity, and no depth spent."""
    ns: dict = {}
    exec("from textwrap import dedent\ndef f():\n    return dedent('x')\n", ns)  # noqa: S102
    assert identity(ns["f"]) is not None
    ns2: dict = {}
    exec("from textwrap import indent as dedent\ndef f():\n    return dedent('x')\n", ns2)  # noqa: S102
    assert identity(ns["f"]) != identity(ns2["f"])


def test_unhashable_state_has_no_identity():
    assert identity(_Holder(threading.Lock())) is None


def test_the_identity_is_16_hex_digits():
    got = identity(_Holder(1))
    assert len(got) == 16 and int(got, 16) >= 0


def test_a_partial_walks_objects_and_functions_among_its_arguments():
    """An argument that runs (a function) or holds state (an object) is walked like any value."""
    f = lambda *a, **k: 0  # noqa: E731
    assert identity(functools.partial(f, _Holder(1))) == identity(functools.partial(f, _Holder(1))) != \
        identity(functools.partial(f, _Holder(2)))
    assert identity(functools.partial(f, rule=lambda t: t > 1)) != identity(functools.partial(f, rule=lambda t: t > 2))
    assert identity(functools.partial(f, f, rule=f)) is not None  # the function again: a back-reference


def test_an_object_inside_an_object_is_walked_not_pickled():
    """State two objects deep still counts by code: a lambda there has an identity (pickle has none for it),
    and its code tells two holders apart."""
    deep = lambda k: _Holder(_Holder(lambda t: t > k))  # noqa: E731
    assert identity(deep(1)) is not None
    assert identity(_Holder(_Holder(lambda t: t > 1))) != identity(_Holder(_Holder(lambda t: t > 2)))
    assert deep(1).value.value.__code__ is not None and identity(deep(1)) == identity(deep(1))


def test_a_library_metaclass_costs_no_depth():
    """ABCMeta is Python's own: not walked, so an ABC class at the last level of the walk still has an
    identity (seven class hops down to it, as for a plain class)."""
    cls = type("C0", (abc.ABC,), {})
    for i in range(7):
        cls = type(f"C{i + 1}", (), {"nxt": cls})
    assert identity(cls) is not None


def test_defaults_count_and_a_default_that_runs_counts_by_its_code():
    def make(limit):
        def f(t, limit=limit):
            return t > limit
        return f

    def make_rule(k):
        def f(t, rule=lambda t: t > k, *, keep=_Holder(k)):
            return rule(t) and keep
        return f

    assert identity(make(1)) == identity(make(1)) != identity(make(2))
    assert identity(make_rule(1)) is not None
    assert identity(make_rule(1)) == identity(make_rule(1)) != identity(make_rule(2))

    def make_kw(k):
        def f(t, *, rule=lambda t: t > k):
            return rule(t)
        return f

    assert identity(make_kw(1)) is not None and identity(make_kw(1)) != identity(make_kw(2))


def test_a_library_base_counts_by_its_name():
    """Inherited library behaviour is named: the same user code over another library base differs."""
    def make(base):
        class P(base):
            def act(self, obs):
                return "ship", {}
        return P

    assert identity(make(json.JSONEncoder)) == identity(make(json.JSONEncoder)) != identity(make(json.JSONDecoder))


class _Callable:
    """A callable object with no `__wrapped__`: walked as an object (its class's code and its state)."""

    def __init__(self, n):
        self.n = n

    def __call__(self, t):
        return t > self.n


class _Wrapping:
    """Not callable, yet carrying a `__wrapped__` attribute: the decorator shortcut is for callables only."""

    def __init__(self, f, n):
        self.__wrapped__ = f
        self.n = n


def test_a_callable_object_in_state_counts_as_an_object():
    assert identity(_Holder(_Callable(1))) is not None
    assert identity(_Holder(_Callable(1))) == identity(_Holder(_Callable(1))) != identity(_Holder(_Callable(2)))


def test_a_non_callable_with_a_wrapped_attribute_counts_all_its_state():
    f = lambda: 0  # noqa: E731
    assert identity(_Holder(_Wrapping(f, 1))) != identity(_Holder(_Wrapping(f, 2)))


def test_containers_count_their_type_and_dict_keys_count():
    assert identity(_Holder([1, 2])) != identity(_Holder((1, 2)))
    assert identity(_Holder({"a": 1})) != identity(_Holder({"b": 1}))


def test_dict_keys_of_mixed_types_have_an_identity():
    """Keys that do not compare (1 and "b") are fine: items count in insertion order, never sorted."""
    a, b = _Holder({1: "a", "b": 2}), _Holder({1: "a", "b": 2})
    assert identity(a) is not None and identity(a) == identity(b) != identity(_Holder({"b": 2, 1: "a"}))


def test_nested_code_counts_by_content_and_the_globals_it_names():
    """A lambda inside a function is code too: the globals it names count, its line in a file does not."""
    src = "def f():\n    return lambda t: t > LIMIT\n"
    a, b, moved = {"LIMIT": 1}, {"LIMIT": 2}, {"LIMIT": 1}
    exec(src, a)  # noqa: S102
    exec(src, b)  # noqa: S102
    exec("\n\n\n" + src, moved)  # noqa: S102 - the same code three lines further down
    assert identity(a["f"]) is not None
    assert identity(a["f"]) != identity(b["f"])  # LIMIT is named only inside the nested lambda
    assert identity(a["f"]) == identity(moved["f"])


def test_a_set_of_mixed_types_has_an_identity():
    """Set elements are ordered by their repr, so elements that do not compare (1 and "a") are fine."""
    assert identity(_Holder({1, "a"})) is not None
    assert identity(_Holder({1, "a"})) == identity(_Holder({"a", 1})) != identity(_Holder({2, "a"}))


def test_a_package_class_is_named_only_and_costs_no_depth():
    """The package's own code is covered by the cache's source digest: a class of finbench at the last
    level of the walk (seven class hops down) is named, not walked, and so still has an identity."""
    from finbench.agents.plans import Plan
    cls = Plan
    for i in range(7):
        cls = type(f"C{i + 1}", (), {"nxt": cls})
    assert identity(cls) is not None


def test_packaged_means_defined_in_finbench():
    from finbench.agents.plans import Plan, plan_label
    assert packaged(Plan) and packaged(plan_label) and packaged(Plan())
    assert not packaged(json.JSONEncoder) and not packaged(_Holder) and not packaged(identity.__class__)
    assert not packaged(5) and not packaged(None)  # no __module__ at all: not the package's
    fn = types.FunctionType(compile("0", "<x>", "eval"), {})  # exec'd: __module__ is None
    assert fn.__module__ is None and not packaged(fn)
    assert not packaged(type("finbenchx", (), {"__module__": "finbenchx.mod"}))  # the first dotted part only


def test_an_installed_librarys_object_in_state_is_plain_data():
    """Its class is not the user's code: its state is hashed by joblib, not walked, so a lambda inside it
    (which pickle cannot hash) leaves the policy with no identity."""
    assert identity(_Holder(types.SimpleNamespace(a=1))) == identity(_Holder(types.SimpleNamespace(a=1)))
    assert identity(_Holder(types.SimpleNamespace(a=1))) != identity(_Holder(types.SimpleNamespace(a=2)))
    assert identity(_Holder(types.SimpleNamespace(rule=lambda t: t))) is None


def test_a_class_exec_made_under_module_builtins_is_walked():
    """`exec` gives a class `__module__ = "builtins"`: it is the user's code, not Python's own."""
    a, b = {}, {}
    exec("class P:\n    def act(self):\n        return 'ship'\n", a)  # noqa: S102
    exec("class P:\n    def act(self):\n        return 'close'\n", b)  # noqa: S102
    assert a["P"].__module__ == "builtins" and identity(a["P"]) != identity(b["P"])


# --- a user's subclass of list, tuple or dict: its code and state count, not only its elements ---------------

@pytest.mark.parametrize("base", [list, tuple, dict])
def test_a_container_subclass_counts_by_its_code_and_state_not_only_its_elements(base):
    """Two policies holding a `Rules(list)` with the same elements but other code (a closure) or other
    attributes play differently: they must not share an identity (and so cached rows)."""
    from finbench.agents.identity import identity

    def make(threshold, limit):
        cls = type("Rules", (base,), {"allows": (lambda self, t: t > threshold)})
        rules = cls({"a": 1} if base is dict else [1])
        rules.limit = limit
        return rules

    def policy(rules):
        class P:
            cache_id = "v1"

            def begin(self, brief):
                self.rules = rules

            def act(self, obs):
                return "wait", {"order_id": "o", "ticks": 5}
        P.rules = rules
        return P

    one, other_code, other_state = (identity(policy(make(*a))) for a in [(300, 5), (130, 5), (300, 9)])
    assert one is not None and other_code is not None and other_state is not None
    assert one != other_code and one != other_state
    assert identity(policy(make(300, 5))) == one  # the same code and state: the same identity


def test_packaged_names_the_package_s_own_classes_and_functions_only():
    """A class or function of finbench is named, never hashed; a user's is neither."""
    from finbench.agents.policies import FinalityGate
    from finbench.sim.corpus import make_corpus

    class Mine:
        pass

    def mine():
        return 1

    assert packaged(FinalityGate) and packaged(make_corpus)
    assert not packaged(Mine) and not packaged(mine) and not packaged(json.dumps)


# --- an object of a user's subclass of a C type counts by what that type holds, too ------------------------

class _ShipIfFirst(list):
    """A policy that is a list: what it plays is decided by its elements, which live outside `__dict__`."""
    cache_id = "v1"

    def begin(self, brief):
        self.order = brief["order_id"]

    def act(self, obs):
        return ("ship" if self[0] else "close"), {"order_id": self.order}


class _Word(str):
    def act(self, obs):
        return str(self), {}


class _Rules(dict):
    def act(self, obs):
        return self["a"], {}


class _Queue(__import__("collections").deque):
    pass


class _Tags(set):
    pass


@pytest.mark.parametrize("one, same, other", [
    (lambda: _ShipIfFirst([1]), lambda: _ShipIfFirst([1]), lambda: _ShipIfFirst([0])),
    (lambda: _Word("ship"), lambda: _Word("ship"), lambda: _Word("close")),
    (lambda: _Rules(a="ship"), lambda: _Rules(a="ship"), lambda: _Rules(a="close")),
    (lambda: _Queue([1, 2]), lambda: _Queue([1, 2]), lambda: _Queue([2, 1])),
    (lambda: _Tags({"x", "y"}), lambda: _Tags({"y", "x"}), lambda: _Tags({"x"})),
], ids=["list", "str", "dict", "deque", "set"])
def test_a_c_type_subclass_counts_by_its_contents(one, same, other):
    """The policy object itself, and the same object held by a policy: its elements count."""
    assert identity(one()) is not None
    assert identity(one()) == identity(same()) != identity(other())
    held = [identity((lambda v: (lambda: v))(make())) for make in (one, same, other)]
    assert held[0] is not None and held[0] == held[1] != held[2]


def test_a_policy_that_is_a_list_gets_the_rows_of_its_own_elements(tmp_path):
    import finbench as fb
    corpus = fb.make_corpus(n_tasks=4)
    fb.clear_caches()
    ship = fb.evaluate(corpus, [fb.PolicyRef.of(_ShipIfFirst([1]), label="p")], seeds=[0], cache=tmp_path)
    close = fb.evaluate(corpus, [fb.PolicyRef.of(_ShipIfFirst([0]), label="p")], seeds=[0], cache=tmp_path)
    assert set(ship["calls"].str.contains("ship")) == {True}
    assert set(close["calls"].str.contains("ship")) == {False}


def test_a_slotted_user_object_counts_by_its_class_s_code():
    """An object with no `__dict__` is still the user's: its class's methods count, not only its name."""
    made = []
    for body in ("return 1", "return 2"):
        scope: dict = {}
        exec(f"class S:\n    __slots__ = ()\n    def f(self):\n        {body}\n", scope)  # noqa: S102
        made.append(scope["S"]())
    held = [identity((lambda v: (lambda: v))(obj)) for obj in made]
    assert held[0] is not None and held[0] != held[1]


def test_a_c_type_subclass_s_contents_cost_two_levels_of_the_walk():
    """The contents are one level below the object, their elements one more: a list subclass holding a
    closure chain of four hops is walked to depth 1, five hops is too deep."""
    assert identity(_Queue([_closure_chain(4)])) is not None
    assert identity(_Queue([_closure_chain(5)])) is None


def test_a_c_type_subclass_whose_state_cannot_be_reduced_has_no_identity():
    class Unreducible(list):
        def __reduce_ex__(self, protocol):
            raise TypeError("no")
    assert identity(Unreducible([1])) is None


def test_a_reduction_to_a_global_s_name_has_no_identity():
    """Pickled by name, its contents are not read: it is never guessed equal to another."""
    class Named(list):
        def __reduce_ex__(self, protocol):
            return "SINGLETON"
    assert identity(Named([1])) is None
