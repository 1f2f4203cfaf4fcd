"""The README's code runs as printed: its own-agent example and the experiment layer's (issue 7, acceptance 1)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], flags=re.S)


def test_own_agent_and_experiment_layer_examples_run_as_printed(tmp_path, monkeypatch, capsys):
    from finbench import runner

    monkeypatch.setattr(runner, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.chdir(tmp_path)
    agent, layer = _blocks("Testing your own agent"), _blocks("The experiment layer")
    assert len(agent) == 2 and len(layer) == 1
    ns: dict = {}

    def run(block):
        exec(compile(block.replace("/tmp/", f"{tmp_path}/"), "README.md", "exec"), ns)

    run(agent[0])
    out = capsys.readouterr().out
    t2 = ns["headline"].table2(ns["df"]).set_index("policy")
    assert list(t2.index) == ["finality_gate", "patient"] and "patient" in out and "pass^5" in out
    assert t2.loc["patient", "episodes"] == 321 * 5
    eff = ns["effects"].effects_table(ns["df"], ns["corpus"]).set_index("policy")
    assert eff.loc["patient", "episodes"] == 321 * 5
    run(agent[1])
    assert (tmp_path / "mine" / "my_table2.md").exists()
    assert list(ns["costly"].costs.unique()) == ["default", "dispute_fee=50"]
    run(layer[0])
    assert (tmp_path / "tables" / "claims_headline.csv").exists() and len(ns["df"]) == 14_445
