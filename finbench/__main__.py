"""``python -m finbench``: the command line (`finbench.cli.main`), exiting with its code.

Once the command has returned the process ends, even if the agent `eval` played left a thread running that
is not a daemon: a normal exit would wait for that thread forever. (`main` itself only returns the code, for
tests and other callers.)
"""
from __future__ import annotations

import os
import sys
import threading

from finbench.cli import main

try:
    code = main()
except KeyboardInterrupt:  # Ctrl-C: one line and 128 + SIGINT, and the exit below (no thread holds it up)
    print("\nfinbench: interrupted", file=sys.stderr)
    code = 130
sys.stdout.flush()
sys.stderr.flush()
if any(t.is_alive() and not t.daemon and not type(t).__module__.startswith("joblib.")
       for t in threading.enumerate() if t is not threading.main_thread()):
    # joblib's idle workers would outlive a hard exit by minutes: stopped first (finbench.eval_cli makes a
    # worker that holds such a thread leave without joining it)
    loky = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(loky, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True, kill_workers=True)
    import atexit

    atexit._run_exitfuncs()  # what a normal exit does after joining threads (joblib removes its temporary folder)
    os._exit(code)
sys.exit(code)
