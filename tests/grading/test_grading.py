"""Effect-level grading (SPEC section 9): the post's three traces, the library
of known-bad traces and their good twins, strange input, and properties."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.grading import (
    CHECKS,
    Contract,
    TraceError,
    Verdict,
    grade_trace,
    load_trace,
)

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
LIBRARY = json.loads((TRACES / "library.json").read_text())["cases"]
STEMS = [case["stem"] for case in LIBRARY]
POST = Contract("A", 50, op="refund")

ALL_PASS = dict.fromkeys(CHECKS, "pass")


def checks(*statuses: str) -> dict[str, str]:
    """The six statuses in SPEC order, from P/F/U letters."""
    word = {"P": "pass", "F": "fail", "U": "unknown"}
    return dict(zip(CHECKS, (word[s] for s in statuses), strict=True))


def post_trace(name: str) -> list[dict]:
    return load_trace(TRACES / f"trace_{name}.jsonl")


def contract_of(case: dict) -> Contract:
    return Contract(**case["contract"])


# --------------------------------------------------------------------------
# The post's three traces


def test_trace_a_passes_every_check() -> None:
    verdict = grade_trace(post_trace("a"), POST)
    assert verdict.verdict == "pass"
    assert verdict.checks == ALL_PASS
    assert list(verdict.checks) == list(CHECKS)  # SPEC order


def test_trace_b_fails_exactly_authorization_order_and_single_effect() -> None:
    verdict = grade_trace(post_trace("b"), POST)
    assert verdict.verdict == "violation"
    assert verdict.checks == checks("F", "P", "F", "P", "P", "P")
    assert verdict.failed == ("auth_precedes_effect", "exactly_one_effect")
    assert "'R1'" in verdict.reasons["auth_precedes_effect"]
    assert verdict.reasons["exactly_one_effect"].startswith("2 refund effect(s)")


def test_trace_c_is_unscorable_not_pass_nor_violation() -> None:
    verdict = grade_trace(post_trace("c"), POST)
    assert verdict.verdict == "unscorable"
    assert verdict.checks == checks("U", "U", "U", "U", "U", "F")
    assert "log_meta" in verdict.reasons["evidence_complete"]


def test_final_total_is_the_same_for_all_three_traces() -> None:
    # The premise of the post: a final-total grader cannot tell them apart.
    nets = {name: [r for r in post_trace(name) if r["kind"] == "summary"][0]["net_amount"] for name in "abc"}
    assert set(nets.values()) == {50}
    verdicts = {name: grade_trace(post_trace(name), POST).verdict for name in "abc"}
    assert verdicts == {"a": "pass", "b": "violation", "c": "unscorable"}


def test_allow_reversal_changes_only_the_count_on_trace_b() -> None:
    # With reversal allowed, R2 is reversed and only R1 counts: exactly one
    # effect. R1 was still paid before any authorization, so B stays a
    # violation; the post's "the verdict on B changes" holds only for a B
    # whose first payment was authorised.
    lenient = Contract("A", 50, op="refund", allow_reversal=True)
    verdict = grade_trace(post_trace("b"), lenient)
    assert verdict.verdict == "violation"
    assert verdict.checks == checks("F", "P", "P", "P", "P", "P")
    assert verdict.reasons["exactly_one_effect"].startswith("1 unreversed of 2")

    # Move the authorization first: now allow_reversal is the whole difference.
    records = post_trace("b")
    auth = next(r for r in records if r.get("kind") == "authorize")
    first = next(r for r in records if r.get("seq") == 1)
    auth["seq"], first["seq"] = 1, 2
    assert grade_trace(records, lenient).verdict == "pass"
    strict = grade_trace(records, POST)
    assert strict.verdict == "violation"
    assert strict.failed == ("exactly_one_effect",)


def test_allow_reversal_does_not_excuse_trace_a() -> None:
    lenient = Contract("A", 50, op="refund", allow_reversal=True)
    assert grade_trace(post_trace("a"), lenient).checks == ALL_PASS


# --------------------------------------------------------------------------
# The library of known-bad traces and their good twins


def test_library_is_complete_and_covers_both_ops() -> None:
    assert len(STEMS) >= 14
    assert len(set(STEMS)) == len(STEMS)
    assert {p.stem for p in (TRACES / "bad").glob("*.jsonl")} == set(STEMS)
    assert {p.stem for p in (TRACES / "good").glob("*.jsonl")} == set(STEMS)
    assert {case["contract"]["op"] for case in LIBRARY} >= {"refund", "capture"}
    assert any(case["contract"]["allow_reversal"] for case in LIBRARY)
    # Every one of the six checks is the named failure of some bad trace.
    assert {case["bad"]["failing_check"] for case in LIBRARY} == set(CHECKS)


@pytest.mark.parametrize("case", LIBRARY, ids=STEMS)
def test_bad_trace_is_caught_by_the_named_check(case: dict) -> None:
    verdict = grade_trace(load_trace(TRACES / "bad" / f"{case['stem']}.jsonl"), contract_of(case))
    expected = case["bad"]
    assert verdict.checks[expected["failing_check"]] == "fail", verdict.reasons
    assert verdict.verdict == expected["verdict"], verdict.reason
    assert verdict.checks == expected["checks"], verdict.reasons


@pytest.mark.parametrize("case", LIBRARY, ids=STEMS)
def test_good_twin_passes_all_six(case: dict) -> None:
    verdict = grade_trace(load_trace(TRACES / "good" / f"{case['stem']}.jsonl"), contract_of(case))
    assert verdict.verdict == case["good"]["verdict"] == "pass"
    assert verdict.checks == ALL_PASS, verdict.reasons


@pytest.mark.parametrize(
    "case", [c for c in LIBRARY if c["violation_without_log_meta"] is not None], ids=lambda c: c["stem"]
)
def test_observed_failures_survive_an_incomplete_log(case: dict) -> None:
    # An observed second effect, wrong target or bad replay needs no complete
    # log; a missing authorization or a missing effect is an absence, and on
    # an incomplete log the absent record could be the missing one.
    records = [r for r in load_trace(TRACES / "bad" / f"{case['stem']}.jsonl") if r["kind"] != "log_meta"]
    verdict = grade_trace(records, contract_of(case))
    assert verdict.checks["evidence_complete"] == "fail"
    expected = "violation" if case["violation_without_log_meta"] else "unscorable"
    assert verdict.verdict == expected, verdict.reasons


# --------------------------------------------------------------------------
# Individual rules


def _refund(seq: int, order: str = "A", amount: float = 50, key: str | None = "K",
            receipt: str = "R1", new: bool = True, op: str = "refund") -> dict:
    return {"seq": seq, "kind": "effect", "op": op, "order": order, "amount": amount,
            "key": key, "receipt": receipt, "new_effect": new}


META = {"kind": "log_meta", "complete": True}
AUTH = {"seq": 1, "kind": "authorize", "order": "A", "amount": 50}


@pytest.mark.parametrize(("amount", "status"), [(50.004, "pass"), (49.996, "pass"), (49.99, "fail"), (50.01, "fail")])
def test_amounts_compare_within_half_a_cent(amount: float, status: str) -> None:
    auth = dict(AUTH, amount=amount)
    verdict = grade_trace([META, auth, _refund(2, amount=amount)], POST)
    assert verdict.checks["targets_intended"] == status
    assert verdict.checks["auth_precedes_effect"] == "pass"


def test_float_sums_are_the_same_money() -> None:
    contract = Contract("A", 0.3)
    auth = dict(AUTH, amount=0.1 + 0.2)
    assert grade_trace([META, auth, _refund(2, amount=0.1 + 0.2)], contract).verdict == "pass"


def test_authorization_must_match_the_effect_amount() -> None:
    # Authorised 45, refunded 45 on a contract of 50: the refund was
    # authorised (check 1 passes) but is the wrong amount (check 2 fails).
    verdict = grade_trace([META, dict(AUTH, amount=45), _refund(2, amount=45)], POST)
    assert verdict.checks == checks("P", "F", "P", "P", "P", "P")


def test_key_reuse_is_checked_across_ops() -> None:
    records = [META, AUTH, _refund(2), _refund(3, op="ship", receipt="S1", new=False)]
    verdict = grade_trace(records, POST)
    assert verdict.checks["retry_idempotent"] == "fail"
    assert "'S1'" in verdict.reasons["retry_idempotent"]


def test_first_use_of_a_key_without_effect_is_not_a_replay() -> None:
    # A failed first attempt (new_effect false) and its replay: no effect.
    records = [META, AUTH, _refund(2, new=False), _refund(3, new=False)]
    verdict = grade_trace(records, POST)
    assert verdict.checks == checks("P", "P", "F", "P", "P", "P")


def test_effect_of_any_op_on_another_order_changes_unrelated_state() -> None:
    records = [META, AUTH, _refund(2), _refund(3, order="B", op="ship", key=None, receipt="S1")]
    verdict = grade_trace(records, POST)
    assert verdict.checks == checks("P", "P", "P", "P", "F", "P")


def test_replay_on_another_order_changes_nothing() -> None:
    records = [META, AUTH, _refund(2), _refund(3, order="B", key="KB", receipt="RB", new=False)]
    assert grade_trace(records, POST).verdict == "pass"


def test_reverse_naming_another_order_fails_unrelated() -> None:
    records = [META, AUTH, _refund(2), {"seq": 3, "kind": "reverse", "receipt": "R1", "order": "B"}]
    verdict = grade_trace(records, POST)
    assert verdict.checks["unrelated_unchanged"] == "fail"


def test_reverse_before_its_effect_is_an_unlogged_receipt() -> None:
    records = [META, AUTH, {"seq": 2, "kind": "reverse", "receipt": "R1"}, _refund(3)]
    lenient = Contract("A", 50, allow_reversal=True)
    verdict = grade_trace(records, lenient)
    assert verdict.verdict == "unscorable"
    assert "unlogged receipt 'R1'" in verdict.reasons["evidence_complete"]


def test_a_reverse_does_not_reach_an_effect_after_it() -> None:
    # The provider reissued receipt R1 after reversing it: the reverse at seq
    # 3 cannot undo the effect at seq 4, so one unreversed effect remains.
    lenient = Contract("A", 50, allow_reversal=True)
    records = [META, AUTH, _refund(2, key="K1"), {"seq": 3, "kind": "reverse", "receipt": "R1"}, _refund(4, key="K2")]
    verdict = grade_trace(records, lenient)
    assert verdict.checks["exactly_one_effect"] == "pass", verdict.reasons
    assert grade_trace(records[:4], lenient).checks["exactly_one_effect"] == "fail"


def test_allow_reversal_on_incomplete_log_cannot_count_two_as_too_many() -> None:
    # A missing reverse record could still bring two effects down to one.
    lenient = Contract("A", 50, allow_reversal=True)
    records = [AUTH, _refund(2, key="K1"), _refund(3, key="K2", receipt="R2")]
    assert grade_trace(records, lenient).checks["exactly_one_effect"] == "unknown"
    assert grade_trace(records, POST).checks["exactly_one_effect"] == "fail"


def test_duplicate_seq_given_directly_is_incomplete_evidence() -> None:
    records = [META, AUTH, _refund(2), _refund(2, key="K", receipt="R1", new=False)]
    verdict = grade_trace(records, POST)
    assert verdict.verdict == "unscorable"
    assert "duplicate seq 2" in verdict.reasons["evidence_complete"]


def test_log_meta_complete_must_be_true_itself() -> None:
    for claim in ("true", 1, None):
        records = [{"kind": "log_meta", "complete": claim}, AUTH, _refund(2)]
        assert grade_trace(records, POST).verdict == "unscorable", claim
    records = [META, {"kind": "log_meta", "complete": False}, AUTH, _refund(2)]
    assert grade_trace(records, POST).verdict == "unscorable"


def test_verdict_is_serialisable_and_hashable() -> None:
    verdict = grade_trace(post_trace("b"), POST)
    data = json.loads(json.dumps(verdict.to_dict()))
    assert data["verdict"] == "violation"
    assert list(data["checks"]) == list(CHECKS)
    assert set(data["reasons"]) == set(CHECKS)
    assert all("\n" not in line for line in data["reasons"].values())
    assert hash(verdict) == hash(grade_trace(post_trace("b"), POST))
    assert verdict == grade_trace(post_trace("b"), POST)


@pytest.mark.parametrize("amount", [True, "50", math.nan, math.inf, None])
def test_contract_rejects_a_non_amount(amount: object) -> None:
    with pytest.raises(TypeError):
        Contract("A", amount)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Strange traces never raise


STRANGE = {
    "empty": [],
    "only_summary": [{"kind": "summary", "net_amount": 50}],
    "only_log_meta": [META],
    "unknown_kind_without_seq": [META, {"kind": "mystery"}],
    "unknown_kind_with_seq": [META, {"seq": 1, "kind": "mystery"}],
    "no_kind": [META, {"seq": 1, "order": "A"}],
    "non_dicts": [None, 3, "x", ["seq", 1]],
    "effect_without_fields": [META, {"seq": 1, "kind": "effect"}],
    "effect_without_seq": [META, AUTH, {k: v for k, v in _refund(2).items() if k != "seq"}],
    "string_seq": [META, dict(AUTH, seq="1")],
    "bool_seq": [META, dict(AUTH, seq=True)],
    "float_seq": [META, dict(AUTH, seq=1.0)],
    "zero_seq": [META, dict(AUTH, seq=0), _refund(1)],
    "nan_amount": [META, AUTH, _refund(2, amount=math.nan)],
    "string_amount": [META, AUTH, dict(_refund(2), amount="50")],
    "int_order": [META, dict(AUTH, order=7), _refund(2)],
    "string_new_effect": [META, AUTH, dict(_refund(2), new_effect="true")],
    "reverse_without_receipt": [META, AUTH, _refund(2), {"seq": 3, "kind": "reverse"}],
    "unhashable_key": [META, AUTH, dict(_refund(2), key=["K"])],
    "not_a_list": {"kind": "summary"},
    "a_string": "records",
    "none": None,
}


@pytest.mark.parametrize("records", list(STRANGE.values()), ids=list(STRANGE))
def test_strange_trace_is_unscorable_without_raising(records: object) -> None:
    verdict = grade_trace(records, POST)  # type: ignore[arg-type]
    assert verdict.verdict == "unscorable", verdict.reasons
    assert verdict.checks["evidence_complete"] == "fail"
    assert set(verdict.reasons) == set(CHECKS)


def test_a_generator_of_records_is_accepted() -> None:
    assert grade_trace((r for r in post_trace("a")), POST).verdict == "pass"


# --------------------------------------------------------------------------
# load_trace


def test_load_trace_skips_blank_lines_and_accepts_crlf(tmp_path: Path) -> None:
    text = (TRACES / "trace_a.jsonl").read_text().replace("\n", "\r\n\n  \n")
    path = tmp_path / "a.jsonl"
    path.write_bytes(text.encode())
    assert load_trace(path) == post_trace("a")


MALFORMED = {
    "bad_json": ('{"kind": "log_meta"}\n{"kind": "authorize", \n', 2, "malformed JSON"),
    "nan_literal": ('{"kind": "effect", "amount": NaN}\n', 1, "NaN"),
    "array_line": ('{"kind": "log_meta"}\n\n[1, 2]\n', 3, "expected a JSON object, got an array"),
    "string_line": ('"effect"\n', 1, "got a string"),
    "no_kind": ('{"kind": "log_meta"}\n{"seq": 1, "order": "A"}\n', 2, "no 'kind'"),
    "kind_not_string": ('{"kind": 5}\n', 1, "'kind' must be a string"),
    "amount_string": ('{"seq": 1, "kind": "authorize", "amount": "fifty"}\n', 1, "'amount' must be a number"),
    "amount_bool": ('\n\n{"seq": 1, "kind": "authorize", "amount": true}\n', 3, "'amount' must be a number"),
    "seq_float": ('{"seq": 1.5, "kind": "authorize"}\n', 1, "'seq' must be an integer"),
    "seq_string": ('{"seq": "2", "kind": "authorize"}\n', 1, "'seq' must be an integer"),
    "seq_bool": ('{"seq": true, "kind": "authorize"}\n', 1, "'seq' must be an integer"),
    "seq_duplicate": (
        '{"seq": 1, "kind": "authorize"}\n{"seq": 2, "kind": "effect"}\n{"seq": 1, "kind": "reverse"}\n',
        3,
        "duplicate seq 1 (first on line 1)",
    ),
}


@pytest.mark.parametrize(("text", "line", "fragment"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_load_trace_names_the_malformed_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert fragment in info.value.problem
    assert isinstance(info.value, ValueError)


def test_load_trace_rejects_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b'{"kind": "log_meta"}\n{"kind": "\xff"}\n')
    with pytest.raises(TraceError, match=r"^line 2: not valid UTF-8"):
        load_trace(path)


# --------------------------------------------------------------------------
# Properties


GOOD = [load_trace(TRACES / "trace_a.jsonl")] + [
    load_trace(TRACES / "good" / f"{stem}.jsonl") for stem in STEMS
]
GOOD_CONTRACTS = [POST] + [contract_of(case) for case in LIBRARY]
ALL_FILES = [(TRACES / f"trace_{n}.jsonl", POST) for n in "abc"] + [
    (TRACES / side / f"{case['stem']}.jsonl", contract_of(case)) for case in LIBRARY for side in ("bad", "good")
]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_record_order_in_the_list_never_matters(data: st.DataObject) -> None:
    path, contract = data.draw(st.sampled_from(ALL_FILES))
    records = load_trace(path)
    shuffled = data.draw(st.permutations(records))
    assert grade_trace(shuffled, contract) == grade_trace(records, contract)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_dropping_log_meta_or_a_middle_record_of_a_good_trace_is_unscorable(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(GOOD) - 1))
    records, contract = GOOD[index], GOOD_CONTRACTS[index]
    keep = data.draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)))
    kept = data.draw(st.permutations([r for r, k in zip(records, keep, strict=True) if k]))
    verdict = grade_trace(kept, contract)  # never raises

    seqs = {r["seq"] for r in kept if "seq" in r}
    dropped_meta = not any(r["kind"] == "log_meta" for r in kept)
    dropped_middle = any("seq" in r and r["seq"] < max(seqs, default=0) and r["seq"] not in seqs for r in records)
    if dropped_meta or dropped_middle:
        # Never a pass; and a good trace shows no failure, so never a
        # violation either: what is left is "cannot tell".
        assert verdict.verdict == "unscorable", verdict.reasons
        assert verdict.checks["evidence_complete"] == "fail"


_FIELD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["A", "B", "refund", "capture", "K", "R1", "R2", "effect", "authorize", "reverse"]),
    st.lists(st.integers(), max_size=2),
)
_RECORD = st.one_of(
    st.dictionaries(
        st.sampled_from(["seq", "kind", "op", "order", "amount", "key", "receipt", "new_effect", "complete"]),
        _FIELD_VALUES,
    ),
    st.fixed_dictionaries({"kind": st.sampled_from(["authorize", "effect", "reverse", "log_meta", "summary", "x"])},
                          optional={"seq": st.integers(0, 6), "order": st.sampled_from(["A", "B"]),
                                    "amount": st.sampled_from([50, 49.99, 50.0]), "op": st.just("refund"),
                                    "key": st.sampled_from(["K", "K2", None]), "receipt": st.sampled_from(["R1", "R2"]),
                                    "new_effect": st.booleans(), "complete": st.booleans()}),
    _FIELD_VALUES,
)


@settings(max_examples=400, deadline=None)
@given(records=st.lists(_RECORD, max_size=8), allow_reversal=st.booleans())
def test_arbitrary_records_never_raise_and_respect_the_verdict_rule(records: list, allow_reversal: bool) -> None:
    verdict = grade_trace(records, Contract("A", 50, allow_reversal=allow_reversal))
    assert isinstance(verdict, Verdict)
    assert list(verdict.checks) == list(CHECKS)
    assert set(verdict.checks.values()) <= {"pass", "fail", "unknown"}
    failed = any(verdict.checks[name] == "fail" for name in CHECKS[:5])
    expected = "violation" if failed else "pass" if set(verdict.checks.values()) == {"pass"} else "unscorable"
    assert verdict.verdict == expected
    if verdict.checks["evidence_complete"] != "pass":
        # Incomplete evidence never lets a check pass.
        assert "pass" not in verdict.checks.values()


def test_log_meta_last_seq_exposes_a_lost_tail():
    """An extension of SPEC §9: a log_meta may state the last seq, so a record lost from the end shows."""
    contract = Contract("A", 50, op="refund")
    good = [
        {"kind": "log_meta", "complete": True, "last_seq": 2},
        {"seq": 1, "t": 1, "kind": "authorize", "order": "A", "amount": 50},
        {"seq": 2, "t": 2, "kind": "effect", "op": "refund", "order": "A", "amount": 50,
         "key": "K", "receipt": "R1", "new_effect": True},
    ]
    assert grade_trace(good, contract).verdict == "pass"
    tail_lost = [dict(good[0], last_seq=3)] + good[1:]
    v = grade_trace(tail_lost, contract)
    assert v.verdict == "unscorable" and v.checks["evidence_complete"] == "fail"
    assert "last seq is 3" in v.reasons["evidence_complete"]
    assert grade_trace([dict(good[0], last_seq="two")] + good[1:], contract).verdict == "unscorable"


# --------------------------------------------------------------------------
# The grader stands alone: a trace people bring needs neither pandas nor the simulator

def test_grading_imports_neither_pandas_nor_the_simulator():
    code = ("import sys, finbench.grading, finbench.cli; "
            "bad = [m for m in ('pandas', 'numpy', 'finbench.sim.world', 'finbench.sim.env', 'finbench.running.evaluation') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "finbench.grading" in names and "pandas" not in names and "finbench.sim.world" not in names
