"""The last doors of `python -m finbench eval` (issue 29, part 4): an agent that exits or hangs, an --out that
cannot hold the card, a name that would rewrite the card or the terminal. Each door: its exit code and one line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finbench.cli import main
from finbench.errors import show
from tests.patient import PATIENT

ROOT = Path(__file__).resolve().parents[1]

# the doors are process-level: real processes, workers and timers (about 30 s in all): `make test`, not the fast tier
# tests marked slow wait on deadlines, threads and worker processes

DOORS = '''
import os, sys, threading, time
''' + PATIENT + '''
class Bare(BaseException):
    pass

class Quitter(Patient):
    name = "quitter"
    def act(self, obs):
        sys.exit(0)

class Barer(Patient):
    name = "barer"
    def begin(self, brief):
        raise Bare("out of band")

class QuitMaker(Patient):
    name = "quit_maker"
    def __init__(self):
        sys.exit(3)

MADE = []

class QuitRemaker(Patient):
    """Made once at start; exits when made again for the first episode."""
    name = "quit_remaker"
    def __init__(self):
        MADE.append(1)
        if len(MADE) > 1:
            sys.exit(4)

class LateQuitter(Patient):
    name = "late_quitter"
    def act(self, obs):
        if self.order == "ord-0025":
            sys.exit(0)
        return super().act(obs)

class Sleepy(Patient):
    name = "sleepy"
    def act(self, obs):
        time.sleep(3600)

class Spinner(Patient):
    """Loops forever, swallowing every Exception: the limit must still end it."""
    name = "spinner"
    def act(self, obs):
        while True:
            try:
                pass
            except Exception:
                pass

class SlowMaker(Patient):
    name = "slow_maker"
    def __init__(self):
        time.sleep(3600)

class LateSleepy(Patient):
    name = "late_sleepy"
    def act(self, obs):
        if self.order == "ord-0025":
            time.sleep(3600)
        return super().act(obs)

class Slow(Patient):
    """A slow but honest agent: 0.3 s for its first call, under the limit."""
    name = "slow"
    def act(self, obs):
        if obs["t"] == 120 and self.order == "ord-0001":
            time.sleep(0.3)
        return super().act(obs)

class Threader(Patient):
    """Starts a thread that never ends and is no daemon, once per process, and notes the process."""
    name = "threader"
    def begin(self, brief):
        if not any(t.name == "threader-forever" for t in threading.enumerate()):
            with open(os.environ["THREADER_PIDS"], "a") as f:
                f.write(f"{os.getpid()}\\n")
            threading.Thread(target=time.sleep, args=(3600,), name="threader-forever").start()
        super().begin(brief)

PARENT = os.getpid()

class WorkerThreader(Threader):
    """As Threader, in worker processes only: each must still leave once its work is done."""
    name = "worker_threader"
    def begin(self, brief):
        if os.getpid() == PARENT:
            return Patient.begin(self, brief)
        super().begin(brief)

class Shouter(Patient):
    name = "shouter"
    def act(self, obs):
        raise ValueError("\\x1b[2J\\x1b[31mgotcha\\x07\\nsecond line\\x9b1m")

class Gate1(Patient):
    name = " finality_gate "

class Gate2(Patient):
    name = "optimistic\\n"

class Gate3(Patient):
    name = "\\x1b[1mfinality_gate\\x1b[0m"

class Blank(Patient):
    name = " \\t "

class Long(Patient):
    name = "x" * 300

class Piped(Patient):
    name = "my|agent\\n# Owned\\x1b[31m*bold*"

def makes_three():
    return 3
'''
LINES = DOORS.splitlines()


def line_of(text: str) -> int:
    return LINES.index(text) + 1


@pytest.fixture()
def doors(tmp_path: Path) -> Path:
    path = tmp_path / "doors.py"
    path.write_text(DOORS)
    return path


def run_eval(capsys, *args) -> tuple[int, str, str]:
    code = main(["eval", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def run_process(*args, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "finbench", "eval", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def last_line(stderr: str) -> str:
    """The command's own line: after the progress bar's, before anything joblib's resource tracker may add once
    the command has exited (a worker stopped mid-chunk)."""
    lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if ln.startswith("finbench eval: ")), lines[-1] if lines else "")


# --- an agent that exits, or is not a policy at all -------------------------------------------------------------

@pytest.mark.parametrize("spec, code, says", [
    ("{doors}:Quitter", 70, "the agent 'quitter' called sys.exit(0) (line {quit}, in act); raised by policy "
                            "'quitter'.act at step 1 (t=120) (task ord-0001, seed 0)"),
    ("{doors}:Barer", 70, "the agent 'barer' raised Bare: out of band (line {bare}, in begin) (task ord-0001, "
                          "seed 0)"),
    ("{doors}:QuitMaker", 70, "the agent '{doors}:QuitMaker' called sys.exit(3) (line {quit_make}, in __init__) "
                              "while being made"),
    ("{doors}:LateQuitter", 70, "the agent 'late_quitter' called sys.exit(0) (line {late_quit}, in act); raised "
                                "by policy 'late_quitter'.act at step 1 (t=120)"),
    ("{doors}:QuitRemaker", 70, "the agent 'quit_remaker' called sys.exit(4) (line {quit_remake}, in __init__) (task "
                                "ord-0001, seed 0)"),
    ("sys:exit", 65, "sys:exit is a built-in function, not a policy: give a class with begin(brief) and "
                     "act(observation), a factory of no arguments returning one, or such an object"),
    ("os:getcwd", 65, "os:getcwd is a built-in function, not a policy"),
    ("{doors}:makes_three", 65, "made 3, which lacks begin(brief) and act(observation)"),
], ids=["sys-exit-in-act", "base-exception-in-begin", "sys-exit-in-constructor", "sys-exit-mid-run",
        "sys-exit-in-an-episode-constructor", "builtin-exit", "builtin-getcwd", "factory-of-no-policy"])
def test_an_agent_that_exits_or_is_no_policy(spec, code, says, doors, tmp_path, capsys):
    spec = spec.format(doors=doors)
    says = says.format(doors=doors, quit=line_of("        sys.exit(0)"), quit_make=line_of("        sys.exit(3)"),
                       bare=line_of('        raise Bare("out of band")'), late_quit=line_of("            sys.exit(0)"),
                       quit_remake=line_of("            sys.exit(4)"))
    got, out, err = run_eval(capsys, spec, "--n-tasks", "30", "--seeds", "1", "--n-jobs", "1", "--no-cache",
                             "--out", tmp_path / "card")
    assert got == code, err
    assert err.count("\n") == 1 and last_line(err).startswith("finbench eval: ") and says in last_line(err), err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "card").exists()


@pytest.mark.slow
def test_sys_exit_in_a_worker_process_exits_70(doors, tmp_path):
    """Run as a user runs it, two workers: the agent calls sys.exit(0) on a task past the first chunk."""
    proc = run_process(f"{doors}:LateQuitter", "--n-tasks", "30", "--seeds", "1", "--n-jobs", "2", "--no-cache",
                       "--out", tmp_path / "card")
    assert proc.returncode == 70, proc.stderr
    assert last_line(proc.stderr) == (
        f"finbench eval: the agent 'late_quitter' called sys.exit(0) (line {line_of('            sys.exit(0)')}, in "
        "act); raised by policy 'late_quitter'.act at step 1 (t=120)"), proc.stderr
    assert proc.stdout == "" and not (tmp_path / "card").exists()


# --- a wall-clock limit per episode ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("spec, says", [
    ("{doors}:Sleepy", "the agent 'sleepy' ran over the limit of 1 s per episode (--episode-timeout) on task "
                       "ord-0001, seed 0 (line {sleep}, in act); raised by policy 'sleepy'.act at step 1 (t=120)"),
    ("{doors}:Spinner", "the agent 'spinner' ran over the limit of 1 s per episode (--episode-timeout) on task "
                        "ord-0001, seed 0 (line"),
    ("{doors}:LateSleepy", "the agent 'late_sleepy' ran over the limit of 1 s per episode (--episode-timeout) on "
                           "task ord-0025, seed 0 (line {late_sleep}, in act); raised by policy 'late_sleepy'.act at "
                           "step 1 (t=120)"),
    ("{doors}:SlowMaker", "the agent '{doors}:SlowMaker' ran over the limit of 1 s per episode (--episode-timeout) "
                          "(line {slow_make}, in __init__) while being made"),
], ids=["sleeps", "spins", "hangs-mid-run", "constructor-hangs"])
def test_a_hanging_agent_is_stopped_in_one_episode(spec, says, doors, tmp_path, capsys):
    spec = spec.format(doors=doors)
    says = says.format(doors=doors, sleep=line_of("        time.sleep(3600)"),
                       late_sleep=line_of("            time.sleep(3600)"),
                       slow_make=LINES.index("        time.sleep(3600)", line_of("class SlowMaker(Patient):")) + 1)
    start = time.monotonic()
    got, out, err = run_eval(capsys, spec, "--n-tasks", "30", "--seeds", "1", "--n-jobs", "1", "--no-cache",
                             "--episode-timeout", "1", "--out", tmp_path / "card")
    assert time.monotonic() - start < 30
    assert got == 70, err
    assert err.count("\n") == 1 and last_line(err).startswith("finbench eval: ") and says in last_line(err), err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "card").exists()


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_limit_holds_in_worker_processes(jobs, doors, tmp_path):
    start = time.monotonic()
    proc = run_process(f"{doors}:LateSleepy", "--n-tasks", "30", "--seeds", "1", "--n-jobs", jobs, "--no-cache",
                       "--episode-timeout", "2", "--out", tmp_path / "card", timeout=90)
    took = time.monotonic() - start
    assert proc.returncode == 70, proc.stderr
    assert last_line(proc.stderr) == (
        "finbench eval: the agent 'late_sleepy' ran over the limit of 2 s per episode (--episode-timeout) on task "
        f"ord-0025, seed 0 (line {line_of('            time.sleep(3600)')}, in act); raised by policy "
        "'late_sleepy'.act at step 1 (t=120)"), proc.stderr
    assert took < 60 and proc.stdout == "" and not (tmp_path / "card").exists()


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["5", "0", "none"])
def test_a_slow_honest_agent_is_not_stopped(limit, doors, tmp_path, capsys):
    got, out, err = run_eval(capsys, f"{doors}:Slow", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                             "--no-cache", "--episode-timeout", limit, "--out", tmp_path / "card")
    assert got == 0, err
    assert (tmp_path / "card" / "report.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("agent, jobs, tasks, processes", [("Threader", "1", "9", {1}), ("Threader", "2", "30", {2, 3}),
                                                            ("WorkerThreader", "2", "30", {1, 2})])
def test_a_thread_the_agent_leaves_does_not_keep_the_process(agent, jobs, tasks, processes, doors, tmp_path):
    """The card is written and the command exits with 0 at once, though the agent started a thread that never
    ends, in the command's process and (two workers) in the workers; none of those processes is left behind."""
    pids = tmp_path / "pids"
    start = time.monotonic()
    proc = run_process(f"{doors}:{agent}", "--n-tasks", tasks, "--seeds", "1", "--n-jobs", jobs, "--no-cache",
                       "--out", tmp_path / "card", timeout=90, env={"THREADER_PIDS": str(pids)})
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 60 and (tmp_path / "card" / "report.md").is_file()
    started = {int(p) for p in pids.read_text().split()}
    # the command's process, and the workers': one worker may take every chunk before the other starts
    assert len(started) in processes
    deadline = time.monotonic() + 20
    while started and time.monotonic() < deadline:
        started = {p for p in started if _alive(p)}
        time.sleep(0.2)
    assert not started, f"left running: {started}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited


