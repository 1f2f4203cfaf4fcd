"""Write docs/mutation.md from mutmut's results in mutants/ (`make mutate` runs it last).

Per mutated module (setup.cfg's [mutmut] only_mutate): how many of its mutants the tests
killed, how many survived, timed out, errored (pytest could not run the selected tests),
ended otherwise (no test reaches them, suspicious, crashed) or are not checked yet, and the
score: killed, timed-out and errored mutants over the checked ones. Then every mutant not
detected (survived, or ended otherwise) with its change and its triage from
docs/mutation_triage.csv (`equivalent`: no test can tell it from the original, and why;
`gap`: a test that should exist does not). mutmut numbers the mutants of a function afresh
when the function changes, so a row is found by its name or, failing that, by its function
and the exact change it describes; a mutant with no such row is listed as untriaged.

A module with no checked mutant in mutants/ (a fresh clone, or a run that re-tested other
modules only) keeps the row and the survivors the page last reported for it, with the commit it
was measured at; a survivor of such a row whose triage row is gone (its code deleted, or a test
added that kills it) is left out and counted. A module never measured is listed as such.

Run alone (`.venv/bin/python scripts/mutation_report.py`) to rewrite the page from the
last results without running anything. `make mutate` says what its run measured
(`--measured MODULE...`, the paths or folders of `MUTATE`; `--measured-all`): only those rows
are stamped with this commit; any other row keeps the commit the page said it was measured
at (mutmut keeps an unchanged function's results between runs, and drops a changed one's,
which then count as not checked).
"""
from __future__ import annotations

import configparser
import csv
import fnmatch
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "mutation.md"
TRIAGE = ROOT / "docs" / "mutation_triage.csv"
SAMPLE = ROOT / "docs" / "mutation_sample.json"  # scripts/mutation_sample.py: modules measured on a sample
COLUMNS = ("killed", "survived", "timeout", "error", "other", "not checked")
VERDICTS = ("equivalent", "gap", "killed since")  # killed since: by a test added after the run, checked by hand
GONE = "Gone since that run: "


def config() -> tuple[list[str], list[str], list[str]]:
    """The source paths, the mutated files' patterns and the tests: the selection, with the marker
    expression of pytest_add_cli_args (`-m`, the fast tier's "not slow") when there is one."""
    cp = configparser.ConfigParser()
    cp.read(ROOT / "setup.cfg")
    lines = lambda key: [x.strip() for x in cp.get("mutmut", key, fallback="").splitlines() if x.strip()]
    args = lines("pytest_add_cli_args")
    marks = [f'-m "{args[i + 1]}"' for i, a in enumerate(args[:-1]) if a == "-m"]
    return lines("source_paths"), lines("only_mutate"), lines("pytest_add_cli_args_test_selection") + marks


def modules(source_paths: list[str], patterns: list[str]) -> list[str]:
    """The mutated files, in the order of the patterns (setup.cfg), each once."""
    files = {str(p.relative_to(ROOT)) for s in source_paths for p in (ROOT / s).rglob("*.py")}
    # a module with results but no source any more (moved by a refactor) is still reported
    files |= {str(p.relative_to(ROOT / "mutants"))[:-len(".meta")] for p in (ROOT / "mutants").rglob("*.py.meta")}
    files = sorted(files)
    out: list[str] = []
    for pat in patterns:
        out += [f for f in files if fnmatch.fnmatch(f, pat) and f not in out]
    return out


def status(code) -> str:
    if code == 255:  # mutmut's worker caught an exception: pytest could not run the selected tests
        return "error"
    s = status_by_exit_code[code]
    return s if s in COLUMNS else "other"


def change(diff: str) -> str:
    """The mutated lines of a unified diff, as `old -> new`, whitespace squeezed."""
    sq = lambda ls: " / ".join(" ".join(line[1:].split()) for line in ls)
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    old = [line for line in body if line.startswith("-")]
    new = [line for line in body if line.startswith("+")]
    return f"{sq(old)} -> {sq(new)}" if new else f"{sq(old)} -> (removed)"


def function(mutant: str) -> str:
    """The mutated function of a mutant's name (`module.x_name__mutmut_3` -> `module.x_name`)."""
    return mutant.rpartition("__mutmut_")[0]


def code(text: str) -> str:
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row_change(row: str) -> str:
    """The change a survivors' table row of the page shows (its third cell, as `code` wrote it), squeezed."""
    text = re.split(r"(?<!\\)\|", row.strip().strip("|"))[2].strip()
    text = text[3:-3] if text.startswith("`` ") and text.endswith(" ``") else text[1:-1]
    return " ".join(text.replace("\\|", "|").split())


def triage() -> dict[str, dict]:
    if not TRIAGE.exists():
        return {}
    with TRIAGE.open(newline="") as f:
        rows = {r["mutant"]: r for r in csv.DictReader(f)}
    bad = {k: r["verdict"] for k, r in rows.items() if r["verdict"] not in VERDICTS}
    if bad:
        sys.exit(f"{TRIAGE.relative_to(ROOT)}: verdict must be one of {VERDICTS}: {bad}")
    return rows


