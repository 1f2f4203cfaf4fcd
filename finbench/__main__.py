"""``python -m finbench``: the command line (`finbench.cli.main`), exiting with its code (`finbench.cli.console`).

Once the command has returned the process ends, even if the agent `eval` played left a thread running that
is not a daemon: a normal exit would wait for that thread forever. (`main` itself only returns the code, for
tests and other callers.)
"""
from __future__ import annotations

from finbench.cli import console

console()
