"""The engine's fast path changes speed, never results.

Built-in policies are played through `FinalityEnv._call` (no argument checks,
no copies, shared folds) and share memoised draws, outcomes and grades; the
public `step` keeps every check and copy. Each test here compares the fast
path with the checked one, or a memo with the computation it spares.
"""
import gc
import pickle
import random
import weakref

import pytest

import finbench as fb
from finbench.sim import constants as C
from finbench.bench import Public  # a built-in policy wrapped as a user's agent would be
from finbench.sim.result import EpisodeResult
from finbench.sim.env import FinalityEnv, reference_position
from finbench.sim.play import batch_mode, play, trusted
from finbench.grading import CHECKS, grade_trace
from finbench.agents.policies import SOP, Policy, Routine
from finbench.sim.rng import Keyed, integer, key_prefix, uniform
from finbench.running.episode import episode_contract, grade_episode

CORPUS = fb.make_corpus(n_tasks=60)
TASKS = CORPUS.tasks[::4]  # every archetype, twins included
PROFILES = {
    "default": fb.FaultProfile.default(),
    "none": fb.FaultProfile.none(),
    "stale_read": fb.FaultProfile.only("stale_read"),
    "without_loss": fb.FaultProfile.without("loss"),
    "intensity_0.6": fb.FaultProfile.default(0.6),
}
VARIANTS = [(name, {}) for name in fb.POLICIES] + [
    ("sop", {"poll_interval": 7, "patience": 45}),
    ("sop", {"poll_interval": 90, "patience": 400}),
    ("react", {"wait": 5}),
    ("reflection", {"wait": 60, "pause": 3}),
    ("finality_gate", {"wait": 9}),
    ("majority_vote", {"wait": 20}),
    ("optimistic", {"poll_interval": 4}),
    # the exploit search's routines (trusted too)
    ("exploit", {}),
    ("exploit", {"at": 300, "settle": "probe", "action": "refund", "act_at": 0}),
    ("exploit", {"at": "none", "settle": "probe", "action": "escalate", "act_at": 500}),
    ("exploit", {"at": 150, "settle": "none", "action": "ship", "act_at": 700}),
    ("exploit_watch", {}),
    ("exploit_watch", {"at": "none", "action": "escalate", "fallback": "refund", "poll": 7}),
    ("exploit_gated", {}),
    ("exploit_gated", {"hedge": 130, "fallback": "write_off"}),
]


def _both(task, name, knobs, seed, profile):
    fast = play(FinalityEnv(task, seed, profile), fb.get_policy(name, **knobs))
    slow = play(FinalityEnv(task, seed, profile), Public(fb.get_policy(name, **knobs)))
    return fast, slow


@pytest.mark.parametrize("label", list(PROFILES))
def test_fast_path_gives_the_public_paths_episode(label):
    profile = PROFILES[label]
    checked = 0
    for task in TASKS:
        for seed in (0, 3):
            for name, knobs in VARIANTS:
                fast, slow = _both(task, name, knobs, seed, profile)
                a, b = fast.result(name), slow.result(name)
                assert a == b, (label, task.task_id, seed, name, knobs)  # every field, actions and trace too
                assert [x[3] for x in a.actions] == [x[3] for x in b.actions]
                assert fast.world.reads == slow.world.reads
                assert fast.world.firings == slow.world.firings
                assert [vars(c) for c in fast.world.captures] == [vars(c) for c in slow.world.captures]
                assert grade_episode(task, a.trace) == grade_episode(task, b.trace)
                checked += 1
    assert checked == len(TASKS) * 2 * len(VARIANTS)


def test_only_the_built_in_classes_are_trusted():
    assert all(trusted(fb.get_policy(name)) for name in fb.POLICIES)
    assert all(trusted(fb.get_policy(name)) for name in ("exploit", "exploit_watch", "exploit_gated"))
    assert not trusted(fb.get_policy("plan")) and not trusted(fb.get_policy("reconciler"))

    class Mine(Policy):
        def act(self, obs):
            return self.call("close")

    class MyRoutine(Routine):
        def run(self):
            yield self.call("close")

    class MySOP(SOP):  # inherits `trusted = True` but is not the package's own class
        pass

    class Claims(Policy):  # says so, but lives outside finbench.agents.policies
        trusted = True

        def act(self, obs):
            return self.call("close")

    from finbench.agents.exploits import Exploit

    class MyExploit(Exploit):  # likewise
        pass

    for policy in (Mine(), MyRoutine(), MySOP(), Claims(), Public(fb.get_policy("sop")), MyExploit()):
        assert not trusted(policy), type(policy).__name__


