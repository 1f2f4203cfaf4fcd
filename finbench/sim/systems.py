"""The four systems' folds: what a read returns given the deliveries that arrived (SPEC §2).

Each fold takes the deliveries visible to the read, in (arrival, seq) order,
and returns the plain JSON payload an agent (or a language model) sees.
"""
from __future__ import annotations

from finbench.sim import constants as C


TERMINAL = {"settled", "failed"}

RECEIVES = {
    "order_placed": ("erp",),
    "auth_approved": ("processor",),
    "capture_submitted": ("processor", "ledger"),
    "capture_settled": ("processor", "ledger", "erp", "bank"),
    "capture_failed": ("processor", "ledger", "erp"),
    "chargeback": ("processor", "ledger", "erp", "bank"),
}
"""Which systems each canonical event is delivered to."""


def fold_processor(order_id: str, ds) -> dict:
    """Status store keyed by operation: a terminal status is never overwritten by a
    non-terminal one, so a repeat or a late 'submitted' is invisible."""
    auth = None
    caps: dict[str, dict] = {}
    chargebacks: dict[str, dict] = {}
    for d in ds:
        e = d.event
        k = e.kind
        if k == "auth_approved":
            auth = {"status": "approved", "amount": e.amount}
        elif k == "chargeback":
            chargebacks[f"cb-{e.capture}"] = {"id": f"cb-{e.capture}", "capture": e.capture,
                                              "status": "posted", "amount": e.amount}
        else:
            status = k[len("capture_"):]
            cur = caps.get(e.capture)
            if cur is None:
                caps[e.capture] = {"id": e.capture, "key": e.key, "amount": e.amount, "status": status}
            elif status in TERMINAL or cur["status"] not in TERMINAL:
                cur["status"] = status
    return {"system": "processor", "order_id": order_id, "authorization": auth,
            "captures": sorted(caps.values(), key=_cap_order), "chargebacks": list(chargebacks.values())}


def _cap_order(c: dict) -> int:
    return int(c["id"].split("-")[1])


_LEGS = {
    # event kind -> journal legs (account, sign); the first leg is the one a
    # half-committed posting keeps (the cash leg of a settlement)
    "capture_submitted": (("clearing", 1), ("sales", -1)),
    "capture_settled": (("cash", 1), ("clearing", -1)),
    "capture_failed": (("clearing", -1), ("sales", 1)),
    "chargeback": (("cash", -1), ("chargebacks", 1)),
}
_MEMO = {"capture_submitted": "capture submitted", "capture_settled": "settlement",
         "capture_failed": "capture failed, clearing reversed", "chargeback": "chargeback"}


def fold_ledger(order_id: str, ds) -> dict:
    """Append-only journal with no dedupe: a duplicate double-posts; a partial
    commit writes only the cash leg and the books stop balancing."""
    lines = []
    bal = {"clearing": 0.0, "cash": 0.0}
    total = 0.0
    for entry, d in enumerate(ds, start=1):
        e = d.event
        legs = _LEGS[e.kind]
        if d.partial:
            legs = legs[:1]
        for account, sign in legs:
            amt = sign * e.amount
            lines.append({"line": len(lines) + 1, "entry": entry, "capture": e.capture,
                          "account": account, "amount": amt, "memo": _MEMO[e.kind]})
            total += amt
            if account in bal:
                bal[account] += amt
    return {"system": "ledger", "order_id": order_id, "lines": lines,
            "balances": {k: round(v, 2) for k, v in bal.items()},
            "balanced": abs(total) < C.MONEY_TOL}


_ERP_RANK = {"placed": 0, "payment_failed": 1, "paid": 2, "charged_back": 3}
_ERP_STATUS = {"order_placed": "placed", "capture_failed": "payment_failed",
               "capture_settled": "paid", "chargeback": "charged_back"}


def fold_erp(order_id: str, ds, value: float) -> dict:
    """One record keyed by order: idempotent and monotone (it never regresses)."""
    status = None
    disposition = None
    for d in ds:
        k = d.event.kind
        if k == "disposition":
            disposition = disposition or d.event.key
            continue
        s = _ERP_STATUS[k]
        if status is None or _ERP_RANK[s] > _ERP_RANK[status]:
            status = s
    return {"system": "erp", "order_id": order_id, "status": status, "amount": value,
            "disposition": disposition}


def fold_bank(order_id: str, ds) -> dict:
    """A statement: each arrival is a line; nothing says two lines are the same money."""
    lines = []
    total = 0.0
    for d in ds:
        e = d.event
        credit = e.kind == "capture_settled"
        amt = e.amount if credit else -e.amount
        lines.append({"line": len(lines) + 1, "posted_at": d.arrival,
                      "type": "credit" if credit else "debit", "amount": amt,
                      "description": f"card {'settlement' if credit else 'chargeback'} {order_id}"})
        total += amt
    return {"system": "bank", "order_id": order_id, "lines": lines, "total": round(total, 2)}


def completed_order_views(order_id: str, value: float) -> dict[str, dict]:
    """What each system shows for the customer's earlier, completed order."""
    return {
        "processor": {"system": "processor", "order_id": order_id,
                      "authorization": {"status": "approved", "amount": value},
                      "captures": [{"id": "cap-1", "key": "key-1", "amount": value, "status": "settled"}],
                      "chargebacks": []},
        "ledger": {"system": "ledger", "order_id": order_id, "lines": [
            {"line": 1, "entry": 1, "capture": "cap-1", "account": "clearing", "amount": value, "memo": "capture submitted"},
            {"line": 2, "entry": 1, "capture": "cap-1", "account": "sales", "amount": -value, "memo": "capture submitted"},
            {"line": 3, "entry": 2, "capture": "cap-1", "account": "cash", "amount": value, "memo": "settlement"},
            {"line": 4, "entry": 2, "capture": "cap-1", "account": "clearing", "amount": -value, "memo": "settlement"}],
            "balances": {"clearing": 0.0, "cash": value}, "balanced": True},
        "erp": {"system": "erp", "order_id": order_id, "status": "paid", "amount": value, "disposition": "shipped"},
        "bank": {"system": "bank", "order_id": order_id, "lines": [
            {"line": 1, "posted_at": -86400, "type": "credit", "amount": value,
             "description": f"card settlement {order_id}"}], "total": value},
    }

