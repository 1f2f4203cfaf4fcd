"""Rule-level tests of every policy (SPEC §7), on hand-made tasks.

Each test builds a task to order (`make_task`, then `dataclasses.replace` for the
resolution fields `make_task` does not take: `retry_outcome`, `retry_delay`,
`processor_lag`), plays one policy, and checks the sequence of calls, the
disposition and its timing against what SPEC §7's rule for that policy says.
Expected values are derived from the rules and from SPEC §1-§5 (latencies,
tool ticks, the bank batch, the economics), not from a recorded run. Sweeps
under faults check that every decision a policy takes is one its rule allows,
given what the observation in front of it showed.

Only the public surface (`import finbench as fb`) is used, plus the name under
which the `reconciler` registers itself.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections import Counter, namedtuple

import pytest

import finbench as fb

NONE = fb.FaultProfile.none()
DEFAULT = fb.FaultProfile.default()
HANDOVER, SHIP_BY = fb.HANDOVER, fb.SHIP_BY
EPS = 0.005

# SPEC §4: the twelve tools and their ticks
READS = ("read_processor", "read_ledger", "read_erp", "read_bank")
TWELVE = {*READS, "probe_processor", "wait", "retry_capture", "ship", "refund", "write_off", "escalate", "close"}
READ_T, PROBE_T = 1, 5
# SPEC §2: delivery latencies; the bank posts at the next 60-tick boundary strictly after the event
LAT = {"processor": 2, "ledger": 5, "erp": 15}


def bank_line_at(t: int) -> int:
    return (t // 60 + 1) * 60


ARCHETYPES = ("settled_clean", "lost_settlement", "stale_processor", "pending_settle", "pending_fail",
              "unresolvable", "duplicate_settlement", "partial_ledger", "late_chargeback")


# --- building tasks and reading episodes ---------------------------------------------------

def mk(archetype: str, seed: int = 0, **kw) -> fb.Task:
    """`make_task` plus the resolution fields it does not take."""
    extra = {k: kw.pop(k) for k in ("retry_outcome", "retry_delay", "processor_lag", "duplicate_gap") if k in kw}
    task = fb.make_task(archetype, seed=seed, **kw)
    return dataclasses.replace(task, **extra) if extra else task


def run(task, policy, seed: int = 0, profile=NONE, probe=None):
    kw = {} if probe is None else {"probe": probe}
    return fb.run_episode(task, policy, seed, profile=profile, **kw)


Call = namedtuple("Call", "issued t tool args obs")  # t: the tick the call took effect (observed at)


def calls(res) -> list[Call]:
    out = []
    for issued, tool, args, obs in res.actions:
        out.append(Call(issued, obs["t"], tool, {k: v for k, v in args.items() if k != "order_id"}, obs))
    return out


def tools(res) -> list[str]:
    return [c.tool for c in calls(res)]


def result(c: Call) -> dict:
    return c.obs.get("result") or {}


def status(c: Call, cap: str = "cap-1"):
    """The status a processor read or probe shows for a capture (None if it does not list it)."""
    return next((x.get("status") for x in result(c).get("captures") or [] if x["id"] == cap), None)


def shows_settled(c: Call) -> bool:
    return any(x.get("status") == "settled" for x in result(c).get("captures") or [])


def fresh_retries(cs: list[Call]) -> list[int]:
    """Indices of retry_capture calls under a key never used before (key-1 is the original's)."""
    used, out = {"key-1"}, []
    for i, c in enumerate(cs):
        if c.tool == "retry_capture":
            if c.args["idempotency_key"] not in used:
                out.append(i)
            used.add(c.args["idempotency_key"])
    return out


def irreversible(cs: list[Call]) -> list[int]:
    """SPEC §7: ship, refund, write_off, or a fresh-key retry_capture."""
    fresh = set(fresh_retries(cs))
    return [i for i, c in enumerate(cs) if c.tool in ("ship", "refund", "write_off") or i in fresh]


def nonempty(xs, what: str = ""):
    xs = list(xs)
    assert xs, f"empty selection: {what}"
    return xs


def every(selection, pred, what: str = "") -> bool:
    """all(pred) over a selection that must not be empty (a vacuous 'all' proves nothing)."""
    return all(pred(x) for x in nonempty(selection, what))


def none_of(selection, pred, what: str = "") -> bool:
    """not any(pred) over a selection that must not be empty."""
    return not any(pred(x) for x in nonempty(selection, what))


def waits_of(cs) -> list[int]:
    return [c.args["ticks"] for c in cs if c.tool == "wait"]


def poll_times(first_obs: int, period: int, n: int) -> list[int]:
    return [first_obs + period * k for k in range(n)]


def position_if_shipped_with_one_settlement(v: float) -> float:
    """SPEC §5 with default costs: cash v, cogs 0.6 v, no liability, no fee."""
    return round(v - 0.6 * v, 6)


def reconciler():
    """The reconciler registers itself when its module is imported (not one of SPEC's nine)."""
    try:
        fb.get_policy("reconciler")
    except fb.PolicyError:
        importlib.import_module("finbench.agents.reconciler")
    return "reconciler"


# Tasks whose original capture settles before SHIP_BY, with its determination time
SETTLING = [("settled_clean", 60), ("pending_settle", 300), ("pending_settle", 560), ("stale_processor", 300),
            ("lost_settlement", 300), ("duplicate_settlement", 300), ("partial_ledger", 300),
            ("late_chargeback", 300)]


def sweep_tasks():
    """Every archetype, a few draws each, plus failed replacements, for the fault sweeps."""
    out = [mk(a, seed=s) for a in ARCHETYPES for s in range(3)]
    out += [mk("pending_fail", seed=s, retry_outcome="failed") for s in range(2)]
    out += [mk("unresolvable", seed=s, outcome="failed", determined_at=700, retry_outcome="failed") for s in range(2)]
    return out


SWEEP_PROFILES = (DEFAULT, fb.FaultProfile.only("stale_read"), fb.FaultProfile.only("loss", "delay"))


def sweep(policy, seeds=range(3), profiles=SWEEP_PROFILES, probe=None):
    for task in sweep_tasks():
        for profile in profiles:
            for seed in seeds:
                yield task, run(task, policy, seed, profile, probe)


# =============================================================================================
# finality_gate: probes; settled -> ship; a probe-confirmed failure -> one fresh-key retry, then
# gates on the new capture; otherwise wait (default 25) and probe again; never a fresh key without
# a confirmed failure, never an irreversible action before a terminal probe; escalates when the
# deadline arrives undetermined.
# =============================================================================================

@pytest.mark.parametrize("archetype,d", SETTLING)
def test_gate_ships_at_the_first_probe_that_shows_the_settlement(archetype, d):
    task = mk(archetype, determined_at=d)
    res = run(task, "finality_gate")
    cs = calls(res)
    assert cs[0].tool == "probe_processor" and cs[0].t == HANDOVER + PROBE_T
    assert cs[-1].tool == "ship" and res.disposition == "ship"
    assert set(tools(res)[:-1]) <= {"probe_processor", "wait"}
    # probe, wait 25, probe, ...: one wait of the default 25 ticks between consecutive probes
    assert tools(res)[:-1] == ["probe_processor", "wait"] * (len(cs) // 2 - 1) + ["probe_processor"]
    probes = [c for c in cs if c.tool == "probe_processor"]
    assert [p.t for p in probes] == poll_times(HANDOVER + PROBE_T, 25 + PROBE_T, len(probes))
    # the probe is authoritative: unknown strictly before d, settled from d on; ship right after
    assert cs[-2] is probes[-1] and probes[-1].t >= d and status(probes[-1]) == "settled"
    if d <= HANDOVER + PROBE_T:  # determined before the first probe: probe, ship
        assert tools(res) == ["probe_processor", "ship"]
    else:
        assert every(waits_of(cs), lambda w: w == 25, "waits")
        assert every(probes[:-1], lambda p: p.t < d and status(p) == "unknown", "probes before d")
    assert res.end_t == probes[-1].t + 1 <= max(d, HANDOVER + PROBE_T) + 25 + PROBE_T + 1
    assert not res.premature_irreversible and fresh_retries(cs) == []
    # the probe is immune to every delivery fault and read lag: the same calls under faults
    for seed in range(3):
        faulty = run(task, "finality_gate", seed, DEFAULT)
        assert [(c.issued, c.tool, c.args) for c in calls(faulty)] == [(c.issued, c.tool, c.args) for c in cs]


def _gate_failure_then_replacement(retry_outcome: str):
    d, delay = 200, 60
    task = mk("pending_fail", determined_at=d, retry_outcome=retry_outcome, retry_delay=delay)
    res = run(task, "finality_gate")
    cs = calls(res)
    i_fail = next(i for i, c in enumerate(cs) if c.tool == "probe_processor" and status(c) == "failed")
    # nothing irreversible, and no retry at all, before the probe that confirms the failure
    assert set(c.tool for c in cs[:i_fail]) <= {"probe_processor", "wait"}
    assert cs[i_fail].t >= d
    assert every([c for c in cs[:i_fail] if c.tool == "probe_processor"], lambda c: status(c) == "unknown")
    # one retry, at once, under a fresh key (not key-1), creating a new capture
    retry = cs[i_fail + 1]
    assert retry.tool == "retry_capture" and retry.args["idempotency_key"] != "key-1"
    assert result(retry)["new_capture"] is True and result(retry)["receipt"] != "cap-1"
    assert [c.tool for c in cs].count("retry_capture") == 1 and fresh_retries(cs) == [i_fail + 1]
    new = result(retry)["receipt"]
    after = cs[i_fail + 2:]
    # it then gates on the new capture: only probes and waits until the new capture's probe is terminal
    assert set(c.tool for c in after[:-1]) <= {"probe_processor", "wait"}
    last_probe = after[-2]
    assert last_probe.tool == "probe_processor" and status(last_probe, new) == retry_outcome
    assert last_probe.t >= retry.t + delay  # the replacement resolves retry_delay after its submission
    assert every([c for c in after[:-2] if c.tool == "probe_processor"], lambda c: status(c, new) in (None, "unknown"))
    return task, res, after[-1]


def test_gate_retries_once_under_a_fresh_key_after_a_confirmed_failure_and_ships_on_the_new_capture():
    task, res, last = _gate_failure_then_replacement("settled")
    assert last.tool == "ship" and res.disposition == "ship"
    assert res.position == pytest.approx(position_if_shipped_with_one_settlement(task.order_value))
    assert res.gap == pytest.approx(0.0) and not res.premature_irreversible


def test_gate_writes_off_when_the_replacement_fails_too():
    task, res, last = _gate_failure_then_replacement("failed")
    assert last.tool == "write_off" and res.disposition == "write_off"
    assert res.position == pytest.approx(0.0)  # nothing settled, nothing shipped (SPEC §5)


@pytest.mark.parametrize("task", [
    mk("unresolvable", outcome="settled", determined_at=700),
    mk("unresolvable", outcome="failed", determined_at=1500),
], ids=["unresolvable-settles", "unresolvable-fails"])
def test_gate_escalates_at_the_deadline_when_undetermined(task):
    res = run(task, "finality_gate")
    cs = calls(res)
    assert cs[-1].tool == "escalate" and res.disposition == "escalate"
    assert set(tools(res)[:-1]) <= {"probe_processor", "wait"}
    assert every([c for c in cs if c.tool == "probe_processor"], lambda c: status(c) == "unknown")
    # at the deadline: no room left for another wait of 25, a probe and the decision
    assert SHIP_BY - (25 + PROBE_T + 1) < res.end_t <= SHIP_BY
    assert not res.premature_irreversible


def test_gate_escalates_when_the_replacement_is_still_undetermined_at_the_deadline():
    d, delay = 560, 120  # the failure is confirmed late; the replacement resolves after SHIP_BY
    res = run(mk("pending_fail", determined_at=d, retry_outcome="settled", retry_delay=delay), "finality_gate")
    cs = calls(res)
    assert len(fresh_retries(cs)) == 1
    retry = cs[fresh_retries(cs)[0]]
    assert retry.t + delay > SHIP_BY
    assert cs[-1].tool == "escalate" and SHIP_BY - (25 + PROBE_T + 1) < res.end_t <= SHIP_BY
    assert not {"ship", "write_off", "refund"} & set(tools(res))


def test_gate_twins_are_played_alike_until_determination():
    settle = mk("unresolvable", outcome="settled", determined_at=900)
    fail = dataclasses.replace(settle, outcome="failed")
    a, b = run(settle, "finality_gate", 1, DEFAULT), run(fail, "finality_gate", 1, DEFAULT)
    assert [(c.issued, c.tool, c.args) for c in calls(a)] == [(c.issued, c.tool, c.args) for c in calls(b)]


def test_gate_rules_hold_under_faults():
    """Never an irreversible action before a terminal probe that justifies it; never a fresh key
    without a probe-confirmed failure; at most one fresh key; never a refund, read or close."""
    n_retry = n_ship = n_writeoff = n_escalate = 0
    for task, res in sweep("finality_gate"):
        cs = calls(res)
        assert set(tools(res)) <= {"probe_processor", "wait", "retry_capture", "ship", "write_off", "escalate"}
        fresh = fresh_retries(cs)
        assert len(fresh) <= 1 and [c.tool for c in cs].count("retry_capture") == len(fresh)
        track = "cap-1"
        for i in irreversible(cs):
            probes = [c for c in cs[:i] if c.tool == "probe_processor"]
            assert probes, (task.task_id, "irreversible before any probe")
            last = probes[-1]
            if cs[i].tool == "ship":
                assert shows_settled(last), task.task_id
                n_ship += 1
            elif cs[i].tool == "retry_capture":
                assert status(last, "cap-1") == "failed" and not shows_settled(last), task.task_id
                track = result(cs[i])["receipt"]
                n_retry += 1
            else:
                assert cs[i].tool == "write_off" and track != "cap-1", task.task_id
                assert status(last, track) == "failed", task.task_id
                n_writeoff += 1
        if task.outcome == "failed" and task.determined_at <= SHIP_BY - PROBE_T - 1:
            assert len(fresh) == 1, task.task_id  # a confirmed failure is always retried once
        if res.disposition == "escalate":
            n_escalate += 1
            last = [c for c in cs if c.tool == "probe_processor"][-1]
            assert status(last, track) == "unknown" and res.end_t <= SHIP_BY
        assert not res.premature_irreversible
    assert n_retry and n_ship and n_writeoff and n_escalate


# =============================================================================================
# sop: polls the processor every poll_interval (default 60) ticks: settled -> ship, failed ->
# write off; after patience (default 180) ticks with neither, reads the bank: a credit line ->
# ship, else the fallback (SPEC: refund; knob fallback="refund" refunds without reading the bank).
# =============================================================================================

def sop_expected(first_terminal_obs: int | None, poll: int = 60, patience: int = 180):
    """(number of processor reads, whether the patience fallback is reached) under the SPEC rule:
    reads observed at HANDOVER+1, then every poll + 1 ticks; it acts on the first read at or after
    `first_terminal_obs`, or falls back at the first read observed `patience` ticks after hand-over."""
    k = 0
    while True:
        t = HANDOVER + READ_T + (poll + READ_T) * k
        if first_terminal_obs is not None and t >= first_terminal_obs:
            return k + 1, False
        if t - HANDOVER >= patience:
            return k + 1, True
        k += 1


def test_sop_ships_when_the_processor_shows_settled():
    d = 200
    res = run(mk("pending_settle", determined_at=d), "sop")
    n, fallback = sop_expected(d + LAT["processor"])
    assert not fallback
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "ship"]
    assert every(waits_of(calls(res)), lambda w: w == 60)
    assert status(calls(res)[-2]) == "settled"


def test_sop_writes_off_when_the_processor_shows_failed():
    d = 200
    res = run(mk("pending_fail", determined_at=d), "sop")
    n, fallback = sop_expected(d + LAT["processor"])
    assert not fallback
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "write_off"]
    assert status(calls(res)[-2]) == "failed" and "retry_capture" not in tools(res)


