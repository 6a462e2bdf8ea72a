"""`inferlab bench batching`'s window figures (the registry's `view_bench`): the request
timeline drawn offscreen (views.batch_timeline.bench_timeline: 2,000 requests, 20,000
iterations).

    timeline_render_ms       one full draw + offscreen render (segments and strips built)
    timeline_cursor_ms       the same records redrawn with the cursor moved, and repainted
    timeline_update_ms       median redraw + repaint of a live run grown by 5 iterations
    timeline_update_max_ms   the slowest of those 20 redraws

The engine figures are engines/labs/batching/bench.py's."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent

from inferlab.app.gui import create_application
from inferlab.app.offscreen import ensure_platform
from inferlab.views.batch_timeline import bench_timeline


def run_timeline_bench(timeline_requests: int = 2000,
                       timeline_iterations: int = 20_000) -> dict:
    ensure_platform()
    create_application()  # the app's own QApplication, not one pyqtgraph makes and drops
    timeline = bench_timeline(timeline_requests, timeline_iterations)
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)  # its view, now
    return {"timeline_render_ms": timeline["render_ms"],
            "timeline_cursor_ms": timeline["cursor_ms"],
            "timeline_update_ms": timeline["update_ms"],  # a live redraw after new records
            "timeline_update_max_ms": timeline["update_max_ms"]}