def test_a_users_subclass_takes_the_checked_path():
    """A subclass that edits its observations must not reach the shared folds."""

    class Vandal(SOP):
        def act(self, obs):
            res = obs.get("result")
            if isinstance(res, dict) and "captures" in res:
                res["captures"].append({"id": "cap-9", "key": "x", "amount": 1.0, "status": "settled"})
            return super().act(obs)

    task = TASKS[5]
    before = fb.run_episode(task, "sop", 1)
    play(FinalityEnv(task, 1), Vandal())
    assert fb.run_episode(task, "sop", 1) == before


def test_public_step_returns_fresh_copies():
    task = next(t for t in CORPUS.tasks if t.archetype == "pending_settle")
    env = FinalityEnv(task, 2, fb.FaultProfile.none())
    order = env.reset()["order_id"]
    first = env.step("read_ledger", order_id=order)
    first["result"]["lines"].clear()
    first["result"]["balances"]["cash"] = 1e9
    again = env.world.view("ledger", first["t"])
    assert again["lines"] and again["balances"]["cash"] == 0.0
    # another episode of the same world shares the memo: it must not see the edit either
    other = FinalityEnv(task, 2, fb.FaultProfile.none())
    other.reset()
    assert other.step("read_ledger", order_id=order)["result"] == again
    assert other.step("read_ledger", order_id=order)["result"] is not other.actions[-2][3]["result"]


def test_results_of_the_fast_path_own_their_observations():
    """Fast-path reads share the world's memo; `result()` hands out copies."""
    task = TASKS[3]
    res = fb.run_episode(task, "majority_vote", 0)
    reads = [obs["result"] for _, tool, _, obs in res.actions if tool.startswith("read_")]
    assert reads
    for r in reads:
        r.clear()
    again = fb.run_episode(task, "majority_vote", 0)
    again_reads = [obs["result"] for _, tool, _, obs in again.actions if tool.startswith("read_")]
    assert len(again_reads) == len(reads)
    assert all(again_reads)
    env = play(FinalityEnv(task, 0), fb.get_policy("majority_vote"))
    lean = env.result("majority_vote", actions=False)
    assert lean.actions == () and lean.trace == again.trace and lean.fired == again.fired


@pytest.mark.parametrize("tool,args,error", [
    ("teleport", {"order_id": "X"}, "unknown tool"),
    ("wait", {"order_id": "X", "ticks": 0}, "ticks must be"),
    ("wait", {"order_id": "X", "ticks": True}, "ticks must be"),
    ("wait", {"order_id": "X"}, "missing argument"),
    ("read_bank", {"order_id": "X", "extra": 1}, "unexpected argument"),
    ("read_bank", {"ORDER_ID": "X"}, "unexpected argument"),  # one argument, as the usual call, but misnamed
    ("retry_capture", {"order_id": "X", "idempotency_key": ""}, "non-empty"),
    ("ship", {"order_id": "ord-nope"}, "unknown order"),
    ("ship", {"order_id": 5}, "order_id must be a string"),  # refused as it is: not taken as text
    ("retry_capture", {"order_id": "X", "idempotency_key": 7}, "idempotency_key must be a non-empty string"),
])
def test_public_step_still_validates(tool, args, error):
    task = TASKS[0]
    env = FinalityEnv(task, 0)
    env.reset()
    args = {k: (task.order_id if v == "X" else v) for k, v in args.items()}
    obs = env.step(tool, **args)
    assert error in obs["error"] and obs["t"] == C.HANDOVER + 1 and obs["calls_left"] == 39
    assert env.actions[-1][2] == args and env.actions[-1][2] is not args


class _OneDict:
    """A user's policy that hands out one argument dict, edited in place at every call (and a dict
    subclass, which the keyword call reads as a mapping)."""

    name = "one_dict"

    class Args(dict):
        pass

    def begin(self, brief):
        self.order, self.args, self.n = brief["order_id"], self.Args(), 0

    def act(self, obs):
        self.n += 1
        # it never reads its observation: past the call budget, a loop that stopped stepping the env would spin
        assert self.n <= 40, "act asked past the call budget"
        self.args.clear()
        self.args["order_id"] = self.order
        if self.n < 4:
            self.args["ticks"] = 10 * self.n
            return "wait", self.args
        return ("read_erp" if self.n < 6 else "escalate"), self.args


class _OnePlainDict(_OneDict):
    """`_OneDict` with a plain dict, which `play` takes without asking `_checked_answer`."""

    Args = dict


