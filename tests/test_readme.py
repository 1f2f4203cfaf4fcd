"""The README as a new user meets it (issue 13, acceptance 2; issue 30): every code block runs as printed,
each Python block also as a script of its own from a folder outside the clone (through the editable install,
no PYTHONPATH), and what it says about the claims agrees with tables/claims.csv."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from finbench.analysis.tables import read_table

# tests marked slow run the README's blocks as scripts in subprocesses (make test-fast leaves them out)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)
SETUP = "make reproduce"


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_every_block_is_python_or_shell_and_none_is_indented():
    assert BLOCKS and {lang for lang, _ in BLOCKS} == {"python", "sh"}
    assert not re.search(r"\n\n(    |\t)\S", README.replace("```", "")), "an indented code block the test cannot run"


def test_the_two_commands_are_the_ones_ci_runs():
    """`make reproduce` and `make test` are run as printed by CI itself (.ci/run), not from inside the tests."""
    setup = [code for lang, code in BLOCKS if SETUP in code]
    assert len(setup) == 1
    commands = [line.split("#")[0].strip() for line in setup[0].splitlines() if line.strip()]
    assert commands == ["make reproduce", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert all(re.search(rf"^{c}\b", ci, flags=re.M) for c in commands)


@pytest.mark.slow
def test_shell_blocks_run_as_printed():
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.fail("the README's commands use .venv/bin/python: run `make test` (it creates .venv)")
    for lang, code in BLOCKS:
        if lang != "sh" or SETUP in code or "mock-server" in code:
            continue  # the model section's lines start a server: tests/agents/test_readme_model.py runs them
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        # the grade command's exit status is its verdict: 0 pass, 1 violation, 2 unscorable
        assert out.returncode in (0, 1, 2), (code, out.stderr)
        assert "verdict" in out.stdout.lower(), out.stdout


@pytest.fixture()
def user(tmp_path, monkeypatch):
    """A fresh working folder holding the repository's example traces, with its own episode cache; it is also
    the package's root (`FINBENCH_ROOT`), so that what the blocks write by default (model transcripts under
    data/model_runs/) lands here, not in the clone."""
    from finbench.running import evaluation as runner

    monkeypatch.setattr(runner, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setenv("FINBENCH_ROOT", str(tmp_path))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "traces").symlink_to(ROOT / "data" / "traces")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(code: str, tmp_path: Path) -> dict:
    ns: dict = {"__name__": "__main__"}  # as a script or a notebook cell runs it (the Dask block is guarded)
    exec(compile(code.replace("/tmp/", f"{tmp_path}/"), "README.md", "exec"), ns)
    return ns


@pytest.mark.slow
def test_python_blocks_run_as_printed(user, monkeypatch, capsys):
    from tests.agents.test_llm import Loopback

    python = [code for lang, code in BLOCKS if lang == "python"]
    assert len(python) == 7
    server = Loopback()
    monkeypatch.setenv("FINBENCH_BASE_URL", server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    try:
        seen = [_run(code, user) for code in python]
    finally:
        server.close()
    own, layer_own, model, grade, dask, explore, layer = seen
    out = capsys.readouterr().out
    assert "patient" in out and "finality_gate" in out
    assert len(own["df"]) == 2 * 321 * 5 and set(own["df"].policy) == {"patient", "finality_gate"}
    assert list(layer_own["costly"].costs.unique()) == ["default", "dispute_fee=50"]
    mine = user / "mine" / "my_table2.csv"
    assert set(read_table(mine).policy) == {"eager_shipper", "finality_gate"}
    assert f"# corpus: {layer_own['run'].corpus.fingerprint}" in mine.read_text()
    assert "finality_gate" in (user / "mine" / "my_table2.md").read_text()
    assert model["res"].policy and len(list((user / "data" / "model_runs").rglob("*.jsonl"))) >= 61
    assert grade["verdict"].verdict == "pass" and "pass () all six checks pass" in out  # trace_a, as printed
    assert len(dask["df"]) == 14_445
    import ipywidgets  # the explorer is a widget (its behaviour: tests/analysis/test_explorer_widget.py)

    assert isinstance(explore["ex"], ipywidgets.Widget) and explore["ex"].draws >= 1
    assert len(layer["rows"]) == 14_445 and set(layer["tables"]) == {"table2", "table3", "table3_gap", "table2_pairs",
                                                                  "table3_counts"}
    claims = read_table(user / "tables" / "claims_headline.csv").set_index("id")
    gate_exact = layer["tables"]["table2"].set_index("policy").loc["finality_gate", "exact_pct"]
    assert claims.loc["gate_exact", "ours"] == pytest.approx(gate_exact)  # the claims of the table just published


# --- each Python block as a script, from a folder outside the clone --------------------------------------

SMALL = (
    # (as printed, as the script test runs it): the same code on fewer episodes, to keep the test short
    ("fb.make_corpus()", "fb.make_corpus(n_tasks=24)"),
    ("n_tasks=321", "n_tasks=24"),
    ("n_tasks=60", "n_tasks=24"),
    ("seeds=range(5)", "seeds=range(2)"),
    ("fb.PUBLIC_SEED, 321, size=60", "fb.PUBLIC_SEED, 40, size=12"),
    ("n_boot=2000", "n_boot=200"),
)
PYTHON_BLOCKS = [code for lang, code in BLOCKS if lang == "python"]
BLOCK_NAMES = ["own_agent", "own_agent_layer", "model", "grade", "dask", "explore", "layer"]


def _small(code: str) -> str:
    for printed, small in SMALL:
        code = code.replace(printed, small)
    return code


@pytest.fixture()
def outside(tmp_path):
    """(working folder, package root, script environment): an empty working folder outside the clone, and a
    root of the package's own (`FINBENCH_ROOT`: episode cache, model transcripts) holding the clone's example
    traces. The environment has no PYTHONPATH: `finbench` is imported through the editable install only."""
    assert ROOT not in tmp_path.resolve().parents
    work, root = tmp_path / "work", tmp_path / "root"
    work.mkdir()
    (root / "data").mkdir(parents=True)
    (root / "data" / "traces").symlink_to(ROOT / "data" / "traces")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENAI_API_KEY", "FINBENCH_ROOT")}
    env.update(FINBENCH_ROOT=str(root), MPLBACKEND="Agg")
    return work, root, env


@pytest.mark.slow
def test_the_install_serves_any_folder(outside):
    """`make venv`'s editable install, as the README's set-up says: the venv's python imports this clone's
    `finbench` from any folder, and the venv's `finbench` command has the subcommands eval and grade."""
    work, _, env = outside
    out = subprocess.run([sys.executable, "-c", "import finbench; print(finbench.__file__)"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "finbench" / "__init__.py"
    command = Path(sys.executable).parent / "finbench"
    assert command.exists(), "the README promises <clone>/.venv/bin/finbench: run `make venv`"
    out = subprocess.run([str(command), "--help"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and {"eval", "grade"} <= set(re.findall(r"^\s+(\w+)\s", out.stdout, flags=re.M))


def test_every_size_substitution_applies():
    """Each smaller size replaces something printed: the script test never runs a block at full size unseen."""
    assert len(PYTHON_BLOCKS) == len(BLOCK_NAMES)
    for printed, _ in SMALL:
        assert any(printed in code for code in PYTHON_BLOCKS), printed
    assert all(printed not in _small(code) for code in PYTHON_BLOCKS for printed, _ in SMALL)


@pytest.mark.slow
@pytest.mark.parametrize("name", BLOCK_NAMES)
def test_python_blocks_run_as_scripts_from_any_folder(name, outside):
    """Each Python block saved as a file and run by the venv's python in an empty folder outside the clone,
    with no PYTHONPATH: it must not lean on the working folder (relative paths) or on the clone being on the
    path, and a block that starts processes (the Dask cluster) must be guarded. At small sizes (`SMALL`)."""
    from tests.agents.test_llm import Loopback

    work, root, env = outside
    code = _small(PYTHON_BLOCKS[BLOCK_NAMES.index(name)]).replace("/tmp/", f"{work.parent}/out/")
    script = work / f"readme_{name}.py"
    script.write_text(code)
    server = Loopback()
    try:
        out = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True, timeout=300,
                             env={**env, "FINBENCH_BASE_URL": server.base_url})
    finally:
        server.close()
    assert out.returncode == 0, (code, out.stderr[-4000:])
    made = work.parent / "out"
    if name == "own_agent":
        assert "patient" in out.stdout and "finality_gate" in out.stdout
    elif name == "own_agent_layer":
        assert "eager_shipper" in (made / "mine" / "my_table2.md").read_text()
    elif name == "model":
        assert list((root / "data" / "model_runs").rglob("*.jsonl")), "the transcripts go under the package root"
    elif name == "grade":
        assert out.stdout.startswith("pass ")
    elif name == "layer":
        assert (made / "tables" / "claims_headline.csv").exists()
    assert sorted(p.name for p in work.iterdir()) == [script.name]  # nothing written to the working folder


def test_the_reproduction_section_agrees_with_the_claims_table():
    """The block between the markers is exactly what the claims report generates from tables/claims.csv."""
    from finbench.experiments import claims as R

    rows = read_table(ROOT / "tables" / "claims.csv")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index(R.README_BEGIN) + len(R.README_BEGIN) + 1:text.index(R.README_END)]
    assert block == R.readme(rows)
    s = R.summary(rows)
    assert s["paper"] >= 45 and f"**{s['reproduced']} reproduced" in block  # the counts are the paper's claims'
    assert set(rows["scope"]) <= {"paper", "by construction", "beyond the paper"}
    for r in rows[(rows["verdict"] == "differs") & (rows["scope"] == "paper")].itertuples():
        assert f"`{r.experiment}.{r.id}`" in block