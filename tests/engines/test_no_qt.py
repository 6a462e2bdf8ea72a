"""engines/ never imports Qt: every module imports with PySide6, shiboken6 and pyqtgraph blocked.

The import check runs in a fresh interpreter whose first `sys.meta_path` finder refuses the
Qt packages. It walks the `engines` package, so modules added later are covered without
editing this file. A module that catches the ImportError and carries on still fails: every
attempt is recorded. A static scan also catches Qt imports hidden inside functions.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.import_scan import offending_imports

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("PySide6", "shiboken6", "pyqtgraph", "PySide2", "PyQt5", "PyQt6", "qtpy")

CHILD = r"""
import importlib, importlib.abc, json, os, pkgutil, sys, traceback

BLOCKED = set(sys.argv[1].split(","))
ENGINES_DIR = os.path.join(os.getcwd(), "engines") + os.sep
attempts = []


def importer():
    # The innermost engines/ source line on the stack: who asked for Qt.
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(ENGINES_DIR):
            return f"{os.path.relpath(frame.filename)}:{frame.lineno}"
    return "?"


class BlockQt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            attempts.append(f"{name} from {importer()}")
            raise ImportError(f"{name} is blocked: engines must not import Qt", name=name)
        return None


preloaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
sys.meta_path.insert(0, BlockQt())
failures = {}


def failed(name):
    failures[name] = traceback.format_exc(limit=-3)


import inferlab.engines as engines

names = ["inferlab.engines"]
for info in pkgutil.walk_packages(engines.__path__, "inferlab.engines.", onerror=failed):
    names.append(info.name)
for name in names:
    try:
        importlib.import_module(name)
    except BaseException:
        failed(name)

loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
print(json.dumps({"modules": names, "preloaded": preloaded, "attempts": attempts,
                  "failures": failures, "loaded": loaded}))
"""


def run_child() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(BLOCKED)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_engines_module_imports_with_qt_blocked():
    result = run_child()
    assert "inferlab.engines.trace.snapshot" in result["modules"]  # the walk found the package
    assert result["preloaded"] == [], "Qt was loaded before the check started"
    failures = "\n".join(f"{name}:\n{tb}" for name, tb in result["failures"].items())
    assert not result["failures"], f"engines modules failed to import:\n{failures}"
    assert result["attempts"] == [], f"engines modules tried to import Qt: {result['attempts']}"
    assert result["loaded"] == []


def test_no_engines_source_mentions_a_qt_import():
    """Catches imports the runtime check cannot reach (inside functions, behind flags)."""
    offenders = offending_imports([ROOT / "engines"], BLOCKED, ROOT)
    assert offenders == [], f"Qt imported in engines/: {offenders}"
