"""Pick a seeded uniform sample of each module's mutants (`make mutate MUTATE_SAMPLE=n`).

A full run over every mutant of a large module takes hours on two cores; a uniform
sample of n mutants gives its score with a stated interval instead (the report shows
the sample's size, its score and a 95% Wilson interval). The sample is a function of
the module's mutant names and the seed only, so a re-run picks the same mutants.

    python scripts/mutation_sample.py 150 finbench/sim/env.py ...   # writes docs/mutation_sample.json,
                                                                   # prints the names to run
    python scripts/mutation_sample.py 0 finbench/sim/env.py         # a full run: the module's entry goes
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "mutation_sample.json"
SEED = 32


def names_of(module: str, mutants: Path) -> list[str]:
    meta = mutants / (module + ".meta")
    return sorted(json.loads(meta.read_text())["exit_code_by_key"])


def sample(module: str, n: int, mutants: Path) -> list[str]:
    names = names_of(module, mutants)
    return sorted(random.Random(f"{SEED}:{module}").sample(names, min(n, len(names))))


def main(argv: list[str]) -> None:
    n, modules = int(argv[0]), argv[1:]
    mutants = ROOT / "mutants"
    doc = json.loads(OUT.read_text()) if OUT.exists() else {}
    for m in modules:
        if n == 0:  # a full run of the module: its every mutant counts again
            doc.pop(m, None)
            continue
        doc[m] = {"size": n, "seed": SEED, "of": len(names_of(m, mutants)), "names": sample(m, n, mutants)}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for m in modules:
        if m in doc:
            print("\n".join(doc[m]["names"]))


if __name__ == "__main__":
    main(sys.argv[1:])
