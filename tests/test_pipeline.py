"""CI's stale-output check (issue 13): regenerated files that differ from the committed ones fail, by name."""
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