def wilson(k: int, n: int, z: float = 1.96) -> str:
    """The 95% Wilson score interval of k successes in n, as `[lo%, hi%]`."""
    if not n:
        return "–"
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / d
    return f"[{100 * (mid - half):.1f}%, {100 * (mid + half):.1f}%]"


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def previous() -> dict[str, dict]:
    """What the page reported last, per module: its counts, the commit it was measured at and its
    survivors' table rows (short mutant name -> row)."""
    if not OUT.exists():
        return {}
    text = OUT.read_text()
    source = next((line.split("commit ", 1)[1].split()[0].rstrip(".") for line in text.splitlines()
                   if line.startswith("Source: commit ")), "?")
    out: dict[str, dict] = {}
    section = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if line.startswith("### `"):
            section = out.setdefault(line[5:].rstrip("`"), {"rows": {}})
        elif line.startswith(GONE) and section is not None:
            section["gone"] = int(line[len(GONE):].split()[0])
        elif cells and section is None and cells[0].startswith("`finbench/"):
            counts = dict(zip(COLUMNS, map(int, cells[1:7])))
            section = None
            out.setdefault(cells[0].strip("`"), {"rows": {}}).update(
                counts=counts, total=int(cells[7]), at=cells[9].strip("`") if len(cells) > 9 else source,
                mutants=cells[10] if len(cells) > 10 else "all")
        elif cells and section is not None:
            section["rows"][cells[0].strip("`")] = line
    return {m: v for m, v in out.items()  # a module the page never saw measured is not carried
            if "counts" in v and v["total"] - v["counts"]["not checked"] > 0}


def measured_now(args: list[str]) -> set[str] | None:
    """The modules (paths or folders) this run measured: None for all; empty when none was run."""
    if args == ["--measured-all"]:
        return None
    if args[:1] == ["--measured"] and len(args) > 1:
        return {a.rstrip("/") for a in args[1:]}
    if args:
        sys.exit(f"mutation_report.py: expected no argument, --measured-all, or --measured MODULE..., got {args}")
    return set()


