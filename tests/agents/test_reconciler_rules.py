"""Rules of the reconciler (finbench.agents.reconciler), checked on hand-made reads and observations:
what each system's read counts as (`evidence`), the decision each round takes from those counts, the
probe's part, the retry and its replacement, and the pacing of rounds against the deadline (600) and
the 40-call budget. Expected values are worked out by hand from the module's docstrings."""
from __future__ import annotations

import pytest

from finbench.agents.reconciler import Reconciler, decide, evidence
from finbench.errors import PolicyError

V = 100.0  # the order value of every hand-made case
READS = ["read_processor", "read_ledger", "read_erp", "read_bank"]


# --- evidence: what each read counts as ------------------------------------------------------

def cap(status, id_="cap-1"):
    return {"id": id_, "status": status}


def line(account, amount, memo="settlement", capture="cap-1"):
    return {"account": account, "amount": amount, "memo": memo, "capture": capture}


def ev(processor=None, ledger=None, erp=None, bank=None, track="cap-1", original=True, value=V):
    return evidence({"processor": processor, "ledger": ledger, "erp": erp, "bank": bank}, value, track, original)


def test_no_reads_are_no_evidence():
    assert ev() == {"settled": set(), "failed": set(), "duplicate": False, "partial": False}
    assert evidence({}, V, "cap-1", True) == {"settled": set(), "failed": set(), "duplicate": False,
                                              "partial": False}


def test_the_processor_shows_a_settlement_of_any_capture_but_the_failure_of_the_tracked_one_only():
    assert ev(processor={"captures": [cap("failed"), cap("settled", "cap-2")]}, track="cap-2")["settled"] == \
        {"processor"}
    assert ev(processor={"captures": [cap("failed")]})["failed"] == {"processor"}
    assert ev(processor={"captures": [cap("failed")]}, track="cap-2")["failed"] == set()  # another capture's
    assert ev(processor={"captures": [cap("submitted")]}) == ev()


def test_the_ledger_shows_a_settlement_by_its_cash_settlement_lines_above_half_a_cent():
    assert ev(ledger={"lines": [line("cash", 0.006)]})["settled"] == {"ledger"}
    assert ev(ledger={"lines": [line("cash", 0.005)]})["settled"] == set()  # half a cent is no money
    assert ev(ledger={"lines": [line("cash", 0.003), line("cash", 0.003)]})["settled"] == {"ledger"}  # summed
    assert ev(ledger={"lines": [line("clearing", 100.0)]})["settled"] == set()  # not the cash account
    assert ev(ledger={"lines": [line("cash", 100.0, memo="capture submitted")]})["settled"] == set()  # not cash in
    assert ev(ledger={"lines": [line("cash", 100.0), line("cash", -100.0)]})["settled"] == set()  # nets to 0


def test_the_ledger_shows_the_failure_by_a_capture_failed_line_of_the_tracked_capture():
    failed = line("clearing", -100.0, memo="capture failed: reversal")
    assert ev(ledger={"lines": [failed]})["failed"] == {"ledger"}
    assert ev(ledger={"lines": [failed]}, track="cap-2")["failed"] == set()
    assert ev(ledger={"lines": [line("clearing", -100.0, memo="reversal: capture failed")]})["failed"] == set()
    assert ev(ledger={"lines": [{"account": "clearing", "amount": 1.0, "capture": "cap-1"}]})["failed"] == set()


@pytest.mark.parametrize("status, original, settled, failed", [
    ("paid", True, {"erp"}, set()),
    ("charged_back", True, {"erp"}, set()),
    ("payment_failed", True, set(), {"erp"}),
    ("payment_failed", False, set(), set()),  # the ERP's one record is the original's
    ("pending", True, set(), set()),
    (None, True, set(), set()),
])
def test_the_erp_status_counts_paid_or_charged_back_and_payment_failed_for_the_original(status, original,
                                                                                         settled, failed):
    got = ev(erp={"status": status}, original=original)
    assert (got["settled"], got["failed"]) == (settled, failed)


def test_the_bank_shows_a_settlement_by_its_credit_lines_above_half_a_cent():
    assert ev(bank={"lines": [{"type": "credit", "amount": 0.006}]})["settled"] == {"bank"}
    assert ev(bank={"lines": [{"type": "credit", "amount": 0.005}]})["settled"] == set()
    assert ev(bank={"lines": [{"type": "credit", "amount": 0.003}] * 2})["settled"] == {"bank"}
    assert ev(bank={"lines": [{"type": "debit", "amount": 100.0}]})["settled"] == set()