# --- where the card goes -------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("out, why", [
    ("{file}", "it exists and is not a folder"),
    ("/dev/null", "it exists and is not a folder"),
    ("{file}/card", "{file} is not a folder"),
    ("{tmp}/{long}/card", "a name in it is longer than a file name may be (300 bytes, at most 255)"),
], ids=["a-file", "dev-null", "under-a-file", "name-too-long"])
def test_an_out_that_cannot_hold_the_card_exits_64(out, why, doors, tmp_path, capsys):
    file = tmp_path / "somefile"
    file.write_text("not a folder\n")
    fmt = dict(file=file, tmp=tmp_path, long="y" * 300)
    out, why = out.format(**fmt), why.format(**fmt)
    got, stdout, err = run_eval(capsys, f"{doors}:Patient", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                                "--no-cache", "--out", out)
    assert got == 64, err
    assert err == (f"finbench eval: argument --out: must be a folder the card can be written to, got {show(out)}: "
                   f"{why} (see finbench eval --help)\n")
    assert stdout == "" and file.read_text() == "not a folder\n"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux /proc only")
def test_an_out_the_system_refuses_is_found_before_the_first_episode(doors, tmp_path, capsys):
    """/proc/x passes every check of the path's shape (its parent is a folder root may write to); only making
    it fails. The command makes and removes a file there before the first episode: nothing is played."""
    got, stdout, err = run_eval(capsys, f"{doors}:Patient", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                                "--no-cache", "--out", "/proc/x")
    assert got == 64, err
    assert err.startswith("finbench eval: argument --out: must be a folder the card can be written to, got '/proc/x'")
    assert stdout == "" and not os.path.exists("/proc/x")


