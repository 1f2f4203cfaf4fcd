"""The command line, run as a user would: ``python -m finbench grade ...``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from finbench.cli import main
from finbench.grading import CHECKS

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "data" / "traces"
POST_ARGS = ["--order", "A", "--amount", "50"]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "finbench", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def status_lines(stdout: str) -> dict[str, str]:
    """Check name -> status from the first six output lines."""
    lines = stdout.splitlines()
    assert len(lines) == len(CHECKS) + 1, stdout
    return {line.split()[0]: line.split()[1] for line in lines[: len(CHECKS)]}


def test_trace_a_exits_0_with_every_check_passing() -> None:
    proc = run("grade", TRACES / "trace_a.jsonl", *POST_ARGS)
    assert proc.returncode == 0, proc.stderr
    assert status_lines(proc.stdout) == dict.fromkeys(CHECKS, "pass")
    assert list(status_lines(proc.stdout)) == list(CHECKS)
    assert proc.stdout.splitlines()[-1].startswith("verdict: pass")


def test_trace_b_exits_1_naming_the_two_failed_checks() -> None:
    proc = run("grade", "data/traces/trace_b.jsonl", *POST_ARGS, "--op", "refund")
    assert proc.returncode == 1, proc.stderr
    statuses = status_lines(proc.stdout)
    assert [name for name, s in statuses.items() if s == "fail"] == ["auth_precedes_effect", "exactly_one_effect"]
    assert proc.stdout.splitlines()[-1] == "verdict: violation (failed: auth_precedes_effect, exactly_one_effect)"
    # Each check line carries its reason after the status.
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("auth_precedes_effect"))
    assert "no earlier authorize" in line


def test_trace_b_with_reversal_allowed_still_exits_1() -> None:
    proc = run("grade", TRACES / "trace_b.jsonl", *POST_ARGS, "--allow-reversal")
    assert proc.returncode == 1, proc.stderr
    statuses = status_lines(proc.stdout)
    assert statuses["exactly_one_effect"] == "pass"
    assert statuses["auth_precedes_effect"] == "fail"


def test_trace_c_exits_2_unscorable() -> None:
    proc = run("grade", TRACES / "trace_c.jsonl", *POST_ARGS)
    assert proc.returncode == 2, proc.stderr
    statuses = status_lines(proc.stdout)
    assert statuses["evidence_complete"] == "fail"
    assert set(statuses[name] for name in CHECKS[:5]) == {"unknown"}
    assert proc.stdout.splitlines()[-1].startswith("verdict: unscorable")


def test_capture_contract_from_the_library() -> None:
    proc = run("grade", TRACES / "bad" / "double_capture.jsonl", "--order", "ord-0042", "--amount", "89.00",
               "--op", "capture")
    assert proc.returncode == 1, proc.stderr
    assert status_lines(proc.stdout)["exactly_one_effect"] == "fail"


def test_malformed_trace_exits_3_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"kind": "log_meta", "complete": true}\n\n{"seq": 1, "kind": "authorize", "amount": "50"}\n')
    proc = run("grade", path, *POST_ARGS)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"{path}: line 3: 'amount' must be a number below 1e+15, got '50'"


@pytest.mark.parametrize(
    "args",
    [
        [],  # no command
        ["grade"],  # no trace, no contract
        ["grade", "data/traces/trace_a.jsonl", "--amount", "50"],  # no --order
        ["grade", "data/traces/trace_a.jsonl", "--order", "A", "--amount", "fifty"],
        ["grade", "data/traces/trace_a.jsonl", "--order", "A", "--amount", "nan"],
        ["frobnicate"],
    ],
    ids=["no-command", "no-args", "no-order", "amount-word", "amount-nan", "unknown-command"],
)
def test_usage_errors_exit_64_not_2(args: list[str]) -> None:
    # argparse's own 2 would read as "unscorable" to a calling script.
    proc = run(*args)
    assert proc.returncode == 64
    assert "usage:" in proc.stderr


def test_missing_trace_file_exits_66(tmp_path: Path) -> None:
    proc = run("grade", tmp_path / "absent.jsonl", *POST_ARGS)
    assert proc.returncode == 66
    assert "cannot read" in proc.stderr


def test_main_returns_codes_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grade", str(TRACES / "trace_a.jsonl"), *POST_ARGS]) == 0
    assert main(["grade", str(TRACES / "trace_c.jsonl"), *POST_ARGS]) == 2
    assert main(["grade", str(TRACES / "trace_a.jsonl")]) == 64
    assert main(["--help"]) == 0
    assert "grade" in capsys.readouterr().out


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    out = subprocess.run([sys.executable, "-m", "finbench", "grade", str(fifo), "--order", "A", "--amount", "50"],
                         capture_output=True, text=True, timeout=30, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 66 and "not a regular file" in out.stderr


VOID = ('{"kind": "log_meta", "complete": true}\n'
        '{"seq": 1, "t": 1, "kind": "authorize", "order": "A", "amount": 50}\n'
        '{"seq": 2, "t": 2, "kind": "effect", "op": "void", "order": "A", "amount": 50, "key": "K", "receipt": "R1", '
        '"new_effect": true}\n')


@pytest.mark.parametrize("trace, args, code, says", [
    ("trace_a.jsonl", ["--op", "refnd"], 64,
     "finbench grade: --op must be an operation a record of the trace names or one of the trace schema's (capture, "
     "refund, ship), got 'refnd'; the trace names refund"),
    ("void", ["--op", "viod"], 64,
     "finbench grade: --op must be an operation a record of the trace names or one of the trace schema's (capture, "
     "refund, ship), got 'viod'; the trace names void"),
    ("trace_a.jsonl", ["--op", "ship"], 1, "verdict: violation"),  # one of the schema's: graded
    ("void", ["--op", "void"], 0, "verdict: pass"),  # one the trace names: graded
    ("trace_a.jsonl", ["--amount", "-50"], 64,
     "finbench grade: error: argument --amount: must be an amount in [0, 1e+15], got '-50'"),
    ("trace_a.jsonl", ["--amount=-0.01"], 64,
     "finbench grade: error: argument --amount: must be an amount in [0, 1e+15], got '-0.01'"),
    ("trace_a.jsonl", ["--amount", "1e16"], 64,
     "finbench grade: error: argument --amount: must be an amount in [0, 1e+15], got '1e16'"),
], ids=["op-typo", "op-typo-of-the-trace", "op-of-the-schema", "op-of-the-trace", "negative-amount",
        "negative-cents", "amount-too-large"])
def test_grade_doors(trace, args, code, says, tmp_path: Path) -> None:
    path = TRACES / trace
    if trace == "void":
        path = tmp_path / "void.jsonl"
        path.write_text(VOID)
    proc = run("grade", path, "--order", "A", "--amount", "50", *args)
    assert proc.returncode == code, proc.stderr
    if code == 64:
        assert proc.stdout == "" and proc.stderr.splitlines()[-1] == says, proc.stderr
    else:
        assert proc.stdout.splitlines()[-1].startswith(says), proc.stdout


def test_grade_prints_no_control_bytes(tmp_path: Path) -> None:
    """An order id the trace carries cannot move the terminal: reasons are printed without control bytes."""
    path = tmp_path / "ansi.jsonl"
    path.write_text(VOID.replace('"order": "A", "amount": 50, "key"',
                                 '"order": "B\\u001b[2J\\u009b31m", "amount": 50, "key"'))
    proc = run("grade", path, "--order", "A\x1b[31m", "--amount", "50", "--op", "void")
    assert proc.returncode == 1, proc.stderr
    assert "\x1b" not in proc.stdout and "\x9b" not in proc.stdout, proc.stdout


def test_reproduce_and_check_are_the_pipelines(monkeypatch):
    from finbench import cli, pipeline

    seen = []
    monkeypatch.setattr(pipeline, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["reproduce", "01_headline", "02_twins"]) == 0
    assert cli.main(["reproduce", "--paper"]) == 0
    assert cli.main(["reproduce"]) == 0
    assert cli.main(["check"]) == 0
    assert seen == [["01_headline", "02_twins"], ["--paper"], [], ["--check"]]
    assert cli.main(["reproduce", "--paper", "01_headline"]) == 64


def test_reproduce_refuses_an_unknown_notebook_before_running_any(capsys):
    from finbench import cli

    assert cli.main(["reproduce", "01_headlin"]) == 64
    assert "NAME must be a notebook" in capsys.readouterr().err


def test_task_ids_take_whole_twin_pairs_and_refuse_a_half_alone():
    """`eval --task-ids`: a twin pair's order id gives both halves; a half alone is refused (the card compares
    whole pairs); the two halves named one by one are a whole pair. (A rule test in the fast tier.)"""
    import argparse

    from finbench.commands.options import task_ids

    assert task_ids("ord-0014") == ("ord-0014:settle", "ord-0014:fail")
    assert task_ids("ord-0001, ord-0014:fail,ord-0014:settle") == ("ord-0001", "ord-0014:fail", "ord-0014:settle")
    for half in ("ord-0014:settle", "ord-0001,ord-0014:fail"):
        with pytest.raises(argparse.ArgumentTypeError, match="is one half of the twin pair ord-0014"):
            task_ids(half)
    with pytest.raises(argparse.ArgumentTypeError, match="has no task 'ord-9999'"):
        task_ids("ord-9999")
