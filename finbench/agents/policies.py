"""The nine policies: one interface, `begin(brief)` then `act(observation) -> (tool, args)` (SPEC §7).

Hand-written policies are written as routines: a generator that yields calls
and receives each call's observation, so a decision procedure reads top to
bottom. Only `finality_oracle` is privileged.
"""
from __future__ import annotations

from finbench.errors import PolicyError, check_choice, check_int
from finbench.sim import constants as C
from finbench.sim.reference import oracle_plan
from finbench.sim.rng import generator
from finbench.sim.play import fast_path
from finbench.sim.tools import TOOL_NAMES


class Policy:
    """Base class. Subclasses see observations only; `privileged` ones also get the resolution."""

    name = "policy"
    privileged = False
    # the package's own classes that take the fast path are declared so (`@fast_path`, `sim.play.trusted`):
    # they never mutate an observation and make only well-formed calls on the case order
    # whether the policy ignores the brief's `seed` (the only part of a brief that moves with it): opt-in,
    # each built-in that does says so; with `trusted`, the runner derives a truth-only episode's other
    # seeds instead of playing them (`running.derivation`), so a class that reads the seed must not say it
    ignores_seed = False

    def begin(self, brief: dict, resolution: dict | None = None) -> None:
        self.brief = brief
        self.order = brief["order_id"]
        self.value = brief["order_value"]

    def call(self, tool: str, **args) -> tuple[str, dict]:
        return tool, {"order_id": self.order, **args}


def knob(policy: str, name: str, value: object, lo: int, hi: int) -> int:
    """A policy's integer knob in [lo, hi], or a `PolicyError` naming the policy and knob
    (a label such as "finality_gate[wait=abc]" fails here, before any episode)."""
    try:
        return check_int(policy, name, value, lo, hi)
    except ValueError as e:
        raise PolicyError(str(e)) from None


