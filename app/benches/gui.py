"""The window's responsiveness: time to first paint, longest GUI stall during measurement."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def first_paint_s(runs: int = 3) -> float:
    """Median seconds from process start to the main window's first paint (offscreen)."""
    env = dict(os.environ, INFERLAB_EXIT_AFTER_PAINT="1", QT_QPA_PLATFORM="offscreen")
    env.setdefault("XDG_CONFIG_HOME", os.path.join(os.path.expanduser("~"), ".cache", "inferlab-bench"))
    values = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-m", "inferlab.app.cli"], env=env, capture_output=True,
                             text=True, timeout=120)
        for line in out.stdout.splitlines():
            if line.startswith("first_paint_s="):
                values.append(float(line.split("=", 1)[1]))
        if out.returncode != 0:
            raise RuntimeError(f"window did not start: {out.stderr.strip()[-500:]}")
    if not values:
        raise RuntimeError("the window never reported its first paint")
    return statistics.median(values)


def gui_stall_during_measurement(tick_ms: int = 5) -> dict:
    """Run the roof micro-benchmarks from the Hardware lab while a timer ticks every `tick_ms`;
    the largest gap between ticks is the GUI thread's longest stall."""
    from PySide6.QtCore import QTimer

    from inferlab.app.offscreen import make_window, process_events_for

    _app, window = make_window()
    try:
        gaps: list[float] = []
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            gaps.append(now - last[0])
            last[0] = now

        timer = QTimer()
        timer.setInterval(tick_ms)
        timer.timeout.connect(tick)
        process_events_for(0.5)
        timer.start()
        last[0] = time.perf_counter()
        t0 = time.perf_counter()
        window.lab("hardware").measure()
        process_events_for(0.2)
        process_events_for(300, until=lambda: not window.context.running_tasks())
        duration = time.perf_counter() - t0
        timer.stop()
        gaps_ms = sorted(g * 1e3 for g in gaps)
        return {"measure_s": duration, "gui_max_stall_ms": gaps_ms[-1],
                "gui_p99_gap_ms": gaps_ms[int(0.99 * (len(gaps_ms) - 1))], "ticks": len(gaps_ms),
                "tick_ms": tick_ms}
    finally:
        window.close()


def run_gui_bench() -> dict:
    return {"first_paint_s": first_paint_s()} | gui_stall_during_measurement()
