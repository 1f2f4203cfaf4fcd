"""The house (SPEC §11): layers import only the layers below them, no import loop, small rooms."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "finbench"
# each layer may import itself, the ones listed before it, and the shared errors
ORDER = ("sim", "grading", "agents", "running", "analysis", "experiments")
SHARED = {"finbench.errors", "finbench.files", "finbench.memo"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, int, bool, str]]:
    """(imported finbench module, line, inside a function?, the line's text)."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    inner = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
             for sub in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("finbench"):
            # `from finbench.x import y` imports finbench.x.y when y is a module
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                     for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("finbench")]
        for name in names:
            out.append((name, node.lineno, id(node) in inner, lines[node.lineno - 1]))
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] in ORDER else None


def test_the_layers_import_only_downwards():
    allowed = {layer: set(ORDER[:i + 1]) for i, layer in enumerate(ORDER)}
    allowed["grading"] = {"grading"}  # the grader stands alone: traces people bring need no simulator
    checked, bad = 0, []
    for module, path in MODULES.items():
        layer = _layer(module)
        if layer is None:
            continue  # the top: the public surface, the CLI, the pipeline, the benchmark
        for target, line, _, _ in _imports(path):
            checked += 1
            if target in SHARED or target == "finbench":
                continue
            if _layer(target) not in allowed[layer]:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} ({layer}) imports {target}")
    assert checked > 100  # the walk saw the package's imports
    assert not bad, "\n".join(bad)


def test_no_import_loop():
    graph = {m: {t for t, *_ in _imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    # a package imports its own submodules when they run; a loop through __init__ does not count
    graph = {m: {t for t in ts if not m.startswith(t + ".") and not t.startswith(m + ".")} for m, ts in graph.items()}
    assert sum(map(len, graph.values())) > 100
    state: dict[str, int] = {}
    loops = []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                loops.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not loops, "\n".join(loops)


def test_function_level_imports_say_why():
    """A package import inside a function is there only to keep a heavy dependency lazy, and says so."""
    found = [(p, line, text) for p in MODULES.values() for _, line, inner, text in _imports(p) if inner]
    unexplained = [f"{p.relative_to(PKG.parent)}:{line}: {text.strip()}" for p, line, text in found
                   if "lazy" not in text]
    assert not unexplained, "\n".join(unexplained)


@pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ,
                    reason="under mutmut every file holds all its mutants: its length says nothing of the source")
def test_rooms_are_small():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert 0 < len(top) <= 10, top
    sizes = {p: sum(1 for _ in p.open()) for p in MODULES.values()}
    assert len(sizes) > 30
    assert not {str(p.relative_to(PKG.parent)): n for p, n in sizes.items() if n > 450}


@pytest.mark.parametrize("module", ["finbench.sim.faults", "finbench.sim.world"])
def test_the_walk_sees_a_known_import(module):
    """The checks above read real imports: world imports faults, faults imports rng."""
    targets = {t for t, *_ in _imports(MODULES[module])}
    assert {"finbench.sim.rng"} <= targets


def test_the_agents_layer_declares_the_fast_path_and_the_engine_names_no_higher_layer():
    """Trust is declared by the agents layer (`@fast_path` on each class), so `sim/` names no module of a
    higher layer, not even as a string; every built-in policy and exploit routine is declared, and no plan
    or reconciler (they take the checked path)."""
    from finbench.agents.exploits import CLASSES as EXPLOITS
    from finbench.agents.policies import POLICIES
    from finbench.sim.play import trusted

    assert len(POLICIES) == 9 and len(EXPLOITS) == 3
    not_fast = [name for name, cls in {**POLICIES, **EXPLOITS}.items() if not trusted(cls())]
    assert not not_fast, f"built-in policies that would not take the fast path: {not_fast}"
    higher = [f"{p.relative_to(PKG.parent)}: {text!r}" for name, p in MODULES.items() if _layer(name) == "sim"
              for text in _code_strings(p) if any(f"finbench.{layer}" in text for layer in ORDER[2:])]
    assert not higher, higher
    assert _code_strings(MODULES["finbench.sim.play"])  # the check above reads real strings


def _code_strings(path: Path) -> list[str]:
    """The string literals of a module's code (docstrings left out: prose may name any module)."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_experiments_are_loaded_only_through_the_package_registry():
    """`finbench.experiments.NAMES` is every experiment module; none imports another or uses importlib."""
    import finbench.experiments as E

    folder = PKG / "experiments"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert modules and set(E.NAMES) == modules
    bad = []
    for name in modules:
        path = folder / f"{name}.py"
        if "importlib" in path.read_text():
            bad.append(f"{name}: importlib")
        for target, line, _, _ in _imports(path):
            if target.startswith("finbench.experiments.") and target.split(".")[2] in modules:
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, bad
    with pytest.raises(E.FinbenchError, match="must be one of"):
        E.experiment("headlines")