@pytest.mark.parametrize("task,credit", [
    # the processor replica lags 400 ticks: it is still pending at the patience limit; the bank
    # line posted at 180 is there -> ship
    (mk("stale_processor", determined_at=150, processor_lag=400), True),
    # the processor never sees the settlement; the bank line posts at 240 -> ship
    (mk("lost_settlement", determined_at=200), True),
    # settles at 300: its bank line posts at 360, after the fallback read -> refund
    (mk("lost_settlement", determined_at=300), False),
    # nothing is determined by SHIP_BY -> refund
    (mk("unresolvable", determined_at=700), False),
], ids=["stale-credit", "lost-credit", "lost-no-credit-yet", "unresolvable"])
def test_sop_after_patience_reads_the_bank_credit_ships_else_refunds(task, credit):
    res = run(task, "sop")
    n, fallback = sop_expected(None)
    assert fallback and n == 4  # reads observed at 121, 182, 243, 304: the first >= 120 + 180
    cs = calls(res)
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "read_bank",
                                                                  "ship" if credit else "refund"]
    assert cs[-3].t - HANDOVER >= 180 > cs[-5].t - HANDOVER
    credits = [ln for ln in result(cs[-2])["lines"] if ln["type"] == "credit"]
    assert bool(credits) == credit
    assert (bank_line_at(task.determined_at) <= cs[-2].t) == credit