@pytest.mark.parametrize("policy", [_OneDict, _OnePlainDict])
def test_play_copies_a_users_arguments_as_the_keyword_call_does(policy):
    task = TASKS[0]
    env = play(FinalityEnv(task, 0), policy())
    args = [a for _, _, a, _ in env.actions]
    assert [a.get("ticks") for a in args] == [10, 20, 30, None, None, None]
    assert all(type(a) is dict for a in args) and len({id(a) for a in args}) == len(args)
    by_hand = FinalityEnv(task, 0)
    by_hand.reset()
    for _, tool, a, _ in env.actions:
        by_hand.step(tool, **a)
    assert by_hand.actions == env.actions


def test_fast_path_hands_the_unexpected_to_the_checked_path():
    """It trusts a built-in's arguments, but not the tool, the order or an open case."""
    task = TASKS[0]
    calls = [("teleport", {"order_id": task.order_id}), ("ship", {"order_id": "ord-nope"}),
             ("read_erp", {"order_id": task.other_order_id}), ("refund", {"order_id": task.other_order_id}),
             ("ship", {"order_id": task.order_id}), ("wait", {"order_id": task.order_id, "ticks": 5})]
    fast, slow = FinalityEnv(task, 0), FinalityEnv(task, 0)
    fast.reset(), slow.reset()
    for tool, args in calls:
        assert fast._call(tool, dict(args)) == slow.step(tool, **args), tool
    assert fast.result("x") == slow.result("x")


def test_episode_result_is_built_as_the_constructor_builds_it():
    res = fb.run_episode(TASKS[2], "react", 4)
    made = EpisodeResult(**vars(res))
    assert made == res and list(vars(made)) == list(vars(res))
    assert pickle.dumps(made) == pickle.dumps(res)


def test_memoised_outcomes_match_a_fresh_settlement():
    from finbench.sim.economics import settle_case

    for task in TASKS:
        for name in fb.POLICIES:
            env = play(FinalityEnv(task, 1), fb.get_policy(name))
            assert env.outcome() == settle_case(task, env.world.captures, env.disposition, env.disposition_t,
                                                env.costs, len(env.other_effects))
    costs = fb.Costs(cogs_rate=0.4)
    env = play(FinalityEnv(TASKS[1], 0, costs=costs), fb.get_policy("finality_gate"))
    assert env.outcome().cogs == pytest.approx(0.4 * TASKS[1].order_value if env.disposition == "ship" else 0.0)


def test_keyed_draws_are_the_plain_draws():
    rnd = random.Random(7)
    memos = {}  # a memo serves one prefix: it is keyed by the text after it
    for _ in range(300):
        stream, seed = f"s/{rnd.randrange(4)}", rnd.randrange(3)  # few prefixes: their memos are asked again
        family, did = rnd.choice(C.FAMILIES), f"cap-{rnd.randrange(9)}:terminal:{rnd.choice(C.SYSTEMS)}"
        memo = memos.setdefault((stream, seed), {})
        after = Keyed.after(key_prefix(stream, seed), memo=memo)  # the prefix given as its text
        assert after.prefix == Keyed(stream, seed).prefix and after.memo is memo
        for keyed in (Keyed(stream, seed), Keyed(stream, seed, memo=memo), after):
            assert keyed.pair(family, did) == uniform(stream, seed, family, did)
            assert keyed.uniform(family, did, 3) == uniform(stream, seed, family, did, 3)
            assert keyed.integer(30, 180, family, did) == integer(30, 180, stream, seed, family, did)
    assert len(memos) == 12 and all(memos.values())


def test_a_keyed_memo_holds_each_draw_under_the_text_after_the_prefix():
    """`Keyed(*parts, memo=m)` and `Keyed.after(key_prefix(*parts), m)`: the prefix is the key text the draws
    begin with (each part's text, then the separator), and a draw is remembered in `m` under the text after it
    (the family, the separator, the delivery id), so a repeat is answered from `m`, whichever of the two asks."""
    text = "s/1\x1f2\x1f"  # = key_prefix("s/1", 2), spelled out
    assert Keyed("s/1", 2).prefix == text and Keyed.after(text).prefix == text
    for make in (lambda memo: Keyed("s/1", 2, memo=memo), lambda memo: Keyed.after(text, memo)):
        memo = {}
        keyed = make(memo)
        u = keyed.pair("loss", "cap-2:terminal:ledger")
        assert memo == {"loss\x1fcap-2:terminal:ledger": u} and u == uniform("s/1", 2, "loss", "cap-2:terminal:ledger")
        memo["loss\x1fcap-3:terminal:bank"] = 0.25  # a remembered draw is the memo's, not drawn again
        assert keyed.pair("loss", "cap-3:terminal:bank") == 0.25


