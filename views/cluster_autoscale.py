"""The cluster lab's autoscaling figures, drawn from an autoscaled run's `AutoscaleRun`
(engines/cluster/autoscale_records.py) and its metrics (engines/labs/cluster/autoscaling.py):
the replicas against time (serving, and held: serving + cold-starting + draining), the
requests in flight beside the stable-window mean the autoscaler acted on and the target
fleet's capacity, and GPU-hours against SLO attainment for the autoscaled fleet and the
fixed fleets probed for the peak one. None draws why there is nothing to draw.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from inferlab.views.style import fixed_plot, pen

SERVING = "#0072B2"
HELD = "#E69F00"
IN_FLIGHT = "#999999"
STABLE = "#009E73"
AUTOSCALED = "#D55E00"
FIXED = "#0072B2"
NOTHING = ("No autoscaled run: choose the replicas layout, tick Autoscale and Run "
           "(or `inferlab run cluster --autoscale --trace F`).")


def _steps(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step curve through (t_i, y_i): y holds until the next tick."""
    if len(t) < 2:
        return t, y
    return np.repeat(t, 2)[1:], np.repeat(y, 2)[:-1]


class ClusterAutoscale(QWidget):
    """Three plots: replicas over time, requests in flight over time, GPU-hours against
    SLO attainment (autoscaled and fixed fleets)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.note = QLabel(NOTHING)
        self.note.setWordWrap(True)
        self.replicas = pg.PlotWidget()
        p = fixed_plot(self.replicas, "Replicas over time", "replicas",
                       "time since the first arrival (s)")
        p.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.held = p.plot([], [], pen=pen(HELD, 2, dashed=True),
                           name="held (serving + cold start + draining)")
        self.serving = p.plot([], [], pen=pen(SERVING, 2), name="serving")
        self.flight = pg.PlotWidget()
        q = fixed_plot(self.flight, "Requests in flight", "requests",
                       "time since the first arrival (s)")
        q.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.in_flight = q.plot([], [], pen=pen(IN_FLIGHT, 1), name="at each tick")
        self.stable = q.plot([], [], pen=pen(STABLE, 2), name="stable-window mean")
        self.capacity = q.plot([], [], pen=pen(SERVING, 1, dashed=True),
                               name="target × serving")
        self.cost = pg.PlotWidget()
        c = fixed_plot(self.cost, "Cost against SLO attainment", "GPU-hours",
                       "requests within both SLOs (%)")
        c.addLegend(offset=(-5, 5), labelTextSize="8pt")
        self.fixed = c.plot([], [], pen=None, symbol="s", symbolSize=8, symbolBrush=FIXED,
                            name="fixed fleets probed")
        self.peak = c.plot([], [], pen=None, symbol="s", symbolSize=13, symbolBrush=None,
                           symbolPen=pg.mkPen("#CC79A7", width=2), name="peak fleet")
        self.scaled = c.plot([], [], pen=None, symbol="o", symbolSize=11,
                             symbolBrush=AUTOSCALED, name="autoscaled")
        self.labels: list[pg.TextItem] = []
        bottom = QHBoxLayout()
        bottom.addWidget(self.flight, 3)
        bottom.addWidget(self.cost, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(self.replicas, 1)
        layout.addLayout(bottom, 1)

    def draw(self, run, figures: dict | None) -> None:
        """`run`: the AutoscaleRun (None: not autoscaled); `figures`: the run's
        metrics["autoscale"] (its GPU-hours, attainment and peak fleet)."""
        c = self.cost.getPlotItem()
        for item in self.labels:
            c.removeItem(item)
        self.labels = []
        if run is None or not run.ticks:
            for curve in (self.held, self.serving, self.in_flight, self.stable, self.capacity,
                          self.fixed, self.peak, self.scaled):
                curve.setData([], [])
            self.note.setText(NOTHING)
            return
        ticks = run.ticks
        t = np.array([x.t_s for x in ticks]) - run.start_s
        serving = np.array([x.ready for x in ticks], dtype=np.float64)
        self.serving.setData(*_steps(t, serving))
        self.held.setData(*_steps(t, np.array([x.ready + x.booting + x.draining
                                               for x in ticks], dtype=np.float64)))
        self.in_flight.setData(t, np.array([x.in_flight for x in ticks], dtype=np.float64))
        self.stable.setData(t, np.array([x.stable_concurrency for x in ticks]))
        target = float(run.policy.get("target_concurrency", 0.0))
        self.capacity.setData(*_steps(t, target * serving))
        self.replicas.getPlotItem().setYRange(0, max(serving.max(), run.peak_replicas) * 1.35
                                              + 0.5, padding=0)
        top = max(max(x.in_flight for x in ticks), target * serving.max(), 1.0)
        self.flight.getPlotItem().setYRange(0, 1.5 * top, padding=0)  # headroom: the legend
        self.flight.getPlotItem().setXRange(0, float(t[-1]), padding=0.02)
        self._draw_cost(figures or {})
        self.note.setText(self._caption(run, figures or {}))

    def _draw_cost(self, figures: dict) -> None:
        c = self.cost.getPlotItem()
        peak = figures.get("peak_fleet")
        probes = (peak or {}).get("probes", [])
        self.fixed.setData([100 * p[1] for p in probes], [p[2] for p in probes])
        for n, got, hours in probes:
            label = pg.TextItem(f"{int(n)}", color="#888888", anchor=(-0.3, 0.5))
            label.setPos(100 * got, hours)
            c.addItem(label)
            self.labels.append(label)
        if peak:
            self.peak.setData([100 * peak["slo_attainment"]], [peak["gpu_hours"]])
        else:
            self.peak.setData([], [])
        if "gpu_hours" in figures:
            self.scaled.setData([100 * figures["slo_attainment"]], [figures["gpu_hours"]])
        hours = [p[2] for p in probes] + [figures.get("gpu_hours", 0.0)]
        got = [100 * p[1] for p in probes] + [100 * figures.get("slo_attainment", 0.0)]
        c.setYRange(0, max(hours) * 1.6 or 1.0, padding=0)  # headroom: the legend
        c.setXRange(max(0.0, min(got) - 5), 103, padding=0)

    @staticmethod
    def _caption(run, figures: dict) -> str:
        p = run.policy
        text = (f"KPA: target {p.get('target_concurrency', 0):g} requests in flight per "
                f"replica, {p.get('min_replicas')}–{p.get('max_replicas')} replicas, "
                f"{p.get('stable_window_s', 0):g} s stable / {p.get('panic_window_s', 0):g} s "
                f"panic window; cold start {run.cold_start_s:.1f} s. "
                f"{len(run.replicas)} replicas started, at most {run.peak_replicas} at once: "
                f"{run.gpu_hours:.3f} GPU-h")
        if "slo_attainment" in figures:
            text += f" at {100 * figures['slo_attainment']:.1f} % within the SLOs"
        peak = figures.get("peak_fleet")
        if peak:
            text += (f". Peak fleet ({peak['basis']}): {peak['replicas']} replicas, "
                     f"{peak['gpu_hours']:.3f} GPU-h at {100 * peak['slo_attainment']:.1f} %")
            ratio = figures.get("gpu_hours_vs_peak_fleet")
            if ratio is not None:
                text += f"; autoscaled / peak = {ratio:.2f}×"
        return text + "."
