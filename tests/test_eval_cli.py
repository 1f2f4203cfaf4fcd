"""`python -m finbench eval AGENT` (issue 22): a report card for a user's agent, and one line for each bad input."""
from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import finbench as fb
from finbench.agents.registry import DEFAULT_POLICIES
from finbench.analysis.tables import read_table
from finbench.cli import build_parser, main
from finbench.grading import CHECKS
from tests.patient import PATIENT

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

AGENTS = PATIENT + '''
class Boom(Patient):
    name = "boom"
    def act(self, obs):
        if obs["t"] > 125:
            raise ValueError("no luck")
        return super().act(obs)

class LateBoom(Patient):
    """Fine on the first task; raises on ord-0025 (in a worker process when run in parallel)."""
    name = "late_boom"
    def act(self, obs):
        if self.order == "ord-0025":
            raise KeyError("late")
        return super().act(obs)

class Shout(Patient):
    name = "shout"
    def act(self, obs):
        return "ship"

class Fussy(Patient):
    name = "fussy"
    def __init__(self):
        raise RuntimeError("no constructor today")

class Gate(Patient):
    name = "finality_gate"

class NoAct:
    def begin(self, brief):
        pass

def needs(x):
    return Patient()

def factory():
    return Patient()

LIMIT = 3
'''


@pytest.fixture()
def agents(tmp_path: Path) -> Path:
    path = tmp_path / "agents.py"
    path.write_text(AGENTS)
    return path


