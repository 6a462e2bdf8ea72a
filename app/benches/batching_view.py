"""`inferlab bench batching --json`: the batching lab's figures, in one run.

    engines.labs.batching.bench.run_batching_bench   continuous / static throughput ratio, p99
                                                TTFT / TPOT of both, simulated requests per
                                                wall second
    timeline_render_ms                          one full draw + offscreen render of the
                                                request timeline (views.batch_timeline.
                                                bench_timeline: 2,000 requests, 20,000
                                                iterations); the bench lives in app/ because
                                                engines must not import views
"""

from __future__ import annotations

from inferlab.engines.labs.batching.bench import run_batching_bench


def run_batching_lab_bench(requests: int = 200, simulator_requests: int = 5000,
                           timeline_requests: int = 2000,
                           timeline_iterations: int = 20_000, real: bool = True) -> dict:
    from PySide6.QtCore import QCoreApplication, QEvent

    from inferlab.app.gui import create_application
    from inferlab.app.offscreen import ensure_platform

    figures = run_batching_bench(requests, simulator_requests, real)
    ensure_platform()
    create_application()  # the app's own QApplication, not one pyqtgraph makes and drops
    from inferlab.views.batch_timeline import bench_timeline

    timeline = bench_timeline(timeline_requests, timeline_iterations)
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)  # its view, now
    figures["timeline_render_ms"] = timeline["render_ms"]
    figures["timeline_cursor_ms"] = timeline["cursor_ms"]
    figures["timeline_update_ms"] = timeline["update_ms"]  # a live redraw after new records
    figures["timeline_update_max_ms"] = timeline["update_max_ms"]
    return figures
