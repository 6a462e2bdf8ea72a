"""The endpoint lab's timeline: the batching lab's Gantt chart, client side, with the server's
own metric strips under it on the same time axis.

Rows are requests in workload order (r0000 at the top), x is the run's clock. A request waits
(grey, the batching lab's "waiting") from the moment the client sent it until its first token,
then streams (the batching lab's decode blue) until its last chunk; a failure is vermillion, a
request cut off by Stop or the run's time limit pale blue. The bars are the batching timeline's
(`TimelineSegments`, one `BarGraphItem` per state, the same colours, request axis and hover
search). Under it, the server's /metrics: requests running and waiting, and KV-cache usage,
each held between two scrapes; a server without /metrics gets a plain note there instead.

It draws records (`draw(record)`: engines/labs/endpoint/records.EndpointRecord); it starts no work.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from inferlab.engines.labs.batching.timeline import DECODE, PREEMPTED, STALLED, WAITING, segment_at
from inferlab.engines.labs.endpoint.timeline import request_segments
from inferlab.views.batch_timeline import BAR_HEIGHT, GanttFrame
from inferlab.views.style import color

STATES = (WAITING, DECODE, PREEMPTED, STALLED)
LEGEND = {WAITING: "waiting (sent, no token yet)", DECODE: "streaming",
          PREEMPTED: "failed", STALLED: "cut off (Stop or time limit)"}
HOVER_NAMES = {WAITING: "waiting for the first token", DECODE: "streaming",
               PREEMPTED: "failed", STALLED: "cut off"}
RUNNING_COLOR, WAITING_COLOR, KV_COLOR = "#0072B2", "#8A8A8A", "#7A4FA0"
HINT = "Hover over a bar for the request, its span and its tokens."


def held_steps(points: np.ndarray):
    """x, y of a value held from each scrape to the next (a step curve)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if len(pts) == 0:
        return np.zeros(0), np.zeros(0)
    x = np.repeat(pts[:, 0], 2)[1:]
    y = np.repeat(pts[:, 1], 2)[:-1]
    return x, y