def test_sop_fallback_refund_knob_refunds_without_reading_the_bank():
    task = mk("stale_processor", determined_at=150, processor_lag=400)
    res = run(task, fb.get_policy("sop", fallback="refund"))
    n, _ = sop_expected(None)
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "refund"]


@pytest.mark.parametrize("poll,patience", [(15, 60), (45, 100), (30, 0)])
def test_sop_knobs_set_the_poll_interval_and_the_patience(poll, patience):
    res = run(mk("unresolvable", determined_at=700), fb.get_policy("sop", poll_interval=poll, patience=patience))
    n, fallback = sop_expected(None, poll, patience)
    assert fallback
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "read_bank", "refund"]
    if n > 1:
        assert every(waits_of(calls(res)), lambda w: w == poll)
    reads = [c.t for c in calls(res) if c.tool == "read_processor"]
    assert reads == poll_times(HANDOVER + READ_T, poll + READ_T, n)


def test_sop_rules_hold_under_faults():
    """Every decision follows the last read it made: processor settled -> ship, failed -> write
    off, patience reached -> bank credit -> ship, else refund; nothing else, and no bank read early."""
    seen, waits = Counter(), []
    for task, res in sweep("sop"):
        cs = calls(res)
        assert set(tools(res)) <= {"read_processor", "wait", "read_bank", "ship", "write_off", "refund"}
        waits += waits_of(cs)
        last = cs[-1]
        proc = [c for c in cs if c.tool == "read_processor"]
        if "read_bank" in tools(res):
            assert tools(res).count("read_bank") == 1 and cs[-2].tool == "read_bank"
            assert cs[-3].t - HANDOVER >= 180 and every(proc[:-1], lambda c: c.t - HANDOVER < 180)
            assert not shows_settled(cs[-3]) and status(cs[-3]) != "failed"
            credit = bool([ln for ln in result(cs[-2])["lines"] if ln["type"] == "credit"])
            assert last.tool == ("ship" if credit else "refund")
            seen["bank-" + last.tool] += 1
        else:
            assert cs[-2] is proc[-1]
            assert last.tool == ("ship" if shows_settled(cs[-2]) else "write_off")
            assert shows_settled(cs[-2]) or status(cs[-2]) == "failed"
            seen[last.tool] += 1
        for c in proc[:-1]:  # every earlier read showed neither
            assert not shows_settled(c) and status(c) != "failed"
    assert set(seen) == {"ship", "write_off", "bank-ship", "bank-refund"}, seen
    assert every(waits, lambda w: w == 60, "sop waits")