@pytest.mark.slow
def test_the_installed_command_exits_though_a_thread_is_left(doors, tmp_path):
    """The `finbench` console script (not `python -m finbench`) writes the card, exits 0 and says why it did
    not wait for the thread the agent left."""
    exe = Path(sys.executable).parent / "finbench"
    proc = subprocess.run([str(exe), "eval", f"{doors}:Threader", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                           "--no-cache", "--out", str(tmp_path / "card")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=90, env={**os.environ, "THREADER_PIDS": str(tmp_path / "pids")})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "card" / "report.md").is_file() and "exiting although 1 thread(s)" in proc.stderr


@pytest.mark.slow
def test_an_unwritable_out_exits_64(doors, tmp_path, capsys, monkeypatch):
    """A folder the process may not write in (root may write anywhere, so os.access is asked as a user would be)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked else real(p, mode, **kw))
    got, _, err = run_eval(capsys, f"{doors}:Patient", "--n-tasks", "9", "--seeds", "1", "--no-cache",
                           "--out", locked / "card")
    assert got == 64, err
    assert err == (f"finbench eval: argument --out: must be a folder the card can be written to, got "
                   f"{show(str(locked / 'card'))}: {locked} is not writable (see finbench eval --help)\n")


@pytest.mark.slow
def test_a_name_too_long_for_the_default_folder_exits_64(doors, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FINBENCH_ROOT", str(tmp_path))
    got, out, err = run_eval(capsys, f"{doors}:Long", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                             "--no-cache")
    assert got == 64, err
    assert err == (f"finbench eval: the agent's name {show('x' * 300)} is 300 bytes, too long for the folder "
                   "build/eval/<name>/ the card goes to by default (at most 255); give --out DIR\n")
    assert not (tmp_path / "build").exists() and out == ""


def test_a_card_that_cannot_be_written_after_the_run_exits_73(doors, tmp_path, capsys, monkeypatch):
    """The file system fails only once the run is done (a full disk): not the agent's fault, nor a bug."""
    from finbench.card import ReportCard

    def full(self, out):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ReportCard, "write", full)
    got, out, err = run_eval(capsys, f"{doors}:Patient", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                             "--no-cache", "--out", tmp_path / "card")
    assert got == 73
    assert last_line(err) == f"finbench eval: cannot write the card into {tmp_path / 'card'}: No space left on device"
    assert err.count("\n") == 1 and out == ""


