"""InferLab's own modules are imported at the top of a module, where a reader looks for them.

A function-level import of our own code is allowed only at the command-line and registry
boundary (`app/cli*.py`, `app/commands/`, `app/labs/registry.py`), where it keeps
`inferlab --help` and the window's first paint from importing torch and every lab, and at
the few start-up sites listed in `LAZY` with their reason. Optional third-party packages
(ray, triton, transformers, ...) may still be imported where they are used.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("app", "engines", "views")

LAZY = {
    ("app/launch.py", "inferlab.app.main_window"):
        "after the display check: without a display nothing of the window is imported",
    ("app/context.py", "inferlab.engines.hardware.discovery"):
        "imports torch: devices are discovered on a worker after the first paint",
    ("app/about.py", "inferlab.engines.hardware.discovery"):
        "imports torch: the About box's versions, never needed for the first paint",
    ("app/main_window.py", "inferlab.app.compare_window"):
        "imports pyqtgraph, which the window configures after its first paint",
    ("app/compare_plots.py", "inferlab.views.overlay_plots"):
        "imports pyqtgraph: only a report with overlaid plots needs it",
}
"""(file, module) -> why the import waits for the function that needs it. At most 10."""


def _boundary(path: str) -> bool:
    return (path.startswith("app/cli") or path.startswith("app/commands/")
            or path == "app/labs/registry.py")


def own_function_imports() -> list[tuple[str, int, str]]:
    """(file, line, module) of every import of an `inferlab` module inside a function."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            for func in ast.walk(tree):
                if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(func):
                    if isinstance(node, ast.ImportFrom):
                        names = [("." * node.level) + (node.module or "")]
                    elif isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    else:
                        continue
                    found += [(rel, node.lineno, name) for name in names
                              if name.startswith(("inferlab", "."))]
    return sorted(set(found))


def test_own_modules_are_imported_at_the_top_outside_the_boundary():
    stray = [f"{path}:{line} imports {module} inside a function"
             for path, line, module in own_function_imports()
             if not _boundary(path) and (path, module) not in LAZY]
    assert not stray, "\n".join(stray)


def test_the_lazy_sites_are_few_and_each_still_exists():
    assert len(LAZY) <= 10
    sites = {(path, module) for path, _line, module in own_function_imports()}
    assert set(LAZY) <= sites, sorted(set(LAZY) - sites)  # a site gone: drop its entry


def test_the_scan_sees_an_import_inside_a_method(tmp_path, monkeypatch):
    module = tmp_path / "app" / "x.py"
    module.parent.mkdir()
    module.write_text("import os\n\n\nclass A:\n    def f(self):\n"
                      "        from inferlab.engines import fields\n        return fields\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert own_function_imports() == [("app/x.py", 6, "inferlab.engines")]
