"""Static import scans for the layout tests: which top-level packages a source file names."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path


def imported_roots(path: Path) -> Iterator[tuple[str, int]]:
    """(top-level package, line) of every absolute import in `path`, inside functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.partition(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0], node.lineno


def offending_imports(folders: Iterable[Path], roots: Iterable[str], base: Path) -> list[str]:
    """"file:line" of each import of one of `roots` in the .py files under `folders`."""
    wanted = set(roots)
    return [f"{path.relative_to(base)}:{line}"
            for folder in folders for path in sorted(folder.rglob("*.py"))
            for root, line in imported_roots(path) if root in wanted]
