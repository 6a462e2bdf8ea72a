"""The Qt application's shared pieces: the display check, the one QApplication, pyqtgraph's
options, and the process clock the start-up figures read.

The window (`main_window`), its launch (`launch`), the offscreen renders (`offscreen`,
`offscreen_window`) and the benches all import this module, and it imports none of them: the
bottom of app/'s import graph (`[tool.importlinter]` keeps app/ free of circles). Qt and
pyqtgraph are imported inside the functions: a command that only checks the display pays for
neither.
"""

from __future__ import annotations

import os
import sys
import time

from inferlab.app import __version__


def display_available(environ=os.environ, platform: str = sys.platform) -> bool:
    """True when Qt can open a window: a display server, or a non-screen platform chosen."""
    if not platform.startswith("linux"):
        return True
    qpa = environ.get("QT_QPA_PLATFORM", "")
    if qpa and not qpa.startswith(("xcb", "wayland")):
        return True  # offscreen, minimal, vnc, eglfs...: Qt needs no display server
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def create_application(argv: list[str] | None = None, plots: bool = True):
    """The one QApplication. `plots`: also configure pyqtgraph the way every view expects
    (imports it); `launch` leaves that to the window, after its first paint."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("InferLab")
    app.setOrganizationName("InferLab")
    app.setOrganizationDomain("inferlab.dev")
    app.setApplicationVersion(__version__)
    if plots:
        configure_plots()
    return app


def configure_plots() -> None:
    """pyqtgraph's options for every view: antialiased, black on white."""
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")


def seconds_since_process_start() -> float:
    """Seconds since this process started. On Linux from the kernel's start time of the
    process and the boot clock (10 ms ticks); psutil's create_time adds the boot time, which
    /proc gives in whole seconds: up to a second off."""
    try:
        with open("/proc/self/stat") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError, IndexError):  # not Linux
        import psutil

        return time.time() - psutil.Process().create_time()