def run_eval(capsys, *args) -> tuple[int, str, str]:
    code = main(["eval", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_the_readme_patient_card(agents, tmp_path, capsys):
    """The acceptance run: the README's Patient at 30 tasks x 2 seeds, well under a minute, naming the agent,
    the gate and violations; every number checked against the rows it wrote or a separate evaluation."""
    out_dir = tmp_path / "card"
    start = time.monotonic()
    code, out, err = run_eval(capsys, f"{agents}:Patient", "--n-tasks", "30", "--seeds", "2", "--n-jobs", "2",
                              "--no-cache", "--out", out_dir)
    took = time.monotonic() - start
    assert code == 0, err
    assert took < 60
    report = (out_dir / "report.md").read_text()
    assert report.startswith("# Report card: patient")
    assert "finality_gate" in report and "violation" in report and "**patient**" in report
    assert (out_dir / "worst_twin_pair.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![worst twin pair](worst_twin_pair.png)" in report

    rows = read_table(out_dir / "rows.csv")
    assert len(rows) == 30 * 2 and set(rows["policy"]) == {"patient"}
    # the same episodes as evaluating Patient alone (a separate run, no cache)
    ns: dict = {}
    exec(AGENTS, ns)
    alone = fb.evaluate(fb.make_corpus(n_tasks=30), [ns["Patient"]], seeds=range(2), cache=False)
    assert rows["gap"].tolist() == pytest.approx(alone["gap"].tolist())
    assert rows["verdict"].tolist() == alone["verdict"].tolist()

    # the summary's agent line, from the rows
    line = next(ln for ln in out.splitlines() if ln.startswith("> patient"))
    exact, gap = 100 * alone["exact"].mean(), alone["gap"].mean()
    violation = 100 * (alone["verdict"] == "violation").mean()
    premature = 100 * alone["premature_irreversible"].mean()
    assert line.split()[2:4] == [f"{exact:.1f}", f"{gap:.1f}"]
    assert line.split()[5:7] == [f"{premature:.1f}", f"{violation:.1f}"]
    assert f"effect verdicts: pass {100 - violation - 100 * (alone['verdict'] == 'unscorable').mean():.1f}%" in out
    # every policy of the nine is in the table, the agent last
    names = [ln.split()[0] for ln in out.splitlines()[3:13]]
    assert names == list(DEFAULT_POLICIES) + [">"]

    # the checks it fails most: the top one is the one its rows fail most
    fails = {c: (alone[f"check_{c}"] == "fail").mean() for c in CHECKS}
    top = max(CHECKS, key=lambda c: (fails[c], -CHECKS.index(c)))
    if fails[top] > 0:
        assert re.search(rf"checks failed most: {top} {100 * fails[top]:.1f}%", out)

    # the worst twin pair against the gate: the (pair, seed) whose mean gap over its two halves most exceeds the
    # gate's on the same pair and seed (the gate evaluated apart)
    gate = fb.evaluate(fb.make_corpus(n_tasks=30), ["finality_gate"], seeds=range(2), cache=False)
    loss = alone[alone["twin_side"].notna()].groupby(["unit", "seed"], sort=False)["gap"].mean()
    gate_loss = gate[gate["twin_side"].notna()].groupby(["unit", "seed"], sort=False)["gap"].mean()
    unit, seed = (loss - gate_loss).idxmax()
    assert (f"worst twin pair against the gate: {unit} seed {seed}, paired loss ${loss[(unit, seed)]:.2f} (gate "
            f"${gate_loss[(unit, seed)]:.2f}, {loss[(unit, seed)] - gate_loss[(unit, seed)]:+.2f})") in out
    assert f"{unit} (tasks {unit}:settle settling, {unit}:fail failing), seed {seed}:" in report
    assert (unit, seed) != loss.idxmax()  # by its own loss alone it would be a pair the gate loses as much

    # the README shows the card's first lines as this command prints them
    shown = [ln[2:] if ln.startswith("# ") else ln[1:] for ln in _readme_block().splitlines() if ln.startswith("#")]
    printed = out.splitlines()
    assert shown[-1] == "..." and shown[:-1] == printed[:len(shown) - 1]


def _readme_block() -> str:
    section = README[README.index("## Test your agent in one command\n"):]
    return re.search(r"^```sh\n(.*?)^```", section, flags=re.S | re.M).group(1)


def test_the_readme_block_runs_the_readme_policy():
    """The README's block writes the same Patient as the README's Python example and runs it as shown."""
    block = _readme_block()
    assert "-m finbench eval /tmp/patient.py:Patient --n-tasks 30 --seeds 2" in block
    body = block.split("<<'END'\n")[1].split("\nEND\n")[0]
    assert textwrap.dedent(AGENTS.split("class Boom")[0]).strip() == body.strip()


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_options_reach_the_run(agents, tmp_path, capsys):
    out_dir = tmp_path / "card"
    code, out, err = run_eval(capsys, f"{agents}:factory", "--n-tasks", "12", "--seeds", "1", "--n-jobs", "1",
                              "--no-cache", "--out", out_dir, "--profile", "only:loss,delay", "--probe",
                              "delayed:60", "--costs", "dispute_fee=50,step_budget=30")
    assert code == 0, err
    report = (out_dir / "report.md").read_text()
    for entry in ("profile: only:delay+loss", "probe: delayed[D=60]", "costs: dispute_fee=50,step_budget=30",
                  "tasks: 12", "seeds: 0", "agent: patient"):
        assert f"- {entry}\n" in report
    rows = read_table(out_dir / "rows.csv")
    ns: dict = {}
    exec(AGENTS, ns)
    alone = fb.evaluate(fb.make_corpus(n_tasks=12), [ns["Patient"]], seeds=[0], cache=False,
                        profile=fb.FaultProfile.only("loss", "delay"), probe=fb.ProbeMode.delayed(60),
                        costs=fb.Costs(dispute_fee=50.0, step_budget=30))
    assert rows["gap"].tolist() == pytest.approx(alone["gap"].tolist())


@pytest.mark.parametrize("spec, code, says", [
    ("{dir}/absent.py:Patient", 66, "no such file"),
    ("{dir}:Patient.py", 64, "AGENT must be"),
    ("{agents}", 64, "AGENT must be PATH.py:NAME or module:NAME"),
    ("{agents}:Nope", 65, "has no 'Nope'; policies it defines: Boom, Fussy, Gate, LateBoom, Patient, Shout"),
    ("{dir}/broken.py:Patient", 65, "does not import: SyntaxError"),
    ("{dir}/imports.py:Patient", 65, "does not import: ModuleNotFoundError: No module named 'no_such_module_xyz' (line 2"),
    ("{agents}:LIMIT", 65, "is 3, not a policy"),
    ("{agents}:NoAct", 65, "without begin(brief) and act(observation): not a policy"),
    ("{agents}:needs", 65, "takes arguments"),
    ("{agents}:Gate", 65, "labelled 'finality_gate', one of the nine"),
    ("finality_gate", 65, "AGENT 'finality_gate' is one of the nine it is compared with"),
    ("sop", 65, "AGENT 'sop' is one of the nine it is compared with"),
    ("no_such_module_xyz:Patient", 66, "no module named 'no_such_module_xyz'"),
    # probes every 5 ticks from the hand-over at t=120: the first t above 125 is 130, the third call
    ("{agents}:Boom", 70, "the agent 'boom' raised ValueError: no luck (line {boom_line}, in act); raised by policy "
                          "'boom'.act at step 3 (t=130) (task ord-0001, seed 0)"),
    ("{agents}:Shout", 70, "policy 'shout' at step 1 (t=120): act(observation) must return (tool, args)"),
    ("{agents}:Fussy", 70, "raised RuntimeError: no constructor today (line {fussy_line}, in __init__) while being made"),
], ids=["missing-file", "folder", "no-name", "missing-name", "syntax", "import", "not-a-policy", "no-act",
        "needs-args", "label-of-the-nine", "builtin-gate", "builtin-sop", "missing-module", "raises", "bad-answer",
        "constructor-raises"])
def test_each_bad_agent_has_its_code_and_one_line(spec, code, says, agents, tmp_path, capsys):
    (tmp_path / "broken.py").write_text("class Patient:\n    def begin(self, brief) pass\n")
    (tmp_path / "imports.py").write_text("import os\nimport no_such_module_xyz\n")
    spec = spec.format(dir=tmp_path, agents=agents)
    lines = AGENTS.splitlines()
    says = says.format(boom_line=lines.index('            raise ValueError("no luck")') + 1,
                       fussy_line=lines.index('        raise RuntimeError("no constructor today")') + 1)
    got, out, err = run_eval(capsys, spec, "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1", "--no-cache",
                             "--out", tmp_path / "card")
    assert got == code, err
    assert err.count("\n") == 1 and err.startswith("finbench eval: ") and says in err, err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "card").exists()


@pytest.mark.parametrize("option, value, says", [
    ("--profile", "sometimes", "argument --profile: must be default, none, only:FAMILIES"),
    ("--profile", "only:loss,bogus", "argument --profile"),
    ("--probe", "fast", "argument --probe: must be full, none, delayed[:D]"),
    ("--probe", "delayed:0", "argument --probe"),
    ("--costs", "tip=3", "argument --costs: must be key=value"),
    ("--costs", "dispute_fee=-1", "dispute_fee must be a finite number in [0, 1e+06]"),
    ("--seeds", "0", "argument --seeds: must be a positive integer"),
    ("--n-tasks", "many", "argument --n-tasks: must be a positive integer"),
    ("--n-jobs", "0", "argument --n-jobs"),
    ("--episode-timeout", "-1", "argument --episode-timeout: must be a number of seconds in [0.01, 86400], or 0 or "
                                "none for no limit, got '-1'"),
    ("--episode-timeout", "soon", "argument --episode-timeout: must be a number of seconds"),
    ("--episode-timeout", "nan", "argument --episode-timeout: must be a number of seconds"),
    ("--episode-timeout", "0.001", "argument --episode-timeout: must be a number of seconds"),
    ("--out", "", "argument --out: must be a folder the card can be written to, got '': it is empty"),
    ("--bogus", "1", "unrecognized arguments: --bogus 1"),
    ("--bogus\x1b[2J", "1", "unrecognized arguments: --bogus 1"),  # printed without its escape sequence
])
def test_unknown_option_values_exit_64_in_one_line(option, value, says, agents, tmp_path, capsys):
    got, out, err = run_eval(capsys, f"{agents}:Patient", "--no-cache", "--out", tmp_path / "card", option, value)
    assert got == 64
    assert err.count("\n") == 1 and says in err and "finbench eval --help" in err and "\x1b" not in err, err
    assert not (tmp_path / "card").exists()


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_an_agent_raising_in_a_worker_process_exits_70_with_its_step(agents, tmp_path):
    """Run as a user runs it: a real process, two workers; the agent raises on a task past the first chunk."""
    proc = subprocess.run([sys.executable, "-m", "finbench", "eval", f"{agents}:LateBoom", "--n-tasks", "30",
                           "--seeds", "1", "--n-jobs", "2", "--no-cache", "--out", str(tmp_path / "card")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 70
    # the command's line: after the progress bar's, before what joblib's resource tracker may add once the
    # command has exited (a worker stopped mid-chunk leaves a semaphore behind)
    last = [ln for ln in proc.stderr.replace("\r", "\n").splitlines() if ln.startswith("finbench eval: ")][-1]
    assert last == ("finbench eval: the agent 'late_boom' raised KeyError: 'late'; raised by policy 'late_boom'.act "
                    "at step 1 (t=120)"), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_a_missing_file_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "finbench", "eval", f"{tmp_path}/nope.py:Patient"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 66
    assert proc.stderr == f"finbench eval: cannot read {tmp_path}/nope.py: no such file\n"


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_module_name_form(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_agents_mod.py").write_text(AGENTS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FINBENCH_ROOT", str(tmp_path / "root"))
    code, out, err = run_eval(capsys, "my_agents_mod:Patient", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                              "--no-cache")
    assert code == 0, err
    # run outside the clone (FINBENCH_ROOT), the default folder is the working directory's build/
    assert (tmp_path / "build" / "eval" / "patient" / "report.md").is_file()
    assert not (tmp_path / "root" / "build").exists()
    assert "> patient" in out
    # run inside the clone, from any of its folders, it is the clone's build/
    inside = tmp_path / "root" / "docs"
    inside.mkdir(parents=True)
    monkeypatch.chdir(inside)
    code, out, err = run_eval(capsys, "my_agents_mod:Patient", "--n-tasks", "9", "--seeds", "1", "--n-jobs", "1",
                              "--no-cache")
    assert code == 0, err
    assert (tmp_path / "root" / "build" / "eval" / "patient" / "report.md").is_file()
    assert not (inside / "build").exists()


def test_help_names_the_exit_codes(capsys):
    assert main(["eval", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for code in ("64 a bad option value", "65 AGENT names nothing usable", "66 no such file", "70 the agent raised"):
        assert code in text


def _help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", "--help"]) == 0
    return re.sub(r"-\s+", "-", " ".join(out.getvalue().split()))  # argparse wraps after a hyphen too


def test_a_builtin_name_as_agent_exits_with_the_code_the_help_states(capsys):
    """The issue: `eval finality_gate` exited 64 where the help says 65. The help's code for it, read from the
    help itself, is what the command returns."""
    text = _help()
    code = int(re.search(r"; (\d+) AGENT names nothing usable \([^;]*; AGENT is one of the nine, such as "
                         r"finality_gate", text).group(1))
    assert code == 65
    got, out, err = run_eval(capsys, "finality_gate", "--n-tasks", "9", "--seeds", "1", "--no-cache")
    assert got == code and out == "" and err.count("\n") == 1
    assert "give your own agent as PATH.py:NAME or module:NAME" in err


def test_n_tasks_says_which_corpus_it_builds():
    """`--n-tasks 30` is make_corpus(n_tasks=30), not the public corpus's first 30 tasks: the help says so, and
    that is still what it does (the same ids, other tasks)."""
    text = _help()
    assert ("--n-tasks N a corpus of N tasks generated from the public corpus's seed with its mix of archetypes "
            "scaled to N (make_corpus(n_tasks=N)); only N=321 is the public corpus") in text
    assert "to run tasks of the public corpus, give --task-ids" in text
    small, public = fb.make_corpus(n_tasks=30), fb.make_corpus()
    assert small.tasks[0].task_id == public.tasks[0].task_id == "ord-0001"
    assert sum(a == b for a, b in zip(small.tasks, public.tasks)) < 10  # ids from ord-0001 again, other tasks
    run = build_parser().parse_args(["eval", "x.py:Y", "--n-tasks", "30"])
    assert run.n_tasks == 30 and run.task_ids is None


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_task_ids_run_those_tasks_of_the_public_corpus(agents, tmp_path, capsys):
    public = fb.make_corpus()
    pair = next(t.unit for t in public.tasks if t.twin_side)
    code, out, err = run_eval(capsys, f"{agents}:Patient", "--task-ids", f"ord-0250,{pair},ord-0007", "--seeds", "2",
                              "--n-jobs", "1", "--no-cache", "--out", tmp_path / "card")
    assert code == 0, err
    rows = read_table(tmp_path / "card" / "rows.csv")
    ids = [t.task_id for t in public.tasks if t.task_id in ("ord-0250", "ord-0007") or t.unit == pair]
    assert list(dict.fromkeys(rows["task_id"])) == ids  # the public corpus's order, the pair whole
    ns: dict = {}
    exec(AGENTS, ns)
    assert rows["gap"].tolist() == pytest.approx([fb.run_episode(public[i], ns["Patient"](), s).gap
                                                  for i in ids for s in range(2)])
    report = (tmp_path / "card" / "report.md").read_text()
    assert f"- task_ids: {','.join(ids)}\n" in report and f"- tasks: {len(ids)}\n" in report


@pytest.mark.parametrize("value, says", [
    ("ord-9999", "argument --task-ids: the public corpus has no task 'ord-9999'"),
    ("ord-0007,nope", "argument --task-ids: the public corpus has no task 'nope'"),
    ("{half}", "argument --task-ids: '{half}' is one half of the twin pair {pair}: give {pair} for both halves"),
    (",", "argument --task-ids: must name at least one task"),
])
def test_an_unknown_task_id_exits_64_naming_it(value, says, agents, tmp_path, capsys):
    public = fb.make_corpus()
    half = next(t for t in public.tasks if t.twin_side)
    value, says = (x.format(half=half.task_id, pair=half.unit) for x in (value, says))
    got, out, err = run_eval(capsys, f"{agents}:Patient", "--task-ids", value, "--no-cache", "--out",
                             tmp_path / "card")
    assert got == 64 and out == "" and err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "card").exists()


def test_task_ids_and_n_tasks_do_not_go_together(agents, tmp_path, capsys):
    got, _, err = run_eval(capsys, f"{agents}:Patient", "--task-ids", "ord-0007", "--n-tasks", "9", "--no-cache")
    assert got == 64 and "not allowed with argument" in err


@pytest.mark.slow  # a subprocess, or a whole `eval` run with its card
def test_make_eval_passes_the_agent_and_the_arguments():
    proc = subprocess.run(["make", "-n", "eval", "AGENT=x.py:Y", "EVAL_ARGS=--seeds 2 --n-tasks 30"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "-m finbench eval 'x.py:Y' --seeds 2 --n-tasks 30" in proc.stdout


def test_report_card_from_python(agents):
    """The card without the command line, from a `Run`: the same numbers as Table II's agent row."""
    from finbench.experiments import headline
    from finbench.card import card_of

    ns: dict = {}
    exec(AGENTS, ns)
    run = fb.Run.make(n_tasks=12, seeds=range(2), policies=[*DEFAULT_POLICIES, ns["Patient"]], n_boot=200,
                      cache=False)
    card = card_of(run, "patient")
    t2 = headline.table2(run.evaluate(), run).set_index("policy")
    assert card.row()["exact_pct"] == t2.loc["patient", "exact_pct"]
    assert list(card.table3["policy"]) == ["patient", "finality_gate"]
    assert isinstance(card.own_rows, pd.DataFrame) and len(card.own_rows) == 24
    from finbench.card import report_card

    again = report_card(ns["Patient"], n_tasks=12, seeds=range(2), n_boot=200, cache=False)
    assert again.row()["mean_gap"] == t2.loc["patient", "mean_gap"] and again.agent == "patient"
    with pytest.raises(fb.FinbenchError, match="must include 'optimistic'"):
        card_of(run.replace(policies=[ns["Patient"], "finality_gate"]), "optimistic")
