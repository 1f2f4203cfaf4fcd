"""The repository's documents as a reader meets them (issue 30): every Markdown file (README.md, CHANGELOG.md,
docs/*.md) cites only what the repository holds. No document leans on the design file the project was built
from (it is not in the repository: each document states the rule it relies on, or points to the repository's
own document that does), every relative link resolves, and every path quoted in backticks that looks like a
repository file exists. Only the outputs `make` generates (under build/, data/cache/, data/model_runs/) may be
named without existing."""
import os
import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")])
"""README.md, CHANGELOG.md and any other Markdown file at the top, and docs/*.md."""

DESIGN_FILE = re.compile(r"(?<![A-Za-z])SPEC(?![a-z])|(?i:\bthe spec\b|\bspec(?:ification)?(?:\.md|'s| §| section))")
"""`SPEC`, `SPEC.md`, `SPEC §3`, `SPEC's nine`, `SPEC-conforming`, `SPEC_FEE`, "the spec" (never `INSPECT_LOG_DIR`,
nor a class `Spec` in code)."""
GENERATED = ("build/", "data/cache/", "data/model_runs/")
"""What `make` (and the runs it starts) writes and nobody commits: named in the documents, never held."""
EXTENSIONS = (".py", ".md", ".ipynb", ".csv", ".toml", ".cfg", ".txt", ".jsonl", ".json")
FOLDERS = ("finbench/", "docs/", "tables/", "figures/", "notebooks/", "data/", "tests/", "scripts/")
INSPECT_TASKS = ("finbench/finbench", "finbench/table5")
"""The package's tasks as Inspect names them (`inspect eval finbench/finbench`): not paths."""
PLACEHOLDERS = ("PATH", "STEM", "NAME", "DIR")
"""Upper-case words the documents use for a name the reader chooses (`PATH.py:NAME`, `data/traces/bad/STEM.jsonl`)."""
SKIP_DIRS = {".git", ".venv", ".hypothesis", ".pytest_cache", "__pycache__", "build", "mutants", "node_modules"}

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|\b(?:src|href)=\"([^\"]+)\"")
FENCE = re.compile(r"^```[^\n]*\n.*?^```", flags=re.S | re.M)
LINKED_CODE = re.compile(r"\[`[^`\n]+`\]\(")  # a link whose text is code: the link is what is checked
CODE = re.compile(r"`([^`\n]+)`")


def _held() -> list[str]:
    """Every file and folder of the working tree (repository-relative, POSIX), generated ones left out."""
    held = []
    for folder, dirs, files in os.walk(ROOT):
        rel = Path(folder).relative_to(ROOT).as_posix()
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (rel == "data" and d in ("cache", "model_runs"))]
        prefix = "" if rel == "." else rel + "/"
        held += [prefix + d for d in dirs] + [prefix + f for f in files]
    return held


HELD = _held()


def _braces(path: str) -> list[str]:
    """`data/corpus_{public,regen}.jsonl` -> both names."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in _braces(path[:m.start()] + alt + path[m.end():])]


def _candidate(token: str) -> str | None:
    """The repository path a quoted token names, or None if it does not look like one."""
    token = token.rstrip(".,;:!?")  # a sentence's punctuation, never a leading ../
    token = re.sub(r"::.*$", "", token)                     # tests/x.py::test_name
    token = re.sub(r"(\.(?:py|ipynb))[@:][\w.*]+$", r"\1", token)   # file.py@task, PATH.py:NAME
    if not token or token.startswith(("/", "~", "$", "-")) or "://" in token or re.fullmatch(r"\.\w+", token):
        return None
    if not (token.endswith(EXTENSIONS) or token.startswith(FOLDERS)) or token in INSPECT_TASKS:
        return None
    return token


def quoted_paths(text: str) -> list[str]:
    """The repository paths a Markdown text quotes in backticks (inline code and code blocks), each as written,
    placeholders (`<name>`, `*`, `STEM`) made wildcards."""
    found = []
    spans = [m.group(0) for m in FENCE.finditer(text)]
    prose = LINKED_CODE.sub("(", FENCE.sub("", text))
    spans += [m.group(1) for m in CODE.finditer(prose)]
    for span in spans:
        span = re.sub(r"<[^<>\n]*>", "*", span)
        span = re.sub(r"\b(?:%s)\b" % "|".join(PLACEHOLDERS), "*", span)
        for token in re.split(r"[\s=()\[\]\"'`;|]+", span):
            path = _candidate(token)
            if path:
                found.append(path)
    return found


def links(text: str) -> list[str]:
    """The relative targets of a Markdown text's links and images (Markdown or HTML), anchors left on."""
    out = []
    for m in LINK.finditer(FENCE.sub("", text)):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-zA-Z][a-zA-Z+.-]*:", target) or target.startswith("/"):
            continue  # a URL (https:, mailto:) or an absolute path
        out.append(target)
    return out


