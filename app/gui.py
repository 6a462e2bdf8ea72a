"""Start the Qt application: display check, QApplication, main window."""

from __future__ import annotations

import os
import sys

NO_DISPLAY_MESSAGE = (
    "inferlab: no display found (neither DISPLAY nor WAYLAND_DISPLAY is set); "
    "run the window on a virtual screen with `xvfb-run -a inferlab`, "
    "or render a lab to a file with `inferlab screenshot --lab roofline --out roofline.png`."
)


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
    from inferlab.app import __version__

    app.setApplicationVersion(__version__)
    if plots:
        configure_plots()
    return app


def configure_plots() -> None:
    """pyqtgraph's options for every view: antialiased, black on white."""
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True, background="w", foreground="k")


def launch() -> int:
    """`inferlab` with no arguments: open the main window and run the event loop.

    The window paints its sidebar, menus and device bar first; torch (device discovery, on a
    worker thread), pyqtgraph and the labs come after that first paint (`deferred=True`).
    """
    if not display_available():
        print(NO_DISPLAY_MESSAGE, file=sys.stderr)
        return 2
    app = create_application(plots=False)
    from inferlab.app.main_window import MainWindow

    window = MainWindow(deferred=True)
    if os.environ.get("INFERLAB_EXIT_AFTER_PAINT"):
        window.quit_after_first_paint(wait_for_labs=os.environ["INFERLAB_EXIT_AFTER_PAINT"] == "labs")
    window.show()
    return app.exec()