def test_money_above_the_order_value_beside_one_settled_capture_is_a_duplicate_delivery():
    one = {"captures": [cap("settled")]}
    two = {"captures": [cap("settled"), cap("settled", "cap-2")]}
    twice = {"lines": [line("cash", V), line("cash", V)]}
    assert ev(processor=one, ledger=twice)["duplicate"] is True
    assert ev(ledger=twice)["duplicate"] is True  # no settled capture at all: still at most one
    assert ev(processor=two, ledger=twice)["duplicate"] is False  # two captures: a second charge
    assert ev(processor=one, bank={"lines": [{"type": "credit", "amount": V}] * 2})["duplicate"] is True
    # the margin is half a cent above the order value
    assert ev(processor=one, ledger={"lines": [line("cash", V + 0.006)]})["duplicate"] is True
    assert ev(processor=one, ledger={"lines": [line("cash", V + 0.005)]})["duplicate"] is False
    assert ev(processor=one, bank={"lines": [{"type": "credit", "amount": V + 0.006}]})["duplicate"] is True
    assert ev(processor=one, bank={"lines": [{"type": "credit", "amount": V + 0.005}]})["duplicate"] is False
    assert ev(processor=one, ledger={"lines": [line("cash", V)]})["duplicate"] is False


def test_a_partial_commit_is_unbalanced_books_with_the_cash_leg_written():
    cash = [line("cash", V)]
    assert ev(ledger={"lines": cash, "balanced": False})["partial"] is True
    assert ev(ledger={"lines": cash, "balanced": True})["partial"] is False
    assert ev(ledger={"lines": cash})["partial"] is False  # unknown balance: not `False`
    assert ev(ledger={"lines": [line("clearing", V)], "balanced": False})["partial"] is False  # no cash
    assert ev(ledger={"lines": [line("cash", 0.005)], "balanced": False})["partial"] is False
    assert ev(ledger={"lines": [line("cash", 0.006)], "balanced": False})["partial"] is True
    assert ev(ledger={"lines": [], "balanced": False})["partial"] is False


# --- the routine, driven by hand-made observations --------------------------------------------

class Drive:
    """Plays a Reconciler against scripted observations: `send(result, dt)` answers the last call."""

    def __init__(self, policy=None, t=120, calls_left=40, value=V):
        self.p = policy or Reconciler()
        self.t, self.left = t, calls_left
        brief = {"order_id": "o", "order_value": value, "t": t, "calls_left": calls_left}
        self.p.begin(brief)
        self.last = self.p.act(brief)

    @property
    def tool(self):
        return self.last[0]

    def send(self, result=None, dt=1):
        self.t += dt
        self.left -= 1
        self.last = self.p.act({"t": self.t, "tool": self.tool, "result": result, "calls_left": self.left,
                                "done": False})
        return self.last

    def round(self, processor=None, ledger=None, erp=None, bank=None):
        """Answer the four reads in order; returns the call after them."""
        for tool, res in zip(READS, (processor, ledger, erp, bank)):
            assert self.tool == tool
            self.send(res)
        return self.last


UNAVAILABLE = {"unavailable": "no probe in this arm", "captures": []}
SETTLED_CAP = {"captures": [cap("settled")]}
FAILED_CAP = {"captures": [cap("failed")]}
CASH = {"lines": [line("cash", V)], "balanced": True}
PAID = {"status": "paid"}
FAILED_LINE = {"lines": [line("clearing", -V, memo="capture failed")], "balanced": True}
PAYMENT_FAILED = {"status": "payment_failed"}


def test_it_probes_first_then_reads_the_four_systems_in_order_when_the_probe_is_unavailable():
    d = Drive()
    assert d.last == ("probe_processor", {"order_id": "o"})
    d.send(UNAVAILABLE, dt=5)
    got = []
    for _ in range(4):
        got.append(d.tool)
        d.send({})
    assert got == READS
    assert d.tool == "wait"  # nothing seen: wait for the next round
    d.send({"waited": 1}, dt=60)
    assert d.tool == "read_processor"  # stopped probing


def test_a_probe_that_tells_identity_only_stops_the_probing():
    d = Drive()
    d.send({"captures": [{"id": "cap-1"}]}, dt=5)  # no status: no more than a read tells
    assert d.tool == "read_processor"
    d.round()
    d.send({"waited": 1}, dt=60)
    assert d.tool == "read_processor"


