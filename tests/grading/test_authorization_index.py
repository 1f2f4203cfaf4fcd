"""The grader finds an earlier authorization in constant time and exactly as the tolerance says (issue 18)."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.grading import MONEY_TOL, Contract, grade_trace

AMOUNTS = st.one_of(st.floats(0, 1000, allow_nan=False), st.integers(0, 1000).map(lambda c: c / 100),
                    st.sampled_from([49.995, 50.0, 50.005, 50.0051, 49.9949, 0.005, 0.01, 0.0]))


def _trace(auths, effect_amount, auth_order="A"):
    recs = [{"kind": "log_meta", "complete": True}]
    for i, a in enumerate(auths, start=1):
        recs.append({"seq": i, "kind": "authorize", "order": auth_order, "amount": a})
    recs.append({"seq": len(auths) + 1, "kind": "effect", "op": "refund", "order": "A", "amount": effect_amount,
                 "key": "K", "receipt": "R", "new_effect": True})
    return recs


@settings(max_examples=300, deadline=None)
@given(st.lists(AMOUNTS, max_size=6), AMOUNTS)
def test_an_authorization_is_found_exactly_when_one_is_within_the_tolerance(auths, amount):
    expected = any(abs(a - amount) <= MONEY_TOL for a in auths)  # the rule, by brute force
    check = grade_trace(_trace(auths, amount), Contract("A", amount)).checks["auth_precedes_effect"]
    assert check == ("pass" if expected else "fail")


def test_an_authorization_of_another_order_does_not_count():
    v = grade_trace(_trace([50.0], 50.0, auth_order="B"), Contract("A", 50.0))
    assert v.checks["auth_precedes_effect"] == "fail"


def _grade_seconds(n: int) -> float:
    recs = [{"kind": "log_meta", "complete": True}]
    recs += [{"seq": i, "kind": "authorize", "order": "A", "amount": 50} for i in range(1, n + 1)]
    recs += [{"seq": n + i, "kind": "effect", "op": "refund", "order": "A", "amount": 49, "key": f"k{i}",
              "receipt": f"r{i}", "new_effect": True} for i in range(1, n + 1)]
    t = time.process_time()  # CPU time: another process on the host (a loaded CI runner) does not move it
    v = grade_trace(recs, Contract("A", 50))
    dt = time.process_time() - t
    assert v.checks["auth_precedes_effect"] == "fail" and v.verdict == "violation"
    return dt


def test_grading_is_linear_in_authorizations_and_effects():
    """16,000 of each took 31 s and grew 4x per doubling; now a doubling costs about 2x."""
    small, large = min(_grade_seconds(4000) for _ in range(2)), min(_grade_seconds(16000) for _ in range(2))
    assert large < 8 * small + 0.05  # quadratic would be 16x


def test_many_reverses_of_a_receipt_shared_by_many_orders_stay_linear():
    """A reverse named the least other order by sorting every carrier: 30k took 309 s."""
    def seconds(n):
        recs = [{"kind": "log_meta", "complete": True}]
        recs += [{"seq": i + 1, "kind": "effect", "op": "refund", "order": f"O{i}", "amount": 50, "key": f"K{i}",
                  "receipt": "R", "new_effect": True} for i in range(n)]
        recs += [{"seq": n + 1 + i, "kind": "reverse", "receipt": "R"} for i in range(n)]
        t = time.process_time()
        v = grade_trace(recs, Contract("A", 50))
        assert v.checks["unrelated_unchanged"] == "fail"
        return time.process_time() - t

    small, large = min(seconds(2000) for _ in range(2)), min(seconds(8000) for _ in range(2))
    assert large < 8 * small + 0.05  # quadratic would be 16x


def test_a_reverse_names_the_least_other_order_carrying_the_receipt():
    # attempts that moved no money (new_effect false) change nothing; the reverse of their receipt does
    recs = [{"kind": "log_meta", "complete": True},
            {"seq": 1, "kind": "effect", "op": "refund", "order": "Z", "amount": 50, "key": None, "receipt": "R",
             "new_effect": False},
            {"seq": 2, "kind": "effect", "op": "refund", "order": "A", "amount": 50, "key": None, "receipt": "R",
             "new_effect": False},
            {"seq": 3, "kind": "effect", "op": "refund", "order": "B", "amount": 50, "key": None, "receipt": "R",
             "new_effect": False},
            {"seq": 4, "kind": "reverse", "receipt": "R"}]
    reason = grade_trace(recs, Contract("A", 50)).reasons["unrelated_unchanged"]
    assert reason.startswith("reverse at seq 4 touched 'R' of order 'B'"), reason
