import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

# derandomized: CI and a developer see the same examples
settings.register_profile("repo", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("repo")


SLOW = ("slow: a test that runs a notebook, plays a full-size corpus, starts a subprocess or a server, "
        "or otherwise takes seconds; `make test-fast` (-m 'not slow') leaves it out, `make test` runs it")


def pytest_configure(config):
    config.addinivalue_line("markers", SLOW)




@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Groups for `pytest -n 2 --dist loadgroup` (what `make test` runs): a test module stays on one
    worker (its module-scoped fixtures are built once), except the notebook tests, which are grouped
    per notebook so the slowest file does not hold one worker alone. A docstring example under finbench/
    (`--doctest-modules`) has no test module: its group is its file.

    A wrapper: the marks are put on before xdist's worker reads them (its own hook turns them into the
    `@group` suffix of each node id, by which the scheduler groups) and the suffix is checked after it:
    under pytest 9.2 xdist 3.8's suffix does not take (it writes `_nodeid`, pytest now reads a structured
    id; pytest-dev/pytest-xdist#1386), so that every test would be its own group, module fixtures built on
    both workers and a notebook executed on each worker that asks for it.

    A test that reads an executed notebook (the `executed` fixture) is marked `slow` here, wherever it
    lives: the first such test of a session executes the notebook. The marks go on before `-m` reads them
    (the mark plugin's own hook runs inside this wrapper)."""
    for item in items:
        if "executed" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
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
    result = yield
    if getattr(config.option, "loadgroup", False):  # set in an xdist worker under --dist loadgroup
        for item in items:
            _suffix_group(item)
    return result


def _suffix_group(item) -> None:
    """`nodeid@group`, as xdist's loadgroup scheduler reads it, where xdist's own suffix did not take."""
    nodeid = item.nodeid
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return  # xdist's suffix took (pytest before 9.2)
    group = "_".join(sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                             for m in item.iter_markers("xdist_group")}))
    if hasattr(item, "_id"):  # pytest 9.2: a structured node id
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{nodeid}@{group}")
    else:
        item._nodeid = f"{nodeid}@{group}"


@pytest.fixture(scope="session", autouse=True)
def _episode_cache_of_this_run(tmp_path_factory):
    """Under mutmut (`make mutate`, which sets MUTANT_UNDER_TEST) the default episode cache is a folder of
    this run's own. The cache key holds a digest of the source, and every mutant of a module lives in the
    same mutated file, so rows one mutant wrote to `data/cache/` would be served to the next: a test that
    evaluates with the default cache would then see the earlier mutant's rows, not its own."""
    if "MUTANT_UNDER_TEST" not in os.environ:
        yield
        return
    from finbench.running import evaluation

    kept = evaluation.CACHE_DIR
    evaluation.CACHE_DIR = tmp_path_factory.mktemp("episode-cache-of-this-mutant")
    yield
    evaluation.CACHE_DIR = kept


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """stem -> the folder its first execution wrote into (each notebook runs once per session and worker),
    with tests/test_notebooks.py's small parameters; `executed.cache` is the episode cache they share. Here
    so that a test module beside tests/test_notebooks.py reads the same execution (its test marked with the
    notebook's xdist group, `NOTEBOOK_GROUPS`), not a second one."""
    from tests.test_notebooks import _execute

    cache = tmp_path_factory.mktemp("episode-cache")
    done: dict[str, Path] = {}

    def get(stem: str) -> Path:
        if stem not in done:
            done[stem] = _execute(stem, tmp_path_factory.mktemp(stem), cache)
        return done[stem]

    get.cache = cache
    return get