class Routine(Policy):
    """A policy written as a generator of calls; it receives each observation."""

    def begin(self, brief, resolution=None):
        super().begin(brief, resolution)
        self.now = brief["t"]
        self.calls_left = brief["calls_left"]
        self._gen = self.run()
        self._started = False

    def act(self, obs):
        # the first act receives the brief (play: obs = brief), every later one an open case's
        # observation: each carries t and calls_left
        self.now = obs["t"]
        self.calls_left = obs["calls_left"]
        try:
            if not self._started:
                self._started = True
                return next(self._gen)
            return self._gen.send(obs)
        except StopIteration:
            return self.call("close")

    def drive(self, call) -> None:
        """Play the routine through `call(tool, args) -> observation` until the case ends: what
        `play` does with `act` (see `act`), without a call of `act` per step (the fast path)."""
        gen = self._gen
        send = gen.send
        try:
            tool, args = next(gen)
            while True:
                obs = call(tool, args)
                if obs["done"]:
                    return
                self.now, self.calls_left = obs["t"], obs["calls_left"]
                tool, args = send(obs)
        except StopIteration:
            call(*self.call("close"))  # as `act` answers once the routine has ended: close ends the case

    def run(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Stop the routine once its case is over (`env.play` calls this for the
        built-in policies): the suspended generator and this policy form a
        reference cycle that only the garbage collector would otherwise free."""
        gen = getattr(self, "_gen", None)
        if gen is not None:
            gen.close()

    # helpers shared by the polling policies
    def wait(self, ticks: int):
        # `self.call("wait", ticks=...)` spelled out: the commonest call of all
        return "wait", {"order_id": self.order, "ticks": max(1, min(int(ticks), C.MAX_WAIT))}


# --- status readers: what an observation says about the money --------------------

def processor_verdict(obs: dict, track: str | None = None) -> str:
    """'settled' if any capture shows settled, 'failed' if the tracked (default: latest) capture
    shows failed, else 'pending'."""
    caps = (obs.get("result") or {}).get("captures") or []
    last = None  # the last capture tracked
    for c in caps:
        if c["status"] == "settled":
            return "settled"
        if track is None or c["id"] == track:
            last = c
    return "failed" if last is not None and last["status"] == "failed" else "pending"


def probe_verdict(obs: dict, track: str) -> str:
    caps = (obs.get("result") or {}).get("captures") or []
    if any(c.get("status") == "settled" for c in caps):  # an identity-only probe has no status
        return "settled"
    if any(c["id"] == track and c.get("status") == "failed" for c in caps):
        return "failed"
    return "unknown"


# --- 1. random ------------------------------------------------------------------------

@fast_path
class RandomPolicy(Policy):
    """Each step a uniformly random tool; stream keyed by (unit, seed)."""

    name = "random"
    ignores_seed = False  # its stream is keyed by the seed

    def begin(self, brief, resolution=None):
        super().begin(brief, resolution)
        self.rng = generator("random-policy", brief["order_id"], brief["seed"])  # every brief carries its seed
        self.fresh = 1

    def act(self, obs):
        tool = TOOL_NAMES[int(self.rng.integers(len(TOOL_NAMES)))]
        if tool == "wait":
            return self.call("wait", ticks=int(self.rng.integers(1, 121)))
        if tool == "retry_capture":
            if self.rng.random() < 0.5:
                return self.call("retry_capture", idempotency_key=C.ORIGINAL_KEY)
            self.fresh += 1
            return self.call("retry_capture", idempotency_key=f"key-{self.fresh}")
        return self.call(tool)


# --- 2. optimistic ---------------------------------------------------------------------

@fast_path
class Optimistic(Routine):
    """Ships as soon as the ledger shows the clearing entry posted at submission."""

    ignores_seed = True  # reads nothing of the brief's seed
    name = "optimistic"

    def __init__(self, poll_interval: int = 30):
        self.poll_interval = knob(self.name, "poll_interval", poll_interval, 1, C.MAX_WAIT)

    def run(self):
        while True:
            obs = yield self.call("read_ledger")
            lines = (obs.get("result") or {}).get("lines") or []
            if any(ln["account"] == "clearing" and ln["memo"] == "capture submitted" for ln in lines):
                yield self.call("ship")
                return
            if self.now + self.poll_interval + 2 > C.SHIP_BY or self.calls_left <= 2:
                yield self.call("close")
                return
            yield self.wait(self.poll_interval)


# --- 3. eager ---------------------------------------------------------------------------

@fast_path
class Eager(Routine):
    """Reads the processor once and commits to what it read."""

    ignores_seed = True  # reads nothing of the brief's seed
    name = "eager"

    def run(self):
        obs = yield self.call("read_processor")
        yield self.call("ship" if processor_verdict(obs) == "settled" else "write_off")


# --- 4. majority vote -------------------------------------------------------------------

def system_verdicts(reads: dict[str, dict], value: float) -> tuple[dict[str, str], bool]:
    """Each system's verdict (settled / failed / pending) and whether ledger or bank shows a double posting."""
    v = {"processor": processor_verdict({"result": reads["processor"]})}
    led = reads["ledger"]
    cash = led["balances"]["cash"]
    failed_lines = any(ln["memo"].startswith("capture failed") for ln in led["lines"])
    v["ledger"] = "settled" if led["balances"]["cash"] >= value - C.MONEY_TOL else ("failed" if failed_lines else "pending")
    erp = reads["erp"]["status"]
    v["erp"] = {"paid": "settled", "payment_failed": "failed", "charged_back": "failed"}.get(erp, "pending")
    bank = reads["bank"]
    credits = sum(ln["amount"] for ln in bank["lines"] if ln["type"] == "credit")
    v["bank"] = "settled" if credits >= value - C.MONEY_TOL else "pending"
    double = cash > value + C.MONEY_TOL or credits > value + C.MONEY_TOL
    return v, double


@fast_path
class MajorityVote(Routine):
    """Reads all four systems each round and follows a 3-of-4 majority."""

    ignores_seed = True  # reads nothing of the brief's seed
    name = "majority_vote"

    def __init__(self, wait: int = 75):
        self.wait_ticks = knob(self.name, "wait", wait, 1, C.MAX_WAIT)

    def run(self):
        while True:
            reads = {}
            for system in C.SYSTEMS:
                obs = yield self.call(f"read_{system}")
                reads[system] = obs.get("result")
            verdicts, double = system_verdicts(reads, self.value)
            votes = list(verdicts.values())
            if double:
                yield self.call("refund")  # it believes the customer was charged twice
                return
            if votes.count("settled") >= 3:
                yield self.call("ship")
                return
            if votes.count("failed") >= 3:
                yield self.call("write_off")
                return
            # another round costs a wait and four reads, then one call to act
            if self.now + self.wait_ticks + 5 > C.SHIP_BY or self.calls_left < 6:
                yield self.call("escalate")
                return
            yield self.wait(self.wait_ticks)


# --- 5. SOP -----------------------------------------------------------------------------

@fast_path
class SOP(Routine):
    """A rule-based procedure: poll the processor; after `patience`, fall back.

    The paper never says what the procedure does when its patience runs out;
    SPEC says it reads the bank (`fallback="bank"`: a credit line -> ship, else
    refund). `fallback="refund"` refunds without reading anything, so the
    ablation can show which conclusions depend on that unstated choice.
    """

    ignores_seed = True  # reads nothing of the brief's seed
    name = "sop"
    FALLBACKS = ("bank", "refund")

    # the default poll (60 ticks) is not the fastest the tuning grid holds: the paper's tuned knobs "poll more
    # often" than the default, which a default at the grid's 30 could not show (docs/DESIGN.md, §7)
    def __init__(self, poll_interval: int = 60, patience: int = 180, fallback: str = "bank"):
        self.poll_interval = knob("sop", "poll_interval", poll_interval, 1, C.MAX_WAIT)
        self.patience = knob("sop", "patience", patience, 0, C.HORIZON)
        try:
            self.fallback = check_choice("sop", "fallback", fallback, self.FALLBACKS)
        except ValueError as e:
            raise PolicyError(str(e)) from None

    def run(self):
        start = self.now
        while True:
            obs = yield self.call("read_processor")
            verdict = processor_verdict(obs)
            if verdict == "settled":
                yield self.call("ship")
                return
            if verdict == "failed":
                yield self.call("write_off")
                return
            out_of_time = self.now + self.poll_interval + 3 > C.SHIP_BY or self.calls_left <= 3
            if self.now - start >= self.patience or out_of_time:
                if self.fallback == "refund":
                    yield self.call("refund")
                    return
                bank = yield self.call("read_bank")
                lines = (bank.get("result") or {}).get("lines") or []
                yield self.call("ship" if any(ln["type"] == "credit" for ln in lines) else "refund")
                return
            yield self.wait(self.poll_interval)


# --- 6/7. ReAct and reflection ------------------------------------------------------------

@fast_path
class ReAct(Routine):
    """Observe-decide over the processor's status, with one fresh-key retry on failure."""

    ignores_seed = True  # reads nothing of the brief's seed
    name = "react"
    pause = 0  # reflection re-reads after this many ticks before anything irreversible

    def __init__(self, wait: int = 30):
        self.wait_ticks = knob(self.name, "wait", wait, 1, C.MAX_WAIT)

    def observe(self, track):
        obs = yield self.call("read_processor")
        return processor_verdict(obs, track)

    def confirmed(self, verdict, track):
        """Reflection's second look; ReAct acts on the first."""
        if not self.pause:
            return verdict
        yield self.wait(self.pause)
        return (yield from self.observe(track))  # the second look decides: it agrees, or it is what it acts on

    def run(self):
        track, retried = C.ORIGINAL_CAPTURE, False
        to_act = self.pause + 2 if self.pause else 1  # ticks from a decision to its act landing (second look, act)
        # where a wait aims: the read after it lands with to_act ticks left (reflection aims one tick
        # earlier than it must, as in every published run)
        slack = 1 + to_act + (1 if self.pause else 0)
        final = 1 + (2 if self.pause else 0)  # calls the last decision needs
        while True:
            if self.calls_left < 1 + final:  # no budget left to observe and then decide
                yield self.call("refund")
                return
            verdict = yield from self.observe(track)
            # out of time or out of calls for another cycle: a wait (1 tick at least), a read, then the act
            deadline = self.now + 2 + to_act > C.SHIP_BY or self.calls_left < 2 + final
            if verdict == "pending" and not deadline:
                yield self.wait(min(self.wait_ticks, max(1, C.SHIP_BY - slack - self.now)))
                continue
            decision = yield from self.confirmed(verdict, track)
            if decision == "settled" and self.now < C.SHIP_BY:
                yield self.call("ship")
                return
            if decision == "failed" and not retried and self.calls_left >= 2 + final:
                obs = yield self.call("retry_capture", idempotency_key="key-2")
                track, retried = obs["result"]["receipt"], True  # a retry on the case order always answers with one
                continue
            if decision == "pending" and not (self.now + 2 + to_act > C.SHIP_BY or self.calls_left < 2 + final):
                continue  # the second look disagreed and there is room: keep observing
            yield self.call("refund")
            return


@fast_path
class Reflection(ReAct):
    """ReAct that waits and re-reads before anything irreversible (a stale replica agrees)."""

    name = "reflection"

    def __init__(self, wait: int = 30, pause: int = 10):
        super().__init__(wait)
        self.pause = knob(self.name, "pause", pause, 0, C.MAX_WAIT)


# --- 8. the finality gate -------------------------------------------------------------------

@fast_path
class FinalityGate(Routine):
    """Gates every irreversible action on a terminal status from the authoritative probe."""

    ignores_seed = True  # reads nothing of the brief's seed
    name = "finality_gate"

    def __init__(self, wait: int = 25):
        self.wait_ticks = knob(self.name, "wait", wait, 1, C.MAX_WAIT)

    def run(self):
        track, retried = C.ORIGINAL_CAPTURE, False
        probe_ticks = self.brief["tool_ticks"]["probe_processor"]  # every brief says what a probe costs
        while True:
            obs = yield self.call("probe_processor")
            verdict = probe_verdict(obs, track)
            if verdict == "settled":
                yield self.call("ship")
                return
            if verdict == "failed":
                if retried:  # the replacement failed too: the payment is lost
                    yield self.call("write_off")
                    return
                obs = yield self.call("retry_capture", idempotency_key="key-2")
                track, retried = obs["result"]["receipt"], True  # a retry on the case order always answers with one
                continue
            if self.now + probe_ticks + 2 > C.SHIP_BY or self.calls_left < 3:
                yield self.call("escalate")
                return
            if "unavailable" in obs["result"]:
                # no probe in this arm (or its rate limit is spent): nothing it trusts will
                # come, so it waits out the deadline and escalates, as it does when undecided.
                # The check above left it now <= SHIP_BY - probe_ticks - 2 and three calls: a wait
                # to SHIP_BY - 1 (two ticks or more) and the escalation always fit
                yield self.wait(C.SHIP_BY - 1 - self.now)
                yield self.call("escalate")
                return
            yield self.wait(min(self.wait_ticks, C.SHIP_BY - probe_ticks - 1 - self.now))


# --- 9. the privileged reference --------------------------------------------------------

@fast_path
class FinalityOracle(Policy):
    """The privileged reference: told how and when the pending capture resolves.

    It plays `finbench.sim.reference.oracle_plan`, the rule the environment prices
    every episode against: ships at once if it will settle; if it fails but a
    replacement would settle, submits the replacement at once and ships; if it
    fails for good, writes off.
    """

    ignores_seed = True  # reads nothing of the brief's seed
    name = "finality_oracle"
    privileged = True

    def begin(self, brief, resolution=None):
        super().begin(brief)
        if resolution is None:
            raise ValueError("finality_oracle is privileged: run it through run_episode/play")
        self.plan = oracle_plan(resolution)

    def act(self, obs):
        tool, args = self.plan.pop(0) if self.plan else ("close", {})
        return self.call(tool, **args)


POLICIES = {
    p.name: p for p in (RandomPolicy, Optimistic, Eager, MajorityVote, SOP, ReAct, Reflection,
                        FinalityGate, FinalityOracle)
}
"""Name -> policy class (a factory: `POLICIES[name](**knobs)`)."""

UNGATED = ("random", "optimistic", "eager", "majority_vote", "sop", "react", "reflection")
