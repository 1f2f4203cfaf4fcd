import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

# derandomized: CI and a developer see the same examples
settings.register_profile("repo", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("repo")


def pytest_collection_modifyitems(config, items):
    """Groups for `pytest -n 2 --dist loadgroup` (what `make test` runs): a test module stays on one
    worker (its module-scoped fixtures are built once), except the notebook tests, which are grouped
    per notebook so the slowest file does not hold one worker alone. A docstring example under finbench/
    (`--doctest-modules`) has no test module: its group is its file."""
    import pytest

    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if getattr(item, "module", None) is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
            continue
        group = item.module.__name__
        stem = getattr(item, "callspec", None) and item.callspec.params.get("stem")
        notebook = getattr(item.module, "NOTEBOOK_GROUPS", {}).get(stem or item.originalname)
        item.add_marker(pytest.mark.xdist_group(notebook or group))
