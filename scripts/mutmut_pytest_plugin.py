"""pytest plugin for `make mutate` only (setup.cfg, [mutmut] pytest_add_cli_args).

mutmut runs, for each mutant, only the tests that reach the mutated function, by node id,
so a run collects a few test modules rather than the whole suite. Two things follow:

- Some test modules call mutated code at import (`COSTS = [fb.Costs(...)]`). Under such a
  mutant the module fails to import; pytest then stops with a usage error (the selected
  tests are not found), which mutmut records as a timeout. A test module that cannot be
  collected is a failing test: the run ends with exit code 1, which mutmut records as killed.
  (The clean run before the mutants, with no mutant on, collects every module.)
- A test may lean on a side effect of another module's import that a full collection always
  has: tests/sim/test_probe.py names the "reconciler" policy, which is registered when
  finbench.agents.reconciler is imported, and does not import it. Importing it here gives
  every run what `make test` gives, so such a test fails for the mutant, not for the order.
- Property tests do not shrink a counterexample (see pytest_configure).
- The selected tests run fastest first (see pytest_collection_modifyitems): mutmut hands
  them over as a set, in an order that changes from run to run, and stops at the first
  failure, so a mutant that a 20 ms rule-level test kills no longer waits for a 10 s
  backtest that happened to come first. The verdict is the same in any order; only the
  time to reach it changes.
- A test that runs 20 times its clean duration (at least 10 s) under a mutant fails (see
  pytest_runtest_call): a mutant can stop a loop from advancing (a user's policy that never
  reads its observation is called again and again), and mutmut's own limit, 30 times the
  selected tests' clean duration in CPU seconds, is most of an hour for a function that
  half the suite reaches. Such a hang is the mutant's doing: failing the test kills it.
- Bytecode is written for mutants/ only (see _bytecode_for_mutants_only): the Makefile unsets
  PYTHONDONTWRITEBYTECODE so that the mutated modules are compiled once, not once a mutant.
"""
import importlib.machinery
import json
import os
import signal
from pathlib import Path

import pytest


def _bytecode_for_mutants_only() -> None:
    """Write .pyc files under mutants/ (this file's tree) only, as if PYTHONDONTWRITEBYTECODE still held
    for every other source. A test that writes a module in its tmp_path, imports it, rewrites it and reloads
    it (tests/running/test_cache_by_declaration.py, the sibling_module channel) would otherwise be handed
    its first version back: a .pyc is checked against its source's size and mtime in whole seconds, and
    LIMIT = 590 and LIMIT = 125 have the same size and are written within the same second."""
    loader = importlib.machinery.SourceFileLoader
    if getattr(loader.set_data, "_mutants_only", False):
        return
    root = str(Path(__file__).resolve().parents[1]) + os.sep
    write = loader.set_data  # the loader writes bytecode through it (importlib.abc.SourceLoader.set_data)

    def set_data(self, path, data, *args, **kwargs):
        if str(path).startswith(root):
            return write(self, path, data, *args, **kwargs)
        return None

    set_data._mutants_only = True
    loader.set_data = set_data


_bytecode_for_mutants_only()

_LIMITS: dict[str, float] = {}
"""Each selected test's time limit under the mutant, in wall seconds (empty in the clean run)."""


def pytest_configure(config):
    import finbench.agents.reconciler  # noqa: F401  (registers "reconciler")

    # After the conftest loaded its profile: the same examples, but a failing property test fails
    # at its first counterexample instead of shrinking it, which can take longer than the time
    # mutmut allows a mutant and would record a kill as a timeout.
    from hypothesis import Phase, settings

    settings.register_profile("mutmut", settings(settings.default, phases=[p for p in Phase if p != Phase.shrink]))
    settings.load_profile("mutmut")


def pytest_collection_modifyitems(session, config, items):
    # mutmut runs pytest in mutants/, where its stats file (with each test's duration from
    # the clean run) lives; without it (the clean run itself) the order is left alone
    stats = Path("mutmut-stats.json")
    if not stats.is_file():
        return
    duration = json.loads(stats.read_text()).get("duration_by_test", {})
    # stable: tests with equal (or unknown, counted last) durations keep pytest's order
    items.sort(key=lambda item: duration.get(item.nodeid, float("inf")))
    _LIMITS.update({item.nodeid: max(10.0, 20 * duration[item.nodeid]) for item in items if item.nodeid in duration})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = _LIMITS.get(item.nodeid)
    if limit is None:
        yield
        return

    def expired(signum, frame):
        raise TimeoutError(f"{item.nodeid} ran past {limit:.0f} s under the mutant (20 times its clean run)")

    before = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def pytest_collectreport(report):
    if report.failed:
        pytest.exit(f"could not collect {report.nodeid} under the mutant", returncode=1)