# =============================================================================================
# majority_vote: each round reads all four systems and turns each into a verdict; a double
# posting (ledger or bank) -> refund; >= 3 of 4 settled -> ship; >= 3 failed -> write off;
# otherwise wait and repeat; escalate at the deadline.
# =============================================================================================

def mv_round_rule(reads: dict, value: float):
    """SPEC §7's reading of one round: (the decision, the verdicts); None when a verdict is ambiguous."""
    proc, led, erp, bank = (reads[s] for s in ("processor", "ledger", "erp", "bank"))
    caps = proc.get("captures") or []
    v = {}
    v["processor"] = ("settled" if any(c["status"] == "settled" for c in caps)
                      else "failed" if caps and caps[-1]["status"] == "failed" else "pending")
    cash = led["balances"]["cash"]
    v["ledger"] = ("settled" if cash >= value - EPS
                   else "failed" if any("fail" in ln["memo"] for ln in led["lines"]) else "pending")
    if erp["status"] == "charged_back":
        return None, v
    v["erp"] = {"paid": "settled", "payment_failed": "failed"}.get(erp["status"], "pending")
    credits = sum(ln["amount"] for ln in bank["lines"] if ln["type"] == "credit")
    v["bank"] = "settled" if credits >= value - EPS else "pending"
    double = cash > value + EPS or credits > value + EPS
    votes = Counter(v.values())
    if double:
        return "refund", v
    if votes["settled"] >= 3:
        return "ship", v
    if votes["failed"] >= 3:
        return "write_off", v
    return "wait", v


def mv_rounds(res):
    """[(reads by system, end tick of the round, the call after it)] for each round of four reads."""
    cs = calls(res)
    out = []
    i = 0
    while i < len(cs):
        if cs[i].tool in READS:
            block = cs[i:i + 4]
            assert sorted(c.tool for c in block) == sorted(READS), [c.tool for c in block]
            nxt = cs[i + 4] if i + 4 < len(cs) else None
            out.append(({c.tool[5:]: result(c) for c in block}, block[-1].t, nxt))
            i += 4
        else:
            assert cs[i].tool == "wait" or i == len(cs) - 1, cs[i].tool
            i += 1
    return out


def test_majority_vote_ships_when_all_four_agree_at_handover():
    res = run(mk("settled_clean", determined_at=60), "majority_vote")
    assert sorted(tools(res)[:4]) == sorted(READS) and tools(res)[4:] == ["ship"]
    assert res.end_t == HANDOVER + 4 * READ_T + 1


def test_majority_vote_ships_on_three_of_four_with_the_processor_lagging():
    d = 150  # the processor replica lags 400 ticks; ledger (155), ERP (165) and bank (180) show it
    task = mk("stale_processor", determined_at=d, processor_lag=400)
    res = run(task, "majority_vote")
    rounds = mv_rounds(res)
    assert res.disposition == "ship"
    reads, end, nxt = rounds[-1]
    assert nxt.tool == "ship" and none_of(reads["processor"]["captures"], lambda c: c["status"] == "settled")
    assert end >= bank_line_at(d)  # the bank is the last of the three to show it
    assert every(rounds[:-1], lambda r: r[1] < bank_line_at(d), "earlier rounds")


def test_majority_vote_refunds_a_double_posting():
    d = 200
    task = mk("duplicate_settlement", determined_at=d)
    res = run(task, "majority_vote")
    assert res.disposition == "refund" and "ship" not in tools(res)
    reads, _, nxt = mv_rounds(res)[-1]
    assert nxt.tool == "refund"
    credits = [ln for ln in reads["bank"]["lines"] if ln["type"] == "credit"]
    assert reads["ledger"]["balances"]["cash"] > task.order_value + EPS or len(credits) >= 2


def test_majority_vote_writes_off_on_three_failures_and_never_retries():
    d = 200
    task = mk("pending_fail", determined_at=d)
    res = run(task, "majority_vote")
    assert res.disposition == "write_off" and "retry_capture" not in tools(res)
    rounds = mv_rounds(res)
    decision, v = mv_round_rule(rounds[-1][0], task.order_value)
    assert Counter(v.values())["failed"] >= 3
    # the bank never shows a failure: three failures need processor, ledger and ERP (d + 15)
    assert rounds[-1][1] >= d + LAT["erp"]


def test_majority_vote_escalates_at_the_deadline_without_a_majority():
    # the settlement never reaches processor and ERP: at most 2 of 4 ever say settled
    for task in (mk("lost_settlement", determined_at=250), mk("unresolvable", determined_at=700)):
        res = run(task, "majority_vote")
        assert res.disposition == "escalate" and set(tools(res)[:-1]) <= {*READS, "wait"}
        # another wait of 75, four reads and the decision would not fit before SHIP_BY
        assert SHIP_BY - (75 + 4 * READ_T + 1) < res.end_t <= SHIP_BY, task.task_id
        assert every(waits_of(calls(res)), lambda w: w == 75)


def test_majority_vote_follows_its_rule_every_round_under_faults():
    """After every round, the call is the one SPEC's rule gives for what the round read;
    including a double posting that only the ledger, or only the bank, shows."""
    seen = Counter()
    tasks = sweep_tasks() + [mk("settled_clean", seed=s) for s in range(12)]
    profiles = SWEEP_PROFILES + (fb.FaultProfile.only("duplicate"),)
    for task in tasks:
        for profile in profiles:
            for seed in range(4):
                res = run(task, "majority_vote", seed, profile)
                for reads, end, nxt in mv_rounds(res):
                    decision, v = mv_round_rule(reads, task.order_value)
                    if decision is None:
                        continue
                    if decision == "wait":
                        assert nxt.tool in ("wait", "escalate"), (task.task_id, seed, nxt.tool)
                        if nxt.tool == "escalate":
                            assert end > SHIP_BY - (75 + 4 * READ_T + 1)
                    else:
                        assert nxt.tool == decision, (task.task_id, profile.name, seed, v, nxt.tool)
                    seen[decision] += 1
                    if decision == "refund":
                        v_ = task.order_value + EPS
                        cash = reads["ledger"]["balances"]["cash"]
                        credits = sum(ln["amount"] for ln in reads["bank"]["lines"] if ln["type"] == "credit")
                        seen["ledger-only double"] += cash > v_ and credits <= v_
                        seen["bank-only double"] += credits > v_ and cash <= v_
    for what in ("refund", "ship", "write_off", "wait", "ledger-only double", "bank-only double"):
        assert seen[what] > 0, (what, seen)