def test_memoised_stale_reads_are_the_keyed_draws():
    """The n-th read of a system is stale by the draw keyed (unit, seed, family, system, n),
    whichever policy asks first (the memo is shared by the worlds of one task and seed)."""
    profile = fb.FaultProfile.only("stale_read", intensity=0.5)
    for task in TASKS[:6]:
        for name in ("majority_vote", "optimistic", "react", "sop"):  # later ones hit the memo
            env = play(FinalityEnv(task, 5, profile), fb.get_policy(name))
            n_of = dict.fromkeys(C.SYSTEMS, 0)
            fired = 0
            for issued, tool, args, obs in env.actions:
                if not tool.startswith("read_"):
                    continue
                system, n = tool[len("read_"):], n_of[tool[len("read_"):]]
                n_of[system] += 1
                key = (task.stream, 5, "stale_read", system, n)
                seen = obs["t"]
                if uniform(*key) < 0.5:
                    fired += 1
                    seen -= integer(*C.STALE_RANGE, *key, "lag")
                assert obs["result"] == env.world.view(system, seen), (task.task_id, name, system, n)
            assert env.world.fired()["stale_read"] == fired


def _direct_grade(task, trace):
    v = grade_trace(list(trace), episode_contract(task))
    caps = sum(1 for r in trace if r.get("kind") == "effect" and r.get("op") == "capture"
               and r.get("new_effect") and r.get("order") == task.order_id)
    return {"verdict": v.verdict, "capture_effects": caps, **{f"check_{k}": v.checks[k] for k in CHECKS}}


def _mutants(trace):
    """Traces one edit away from `trace`, each of a kind the grader reads."""
    recs = [dict(r) for r in trace]
    events = [i for i, r in enumerate(recs) if "seq" in r]
    effects = [i for i in events if recs[i]["kind"] == "effect"]
    out = []

    def edit(fn):
        new = [dict(r) for r in recs]
        fn(new)
        out.append(new)

    edit(lambda rs: rs.pop(events[0]))  # the authorization is lost
    edit(lambda rs: rs[events[-1]].update(seq=rs[events[0]]["seq"]))  # two records under one seq
    edit(lambda rs: rs[0].update(complete=False))
    edit(lambda rs: rs[0].pop("last_seq"))
    edit(lambda rs: rs[0].update(last_seq=None))
    edit(lambda rs: rs[events[0]].update(seq=float(rs[events[0]]["seq"])))  # 1.0 is not the seq 1
    edit(lambda rs: rs[events[0]].pop("seq"))
    edit(lambda rs: rs[events[0]].update(seq=None))
    edit(lambda rs: rs.append({"kind": "note", "seq": None}))
    edit(lambda rs: rs.append({"kind": "note"}))
    for i in effects:
        edit(lambda rs, i=i: rs[i].update(new_effect=1 if rs[i]["new_effect"] else 0))  # not booleans
        edit(lambda rs, i=i: rs[i].update(new_effect=not rs[i]["new_effect"]))
        edit(lambda rs, i=i: rs[i].update(order="ord-elsewhere"))
        edit(lambda rs, i=i: rs[i].update(amount=rs[i]["amount"] + 0.01))
        edit(lambda rs, i=i: rs[i].update(amount=True))
        edit(lambda rs, i=i: rs[i].update(key=None))
        edit(lambda rs, i=i: rs[i].update(receipt="cap-1"))
        edit(lambda rs, i=i: rs[i].update(op="refund"))
        edit(lambda rs, i=i: rs[i].update(t=-5, outcome="?", actor="nobody"))  # unread fields
    last = max(r["seq"] for r in recs if "seq" in r)
    edit(lambda rs: rs.append({"seq": last + 1, "t": 0, "kind": "reverse", "receipt": "cap-1", "by": "x"}))
    edit(lambda rs: rs.append({"seq": last + 1, "t": 0, "kind": "reverse", "receipt": "cap-7"}))
    edit(lambda rs: rs.append({"seq": last + 1, "t": 0, "kind": "reverse", "receipt": "cap-1", "order": 5}))
    return out