def main() -> None:
    now = measured_now(sys.argv[1:])
    source_paths, patterns, selection = config()
    mods = modules(source_paths, patterns)
    notes = triage()
    by_change = {}
    for name, note in notes.items():
        by_change.setdefault((function(name), " ".join(note["change"].split())), note)
    rows, survivors, codes_of, carried = [], {}, {}, {}
    total = Counter()
    last = previous()
    head = git("rev-parse", "--short", "HEAD")
    sampled = json.loads(SAMPLE.read_text()) if SAMPLE.exists() else {}
    for mod in mods:
        meta = ROOT / "mutants" / f"{mod}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        if mod in sampled and codes:  # measured on its sample: only those mutants count
            codes = {k: codes.get(k) for k in sampled[mod]["names"]}
        c = Counter(status(v) for v in codes.values())
        n = sum(c.values())
        at = (head or "?") + ("*" if git("status", "--porcelain", "--", mod) else "")
        if now is not None and mod in last and not any(mod == m or mod.startswith(m + "/") for m in now):
            at = last[mod]["at"]  # results of an earlier run, kept by mutmut: stamped as the page had them
        if n - c["not checked"] == 0 and mod in last:  # not measured here: the page's last report of it
            c, n, at = Counter(last[mod]["counts"]), last[mod]["total"], last[mod]["at"]
            carried[mod] = last[mod]["rows"]
            codes = {}
        elif n == 0 and meta.exists():  # mutmut read it and found no function to mutate (constants only)
            at = "nothing to mutate"
        elif n - c["not checked"] == 0:
            at = "never"
        codes_of.update(codes)
        total.update(c)
        total["total"] += n
        rows.append((mod, c, n, at))
        survivors[mod] = sorted((k for k, v in codes.items() if status(v) in ("survived", "other")),
                                key=lambda k: (k.rpartition("__mutmut_")[0], int(k.rpartition("__mutmut_")[2])))

    def score(c: Counter, n: int) -> str:
        checked = n - c["not checked"]
        return f"{100 * (c['killed'] + c['timeout'] + c['error']) / checked:.1f}%" if checked else "–"

    def sample_cell(mod: str, c: Counter, n: int) -> str:
        if mod in carried:  # the page's last report of it: its sample as the page described it
            return last[mod]["mutants"]
        if mod not in sampled or not sampled[mod]["of"]:
            return "all"
        k, m = c["killed"] + c["timeout"] + c["error"], n - c["not checked"]
        note = f"; {sampled[mod]['note']}" if sampled[mod].get("note") else ""
        return (f"{len(sampled[mod]['names'])} of {sampled[mod]['of']}, seed {sampled[mod]['seed']}; "
                f"95% {wilson(k, m)}{note}")

    out = [
        "# Mutation testing",
        "",
        "Generated by `scripts/mutation_report.py` from mutmut's results in `mutants/`; "
        "`make mutate` runs mutmut and then the script (`make mutate MUTATE=finbench/sim/economics.py` "
        "re-tests one module and keeps the others' last results). What is mutated and with which "
        "tests: `setup.cfg`, section `[mutmut]`. The triage of the survivors: "
        "`docs/mutation_triage.csv`.",
        "",
        f"Source: commit {head or '?'}; each module's row says the commit it was measured at (`*`: with "
        "uncommitted changes to it; a row measured at an earlier commit is the last report of a module not "
        "re-run since, kept by the script; *never*: not measured yet; *nothing to mutate*: the module holds "
        "no function, only constants and imports).",
        "Tests: " + ", ".join(f"`{t}`" for t in selection) + " (`make test-fast`'s tests).",
        "",
        "Score = (killed + timeout + error) / (mutants checked). *Error*: under the mutant pytest could "
        "not even run the selected tests (a test's parameters are computed by mutated code, so its id "
        "changed): detected, but not by a failing assertion. *Other*: no test reaches the mutant, or "
        "the run ended otherwise (suspicious, crashed); *not checked*: not run yet.",
        "",
        "A module measured on a sample (`make mutate MUTATE=... MUTATE_SAMPLE=n`, "
        "`scripts/mutation_sample.py`: n of its mutants drawn uniformly with a fixed seed, "
        "`docs/mutation_sample.json`) counts those n only (*total* is n) and gives its score's 95% "
        "Wilson interval; *all* means every mutant of the module.",
        "",
        "| module | killed | survived | timeout | error | other | not checked | total | score | measured at | mutants |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for mod, c, n, at in rows:
        out.append(f"| `{mod}` | " + " | ".join(str(c[k]) for k in COLUMNS)
                   + f" | {n} | {score(c, n)} | `{at}` | {sample_cell(mod, c, n)} |")
    out.append("| **all** | " + " | ".join(str(total[k]) for k in COLUMNS)
               + f" | {total['total']} | {score(total, total['total'])} | | |")

    counts = Counter()
    sections = []
    for mod in mods:
        if mod in carried:
            dotted = mod[:-len(".py")].replace("/", ".").removesuffix(".__init__")
            # by name, or (mutmut renumbers a changed function's mutants) by its function and the exact change
            kept = [row for short, row in carried[mod].items() if f"{dotted}.{short}" in notes
                    or (function(f"{dotted}.{short}"), row_change(row)) in by_change]
            gone = last[mod].get("gone", 0) + len(carried[mod]) - len(kept)
            if kept or gone:
                sections += ["", f"### `{mod}`", ""]
            if gone:
                sections += [f"{GONE}{gone} of its survivors (their code deleted, or a test added that kills "
                             "them): `make mutate MUTATE=" + mod + "` recounts.", ""]
            if kept:
                sections += ["| mutant | status | change | verdict | why |", "| --- | --- | --- | --- | --- |", *kept]
            for row in kept:
                counts["gap" if "**gap**" in row else "untriaged" if "**untriaged**" in row
                       else "killed since" if "| killed since |" in row else "equivalent"] += 1
            continue
        if not survivors[mod]:
            continue
        sections += ["", f"### `{mod}`", "", "| mutant | status | change | verdict | why |",
                     "| --- | --- | --- | --- | --- |"]
        for name in survivors[mod]:
            try:
                what = change(get_diff_for_mutant(name, path=mod))
            except Exception as e:  # noqa: BLE001 - a mutant mutmut cannot show is still listed
                what = f"(no diff: {e})"
            note = notes.get(name)
            if note is None or " ".join(note["change"].split()) != what:
                # mutmut renumbers a function's mutants when the function changes: a row of the
                # same function describing exactly this change is this mutant's triage
                note = by_change.get((function(name), what), note)
            if note is None:
                verdict, why = "**untriaged**", ""
            elif " ".join(note["change"].split()) != what:
                verdict, why = "**untriaged**", f"(the triage row describes another change: {cell(note['change'])})"
            else:
                verdict = {"equivalent": "equivalent", "killed since": "killed since"}.get(note["verdict"], "**gap**")
                why = cell(note["why"])
            counts[verdict.strip("*")] += 1
            short = name.rpartition(".")[2]
            sections.append(f"| `{short}` | {status_by_exit_code[codes_of[name]]} | {code(what)} | {verdict} | {why} |")
    out += ["", "## Mutants not killed", ""]
    if sections:
        out.append(f"{sum(counts.values())} mutants survived or were reached by no test: {counts['equivalent']} "
                   f"equivalent (no test can tell them from the original), {counts['gap']} gaps (a test should "
                   f"kill them), {counts['killed since']} killed since (by a test added after the run, each checked by "
                   f"applying the mutation by hand; the next run counts them), {counts['untriaged']} untriaged. `mutmut show <module>.<mutant>` (e.g. "
                   "`mutmut show finbench.sim.economics.x_settle_case__mutmut_1`) prints one as a diff.")
        out += sections
    else:
        out.append("None.")
    OUT.write_text("\n".join(out) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {total['killed']} killed, {total['survived']} survived, "
          f"{total['timeout']} timeout of {total['total']}")


if __name__ == "__main__":
    main()
