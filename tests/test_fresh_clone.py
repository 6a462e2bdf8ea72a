"""A fresh clone is complete: its suite collects, and nothing skips for a missing model or a
missing `shared/` folder beside it.

The committed HEAD is cloned into an empty temporary folder. `inferlab` is installed editable
from this checkout, so `import inferlab` in the clone would find this checkout's code: the
clone's own folders are put first on PYTHONPATH as the `inferlab` namespace package
(<tmp>/pkgpath/inferlab/app -> <clone>/app, ...; the standard path finder comes before
setuptools' editable finder), and a subprocess checks that they are what imports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Cheap tests that read the shipped example models: in the clone they pass, none skipped.
CHEAP_SUBSET = ("tests/engines/mcu/test_examples.py", "tests/engines/mcu/test_mcu_graph.py")
# Ways a source would reach for a `shared/` folder beside the checkout.
SHARED_FOLDER = re.compile(r"""\.\./shared|["']shared["']\s*/\s*["']models["']""")

pytestmark = pytest.mark.slow


def run(args, cwd, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """(clone folder, environment that imports the clone's `inferlab`)."""
    root = tmp_path_factory.mktemp("fresh")
    target = root / "inferlab"
    done = run(["git", "clone", "--quiet", str(REPO), str(target)], cwd=root)
    assert done.returncode == 0, done.stderr
    assert not (root / "shared").exists()

    # The clone's own folder mapping (setup.py's package_dir: inferlab.app -> app, ...).
    mapping = run([sys.executable, "-c",
                   "import json; from distutils.core import run_setup; "
                   "print(json.dumps(run_setup('setup.py', stop_after='init').package_dir))"],
                  cwd=target)
    assert mapping.returncode == 0, mapping.stderr
    package_dir = json.loads(mapping.stdout.strip().splitlines()[-1])
    namespace = root / "pkgpath" / "inferlab"  # no __init__.py: a namespace portion
    namespace.mkdir(parents=True)
    for package, folder in package_dir.items():
        name = package.split(".", 1)[1]
        (namespace / name).symlink_to(target / folder, target_is_directory=True)

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(namespace.parent), QT_QPA_PLATFORM="offscreen",
               PYTHONDONTWRITEBYTECODE="1")
    return target, env, package_dir


def test_the_clone_imports_its_own_code(clone):
    target, env, package_dir = clone
    probe = run([sys.executable, "-c",
                 "import importlib, json, sys; print(json.dumps({n: list(importlib.import_module("
                 "n).__path__) for n in sys.argv[1:]}))", *package_dir], cwd=target, env=env)
    assert probe.returncode == 0, probe.stderr
    paths = json.loads(probe.stdout)
    for package, folder in package_dir.items():
        assert [Path(p).resolve() for p in paths[package]] == [(target / folder).resolve()], package


def test_no_source_looks_for_a_shared_folder(clone):
    target, _env, _ = clone
    tracked = run(["git", "ls-files"], cwd=target).stdout.split()
    hits = []
    for name in tracked:
        path = target / name
        if path.suffix not in (".py", ".toml", ".cfg", ".ini", ".md", ".txt", "") or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1)
                 if SHARED_FOLDER.search(line)]
    assert hits == []


def test_the_clone_collects_its_whole_suite(clone):
    target, env, _ = clone
    out = run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
              cwd=target, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert re.match(r"\d+ tests? collected", summary), summary
    assert not re.search(r"error|skipped", summary), summary
    files = {line.split("::", 1)[0] for line in out.stdout.splitlines() if "::" in line}
    test_files = {str(p.relative_to(target)) for p in (target / "tests").rglob("test_*.py")}
    assert test_files <= files  # every test file has tests (none skipped at import)


def test_cheap_tests_pass_in_the_clone_with_no_skip(clone):
    target, env, _ = clone
    out = run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *CHEAP_SUBSET],
              cwd=target, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"skipped|failed|error|deselected", summary), summary
    assert "SKIPPED" not in out.stdout
