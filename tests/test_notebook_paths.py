"""A notebook opened in JupyterLab runs in `notebooks/`: its folders are still the repository's (issue 30).

The root is moved to a temporary folder (`FINBENCH_ROOT`, as a user would to write elsewhere), the
notebooks run with their default folder parameters and the working directory `notebooks/`, and
nothing may appear under `notebooks/`; the outputs land under the root's own folders.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from finbench.files import ROOT_VARIABLE, at_root, root
from finbench.pipeline import run_notebook

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.xdist_group("notebook-paths"), pytest.mark.slow]  # runs notebooks: slow


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_at_root_anchors_relative_paths(monkeypatch, tmp_path):
    monkeypatch.delenv(ROOT_VARIABLE, raising=False)
    assert root() == REPO and at_root("tables") == REPO / "tables"
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path))
    assert at_root("data/cache") == tmp_path / "data" / "cache" and at_root(REPO) == REPO


def test_notebooks_run_from_notebooks_folder_write_only_under_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path))
    before = _tree(REPO / "notebooks")
    small = {"n_tasks": 30, "n_seeds": 2, "n_jobs": 1}
    run_notebook(REPO / "notebooks" / "01_headline.ipynb", {**small, "n_boot": 50}, out_dir=tmp_path / "build",
                 cwd=REPO / "notebooks")
    run_notebook(REPO / "notebooks" / "explore.ipynb", small, out_dir=tmp_path / "build", cwd=REPO / "notebooks")
    assert _tree(REPO / "notebooks") == before, "a notebook wrote under notebooks/"
    assert (tmp_path / "tables" / "table2.csv").is_file() and (tmp_path / "figures" / "figure1.png").is_file()
    cached = list((tmp_path / "data" / "cache").rglob("*.json"))
    assert cached, "the episode cache went elsewhere"
    top = {p.name for p in tmp_path.iterdir()}
    assert top <= {"tables", "figures", "data", "build"}, top
    assert oct(os.stat(tmp_path / "tables" / "table2.csv").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