def _held_as(path: str, doc: Path) -> bool:
    """`path` is under the repository root or the document's folder, or is the tail of a path the repository
    holds (`grading/checks.py` beside `finbench/grading/`); wildcards match any name."""
    doc_dir = doc.parent.relative_to(ROOT).as_posix()
    for alt in _braces(path):
        alt = alt.rstrip("/")
        bases = [alt] if doc_dir == "." else [alt, os.path.normpath(f"{doc_dir}/{alt}")]
        if any((f + "/").startswith(GENERATED) for f in bases):
            continue
        if not any(fnmatchcase(h, b) or fnmatchcase(h, "*/" + b) for b in bases for h in HELD):
            return False
    return True


def missing_paths(text: str, doc: Path) -> list[str]:
    return [p for p in quoted_paths(text) if not _held_as(p, doc)]


def missing_links(text: str, doc: Path) -> list[str]:
    bad = []
    for target in links(text):
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            bad.append(target)
    return bad


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown text's headings: lower case, punctuation dropped, spaces to hyphens,
    a repeated one suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _ids(docs):
    return [d.relative_to(ROOT).as_posix() for d in docs]


def test_the_documents_are_the_repositorys_markdown_files():
    names = set(_ids(DOCS))
    assert {"README.md", "CHANGELOG.md", "docs/DESIGN.md", "docs/ARCHITECTURE.md", "docs/RESULTS.md",
            "docs/grading.md", "docs/inspect.md"} <= names


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_no_document_cites_the_design_file_the_repository_does_not_hold(doc):
    text = doc.read_text(encoding="utf-8")
    lines = [f"{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if DESIGN_FILE.search(line)]
    assert not lines, "state the rule, or point to the repository's own document:\n" + "\n".join(lines)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_relative_link_resolves(doc):
    assert not missing_links(doc.read_text(encoding="utf-8"), doc)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_quoted_repository_path_exists(doc):
    assert not missing_paths(doc.read_text(encoding="utf-8"), doc)


def test_the_checks_check_something():
    """The checks above read many paths and links, and each fails on what it is there to catch."""
    paths = {(d.name, p) for d in DOCS for p in quoted_paths(d.read_text(encoding="utf-8"))}
    targets = {(d.name, t) for d in DOCS for t in links(d.read_text(encoding="utf-8"))}
    assert len(paths) >= 200 and len(targets) >= 50
    quoted = {p for _, p in paths}
    assert {"finbench/sim/constants.py", "data/traces/trace_b.jsonl", "notebooks/explore.ipynb"} <= quoted
    assert any(p.startswith("build/") for p in quoted)  # generated, allowed, still read

    readme = ROOT / "README.md"
    doc = ROOT / "docs" / "DESIGN.md"
    bad = ("`finbench/sim/nowhere.py`, `scripts/gone.py`, `grading/absent.py`, `tables/*.xlsx.csv`, "
           "`PATH.py:NAME` and `.venv/bin/python -m finbench grade data/traces/trace_z.jsonl`")
    assert missing_paths(bad, readme) == ["finbench/sim/nowhere.py", "scripts/gone.py", "grading/absent.py",
                                          "tables/*.xlsx.csv", "data/traces/trace_z.jsonl"]
    assert missing_paths("```python\nfb.load_trace(\"data/traces/nope.jsonl\")\n```\n", readme) == [
        "data/traces/nope.jsonl"]
    assert not missing_paths("`finbench/grading/checks.py`, `grading/checks.py`, `sim/world.py`, `RESULTS.md`, "
                             "`data/corpus_{public,regen}.jsonl`, `tables/claims_<name>.csv`, "
                             "`build/eval/<name>/report.md`, `data/model_runs/<model>/x.jsonl`", doc)
    assert missing_links("[a](docs/NOPE.md), [b](#no-such-heading), <img src=\"figures/none.png\">, "
                         "[c](docs/DESIGN.md#no-such-section), [d](https://example.org/x.md)", readme) == [
        "docs/NOPE.md", "#no-such-heading", "figures/none.png", "docs/DESIGN.md#no-such-section"]
    assert not missing_links("[a](RESULTS.md), [b](../tables/table2.md), [c](#5-economics)", doc)
    assert DESIGN_FILE.search("as SPEC §3 says") and DESIGN_FILE.search("the spec's nine")
    assert not DESIGN_FILE.search("INSPECT_LOG_DIR, inspect view, delivery specs, spec = Spec(did, system)")
