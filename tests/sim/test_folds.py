"""The four systems' folds (SPEC §2; finbench.sim.systems), rule by rule, on hand-made deliveries: what a read
returns given the deliveries that arrived, in (arrival, seq) order. Each test pins one rule where a changed
comparison or a loop that stops early would otherwise go unnoticed (mutation testing, issue 32): the
episodes never read a fold in the states these tests build, so no backtest would see it."""
from __future__ import annotations

from types import SimpleNamespace

from finbench.sim import constants as C
from finbench.sim.systems import fold_bank, fold_erp, fold_ledger, fold_processor
from finbench.sim.task import Event

V = 40.0


def _ds(*events):
    return [SimpleNamespace(event=e, partial=False, arrival=e.t, seq=i) for i, e in enumerate(events)]


def _disposition(t, kind):
    return Event(t, "disposition", None, kind)  # the ERP's record of the agent's disposition (World.record_disposition)


def test_the_erp_keeps_folding_payments_after_it_records_a_disposition():
    # a disposition is a field beside the status: a settlement arriving after it still moves the status
    ds = _ds(Event(0, "order_placed", amount=V), _disposition(200, "ship"),
             Event(300, "capture_settled", "cap-1", "key-1", V))
    assert fold_erp("o", ds, V) == {"system": "erp", "order_id": "o", "status": "paid", "amount": V,
                                    "disposition": "ship"}


def test_the_erp_records_the_first_disposition_only():
    ds = _ds(Event(0, "order_placed", amount=V), _disposition(200, "escalate"), _disposition(210, "refund"))
    assert fold_erp("o", ds, V)["disposition"] == "escalate"


# --- the bank: a statement line per arrival --------------------------------------------------------

def test_a_chargeback_reaches_the_bank_as_a_debit_line_named_for_it():
    ds = _ds(Event(300, "capture_settled", "cap-1", "key-1", V), Event(700, "chargeback", "cap-1", "key-1", V))
    assert fold_bank("o", ds)["lines"] == [
        {"line": 1, "posted_at": 300, "type": "credit", "amount": V, "description": "card settlement o"},
        {"line": 2, "posted_at": 700, "type": "debit", "amount": -V, "description": "card chargeback o"}]
    assert fold_bank("o", ds)["total"] == 0.0


# --- the ledger: balances to the cent, balanced within less than half a cent ---------------------------

def test_the_ledger_balances_are_rounded_to_the_cent():
    v = 1.2345
    ds = _ds(Event(10, "capture_submitted", "cap-1", "key-1", v), Event(300, "capture_settled", "cap-1", "key-1", v))
    assert fold_ledger("o", ds)["balances"] == {"clearing": 0.0, "cash": 1.23}


def test_the_books_balance_only_when_off_by_less_than_half_a_cent():
    # a half-committed settlement writes only its cash leg: the books are off by the order's value
    def off_by(v):
        d = _ds(Event(10, "capture_submitted", "cap-1", "key-1", v), Event(300, "capture_settled", "cap-1", "key-1", v))
        d[1].partial = True
        return fold_ledger("o", d)
    assert off_by(C.MONEY_TOL / 2)["balanced"] is True
    assert off_by(C.MONEY_TOL)["balanced"] is False  # exactly half a cent off is off
    assert off_by(V)["balanced"] is False


def test_the_bank_total_is_rounded_to_the_cent():
    assert fold_bank("o", _ds(Event(300, "capture_settled", "cap-1", "key-1", 1.2345)))["total"] == 1.23


# --- the processor: a status store by operation --------------------------------------------------

def test_the_processor_shows_no_authorization_until_one_arrives():
    # the authorization's delivery can be lost or late (faults): the field is then None, not a falsy stand-in
    view = fold_processor("o", _ds(Event(10, "capture_submitted", "cap-1", "key-1", V)))
    assert view["authorization"] is None
    assert fold_processor("o", _ds(Event(5, "auth_approved", amount=V)))["authorization"] == {
        "status": "approved", "amount": V}


def test_the_processor_shows_a_chargeback_posted_against_its_capture():
    ds = _ds(Event(300, "capture_settled", "cap-1", "key-1", V), Event(700, "chargeback", "cap-1", "key-1", V),
             Event(705, "chargeback", "cap-1", "key-1", V))  # a duplicate delivery: one chargeback, keyed by capture
    assert fold_processor("o", ds)["chargebacks"] == [
        {"id": "cb-cap-1", "capture": "cap-1", "status": "posted", "amount": V}]