# --- names: not one of the nine, and never markup or terminal control ------------------------------------------

@pytest.mark.parametrize("spec, says", [
    ("{doors}:Gate1", "{doors}:Gate1 is labelled ' finality_gate ', which reads as 'finality_gate', one of the nine "
                      "it is compared with; give it another name (its `name` attribute)"),
    ("{doors}:Gate2", "{doors}:Gate2 is labelled 'optimistic\\n', which reads as 'optimistic', one of the nine"),
    ("{doors}:Gate3", "{doors}:Gate3 is labelled '\\x1b[1mfinality_gate\\x1b[0m', which reads as 'finality_gate', "
                      "one of the nine"),
    ("{doors}:Blank", "{doors}:Blank is labelled ' \\t ', which reads as nothing; give it a name (its `name` "
                      "attribute)"),
], ids=["spaces", "newline", "escapes", "blank"])
def test_a_name_that_reads_as_one_of_the_nine_exits_65(spec, says, doors, tmp_path, capsys):
    got, out, err = run_eval(capsys, spec.format(doors=doors), "--n-tasks", "9", "--seeds", "1", "--no-cache",
                             "--out", tmp_path / "card")
    assert got == 65, err
    assert says.format(doors=doors) in err, err
    assert err.count("\n") == 1 and "\x1b" not in err and out == ""
    assert not (tmp_path / "card").exists()