# =============================================================================================
# optimistic: polls the ledger and ships as soon as it shows the clearing entry posted at
# submission; closes at the deadline if it never does.
# =============================================================================================

def clearing_entry(c: Call) -> bool:
    """The clearing entry of the submission: the one positive line on the clearing account."""
    return any(ln["account"] == "clearing" and ln["amount"] > 0 for ln in result(c).get("lines") or [])


@pytest.mark.parametrize("archetype", ARCHETYPES)
def test_optimistic_ships_at_once_because_the_submission_posted_at_15(archetype):
    # the capture is submitted at 10 and reaches the ledger at 15: at hand-over it is there,
    # whatever becomes of the payment
    res = run(mk(archetype), "optimistic")
    assert tools(res) == ["read_ledger", "ship"] and res.end_t == HANDOVER + READ_T + 1
    assert clearing_entry(calls(res)[0])


def test_optimistic_closes_at_the_deadline_when_the_ledger_never_shows_it():
    everything_lost = fb.FaultProfile.only("loss", intensity=1.0)
    res = run(mk("pending_settle", determined_at=300), "optimistic", 0, everything_lost)
    cs = calls(res)
    assert res.disposition == "close" and "ship" not in tools(res)
    assert set(tools(res)[:-1]) <= {"read_ledger", "wait"} and none_of(cs[:-1], clearing_entry)
    assert every(waits_of(cs), lambda w: w == 30)
    assert SHIP_BY - (30 + READ_T + 1) < res.end_t <= SHIP_BY


def test_optimistic_ships_right_after_the_first_read_showing_the_entry_under_faults():
    seen = Counter()
    for task, res in sweep("optimistic"):
        cs = calls(res)
        for i, c in enumerate(cs):
            if c.tool == "read_ledger":
                expect = "ship" if clearing_entry(c) else ("wait", "close")
                assert cs[i + 1].tool in expect, (task.task_id, i)
                seen[cs[i + 1].tool] += 1
        assert set(tools(res)) <= {"read_ledger", "wait", "ship", "close"}
    assert seen["ship"] and seen["wait"]


# =============================================================================================
# eager: reads the processor once and commits to what it read: settled -> ship, else write off.
# =============================================================================================

@pytest.mark.parametrize("archetype,d,expect", [
    ("settled_clean", 60, "ship"),  # the processor shows it from 62
    ("pending_settle", 130, "write_off"),
    ("pending_fail", 130, "write_off"),
    ("stale_processor", 130, "write_off"),
    ("unresolvable", 700, "write_off"),
])
def test_eager_reads_once_and_commits(archetype, d, expect):
    res = run(mk(archetype, determined_at=d), "eager")
    assert tools(res) == ["read_processor", expect] and res.end_t == HANDOVER + READ_T + 1


def test_eager_commits_to_its_one_read_under_faults():
    seen = Counter()
    for task, res in sweep("eager"):
        cs = calls(res)
        assert [c.tool for c in cs[:1]] == ["read_processor"] and len(cs) == 2
        assert cs[1].tool == ("ship" if shows_settled(cs[0]) else "write_off")
        seen[cs[1].tool] += 1
    assert seen["ship"] and seen["write_off"]


# =============================================================================================
# react: observe-decide over the processor's status: settled -> ship; failed -> one fresh-key
# retry, then observes the new capture; otherwise wait (default 30) and observe again; refunds
# when the deadline arrives with nothing settled.
# reflection: react, but before anything irreversible it waits 10 ticks and re-reads, acting only
# if the second read agrees.
# =============================================================================================

def test_react_ships_on_the_first_read_showing_settled():
    d = 200
    res = run(mk("pending_settle", determined_at=d), "react")
    n = next(k for k in range(20) if HANDOVER + READ_T + 31 * k >= d + LAT["processor"]) + 1
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "ship"]
    assert every(waits_of(calls(res)), lambda w: w == 30)


@pytest.mark.parametrize("retry_outcome", ["settled", "failed"])
def test_react_retries_once_under_a_fresh_key_after_a_failure(retry_outcome):
    d, delay = 200, 60
    task = mk("pending_fail", determined_at=d, retry_outcome=retry_outcome, retry_delay=delay)
    res = run(task, "react")
    cs = calls(res)
    i_fail = next(i for i, c in enumerate(cs) if c.tool == "read_processor" and status(c) == "failed")
    assert set(tools(res)[:i_fail]) <= {"read_processor", "wait"}
    retry = cs[i_fail + 1]
    assert retry.tool == "retry_capture" and retry.args["idempotency_key"] != "key-1"
    assert result(retry)["new_capture"] is True
    assert fresh_retries(cs) == [i_fail + 1] and tools(res).count("retry_capture") == 1
    new = result(retry)["receipt"]
    assert cs[-2].tool == "read_processor" and status(cs[-2], new) == retry_outcome
    assert cs[-2].t >= retry.t + delay + LAT["processor"]
    if retry_outcome == "settled":
        assert cs[-1].tool == "ship"
        assert res.position == pytest.approx(position_if_shipped_with_one_settlement(task.order_value))
    else:
        # no second fresh key; nothing settled: it refunds (nothing to return)
        assert cs[-1].tool == "refund" and res.position == pytest.approx(0.0)


def test_react_refunds_at_the_deadline_with_nothing_settled():
    res = run(mk("unresolvable", determined_at=700), "react")
    cs = calls(res)
    assert cs[-1].tool == "refund" and set(tools(res)[:-1]) <= {"read_processor", "wait"}
    assert none_of(cs[:-1], shows_settled)
    assert SHIP_BY - (30 + READ_T + 1) < res.end_t <= SHIP_BY
    assert every(waits_of(cs), lambda w: w <= 30)


def test_react_rules_hold_under_faults():
    seen = Counter()
    for task, res in sweep("react"):
        cs = calls(res)
        assert set(tools(res)) <= {"read_processor", "wait", "retry_capture", "ship", "refund"}
        fresh = fresh_retries(cs)
        assert len(fresh) <= 1 and tools(res).count("retry_capture") == len(fresh)
        for i in fresh:  # a fresh key only right after a read showing the original failed
            assert cs[i - 1].tool == "read_processor" and status(cs[i - 1]) == "failed", task.task_id
            assert not shows_settled(cs[i - 1])
            seen["retry"] += 1
        if res.disposition == "ship":
            assert cs[-2].tool == "read_processor" and shows_settled(cs[-2]), task.task_id
        else:
            assert res.disposition == "refund" and not shows_settled(cs[-2]), task.task_id
        seen[res.disposition] += 1
        for c in cs[:-2]:  # it ships at the first read that shows a settlement
            if c.tool == "read_processor":
                assert not shows_settled(c), task.task_id
    assert seen["retry"] and seen["ship"] and seen["refund"]


