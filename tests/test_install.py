"""A non-editable install works from any folder: the CLI plans a shipped model and builds the
board firmware from the sources shipped inside the package, into the user's cache folder.

The wheel is built from a copy of this working tree (so that no build/ folder of the checkout,
stale files included, goes into it) and installed (`--no-deps`) into a fresh venv. Rather
than install torch, numpy and Qt again, a `.pth` file appends this venv's site-packages to
the new one's path: a `.pth` path line only extends sys.path (the `.pth` files there, such as
the editable install's finder of this checkout, are not run), so every `inferlab` module
comes from the new venv. The test asserts that too. Commands run from an empty folder, with
XDG_CACHE_HOME in the test's tmp folder.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.firmware.fwtools import need_tools

ROOT = Path(__file__).resolve().parents[1]


def run(cmd, cwd, env, timeout=600):
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return done


def ok(done) -> str:
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's python, its bin folder, an env for it, an empty working folder, the venv)."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "out", "*.egg-info", "__pycache__", ".*_cache"))
    wheels = tmp / "wheels"
    ok(run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source],
           source, os.environ))
    (wheel,) = wheels.glob("inferlab-*.whl")
    venv = tmp / "venv"
    ok(run([sys.executable, "-m", "venv", venv], tmp, os.environ))
    python = venv / "bin" / "python"
    ok(run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], tmp,
           os.environ))
    # Only now (pip must not see this checkout's editable install): this venv's packages.
    purelib = Path(ok(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                         "['purelib'])"], tmp, os.environ)).strip())
    ours = [Path(p) for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}]
    (purelib / "zz_inferlab_test_deps.pth").write_text(
        "".join(f"{p}\n" for p in ours if p.is_dir()))
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "INFERLAB_FIRMWARE_DIR", "VIRTUAL_ENV")}
    env |= {"XDG_CACHE_HOME": str(tmp / "cache"), "XDG_CONFIG_HOME": str(tmp / "config"),
            "QT_QPA_PLATFORM": "offscreen"}
    return python, venv / "bin", env, elsewhere, venv


@pytest.mark.slow
def test_the_installed_copy_is_what_runs(installed):
    python, _bin, env, elsewhere, venv = installed
    where = ok(run([python, "-c", "import inferlab.app, inferlab.engines.board.toolchain as t; "
                                  "print(inferlab.app.__file__); print(t.FIRMWARE_DIR)"],
                   elsewhere, env)).split()
    assert all(Path(p).resolve().is_relative_to(venv.resolve()) for p in where), where
    assert (Path(where[1]) / "core" / "fw_server.c").is_file()
    bare = run([python, "-c", "import engines"], elsewhere, env)
    assert bare.returncode != 0 and "ModuleNotFoundError" in bare.stderr


@pytest.mark.slow
def test_installed_cli_plans_and_builds_the_firmware_from_anywhere(installed, tmp_path):
    python, bin_dir, env, elsewhere, venv = installed
    plan = json.loads(ok(run([bin_dir / "inferlab", "mcu", "plan", "person_detect", "--json"],
                             elsewhere, env)))
    assert plan["planner"] == "tflm-greedy" and plan["arena_bytes"] > 0

    need_tools("host")
    out = tmp_path / "fw"
    build = json.loads(ok(run([bin_dir / "inferlab", "board", "build", "--model",
                               "person_detect", "--target", "host", "--out", out, "--json"],
                              elsewhere, env)))
    assert Path(build["image"]) == out / "firmware" and (out / "firmware").is_file()
    assert build["arena_bytes"] == plan["arena_bytes"]
    # No --out: the image goes to the cache folder, next to the reused objects.
    cached = json.loads(ok(run([bin_dir / "inferlab", "board", "build", "--model",
                                "person_detect", "--target", "host", "--json"], elsewhere, env)))
    cache = Path(env["XDG_CACHE_HOME"]) / "inferlab" / "firmware"
    assert Path(cached["image"]).is_file() and Path(cached["image"]).is_relative_to(cache)
    assert list(cache.glob("*/obj/host-p*/core/fw_server.o"))
    # Nothing was written into the installed sources, nor into the working folder.
    firmware = Path(ok(run([python, "-c", "import inferlab.engines.board.toolchain as t; "
                                          "print(t.FIRMWARE_DIR)"], elsewhere, env)).strip())
    assert not (firmware / "build").exists()
    assert list(elsewhere.iterdir()) == []
