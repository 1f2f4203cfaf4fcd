"""The README as a new user meets it (issue 13, acceptance 2): every code block runs as printed, and what
it says about the claims agrees with tables/claims.csv."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from finbench.analysis.tables import read_table

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


def test_shell_blocks_run_as_printed():
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.fail("the README's commands use .venv/bin/python: run `make test` (it creates .venv)")
    for lang, code in BLOCKS:
        if lang != "sh" or SETUP in code:
            continue
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        # the grade command's exit status is its verdict: 0 pass, 1 violation, 2 unscorable
        assert out.returncode in (0, 1, 2), (code, out.stderr)
        assert "verdict" in out.stdout.lower(), out.stdout


@pytest.fixture()
def user(tmp_path, monkeypatch):
    """A fresh working folder holding the repository's example traces, with its own episode cache."""
    from finbench.running import evaluation as runner

    monkeypatch.setattr(runner, "CACHE_DIR", tmp_path / "cache")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "traces").symlink_to(ROOT / "data" / "traces")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(code: str, tmp_path: Path) -> dict:
    ns: dict = {"__name__": "__readme__"}
    exec(compile(code.replace("/tmp/", f"{tmp_path}/"), "README.md", "exec"), ns)
    return ns


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
    assert len(layer["rows"]) == 14_445 and set(layer["tables"]) == {"table2", "table3", "table3_gap", "table2_pairs"}
    claims = read_table(user / "tables" / "claims_headline.csv").set_index("id")
    gate_exact = layer["tables"]["table2"].set_index("policy").loc["finality_gate", "exact_pct"]
    assert claims.loc["gate_exact", "ours"] == pytest.approx(gate_exact)  # the claims of the table just published


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