def test_reflection_reads_twice_ten_ticks_apart_before_shipping():
    d = 200
    res = run(mk("pending_settle", determined_at=d), "reflection")
    cs = calls(res)
    n = next(k for k in range(20) if HANDOVER + READ_T + 31 * k >= d + LAT["processor"]) + 1
    assert tools(res) == ["read_processor", "wait"] * (n - 1) + ["read_processor", "wait", "read_processor", "ship"]
    first, pause, second = cs[-4], cs[-3], cs[-2]
    assert pause.args["ticks"] == 10 and second.t == first.t + 10 + READ_T
    assert shows_settled(first) and shows_settled(second)


def test_reflection_confirms_the_failure_before_the_retry_and_the_settlement_before_the_ship():
    res = run(mk("pending_fail", determined_at=200, retry_outcome="settled", retry_delay=60), "reflection")
    cs = calls(res)
    (i,) = fresh_retries(cs)
    assert [c.tool for c in cs[i - 3:i]] == ["read_processor", "wait", "read_processor"]
    assert cs[i - 2].args["ticks"] == 10 and status(cs[i - 3]) == status(cs[i - 1]) == "failed"
    new = result(cs[i])["receipt"]
    assert tools(res)[-4:] == ["read_processor", "wait", "read_processor", "ship"]
    assert cs[-3].args["ticks"] == 10 and status(cs[-4], new) == status(cs[-2], new) == "settled"


def test_reflection_re_reads_before_the_deadline_refund():
    res = run(mk("unresolvable", determined_at=700), "reflection")
    cs = calls(res)
    assert tools(res)[-4:] == ["read_processor", "wait", "read_processor", "refund"]
    assert cs[-3].args["ticks"] == 10 and res.end_t <= SHIP_BY
    assert not shows_settled(cs[-4]) and not shows_settled(cs[-2])


def _verdict(c: Call, track: str) -> str:
    if shows_settled(c):
        return "settled"
    return "failed" if status(c, track) == "failed" else "pending"


def _reflection_episodes():
    profiles = (DEFAULT, fb.FaultProfile.only("stale_read"))
    tasks = [mk(a, seed=s) for a in ("pending_settle", "stale_processor", "pending_fail", "late_chargeback",
                                      "partial_ledger") for s in range(8)]
    for task in tasks:
        for profile in profiles:
            for seed in range(4):
                yield task, seed, profile, calls(run(task, "reflection", seed, profile))


def test_reflection_acts_only_when_the_second_read_agrees():
    """Away from the deadline: every irreversible action is preceded by read, wait 10, read, and
    both reads show what justifies it; a second read that disagrees is not acted on."""
    agreed = disagreed = 0
    for task, seed, profile, cs in _reflection_episodes():
        track = "cap-1"
        for i in irreversible(cs):
            act = cs[i]
            if act.issued > SHIP_BY - 40 or act.obs["calls_left"] < 6:
                continue  # the deadline corner: see the xfail test below
            first, pause, second = cs[i - 3], cs[i - 2], cs[i - 1]
            assert (first.tool, pause.tool, second.tool) == ("read_processor", "wait", "read_processor")
            assert pause.args["ticks"] == 10
            want = {"ship": "settled", "retry_capture": "failed"}.get(act.tool)
            assert want is not None, (task.task_id, act.tool, act.issued)  # refund only at the deadline
            assert _verdict(first, track) == _verdict(second, track) == want, (task.task_id, seed, i)
            agreed += 1
            if act.tool == "retry_capture":
                track = result(act)["receipt"]
        # a terminal first look whose re-read disagrees is not acted on
        for j in range(len(cs) - 3):
            a, w, b = cs[j:j + 3]
            if (a.tool, w.tool, b.tool) == ("read_processor", "wait", "read_processor") and w.args["ticks"] == 10:
                va, vb = _verdict(a, "cap-1"), _verdict(b, "cap-1")
                if va == "settled" and vb != va and b.t < SHIP_BY - 40:
                    disagreed += 1
                    assert cs[j + 3].tool != "ship", (task.task_id, seed, profile.name, j)
    assert agreed and disagreed


@pytest.mark.xfail(strict=True, reason=(
    "SPEC deviation (deadline corner): SPEC §7 says reflection acts 'only if the second read agrees'. "
    "At the deadline, when the two reads disagree, the implementation acts on the second read alone: "
    "first read pending, second settled -> ship (an irreversible action without a confirming re-read); "
    "first read settled, second stale and pending -> refund although a read showed the settlement. "
    "SPEC gives no deadline exception; whether one is intended is for the SPEC owner to say."))
def test_reflection_never_acts_on_disagreeing_reads_even_at_the_deadline():
    corner = 0
    for task, seed, profile, cs in _reflection_episodes():
        for i in irreversible(cs):
            if cs[i].tool not in ("ship", "refund") or i < 3:
                continue
            first, pause, second = cs[i - 3], cs[i - 2], cs[i - 1]
            if (first.tool, pause.tool, second.tool) != ("read_processor", "wait", "read_processor"):
                continue
            corner += 1
            assert shows_settled(first) == shows_settled(second), (task.task_id, seed, profile.name, cs[i].issued)
    assert corner


# =============================================================================================
# finality_oracle: told how and when the pending capture resolves (outcome, determined_at,
# retry_outcome, nothing else): ships at once if it will settle, re-submits at once and ships if
# it fails recoverably, writes off if it fails for good.
# =============================================================================================

@pytest.mark.parametrize("task,plan", [
    (mk("pending_settle", determined_at=300), ["ship"]),
    (mk("unresolvable", outcome="settled", determined_at=1400), ["ship"]),  # settles long after SHIP_BY
    (mk("late_chargeback", determined_at=200), ["ship"]),  # it is not told the chargeback
    (mk("pending_fail", determined_at=300, retry_outcome="settled"), ["retry_capture", "ship"]),
    (mk("unresolvable", outcome="failed", determined_at=700, retry_outcome="settled"), ["retry_capture", "ship"]),
    (mk("unresolvable", outcome="failed", determined_at=700, retry_outcome="failed"), ["write_off"]),
    (mk("pending_fail", determined_at=300, retry_outcome="failed"), ["write_off"]),
], ids=["settles", "settles-after-ship-by", "chargeback", "recoverable", "unresolvable-recoverable",
        "lost-for-good", "pending-fail-lost"])