def test_a_fresh_pending_probe_waits_without_reading_and_a_stale_one_reads_the_replicas():
    fresh = Drive()
    fresh.send({"captures": [cap("submitted")]}, dt=5)
    assert fresh.tool == "wait"  # no replica can know more than a fresh probe
    fresh.send({"waited": 1}, dt=60)
    assert fresh.tool == "probe_processor"  # still probing
    stale = Drive()
    stale.send({"captures": [cap("submitted")], "as_of": 100}, dt=5)
    assert stale.tool == "read_processor"
    assert stale.round() [0] == "wait"
    stale.send({"waited": 1}, dt=60)
    assert stale.tool == "probe_processor"  # a stale probe is still a probe


def test_a_probe_with_no_captures_at_all_is_pending():
    d = Drive()
    d.send({"captures": []}, dt=5)
    assert d.tool == "wait"


def test_a_settled_probe_ships_and_a_late_one_escalates():
    d = Drive()
    assert d.send(SETTLED_CAP, dt=5) == ("ship", {"order_id": "o"})
    # ship takes effect at now + 1: at 599 it lands at 600, still in time; at 600 it would be late
    assert Drive(t=594).send(SETTLED_CAP, dt=5)[0] == "ship"
    assert Drive(t=595).send(SETTLED_CAP, dt=5)[0] == "escalate"


def test_a_settled_probe_of_another_capture_ships_and_a_stale_settled_probe_decides_too():
    assert Drive().send({"captures": [cap("failed"), cap("settled", "cap-9")]}, dt=5)[0] == "ship"
    assert Drive().send({"captures": [cap("settled")], "as_of": 100}, dt=5)[0] == "ship"


def test_a_failed_probe_retries_under_a_fresh_key_then_tracks_the_replacement():
    d = Drive()
    assert d.send(FAILED_CAP, dt=5) == ("retry_capture", {"order_id": "o", "idempotency_key": "key-2"})
    d.send({"receipt": "cap-7"})
    assert d.tool == "probe_processor"  # straight to the next round, no wait
    # the original's failure is no longer the tracked capture's: pending, a wait
    assert d.send({"captures": [cap("failed"), cap("submitted", "cap-7")]}, dt=5)[0] == "wait"
    d.send({"waited": 1}, dt=60)
    assert d.send({"captures": [cap("failed"), cap("failed", "cap-7")]}, dt=5) == ("write_off", {"order_id": "o"})


def test_a_replacement_without_a_receipt_is_tracked_as_cap_2():
    d = Drive()
    d.send(FAILED_CAP, dt=5)
    d.send({})
    assert d.send({"captures": [cap("failed"), cap("failed", "cap-2")]}, dt=5)[0] == "write_off"


def test_a_failure_too_late_for_a_replacement_escalates():
    """A replacement needs 60 ticks after the retry's tick to settle and be seen before 600."""
    assert Drive(t=534).send(FAILED_CAP, dt=5)[0] == "retry_capture"  # now 539: 539 + 1 + 60 = 600
    assert Drive(t=535).send(FAILED_CAP, dt=5)[0] == "escalate"  # now 540: 601 > 600


def test_a_failure_without_calls_for_the_replacement_escalates():
    """Two calls are kept for the final decision and six for the replacement's rounds: 8 calls left."""
    assert Drive(calls_left=9).send(FAILED_CAP, dt=5)[0] == "retry_capture"  # 8 left after the probe
    assert Drive(calls_left=8).send(FAILED_CAP, dt=5)[0] == "escalate"  # 7 left


def no_probe(**kw):
    d = Drive(**kw)
    d.send(UNAVAILABLE, dt=5)
    return d


def test_two_systems_showing_the_settlement_ship():
    assert no_probe().round(SETTLED_CAP, CASH)[0] == "ship"
    assert no_probe().round(None, None, PAID, {"lines": [{"type": "credit", "amount": V}]})[0] == "ship"


def test_one_settlement_signal_waits_before_the_deadline_and_ships_at_it():
    assert no_probe().round(None, CASH)[0] == "wait"
    d = no_probe(t=580)  # after the probe and reads now is 589: 589 + 1 + 11 > 600, the last round
    assert d.round(None, CASH)[0] == "ship"


def test_one_settlement_against_one_failure_escalates_at_the_deadline():
    d = no_probe(t=580)
    assert d.round(None, CASH, PAYMENT_FAILED)[0] == "escalate"


def test_two_confirmed_failures_with_no_settlement_retry_and_a_settlement_blocks_it():
    assert no_probe().round(FAILED_CAP, FAILED_LINE)[0] == "retry_capture"
    assert no_probe().round(FAILED_CAP, None, PAYMENT_FAILED)[0] == "retry_capture"
    # a settlement signal beside two failures: conflicting, so no retry (and not two settlements: no ship)
    assert no_probe().round(FAILED_CAP, FAILED_LINE, None, {"lines": [{"type": "credit", "amount": V}]})[0] == \
        "wait"
    assert no_probe().round(FAILED_CAP)[0] == "wait"  # one failure is not confirmed


