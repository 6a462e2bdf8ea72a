"""The window's responsiveness: time to first paint, longest GUI stall during measurement.

    first_paint_s              `inferlab` (the real launch path, offscreen) from process start
                               to the window's first paint event (median of FIRST_PAINT_RUNS)
    bare_window_first_paint_s  the same for a bare PySide6 QMainWindow: the floor (interpreter,
                               Qt, one platform window); runs interleaved with InferLab's
    first_paint_ratio          first_paint_s / bare_window_first_paint_s
    current_lab_ready_s        InferLab: until the lab shown at start has its page (deferred
                               start-up builds it after the first paint)
    labs_ready_s               InferLab: until every lab is built and the devices are known
    measure_s, gui_*           the Hardware lab's roof measurement and the GUI thread's longest
                               gap meanwhile (a timer ticking every tick_ms)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from PySide6.QtCore import QTimer

from inferlab.app.offscreen import process_events_for
from inferlab.app.offscreen_window import make_window

FIRST_PAINT_RUNS = 5

# A bare PySide6 window, reporting its first paint as InferLab's window does
# (MainWindow.quit_after_first_paint): seconds since process start, at the first paint event.
BARE_WINDOW = """
import sys
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

class FirstPaint(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Paint:
            obj.removeEventFilter(self)
            from inferlab.app.gui import seconds_since_process_start
            print(f"first_paint_s={seconds_since_process_start():.3f}", flush=True)
            QTimer.singleShot(0, obj.close)
        return False

app = QApplication(sys.argv[:1])
window = QMainWindow()
window.resize(1280, 800)
probe = FirstPaint()
window.installEventFilter(probe)
window.show()
sys.exit(app.exec())
"""


def _figures(command: list[str], env: dict) -> dict[str, str]:
    """Run a window that reports `key=value` lines on stdout and closes itself."""
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"window did not start ({' '.join(command[:3])}): {out.stderr.strip()[-500:]}")
    figures = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    if "first_paint_s" not in figures:
        raise RuntimeError(f"the window never reported its first paint: {out.stdout[-500:]}")
    return figures


def first_paint(runs: int = FIRST_PAINT_RUNS) -> dict:
    """Medians over `runs` of InferLab's start-up figures and a bare window's first paint,
    runs interleaved so that both see the same machine load."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               XDG_CONFIG_HOME=tempfile.mkdtemp(prefix="inferlab-bench-config-"))
    inferlab: dict[str, list[float]] = {"first_paint_s": [], "current_lab_ready_s": [], "labs_ready_s": []}
    bare: list[float] = []
    for _ in range(runs):
        figures = _figures([sys.executable, "-m", "inferlab.app.cli"],
                           dict(env, INFERLAB_EXIT_AFTER_PAINT="labs"))
        if figures.get("torch_imported_at_first_paint") != "False":
            raise RuntimeError("torch was imported before the window's first paint")
        for key, values in inferlab.items():
            values.append(float(figures[key]))
        bare.append(float(_figures([sys.executable, "-c", BARE_WINDOW], env)["first_paint_s"]))
    result = {key: statistics.median(values) for key, values in inferlab.items()}
    result["bare_window_first_paint_s"] = statistics.median(bare)
    result["first_paint_ratio"] = result["first_paint_s"] / result["bare_window_first_paint_s"]
    result["first_paint_runs"] = runs
    return result


def gui_stall_during_measurement(tick_ms: int = 5) -> dict:
    """Run the roof micro-benchmarks from the Hardware lab while a timer ticks every `tick_ms`;
    the largest gap between ticks is the GUI thread's longest stall."""
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
    return first_paint() | gui_stall_during_measurement()
