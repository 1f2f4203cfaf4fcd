"""pytest plugin for `make mutate` only (setup.cfg, [mutmut] pytest_add_cli_args).

Some test modules call mutated code at import (`COSTS = [fb.Costs(...)]`). Under such a
mutant the module fails to import; pytest then stops with a usage error (the selected
tests are not found), which mutmut records as a timeout. A test module that cannot be
collected is a failing test: this ends the run with exit code 1, which mutmut records as
killed. (The clean run before the mutants, with no mutant on, collects every module.)
"""
import pytest


def pytest_collectreport(report):
    if report.failed:
        pytest.exit(f"could not collect {report.nodeid} under the mutant", returncode=1)
