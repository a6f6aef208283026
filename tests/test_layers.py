"""The package's architecture, enforced: each layer imports only from the layers below it.

The order, bottom to top, is the one the README's "Layout" section describes. A
module may import from its own layer and any layer below; an import from a layer
above, or an import cycle between modules, fails here with the offending lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "planner"

# Bottom to top. The top-level modules (errors, markdown, _numeric) form the base.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("planner", "planner.errors", "planner.markdown", "planner._numeric"),
    ("planner.autoscaler",),
    ("planner.vllm",),
    ("planner.capacity",),
    ("planner.dynamics",),
    ("planner.simulate",),
    ("planner.readers",),
    ("planner.manifests",),
    ("planner.workflows",),
    ("planner.charts",),
    ("planner.explorers",),
    ("planner.cli",),
)
MAX_TOP_LEVEL_MODULES = 10


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every planner import in a file, at any depth (function-level too)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("planner"):
                continue
            # `from planner.x import y` may name a submodule y: count the more precise target.
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.append((node.lineno, candidate if _is_module(candidate) else target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("planner")]
    return found


def _is_module(name: str) -> bool:
    path = PACKAGE_DIR.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _layer(module: str) -> int:
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    if module == "planner" or rank == -1:
        rank = 0 if module == "planner" or module.count(".") == 1 else rank
    return rank


SOURCES = sorted(PACKAGE_DIR.rglob("*.py"))
GRAPH = {_module_name(path): _imports(path) for path in SOURCES}


def test_every_module_belongs_to_a_layer():
    unplaced = [name for name in GRAPH if _layer(name) < 0]
    assert not unplaced, f"modules outside every layer (add them to LAYERS): {unplaced}"


def test_no_module_imports_from_a_layer_above_it():
    violations = []
    for path in SOURCES:
        importer = _module_name(path)
        if importer == "planner":
            continue  # the package's own __init__ re-exports, it is not a layer
        for line, imported in GRAPH[importer]:
            if _layer(imported) > _layer(importer):
                violations.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {importer} imports {imported}")
    assert not violations, "imports from a higher layer:\n" + "\n".join(violations)


def test_no_import_cycles():
    edges = {
        name: {target for _, target in imports if target in GRAPH and target != name} for name, imports in GRAPH.items()
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_top_of_the_package_stays_small():
    top = sorted(path.name for path in PACKAGE_DIR.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules at the top of planner/: {top}"


@pytest.mark.parametrize("upward", ["planner.cli", "planner.readers.manifest", "planner.workflows.plan"])
def test_the_checker_catches_an_upward_import(upward):
    # The rule is not vacuous: an autoscaler module importing any of these would be flagged.
    assert _layer(upward) > _layer("planner.autoscaler.horizontal")
