"""`inferlab bench attention`'s window figure (the registry's `view_bench`): the attention
view's redraw late in a long tiled run.

    redraw_ms_4096   median ms to draw one more step and repaint, N = 4,096 (d = 64, 64×64
                     tiles: 4,096 tiles), the records arriving one at a time as in a live run

The engine figures are engines/labs/attention/bench.py's."""

from __future__ import annotations

import statistics
import time

import shiboken6
from PySide6.QtWidgets import QApplication

from inferlab.app.labs.attention import gpu_roof
from inferlab.engines.labs.attention.session import AttentionSession
from inferlab.engines.labs.attention.settings import ATTENTION_DEFAULTS
from inferlab.views.attention_view import AttentionHeader, AttentionView

REDRAW_N = 4096
REDRAW_STEPS = 64


def redraw_ms(n: int = REDRAW_N, steps: int = REDRAW_STEPS) -> float:
    """Median ms of the view's redraw for one more step, late in a tiled run of N = `n`
    (d = 64, 64×64 tiles: 4,096 tiles), the records arriving one at a time as in a live run."""
    app = QApplication.instance() or QApplication([])
    session = AttentionSession(dict(ATTENTION_DEFAULTS, n=n, d=64, br=64, bc=64))
    records = []
    while not session.done:
        records.append(session.step())
    view = AttentionView()
    view.resize(1280, 760)
    view.show()
    header = AttentionHeader(session.info, (gpu_roof(),))
    start = len(records) - steps
    view.draw(header, records[:start])
    app.processEvents()
    times = []
    for i in range(start, len(records)):
        t0 = time.perf_counter()
        view.draw(header, records[:i + 1])
        view.repaint()  # the paint, not only the data update
        app.processEvents()
        times.append(time.perf_counter() - t0)
    view.close()
    shiboken6.delete(view)  # now, not at interpreter exit (where its teardown could crash)
    return 1e3 * statistics.median(times)


def run_attention_view_bench() -> dict:
    """`redraw_ms_4096`, added to engines.labs.attention.bench's figures."""
    return {f"redraw_ms_{REDRAW_N}": redraw_ms()}
