"""The distribution installs exactly one import package, `inferlab`, and the sources use it.

The folders app/, engines/, views/ and assets/ stay at the repository's top level; setup.py maps
them to `inferlab.app`, `inferlab.engines`, ... A bare `import engines` would work inside the
repository (pytest puts its root on sys.path) and break for a user, so the sources are scanned.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.import_scan import offending_imports

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("app", "engines", "views", "assets")


def test_sources_import_only_through_inferlab():
    offenders = offending_imports([ROOT / f for f in (*FOLDERS, "tests")], FOLDERS, ROOT)
    assert offenders == [], f"bare top-level imports (use inferlab.<folder>): {offenders}"


@pytest.mark.slow
def test_wheel_installs_one_top_level_name(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("inferlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"inferlab"}
    # every folder's code and the assets' data are inside it, the firmware's sources too
    for needed in ("inferlab/app/cli.py", "inferlab/engines/kv/block_manager.py",
                   "inferlab/views/kv_view.py", "inferlab/assets/models/smollm2-135m.json",
                   "inferlab/assets/tflite/person_detect.tflite", "inferlab/firmware/Makefile",
                   "inferlab/assets/traces/azure_conv_2023_first20min.csv",
                   "inferlab/firmware/main.c", "inferlab/firmware/core/fw_server.c",
                   "inferlab/firmware/ports/cortex-m/link.ld.in",
                   "inferlab/engines/kernels/lowbit.c", "inferlab/engines/kernels/skinny.c"):
        assert needed in names
    # every firmware source (build/ is a make run by hand's output), and no build output
    sources = [f.relative_to(ROOT).as_posix() for f in (ROOT / "firmware").rglob("*")
               if f.is_file() and f.relative_to(ROOT / "firmware").parts[0] != "build"
               and (f.suffix in (".c", ".h", ".md") or f.name in ("Makefile", "link.ld.in"))]
    assert len(sources) > 20 and all(f"inferlab/{f}" in names for f in sources)
    assert not [n for n in names if n.startswith("inferlab/firmware/") and
                n.endswith((".o", ".d", ".so", ".elf", ".su"))]
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "inferlab = inferlab.app.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
