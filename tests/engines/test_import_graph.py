"""The package import graph: the contracts in pyproject.toml hold, and engines/ has no circle.

`lint-imports` (import-linter, as napari uses it) checks the contracts of
`[tool.importlinter]`: layers app > views > engines, no Qt in engines, every lab package
(`engines/labs/<id>`) above every mechanism package (exhaustive: a new package under engines/
must be placed), the MCU lab above the board side above the arena side (`engines.mcu` never
imports `engines.board`), and no import circle among the siblings of any package under
engines (so none between two engines subpackages, nor between two modules of one), nor under
app. Its graph counts every import, those inside functions included.

The own check below reads engines/**/*.py with `ast` and follows the imports a module runs
when it is imported (its top level, `if TYPE_CHECKING:` blocks included: a circle of type
names is still a circle), so that a failure names the modules of the circle in order.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / "engines"
PACKAGE = "inferlab.engines"


def test_import_linter_contracts_are_kept():
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                               "lint_imports_command()", "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert "0 broken" in report and "No import circle in engines" in report
    assert "Labs above the mechanism packages KEPT" in report
    assert "No import circle in app, between packages or modules at any depth KEPT" in report


# ---- the own check -------------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = path.relative_to(ENGINES).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def engines_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ENGINES.rglob("*.py"))}


def _import_time_nodes(body):
    """Import statements a module runs when it is imported: its top level and the blocks
    there (if, try, with, class bodies), never a function's body."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _import_time_nodes(getattr(node, field, ()) or ())


def top_level_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The engines modules `name` imports at import time (`from p import m`: module p.m
    when there is one, else package p)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = set()
    for node in _import_time_nodes(tree.body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, base] if base else here)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a module inside
                target = target.rpartition(".")[0]
            if target.startswith(PACKAGE) and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = engines_modules()
    return {name: top_level_imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (modules in import order, back to the first) per strongly connected
    component of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_circle_in(graph, component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _circle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path from the component's first module back to itself (breadth first: shortest)."""
    start = min(component)
    previous = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    raise AssertionError(f"no circle in component {sorted(component)}")


def test_cycles_finds_and_names_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_top_level_imports_of_modules_and_packages():
    graph = import_graph()
    assert "inferlab.engines.mcu.plan" in graph["inferlab.engines.mcu.planners"]
    assert "inferlab.engines.mcu.kernels" in graph["inferlab.engines.mcu.interpreter"]
    assert "inferlab.engines.board.protocol" in graph["inferlab.engines.board.link"]


def test_engines_modules_import_no_circle():
    found = cycles(import_graph())
    assert found == [], "import circles in engines/:\n" + "\n".join(
        " -> ".join(circle) for circle in found)


def _imported_names(path: Path):
    """(line, module name) of every absolute import in `path`, inside functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_no_mechanism_package_imports_a_lab():
    """Outside engines/labs, no module names engines.labs (any import, functions included):
    the lab packages stand above the mechanisms they drive."""
    offenders = [f"{path.relative_to(ROOT)}:{line} {name}"
                 for path in sorted(ENGINES.rglob("*.py"))
                 if path.relative_to(ENGINES).parts[0] != "labs"
                 for line, name in _imported_names(path)
                 if name == f"{PACKAGE}.labs" or name.startswith(f"{PACKAGE}.labs.")]
    assert offenders == [], f"mechanism packages import a lab: {offenders}"


def test_the_arena_side_never_imports_the_board_side():
    """engines/mcu, any import (inside functions too), never names engines.board or the lab."""
    offenders = []
    for path in sorted((ENGINES / "mcu").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(n.startswith(("inferlab.engines.board", "inferlab.engines.labs.mcu"))
                   for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], f"engines/mcu imports the board side: {offenders}"
