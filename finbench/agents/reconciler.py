"""`reconciler`: the tenth, unprivileged policy, that reasons across the four replicas (issue 12).

It trusts no single system. Every round it reads the processor, the ledger,
the ERP and the bank and weighs what they say about the tracked capture:

- settlement evidence: a settled capture at the processor, a settlement
  (cash) posting in the ledger, `paid` at the ERP, a credit line at the bank.
  A duplicate is recognised by comparing ledger or bank against the processor:
  cash or credits above the order value beside one settled capture are one
  payment delivered twice, not a second charge, so it never refunds for them.
  A partial commit is recognised from inside the ledger (the books out of
  balance with the cash leg written): the settlement happened, only its
  clearing leg is missing. Both are recognised (`evidence`) and change no
  decision (`decide`): each is one system's settlement evidence, never two.
- failure evidence for the tracked capture: `failed` at the processor, a
  reversal line for that capture in the ledger, `payment_failed` at the ERP
  (only while the original capture is tracked: the ERP keeps one record per order).
- a system that lags the others past its own latency (plus the bank's batch)
  is taken as a lost or delayed delivery, never as evidence against them.

It ships once two systems show the settlement, retries under a fresh key only
once two systems confirm the failure, and writes off when a replacement's
failure is confirmed the same way. At the deadline a single settlement signal
with nothing against it is enough to ship (replicas lag, they do not invent
money); anything else -- no terminal evidence, or evidence that still
conflicts -- is escalated. With the probe it uses the probe first: a terminal
answer decides; an unavailable or status-less answer makes it stop probing.
It is registered with `register_policy`, not among SPEC's nine.
"""
from __future__ import annotations

from finbench.sim import constants as C
from finbench.agents.policies import Routine, knob
from finbench.agents.registry import register_policy

EPS = C.MONEY_TOL  # what counts as money seen (the engine's half-cent)


def evidence(reads: dict[str, dict], value: float, track: str, original: bool) -> dict:
    """What the four reads say: counts of systems showing settlement and the tracked capture's
    failure, and the two anomalies (duplicate delivery, partial commit) recognised on the way."""
    proc, led, erp, bank = (reads.get(s) or {} for s in C.SYSTEMS)
    caps = proc.get("captures") or []
    settled, failed = set(), set()
    if any(c.get("status") == "settled" for c in caps):
        settled.add("processor")
    if any(c.get("id") == track and c.get("status") == "failed" for c in caps):
        failed.add("processor")
    lines = led.get("lines") or []
    cash_in = sum(ln["amount"] for ln in lines if ln.get("memo") == "settlement" and ln.get("account") == "cash")
    if cash_in > EPS:
        settled.add("ledger")
    if any(ln.get("capture") == track and str(ln.get("memo", "")).startswith("capture failed") for ln in lines):
        failed.add("ledger")
    status = erp.get("status")
    if status in ("paid", "charged_back"):
        settled.add("erp")
    if original and status == "payment_failed":
        failed.add("erp")
    credits = sum(ln["amount"] for ln in bank.get("lines") or [] if ln.get("type") == "credit")
    if credits > EPS:
        settled.add("bank")
    n_proc_settled = sum(c.get("status") == "settled" for c in caps)
    duplicate = (cash_in > value + EPS or credits > value + EPS) and n_proc_settled <= 1
    partial = bool(lines) and led.get("balanced") is False and cash_in > EPS
    return {"settled": settled, "failed": failed, "duplicate": duplicate, "partial": partial}


def decide(ev: dict, confirm: int, at_deadline: bool, original: bool) -> str:
    """"settled", "failed" or "pending" from the four reads' `evidence`. A partial commit or a duplicate
    delivery changes nothing here: the ledger's cash leg is already one system's settlement evidence (a
    partial commit is one system, never two), and the reconciler never refunds, so a payment delivered twice
    cannot mislead it into a refund. Two systems confirm; at the deadline one settlement signal with nothing
    against it will do; a replacement capture settles on a tie."""
    s, f = len(ev["settled"]), len(ev["failed"])
    if s >= confirm or (at_deadline and s >= 1 and f == 0) or (s >= 1 and s >= f and f >= 1 and not original):
        return "settled"
    if f >= confirm and s == 0:
        return "failed"
    return "pending"


class Reconciler(Routine):
    """Reconciles the four replicas; uses the probe when it has one, and does not need it.

    Args:
        wait: ticks between rounds of reads (shortened so that the budget lasts to the deadline).
        confirm: systems that must agree before it ships or retries (2).
    """

    name = "reconciler"

    def __init__(self, wait: int = 45, confirm: int = 2):
        self.wait_ticks = knob(self.name, "wait", wait, 1, C.MAX_WAIT)
        self.confirm = knob(self.name, "confirm", confirm, 1, len(C.SYSTEMS))

    def run(self):
        track, original, retried = C.ORIGINAL_CAPTURE, True, False
        probing = True
        reserve = 2  # calls kept for the final decision
        while True:
            probed = None
            if probing:
                obs = yield self.call("probe_processor")
                res = obs.get("result") or {}
                caps = res.get("captures") or []
                if "unavailable" in res or any("status" not in c for c in caps):
                    probing = False  # no probe, its limit spent, or it tells identity only
                else:
                    probed = _probe_status(caps, track)
                    fresh = "as_of" not in res
                    if probed is None and fresh:
                        probed = "pending"
            if probed in ("settled", "failed"):
                verdict = probed
            elif probed == "pending":
                verdict = "pending"  # the fresh probe says nothing is decided: no replica can know more
            else:
                reads = {}
                for system in C.SYSTEMS:
                    obs = yield self.call(f"read_{system}")
                    reads[system] = obs.get("result") or {}
                verdict = decide(evidence(reads, self.value, track, original), self.confirm,
                                 self._last_round(probing), original)
            if verdict == "settled":
                yield self.call("ship" if self.now + 1 <= C.SHIP_BY else "escalate")
                return
            if verdict == "failed":
                if retried:
                    yield self.call("write_off")
                    return
                if self.now + 1 + 60 > C.SHIP_BY or self.calls_left < reserve + 6:
                    yield self.call("escalate")  # too late for a replacement to settle and be seen
                    return
                obs = yield self.call("retry_capture", idempotency_key="key-2")
                track = (obs.get("result") or {}).get("receipt", "cap-2")
                original, retried = False, True
                continue
            if self._last_round(probing):
                yield self.call("escalate")  # nothing terminal, or evidence still conflicts
                return
            yield self.wait(self._next_wait(probing))

    def _round_calls(self, probing: bool) -> int:
        return 4 + (1 if probing else 0)

    def _last_round(self, probing: bool) -> bool:
        """Whether another wait and round of reads would miss the deadline or the budget."""
        need = self._round_calls(probing) + 1  # a wait, then the round
        ticks = self._round_calls(probing) + 5 + 2  # reads (+ a probe's extra ticks), then the decision
        return self.now + 1 + ticks > C.SHIP_BY or self.calls_left < need + 2

    def _next_wait(self, probing: bool) -> int:
        per = self._round_calls(probing) + 1
        rounds = max(1, (self.calls_left - 2) // per)
        room = C.SHIP_BY - 1 - (self._round_calls(probing) + 5 + 2) - self.now
        return max(1, min(C.MAX_WAIT, room, max(self.wait_ticks, room // rounds)))


def _probe_status(caps: list, track: str) -> str | None:
    if any(c.get("status") == "settled" for c in caps):
        return "settled"
    if any(c.get("id") == track and c.get("status") == "failed" for c in caps):
        return "failed"
    return None


register_policy("reconciler", Reconciler, replace=True)