def test_grade_episode_is_the_graders_verdict():
    traces = []
    for task in CORPUS.tasks[::3]:
        for seed in range(3):
            for name in fb.POLICIES:
                traces.append((task, fb.run_episode(task, name, seed).trace))
        env = FinalityEnv(task, 0, double_effect=True)  # a replayed key charges again
        play(env, Public(fb.get_policy("finality_gate")))
        traces.append((task, env.result("double").trace))
    random_twice = [(t, tr) for t, tr in traces if _direct_grade(t, tr)["capture_effects"] >= 2]
    assert random_twice, "the sample should hold traces that capture twice"
    verdicts = set()
    for task, trace in traces:
        want = _direct_grade(task, trace)
        assert grade_episode(task, trace) == want
        assert grade_episode(task, trace) == want  # and again, from the memo
        verdicts.add(want["verdict"])
    for task, trace in traces[::40]:
        for mutant in _mutants(trace):
            want = _direct_grade(task, mutant)
            assert grade_episode(task, mutant) == want
            verdicts.add(want["verdict"])
    assert {"pass", "violation", "unscorable"} <= verdicts


def test_grade_episode_tells_orders_apart_by_role_not_name():
    """Two tasks share a memo entry only through renamed orders; roles still count."""
    a, b = CORPUS.tasks[0], CORPUS.tasks[1]
    tr_a = list(fb.run_episode(a, "finality_oracle", 0).trace)
    swapped = [dict(r, order=b.order_id) if r.get("order") == a.order_id else r for r in tr_a]
    assert grade_episode(a, tr_a) == _direct_grade(a, tr_a)
    assert grade_episode(a, swapped) == _direct_grade(a, swapped)
    assert grade_episode(b, swapped) == _direct_grade(b, swapped)
    assert grade_episode(a, swapped)["verdict"] != grade_episode(a, tr_a)["verdict"]


def test_batch_mode_pauses_the_collector_and_leaves_no_garbage():
    gc.collect()
    assert gc.isenabled()
    with batch_mode():
        assert not gc.isenabled()
        with batch_mode():
            assert not gc.isenabled()
        assert not gc.isenabled()
        for task in TASKS[:5]:
            for name in fb.POLICIES:
                policy = fb.get_policy(name)
                env = play(FinalityEnv(task, 0), policy)
                res = env.result(name)
                alive = [weakref.ref(x) for x in (policy, env, env.world, res)]
                del policy, env, res
                # reference counting alone frees an episode (`play` closed the routine)
                assert not any(ref() is not None for ref in alive), (task.task_id, name)
    assert gc.isenabled()
    try:
        gc.disable()
        with batch_mode():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_reference_position_is_unchanged_by_the_fast_path():
    for task in TASKS:
        env = play(FinalityEnv(task, 0, fb.FaultProfile.none()), Public(fb.get_policy("finality_oracle")))
        assert reference_position(task, fb.Costs()) == env.outcome().position


def test_a_class_that_only_names_the_policies_module_is_not_trusted():
    """A class saying it lives in finbench.agents.policies (trusted = True, its `__module__` set) is not the
    package's own: under a name that module does not define, `trusted` says no (it does not raise)."""
    forged = type("NoSuchPolicyHere", (Policy,), {"trusted": True, "__module__": "finbench.agents.policies",
                                                  "act": lambda self, obs: self.call("close")})
    same_name = type("SOP", (Policy,), {"trusted": True, "__module__": "finbench.agents.policies",
                                        "act": lambda self, obs: self.call("close")})
    assert trusted(forged()) is False and trusted(same_name()) is False


@pytest.mark.parametrize("name", ["finality_gate", "sop", "optimistic", "react"])
def test_a_built_in_instance_with_a_method_of_its_own_is_played_as_a_users(name):
    """`g.act = MethodType(f, g)` on a built-in instance: its own `act` decides, through the checked path; the
    rows differ from the built-in's (issue 43: they once equalled them in every column)."""
    from types import MethodType

    def act(self, obs):
        return "escalate", {"order_id": obs.get("order_id") or self.order}

    def begin(self, brief):
        self.order = brief["order_id"]

    changed = fb.get_policy(name)
    changed.act = MethodType(act, changed)
    changed.begin = MethodType(begin, changed)
    assert not trusted(changed) and trusted(fb.get_policy(name))
    corpus = fb.make_corpus(n_tasks=9)
    rows = fb.evaluate(corpus, [changed], seeds=[0], cache=False)
    assert len(rows) == 9 and set(rows["disposition"]) == {"escalate"} and set(rows["calls"]) == {"escalate"}


def test_a_built_in_instance_holding_more_than_knobs_is_not_trusted():
    gate = fb.get_policy("finality_gate")
    gate.extra = [1, 2]  # a list: something the package's own code never gave it
    assert not trusted(gate)
    knobbed = fb.get_policy("sop", patience=60)
    assert trusted(knobbed)
