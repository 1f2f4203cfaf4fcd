"""CI's stale-output check (issue 13): regenerated files that differ from the committed ones fail, by name."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from finbench.pipeline import OUTPUTS, stale

ROOT = Path(__file__).resolve().parent.parent


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture()
def repo(tmp_path):
    """A checkout holding copies of the committed tables and figures."""
    if shutil.which("git") is None:
        pytest.fail("git is needed for the stale-output check")
    for d in ("tables", "figures"):
        shutil.copytree(ROOT / d, tmp_path / d)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "outputs")
    return tmp_path


def _check(repo):
    return subprocess.run([sys.executable, "-m", "finbench.pipeline", "--check", str(repo)], capture_output=True,
                          text=True, cwd=ROOT)


def test_matching_outputs_pass(repo):
    out = _check(repo)
    assert out.returncode == 0, out.stderr
    assert stale(repo) == []


def test_an_edited_table_fails_naming_the_file(repo):
    path = repo / "tables" / "table2.csv"
    path.write_text(path.read_text().replace("finality_gate,", "finality_gate,9", 1))
    out = _check(repo)
    assert out.returncode == 1
    assert "tables/table2.csv: differs from the committed file" in out.stderr
    assert "tables/table4.csv" not in out.stderr


def test_new_and_missing_outputs_fail_naming_them(repo):
    (repo / "figures" / "figure2.png").unlink()
    (repo / "tables" / "extra.md").write_text("x\n")
    found = stale(repo)
    assert found == ["figures/figure2.png: is committed but was not regenerated",
                     "tables/extra.md: is new (not committed)"]
    assert _check(repo).returncode == 1


def test_outside_a_checkout_the_error_says_so(tmp_path):
    with pytest.raises(RuntimeError, match="git status failed"):
        stale(tmp_path)
    assert "tables" in OUTPUTS and "figures" in OUTPUTS


def _pipeline(*args, **kw):
    return subprocess.run([sys.executable, "-m", "finbench.pipeline", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, **kw)


@pytest.mark.parametrize("args, status, line", [
    (["00_corpus", "01_headlin"], 64, r"pipeline: NAME must be a notebook, one of 00_corpus, 01_headline, .*, "
                                      r"got '01_headlin'"),
    (["01_headlin", "00_corpus"], 64, r"pipeline: NAME must be a notebook, .*got '01_headlin'"),
    ([""], 64, r"pipeline: NAME must be a notebook, .*got ''"),
    (["--chek"], 64, r"pipeline: an option must be --paper alone, --check \[ROOT\] or --help, first, got '--chek'"),
    (["00_corpus", "--check"], 64, r"pipeline: an option must be --paper alone, --check \[ROOT\] or --help, first, got '--check'"),
    (["--check", "a", "b"], 64, r"pipeline --check: the arguments must be at most one folder \(ROOT\), "
                                r"got \['a', 'b'\]"),
    (["--check", "/nonexistent"], 66, r"pipeline --check: ROOT must be an existing folder \(a checkout of the "
                                      r"repository\), got '/nonexistent'"),
    (["--check", __file__], 66, r"pipeline --check: ROOT must be an existing folder .*got '.*test_pipeline.py'"),
])
def test_bad_arguments_exit_with_one_line_and_run_nothing(args, status, line):
    out = _pipeline(*args)
    assert out.returncode == status, out.stderr
    assert out.stdout == ""  # no notebook ran: each one prints its time
    assert re.fullmatch(line + "\n", out.stderr), out.stderr  # one line, no traceback


def test_a_folder_that_is_not_a_checkout_exits_66_naming_git_s_error(tmp_path):
    out = _pipeline("--check", str(tmp_path), env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert out.returncode == 66 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"pipeline --check: git status failed in {tmp_path}: ")
    assert len(out.stderr.splitlines()) == 1


def test_without_git_check_exits_69(tmp_path):
    out = _pipeline("--check", str(tmp_path), env={**os.environ, "PATH": str(tmp_path)})
    assert out.returncode == 69 and out.stderr.startswith("pipeline --check: cannot run git")


def test_stale_refuses_a_missing_folder_naming_it():
    from finbench.errors import FinbenchError

    with pytest.raises(FinbenchError, match="^pipeline --check: ROOT must be an existing folder .*got '/nonexistent'$"):
        stale("/nonexistent")


def test_help_exits_0():
    out = _pipeline("--help")
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m finbench.pipeline")


def test_the_report_and_the_explorer_run_after_every_experiment():
    from finbench.pipeline import notebooks, stages

    order = [[p.stem for p in stage] for stage in stages(notebooks())]
    assert order[0] == ["00_corpus", "01_headline"] and order[-1] == ["99_claims", "explore"] and len(order) == 3
    middle = order[1]
    assert "02_twins" in middle and "11_exploits" in middle and len(middle) == len(notebooks()) - 4
    assert middle == sorted(middle)  # no times: by name
    assert [p.stem for stage in stages(notebooks()[:2]) for p in stage] == ["00_corpus", "01_headline"]
    assert [[p.stem for p in s] for s in stages([p for p in notebooks() if p.stem in ("explore", "02_twins")])] \
        == [["02_twins"], ["explore"]]


def test_experiments_start_longest_first_and_a_new_one_first_of_all():
    from finbench.pipeline import notebooks, stages

    have = notebooks()
    times = {p.stem: float(i) for i, p in enumerate(have)}  # later names took longer
    new = have[3].stem
    del times[new]
    middle = [p.stem for p in stages(have, times)[1]]
    assert middle[0] == new
    rest = middle[1:]
    assert len(rest) >= 5 and [times[n] for n in rest] == sorted((times[n] for n in rest), reverse=True)


@pytest.mark.slow  # a notebook on a kernel
def test_a_failing_cell_still_raises_and_the_kernel_chatter_stays_quiet(tmp_path, capfd):
    """The kernel's own log is silenced (start-up and shutdown chatter), never a notebook's error."""
    import nbformat
    from papermill.exceptions import PapermillExecutionError

    from finbench.pipeline import run_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("raise ValueError('the cell failed')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "failing.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(PapermillExecutionError, match="the cell failed"):
        run_notebook(path, out_dir=tmp_path / "out", cwd=tmp_path)
    err = capfd.readouterr().err
    assert "IPKernelApp" not in err, err


def test_paper_names_the_notebooks_behind_the_papers_tables():
    from finbench.pipeline import PAPER, notebooks

    stems = {p.stem for p in notebooks()}
    assert set(PAPER) <= stems and "10_splits" not in PAPER and "99_claims" not in PAPER
    out = _pipeline("--paper", "extra")
    assert out.returncode == 64 and "--paper alone" in out.stderr


def test_every_committed_table_names_the_function_that_made_it():
    """`tables/x.csv` -> its `made_by` stamp line -> an importable function, in one step."""
    import importlib

    from finbench.pipeline import ROOT

    tables = sorted((ROOT / "tables").glob("*.csv"))
    assert len(tables) > 30
    missing, wrong = [], []
    for path in tables:
        head = [line[2:] for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# ")]
        made = [line.split(": ", 1)[1] for line in head if line.startswith("made_by: ")]
        if not made:
            missing.append(path.name)
            continue
        module, _, name = made[0].rpartition(".")
        if not callable(getattr(importlib.import_module(module), name, None)):
            wrong.append(f"{path.name}: {made[0]}")
    assert not missing and not wrong, (missing, wrong)


def test_a_fresh_checkout_starts_the_longest_experiment_first():
    """Without a last run's times, the expected ones order the experiments: every experiment notebook has one
    (a new notebook must be given one), and the splits notebook, the longest, starts first."""
    from finbench.pipeline import EXPECTED, FIRST, LAST, notebooks, stages

    middle = {p.stem for p in notebooks()} - set(FIRST) - set(LAST)
    assert set(EXPECTED) == middle and len(middle) == 10
    order = [p.stem for p in stages(notebooks(), dict(EXPECTED))[1]]
    assert order[0] == "10_splits" and order == sorted(middle, key=lambda n: (-EXPECTED[n], n))


def test_a_warm_run_s_times_do_not_reorder_the_next_cold_run():
    from finbench.pipeline import EXPECTED, _expected

    warm = {name: 3.0 for name in EXPECTED} | {"10_splits": 95.0, "12_new": 7.0}
    order = _expected(warm)
    assert order["10_splits"] == 95.0 and order["12_new"] == 7.0  # longer than expected, or not expected: as run
    assert all(order[n] == EXPECTED[n] for n in EXPECTED if n != "10_splits" and EXPECTED[n] > 3.0)
    assert _expected({}) == {n: float(s) for n, s in EXPECTED.items()}