@pytest.mark.slow
def test_a_name_cannot_add_markdown_or_move_the_terminal(doors, tmp_path, capsys):
    got, out, err = run_eval(capsys, f"{doors}:Piped", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                             "--no-cache", "--out", tmp_path / "card")
    assert got == 0, err
    report = (tmp_path / "card" / "report.md").read_text()
    shown = r"my\|agent # Owned\*bold\*"  # the escape sequence dropped, the newline a space, | and * escaped
    assert report.startswith(f"# Report card: {shown}\n")
    assert not any(line.startswith("# Owned") for line in report.splitlines())
    assert "\x1b" not in report and f"**{shown}**" in report
    for table in re.findall(r"(?:^\|.*\|\n)+", report, flags=re.M):  # every row of a table has the header's cells
        cells = {len(re.split(r"(?<!\\)\|", row)) for row in table.splitlines()}
        assert len(cells) == 1, table
    printed = out + err
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed.replace("\r", "")), printed
    assert "> my|agent # Owned*bold*" in out  # the summary's row: one line, as printable text


def test_control_bytes_never_reach_the_terminal(doors, tmp_path, capsys):
    got, out, err = run_eval(capsys, f"{doors}:Shouter", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                             "--no-cache", "--out", tmp_path / "card")
    assert got == 70
    assert err.count("\n") == 1 and "raised ValueError: gotcha second line" in err, err
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", err), repr(err)


@pytest.mark.slow
def test_help_states_the_doors(capsys):
    assert main(["eval", "--help"]) == 0
    text = re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))  # argparse wraps after a hyphen too
    for says in ("--episode-timeout SECONDS", "default: 300", "0 or none: no limit",
                 "64 a bad option value, AGENT spelling or --out", "65 AGENT names nothing usable",
                 "a built-in function", "reads as one of the nine", "AGENT is one of the nine, such as finality_gate",
                 "a --task-ids id the public corpus does not hold", "70 the agent raised, exited (sys.exit) or "
                 "ran over --episode-timeout", "73 the card could not be written after the run"):
        assert says in text, says
