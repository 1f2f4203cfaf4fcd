"""Where `eval` writes by default and how notes are shown (issue 44, point 4)."""
from __future__ import annotations

import io
import sys

from finbench.errors import note
from finbench.eval_cli import default_home
from finbench.files import root


def test_the_default_folder_is_the_clone_s_inside_it_and_the_current_one_outside(tmp_path, monkeypatch):
    monkeypatch.chdir(root() / "docs")
    assert default_home() == root().resolve()
    monkeypatch.chdir(tmp_path)
    assert default_home() == tmp_path.resolve() != root().resolve()


class _KernelStream(io.StringIO):
    """A stand-in for ipykernel's OutStream: what a Jupyter kernel puts in sys.stderr."""


_KernelStream.__module__ = "ipykernel.iostream"


def test_a_note_is_plain_output_in_a_jupyter_kernel_and_stderr_in_a_terminal(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    note("playing mine afresh")
    assert (out.getvalue(), err.getvalue()) == ("", "note: playing mine afresh\n")
    kernel_err = _KernelStream()
    monkeypatch.setattr(sys, "stderr", kernel_err)
    note("playing mine afresh")
    assert (out.getvalue(), kernel_err.getvalue()) == ("note: playing mine afresh\n", "")