def test_after_the_retry_one_settlement_at_least_matching_the_failures_ships():
    """The replacement's settlement: s >= 1 and s >= f >= 1 is enough once the original is replaced."""
    d = no_probe()
    assert d.round(FAILED_CAP, FAILED_LINE)[0] == "retry_capture"
    d.send({"receipt": "cap-2"})
    replacement_settled = {"captures": [cap("failed"), cap("settled", "cap-2")]}
    failed_again = {"lines": [line("clearing", -V, memo="capture failed", capture="cap-2")], "balanced": True}
    assert d.round(replacement_settled, failed_again)[0] == "ship"  # s = 1, f = 1


def test_after_the_retry_one_settlement_and_no_failure_still_waits():
    d = no_probe()
    d.round(FAILED_CAP, FAILED_LINE)
    d.send({"receipt": "cap-2"})
    # the ERP says payment_failed, but that is the original's record: not counted once it is replaced
    assert d.round({"captures": [cap("failed"), cap("settled", "cap-2")]}, None, PAYMENT_FAILED)[0] == "wait"


def test_after_the_retry_two_confirmed_failures_write_off():
    d = no_probe()
    d.round(FAILED_CAP, FAILED_LINE)
    d.send({"receipt": "cap-2"})
    failed2 = {"captures": [cap("failed"), cap("failed", "cap-2")]}
    line2 = {"lines": [line("clearing", -V, memo="capture failed", capture="cap-2")], "balanced": True}
    assert d.round(failed2, line2) == ("write_off", {"order_id": "o"})


def test_confirm_sets_how_many_systems_must_agree():
    assert no_probe(policy=Reconciler(confirm=1)).round(None, CASH)[0] == "ship"
    assert no_probe(policy=Reconciler(confirm=1)).round(FAILED_CAP)[0] == "retry_capture"
    assert no_probe(policy=Reconciler(confirm=3)).round(SETTLED_CAP, CASH)[0] == "wait"
    assert no_probe(policy=Reconciler(confirm=3)).round(SETTLED_CAP, CASH, PAID)[0] == "ship"


def test_the_last_round_with_nothing_terminal_escalates():
    assert no_probe(t=580).round()[0] == "escalate"


@pytest.mark.parametrize("kw, message", [
    ({"wait": 0}, "reconciler: wait must be an integer in [1, 600], got 0"),
    ({"wait": 601}, "reconciler: wait must be an integer in [1, 600], got 601"),
    ({"confirm": 0}, "reconciler: confirm must be an integer in [1, 4], got 0"),
    ({"confirm": 5}, "reconciler: confirm must be an integer in [1, 4], got 5"),
])
def test_the_knobs_are_checked(kw, message):
    with pytest.raises(PolicyError) as info:
        Reconciler(**kw)
    assert str(info.value) == message


def test_the_default_knobs():
    r = Reconciler()
    assert (r.wait_ticks, r.confirm) == (45, 2)
    assert (Reconciler(wait=1, confirm=4).wait_ticks, Reconciler(wait=600, confirm=4).confirm) == (1, 4)


# --- pacing: the last round and the wait between rounds -----------------------------------------

def at(now, calls_left, wait=45):
    r = Reconciler(wait=wait)
    r.now, r.calls_left = now, calls_left
    return r


@pytest.mark.parametrize("probing, last_t, min_calls", [(False, 588, 7), (True, 587, 8)])
def test_the_last_round_is_when_another_would_miss_the_deadline_or_the_budget(probing, last_t, min_calls):
    """A round is 4 reads (+ a probe), each a call; another one needs a wait, the round and 2 calls for
    the decision; in ticks the round plus 5 (a probe's extra) plus 2, from now + 1, must end by 600.
    Without the probe: 4 + 5 + 2 = 11 ticks, so t = 588 is the last time another round fits; with it 12."""
    assert not at(last_t, 40)._last_round(probing)
    assert at(last_t + 1, 40)._last_round(probing)
    assert not at(100, min_calls)._last_round(probing)
    assert at(100, min_calls - 1)._last_round(probing)