def test_oracle_plans_from_the_resolution_at_once(task, plan):
    res = run(task, "finality_oracle")
    cs = calls(res)
    assert tools(res) == plan
    assert cs[0].issued == HANDOVER and res.end_t == HANDOVER + len(plan)  # at once
    if plan[0] == "retry_capture":
        assert cs[0].args["idempotency_key"] != "key-1" and result(cs[0])["new_capture"] is True
    v = task.order_value
    expected = {"ship": position_if_shipped_with_one_settlement(v), "write_off": 0.0}[plan[-1]]
    if task.archetype == "late_chargeback":
        expected = round(-0.6 * v - 25.0, 6)  # the chargeback reverses the cash; fee charged (SPEC §5)
    assert res.position == pytest.approx(expected)
    assert res.reference_position == pytest.approx(res.position) and res.gap == pytest.approx(0.0)


class _Spy:
    """Records what `begin` is given (the brief, and anything else, however passed); then closes."""

    def __init__(self, privileged: bool):
        self.privileged = privileged
        self.got = None

    def begin(self, brief, *args, **kwargs):
        self.got = (dict(brief), list(args) + list(kwargs.values()))

    def act(self, obs):
        return "close", {"order_id": self.got[0]["order_id"]}


def test_only_a_privileged_policy_is_told_the_resolution_and_nothing_else():
    task = mk("late_chargeback", determined_at=250)
    priv, plain = _Spy(True), _Spy(False)
    fb.run_episode(task, priv, 0, profile=NONE)
    fb.run_episode(task, plain, 0, profile=NONE)
    brief, rest = priv.got
    assert len(rest) == 1
    assert rest[0] == {"outcome": task.outcome, "determined_at": task.determined_at,
                       "retry_outcome": task.retry_outcome}  # not the chargeback
    brief, rest = plain.got
    assert rest == [] or rest == [None]
    hidden = {"outcome", "determined_at", "retry_outcome", "archetype", "chargeback_at", "cogs_rate",
              "dispute_fee", "escalation_cost"}
    assert not hidden & set(brief), brief  # costs never reach an unprivileged policy (SPEC §8)


# =============================================================================================
# random: each step a uniformly random tool (waits of 1-120 ticks; key-1 or a fresh key), from a
# stream keyed by (unit, seed).
# =============================================================================================

def _random_calls(task, seed, profile=NONE):
    return [(c.tool, c.args) for c in calls(run(task, "random", seed, profile))]


def test_random_uses_only_the_twelve_tools_uniformly():
    counts, waits, keys = Counter(), [], Counter()
    for ai, a in enumerate(ARCHETYPES):
        for seed in range(40):
            # a distinct unit (order id) per episode: the stream is keyed by (unit, seed)
            cs = calls(run(mk(a, seed=100 * ai + seed), "random", seed))
            for i, c in enumerate(cs):
                counts[c.tool] += 1
                if c.tool == "wait":
                    waits.append(c.args["ticks"])
                if c.tool == "retry_capture":
                    key = c.args["idempotency_key"]
                    if key == "key-1":
                        keys["key-1"] += 1
                        assert result(c)["new_capture"] is False
                    else:
                        assert i in fresh_retries(cs)  # never a key used before
                        keys["fresh"] += 1
    assert set(counts) == TWELVE
    n = sum(counts.values())
    sd = (n * (1 / 12) * (11 / 12)) ** 0.5
    for tool, k in counts.items():
        assert abs(k - n / 12) < 5 * sd, (tool, k, n)
    assert nonempty(waits, "random waits") and min(waits) >= 1 and max(waits) <= 120
    assert len(set(waits)) > 30  # spread over the range, not one value
    assert keys["key-1"] and keys["fresh"]


def test_random_is_deterministic_per_unit_and_seed():
    task = mk("unresolvable", seed=4, outcome="settled", determined_at=900)
    twin = dataclasses.replace(task, outcome="failed", task_id=task.task_id + ":fail")  # same unit
    by_seed = {seed: _random_calls(task, seed) for seed in range(8)}
    for seed, seq in by_seed.items():
        assert _random_calls(task, seed) == seq
        assert _random_calls(twin, seed) == seq  # its stream is keyed by the unit, not the task
        assert _random_calls(task, seed, DEFAULT) == seq  # and not by what it observes
    assert len({repr(s) for s in by_seed.values()}) >= 6  # the seed changes the stream
    other_unit = mk("unresolvable", seed=5, outcome="settled", determined_at=900)
    assert other_unit.order_id != task.order_id
    differ = sum(_random_calls(other_unit, s) != by_seed[s] for s in by_seed)
    assert differ >= 6


# =============================================================================================
# reconciler (registered, not among SPEC's nine; rules from its docstring): ships once two systems
# show the settlement; retries under a fresh key only once two systems confirm the failure;
# writes off when a replacement's failure is confirmed the same way; at the deadline one settlement
# signal with nothing against it is enough to ship; anything else is escalated. With the probe it
# uses the probe first; an unavailable probe makes it stop probing. A duplicate is one payment
# delivered twice: never a refund.
# =============================================================================================

NO_PROBE = fb.ProbeMode.none()


def rc_rounds(cs: list[Call]):
    """[(index of the call after the round, reads by system)] for each round of four reads."""
    out, i = [], 0
    while i < len(cs):
        if cs[i].tool in READS:
            block = cs[i:i + 4]
            assert [c.tool for c in block] == list(READS), [c.tool for c in block]
            out.append((i + 4, {c.tool[5:]: result(c) for c in block}))
            i += 4
        else:
            i += 1
    return out


def rc_signals(reads: dict, track: str, original: bool) -> tuple[set, set]:
    """Which systems show a settlement, and which the tracked capture's failure (the docstring's list)."""
    settled, failed = set(), set()
    caps = reads["processor"].get("captures") or []
    if any(c["status"] == "settled" for c in caps):
        settled.add("processor")
    if any(c["id"] == track and c["status"] == "failed" for c in caps):
        failed.add("processor")
    lines = reads["ledger"].get("lines") or []
    if any(ln["account"] == "cash" and ln["amount"] > 0 for ln in lines):
        settled.add("ledger")
    if any(ln["capture"] == track and "fail" in ln["memo"] for ln in lines):
        failed.add("ledger")
    if reads["erp"].get("status") in ("paid", "charged_back"):
        settled.add("erp")
    if original and reads["erp"].get("status") == "payment_failed":
        failed.add("erp")
    if any(ln["type"] == "credit" for ln in reads["bank"].get("lines") or []):
        settled.add("bank")
    return settled, failed