class EndpointTimelineView(GanttFrame):
    """Requests sent by the client (waiting, then streaming) over the server's strips."""

    def __init__(self, parent=None):
        super().__init__(HINT, len(STATES), "requests<br>(workload order,<br>first at the top)",
                         parent)
        self.gantt.showGrid(x=True, y=False, alpha=0.2)
        self.gantt.getViewBox().invertY(True)
        self._add_bars({state: LEGEND[state] for state in STATES})
        self.message = pg.TextItem("", color="#555", anchor=(0.5, 0.5))
        self.gantt.addItem(self.message, ignoreBounds=True)

        self.running_plot = self._strip(
            2, f'server: requests<br><span style="color:{RUNNING_COLOR}">running</span>, '
               f'<span style="color:{WAITING_COLOR}">waiting</span>')
        self.kv_plot = self._strip(3, "server: KV cache<br>used (%)", last=True)
        self.kv_plot.setYRange(0, 100, padding=0.08)
        self.kv_plot.getViewBox().enableAutoRange(axis="y", enable=False)
        self.kv_plot.getAxis("left").setTicks([[(v, str(v)) for v in (0, 50, 100)]])
        self.kv_plot.setLabel("bottom", "time since the run started (s, wall clock)",
                              color="#333333")
        for plot in (self.running_plot, self.kv_plot):
            # short strips: labels at the edges may overhang (an axis with a grid clips them)
            plot.showGrid(x=True, y=False, alpha=0.2)
            plot.getAxis("left").setStyle(hideOverlappingLabels=False,
                                          textFillLimits=[(0, 0.95), (3, 0.9)])
        self.running_curve = self._curve(self.running_plot, RUNNING_COLOR, 1.5)
        self.waiting_curve = self._curve(self.running_plot, WAITING_COLOR)
        self.kv_curve = self._curve(self.kv_plot, KV_COLOR, 1.5)
        self.no_metrics = pg.TextItem("", color="#555", anchor=(0, 0.5))
        self.running_plot.addItem(self.no_metrics, ignoreBounds=True)
        self.running_plot.setMinimumHeight(70)
        self.running_plot.setMaximumHeight(80)
        self.kv_plot.setMinimumHeight(90)
        self.kv_plot.setMaximumHeight(100)

        self._server_curves: list = []
        self.server_legend = self.running_plot.addLegend(offset=(-5, 2), labelTextSize="8pt")
        self.server_legend.setVisible(False)
        self.record = None
        self.segments = None
        self._hover = ""
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse)
        self.draw(None, "No run yet: nothing has been contacted.")

    # ---- drawing -------------------------------------------------------------------------------
    def draw(self, record, message: str = "") -> None:
        """Draw a run (an EndpointRecord, possibly partial), or clear with `message`."""
        self.record = record
        results = record.results if record is not None else ()
        seg = self.segments = request_segments(results)
        self._draw_bars(seg)
        n = len(seg.request_ids)
        if n:
            lo = float(seg.start_s.min())
            hi = float(seg.end_s.max())
            self.gantt.setXRange(lo, hi if hi > lo else lo + 1.0, padding=0.01)
        else:
            self.gantt.setXRange(0, 1, padding=0)
        self.gantt.setYRange(-0.5, max(n, 1) - 0.5, padding=0.0)
        self.message.setText("" if n else message)
        self.message.setPos(0.5, 0)
        self._draw_server(record)
        ok = sum(1 for r in results if r.ok)
        self.readout.setText(f"{ok} of {n} requests completed" if n else "")

    def _draw_servers(self, record) -> None:
        """Several servers: each one's running requests and KV use in a colour of its own
        (server 1 is the first URL), over the strips the first server's series use."""
        for plot, curve in self._server_curves:
            plot.removeItem(curve)
        self._server_curves = []
        self.server_legend.clear()
        servers = record.servers if record is not None else ()
        if len(servers) < 2:
            self.server_legend.setVisible(False)
            return
        self.server_legend.setVisible(True)
        for j, (url, scrape) in enumerate(servers):
            for plot, key, scale in ((self.running_plot, "running", 1.0),
                                     (self.kv_plot, "kv_usage_frac", 100.0)):
                pts = scrape.common.get(key)
                if pts is None or not len(pts):
                    continue
                x, y = held_steps(pts)
                curve = plot.plot(x, scale * y, pen=pg.mkPen(color(j), width=1.5))
                self._server_curves.append((plot, curve))
                if plot is self.running_plot:
                    self.server_legend.addItem(curve, f"server {j + 1} ({url})")

    def _draw_server(self, record) -> None:
        if record is not None and len(record.servers) > 1:
            for curve in (self.running_curve, self.waiting_curve, self.kv_curve):
                curve.setData([], [])  # each server's own curves instead
            self._draw_servers(record)
            self.no_metrics.setText("")
            return
        self._draw_servers(None)
        common = record.scrape.common if record is not None else {}
        for curve, key, scale in ((self.running_curve, "running", 1.0),
                                  (self.waiting_curve, "waiting", 1.0),
                                  (self.kv_curve, "kv_usage_frac", 100.0)):
            pts = common.get(key)
            if pts is None or len(pts) == 0:
                curve.setData([], [])
                continue
            x, y = held_steps(pts)
            curve.setData(x, scale * y)
        if record is None:
            note = ""
        elif common:
            note = ""
        else:
            note = record.scrape_note() if record.scrape.notes else \
                "waiting for the first scrape of /metrics"
            if record.has_metrics:
                note = "this server's /metrics has none of running / waiting / KV usage"
        self.no_metrics.setText(note)
        x0 = self.gantt.getViewBox().viewRange()[0][0]
        self.no_metrics.setPos(x0, 0.5)
        for plot in (self.running_plot, self.kv_plot):  # no numbers where there is no data
            plot.getAxis("left").setStyle(showValues=not note)
        if note:
            self.running_plot.setYRange(0, 1, padding=0)
        else:
            self.running_plot.enableAutoRange(axis="y")

    # ---- hover -----------------------------------------------------------------------------------
    def describe(self, i: int) -> str:
        seg = self.segments
        row, state = int(seg.row[i]), int(seg.state[i])
        r = self.record.results[row]
        a, b = float(seg.start_s[i]), float(seg.end_s[i])
        text = (f"{seg.request_ids[row]} · {HOVER_NAMES.get(state, '')} {a:.3f}–{b:.3f} s "
                f"({1e3 * (b - a):,.1f} ms) · {r.output_tokens} output tokens in "
                f"{len(r.chunk_times_s)} chunks · prompt {r.prompt_tokens} tokens")
        if r.ttft_s is not None:
            text += f" · TTFT {1e3 * r.ttft_s:,.1f} ms"
        if r.error:
            text += f" · {r.error}"
        return text

    def _on_mouse(self, scene_pos) -> None:
        vb = self.gantt.getViewBox()
        text = ""
        seg = self.segments
        if seg is not None and len(seg) and vb.sceneBoundingRect().contains(scene_pos):
            p = vb.mapSceneToView(scene_pos)
            row = int(round(p.y()))
            if abs(p.y() - row) <= BAR_HEIGHT / 2:
                i = segment_at(seg, row, p.x())
                if i is not None:
                    text = self.describe(i)
        if text != self._hover:
            self._hover = text
            self.info.setText(text or HINT)
