"""`inferlab` with no arguments: the display check, then the main window and its event loop."""

from __future__ import annotations

import os
import sys

from inferlab.app.gui import create_application, display_available

NO_DISPLAY_MESSAGE = (
    "inferlab: no display found (neither DISPLAY nor WAYLAND_DISPLAY is set); "
    "run the window on a virtual screen with `xvfb-run -a inferlab`, "
    "or render a lab to a file with `inferlab screenshot --lab roofline --out roofline.png`."
)


def launch() -> int:
    """Open the main window and run the event loop.

    The window paints its sidebar, menus and device bar first; torch (device discovery, on a
    worker thread), pyqtgraph and the labs come after that first paint (`deferred=True`).
    """
    if not display_available():
        print(NO_DISPLAY_MESSAGE, file=sys.stderr)
        return 2
    app = create_application(plots=False)
    # after the display check and the QApplication, as before: no display, no window imports
    from inferlab.app.main_window import MainWindow

    window = MainWindow(deferred=True)
    if os.environ.get("INFERLAB_EXIT_AFTER_PAINT"):
        window.quit_after_first_paint(wait_for_labs=os.environ["INFERLAB_EXIT_AFTER_PAINT"] == "labs")
    window.show()
    return app.exec()