@pytest.mark.parametrize("now, calls_left, probing, wait, expected", [
    # not probing: a round is 5 calls with its wait; rounds = (calls_left - 2) // 5; room = 599 - 11 - now
    (129, 35, False, 45, 76),    # rounds 6, room 459: 459 // 6 = 76 beats the 45 asked
    (129, 1000, False, 45, 45),  # many rounds: the wait asked
    (129, 1000, False, 1, 2),    # rounds 199: 459 // 199 = 2
    (580, 35, False, 45, 8),     # room 8: never past the last round's start
    (590, 35, False, 45, 1),     # no room: at least one tick
    (129, 4, False, 45, 459),    # (4 - 2) // 5 = 0 rounds: at least one, which may take the whole room
    (129, 7, False, 45, 459),    # (7 - 2) // 5 = 1 round
    (129, 12, False, 45, 229),   # (12 - 2) // 5 = 2 rounds: 459 // 2
    (0, 3, False, 45, 588),      # room 588 under the 600 cap
    (0, 3, False, 600, 588),
    # probing: 6 calls a round; room = 599 - 12 - now
    (125, 40, True, 45, 77),     # rounds (40 - 2) // 6 = 6, room 462: 77
    (125, 14, True, 45, 231),    # rounds 2
    (125, 7, True, 45, 462),     # rounds (7 - 2) // 6 = 0 -> 1: the whole room, 599 - 12 - 125
    (575, 3, True, 1, 12),       # one round, room 12 (not 13: the probe's extra tick counted)
    (587, 40, True, 45, 1),      # room 0
])
def test_the_wait_spreads_the_budget_over_the_time_left(now, calls_left, probing, wait, expected):
    assert at(now, calls_left, wait)._next_wait(probing) == expected


def test_the_wait_never_exceeds_600_ticks():
    r = at(-200, 3)  # room 788: more than a wait may last
    assert r._next_wait(False) == 600


def test_a_round_with_a_stale_probe_judges_the_deadline_with_the_probe_counted():
    """Still probing, a round takes 12 ticks: at now = 588 after the reads (588 + 1 + 12 > 600) it is the last,
    so one uncontradicted settlement ships; without the probe counted (11 ticks) it would not be yet."""
    d = Drive(t=579)
    d.send({"captures": [cap("submitted")], "as_of": 570}, dt=5)  # stale: read the replicas
    assert d.round(None, CASH)[0] == "ship"  # now 588
    early = Drive(t=578)
    early.send({"captures": [cap("submitted")], "as_of": 570}, dt=5)
    assert early.round(None, CASH)[0] == "wait"  # now 587: 587 + 13 = 600, another round fits


def test_while_probing_the_wait_and_the_last_round_count_the_probe():
    """A fresh pending probe at now = 125 with 39 calls left: rounds of 6 calls (probe, 4 reads, wait):
    (39 - 2) // 6 = 6 rounds over room 599 - 12 - 125 = 462 ticks: a wait of 462 // 6 = 77."""
    d = Drive()
    assert d.send({"captures": [cap("submitted")]}, dt=5) == ("wait", {"order_id": "o", "ticks": 77})
    # at now = 588 a probing round (12 ticks) no longer fits: 588 + 1 + 12 > 600, so it escalates
    assert Drive(t=583).send({"captures": [cap("submitted")]}, dt=5)[0] == "escalate"
    assert Drive(t=582).send({"captures": [cap("submitted")]}, dt=5)[0] == "wait"  # now 587: it fits


def test_a_partial_commit_is_one_system_and_never_ships_alone_before_the_deadline():
    """A ledger out of balance with its cash leg written (a partial commit) is the ledger's settlement
    evidence, one system: before the deadline the reconciler waits for a second (issue 43: shipping on it
    with one confirming system survived every test)."""
    partial = ev(ledger={"lines": [line("cash", V)], "balanced": False})
    assert partial["partial"] is True and partial["settled"] == {"ledger"}
    assert decide(partial, 2, at_deadline=False, original=True) == "pending"
    assert decide(partial, 2, at_deadline=True, original=True) == "settled"  # one signal, nothing against it
    two = ev(processor={"captures": [{"id": "cap-1", "status": "settled"}]},
             ledger={"lines": [line("cash", V)], "balanced": False})
    assert decide(two, 2, at_deadline=False, original=True) == "settled"


def test_a_duplicate_delivery_counts_once_and_decides_nothing_by_itself():
    twice = ev(ledger={"lines": [line("cash", V), line("cash", V)]})
    assert twice["duplicate"] is True and decide(twice, 2, at_deadline=False, original=True) == "pending"
    failed = ev(processor={"captures": [{"id": "cap-1", "status": "failed"}]},
                erp={"status": "payment_failed"})
    assert decide(failed, 2, at_deadline=False, original=True) == "failed"
