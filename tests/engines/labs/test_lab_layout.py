"""Every lab package has the same files, and the registry finds each part where a newcomer
looks for it: `engines/labs/<id>/{settings,records,session,section,run,bench}.py`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from inferlab.app.labs.registry import LABS

ROOT = Path(__file__).resolve().parents[3]
LAB_FILES = ("settings.py", "records.py", "session.py", "section.py", "run.py")
"""Every lab's; and `bench.py` for each lab with a bench (hardware's roofs are measured by the
roofline bench; memory's figures are closed forms with nothing to time)."""


@pytest.mark.parametrize("spec", LABS, ids=lambda spec: spec.id)
def test_the_lab_package_has_the_same_files(spec):
    package = ROOT / "engines" / "labs" / spec.id
    files = LAB_FILES + (("bench.py",) if spec.bench else ())
    missing = [name for name in files if not (package / name).is_file()]
    assert not missing, f"engines/labs/{spec.id} lacks {', '.join(missing)}"


@pytest.mark.parametrize("spec", LABS, ids=lambda spec: spec.id)
def test_the_registry_names_the_lab_package_for_each_part(spec):
    here = f"inferlab.engines.labs.{spec.id}."
    assert spec.read_section.startswith(here + "section:")
    for ref in (spec.run, spec.run_arguments):
        assert ref is None or ref.startswith(here + "run:"), ref
    for ref in (spec.bench, spec.bench_arguments):
        assert ref is None or ref.startswith(here + "bench:"), ref
    # only a view's own timings stay on the app side
    assert spec.view_bench is None or spec.view_bench.startswith("inferlab.app.benches."), \
        spec.view_bench


@pytest.mark.parametrize("spec", LABS, ids=lambda spec: spec.id)
def test_section_py_holds_only_the_writer_and_the_reader(spec):
    """The section module defines the section's writer and reader (and the small readers of
    its parts); settings, sessions and records live in their own files."""
    tree = ast.parse((ROOT / "engines" / "labs" / spec.id / "section.py").read_text("utf-8"))
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    assert not classes, f"engines/labs/{spec.id}/section.py defines {classes}"
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert f"read_{spec.id}_section" in functions