@pytest.mark.parametrize("archetype,d", [("pending_settle", 300), ("stale_processor", 300), ("lost_settlement", 300)])
def test_reconciler_with_the_probe_ships_on_the_probe_and_reads_nothing_while_it_is_pending(archetype, d):
    res = run(mk(archetype, determined_at=d), reconciler())
    cs = calls(res)
    assert set(tools(res)) == {"probe_processor", "wait", "ship"}
    assert cs[-2].tool == "probe_processor" and status(cs[-2]) == "settled"
    assert every([c for c in cs[:-2] if c.tool == "probe_processor"], lambda c: status(c) == "unknown")


@pytest.mark.parametrize("retry_outcome,last", [("settled", "ship"), ("failed", "write_off")])
def test_reconciler_with_the_probe_retries_once_then_gates_on_the_replacement(retry_outcome, last):
    res = run(mk("pending_fail", determined_at=200, retry_outcome=retry_outcome, retry_delay=60), reconciler())
    cs = calls(res)
    (i,) = fresh_retries(cs)
    assert cs[i - 1].tool == "probe_processor" and status(cs[i - 1]) == "failed"
    assert cs[i].args["idempotency_key"] != "key-1" and tools(res).count("retry_capture") == 1
    new = result(cs[i])["receipt"]
    assert cs[-1].tool == last and cs[-2].tool == "probe_processor" and status(cs[-2], new) == retry_outcome


def test_reconciler_with_the_probe_escalates_at_the_deadline_when_undetermined():
    res = run(mk("unresolvable", determined_at=700), reconciler())
    assert res.disposition == "escalate" and SHIP_BY - 80 < res.end_t <= SHIP_BY
    assert not irreversible(calls(res))


@pytest.mark.parametrize("archetype,d", [("settled_clean", 60), ("duplicate_settlement", 250),
                                         ("partial_ledger", 250), ("lost_settlement", 250),
                                         ("stale_processor", 250), ("late_chargeback", 250)])
def test_reconciler_without_the_probe_ships_once_two_systems_show_the_settlement(archetype, d):
    extra = {"stale_processor": {"processor_lag": 400}, "duplicate_settlement": {"duplicate_gap": 1}}
    task = mk(archetype, determined_at=d, **extra.get(archetype, {}))
    res = run(task, reconciler(), probe=NO_PROBE)
    cs = calls(res)
    assert tools(res).count("probe_processor") == 1 and cs[0].tool == "probe_processor"  # stops probing
    assert res.disposition == "ship" and "refund" not in tools(res)  # a duplicate is never refunded
    rounds = rc_rounds(cs)
    nxt, reads = rounds[-1]
    assert nxt == len(cs) - 1
    if archetype == "duplicate_settlement":  # the round it ships on shows the settlement twice
        assert reads["ledger"]["balances"]["cash"] > task.order_value + EPS
    assert len(rc_signals(reads, "cap-1", True)[0]) >= 2
    for _, earlier in rounds[:-1]:
        assert len(rc_signals(earlier, "cap-1", True)[0]) < 2  # and not before


@pytest.mark.parametrize("retry_outcome,last", [("settled", "ship"), ("failed", "write_off")])
def test_reconciler_without_the_probe_retries_only_on_two_confirmed_failures(retry_outcome, last):
    res = run(mk("pending_fail", determined_at=250, retry_outcome=retry_outcome, retry_delay=60), reconciler(),
              probe=NO_PROBE)
    cs = calls(res)
    (i,) = fresh_retries(cs)
    rounds = rc_rounds(cs)
    before = [r for n, r in rounds if n <= i]
    settled, failed = rc_signals(before[-1], "cap-1", True)
    assert len(failed) >= 2 and not settled and cs[i].args["idempotency_key"] != "key-1"
    for r in before[:-1]:
        assert len(rc_signals(r, "cap-1", True)[1]) < 2
    new = result(cs[i])["receipt"]
    assert cs[-1].tool == last
    settled, failed = rc_signals(rounds[-1][1], new, False)
    if last == "ship":
        assert len(settled) >= 2
    else:
        assert len(failed) >= 2 and not settled


def test_reconciler_without_the_probe_escalates_at_the_deadline_on_no_evidence():
    res = run(mk("unresolvable", determined_at=700), reconciler(), probe=NO_PROBE)
    assert res.disposition == "escalate" and SHIP_BY - 80 < res.end_t <= SHIP_BY
    assert not irreversible(calls(res))


def test_reconciler_ships_on_a_single_uncontradicted_signal_only_at_the_deadline():
    """Loss faults leave one system showing the settlement: not enough before the deadline,
    enough at it (replicas lag, they do not invent money)."""
    at_deadline = early = 0
    for seed in range(40):
        res = run(mk("lost_settlement", determined_at=300), reconciler(), seed, fb.FaultProfile.only("loss"),
                  NO_PROBE)
        cs = calls(res)
        assert "refund" not in tools(res) and not fresh_retries(cs)
        for nxt, reads in rc_rounds(cs):
            settled, failed = rc_signals(reads, "cap-1", True)
            if len(settled) == 1 and not failed:
                if cs[nxt - 1].t < SHIP_BY - 80:
                    early += 1
                    assert cs[nxt].tool == "wait", (seed, cs[nxt].tool)
                elif cs[nxt].tool != "wait":
                    at_deadline += 1
                    assert cs[nxt].tool == "ship", (seed, cs[nxt].tool)
    assert early and at_deadline


def test_reconciler_rules_hold_under_faults_without_the_probe():
    seen = Counter()
    for task, res in sweep(reconciler(), seeds=range(2), probe=NO_PROBE):
        cs = calls(res)
        assert "refund" not in tools(res) and "close" not in tools(res)
        fresh = fresh_retries(cs)
        assert len(fresh) <= 1
        for nxt, reads in rc_rounds(cs):
            if nxt in fresh:
                settled, failed = rc_signals(reads, "cap-1", True)
                assert len(failed) >= 2 and not settled, task.task_id
                seen["retry"] += 1
            if nxt < len(cs) and cs[nxt].tool == "ship":
                track = result(cs[fresh[0]])["receipt"] if fresh else "cap-1"
                settled, _ = rc_signals(reads, track, not fresh)
                assert settled, task.task_id  # never ships without a settlement signal
                seen["ship"] += 1
        seen[res.disposition] += 1
    assert seen["retry"] and seen["ship"] and seen["escalate"]
