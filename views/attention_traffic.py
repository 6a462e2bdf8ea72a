"""The attention lab's traffic picture: bytes moved per execution (the closed form, and what
the stepped engine has counted so far), the three executions on the roofline with tiled
attention at growing Q tiles, and the closed forms with the run's numbers substituted."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from inferlab.engines.attention.traffic import tiled_traffic
from inferlab.views.attention_tiles import set_title
from inferlab.views.roofline_plot import (
    SYMBOLS,
    RoofLine,
    RooflinePlot,
    RooflinePoint,
    RooflineScene,
)
from inferlab.views.style import color, nowrap, style_plot

NAMES = {"naive": "naive", "tiled": "tiled (FA-2)", "split_k": "split-K decode"}
ORDER = ("naive", "tiled", "split_k")
READ_COLOR, WRITE_COLOR, COUNTED_COLOR = "#56B4E9", "#CC79A7", "#E69F00"
ROOFLINE_TILES = (16, 32, 64, 128, 256, 512, 1024)
MIB = 2**20


def mib(x: float) -> str:
    return f"{x / MIB:,.3g} MiB" if x >= MIB / 100 else f"{x:,.0f} B"


class BytesBars(pg.PlotWidget):
    """Per execution: bytes read and written (closed form, open bars) and the stepped
    execution's counted bytes so far (filled)."""

    def __init__(self, parent=None):
        super().__init__(parent=parent)
        self.item = self.getPlotItem()
        style_plot(self.item)
        self.item.setLabel("left", "main-memory traffic (MiB)")
        self.item.hideButtons()
        self.item.setMenuEnabled(False)
        self.item.disableAutoRange()  # the range is set once per run, in `draw`
        self.item.getAxis("bottom").setTicks([[(i, NAMES[e]) for i, e in enumerate(ORDER)]])
        self.read = pg.BarGraphItem(x=[], height=[], width=0.3, brush=None,
                                    pen=pg.mkPen(READ_COLOR, width=2), name="read (closed form)")
        self.written = pg.BarGraphItem(x=[], height=[], width=0.3, brush=None,
                                       pen=pg.mkPen(WRITE_COLOR, width=2),
                                       name="written (closed form)")
        self.counted = pg.BarGraphItem(x=[], height=[], width=0.26, brush=COUNTED_COLOR,
                                       pen=None, name="counted so far (stepped engine)")
        for bar in (self.read, self.written, self.counted):
            self.item.addItem(bar)
        self.texts = [pg.TextItem("", color="#333", anchor=(0.5, 1)) for _ in ORDER]
        for t in self.texts:
            self.item.addItem(t)
        self._info = None

    def draw(self, info, record) -> None:
        x = np.arange(len(ORDER), dtype=float)
        forms = [info.closed_forms[e] for e in ORDER]
        if info is not self._info:  # the closed forms change with the run only
            read = np.array([f.bytes_read for f in forms], dtype=float) / MIB
            written = np.array([f.bytes_written for f in forms], dtype=float) / MIB
            self.read.setOpts(x=x - 0.16, height=read)
            self.written.setOpts(x=x + 0.16, height=written)
            top = max(float(read.max()), float(written.max()), 1e-9)
            self.item.setYRange(0, top * 1.25, padding=0)
            self.item.setXRange(-0.6, len(ORDER) - 0.4, padding=0)
            for i, (t, f) in enumerate(zip(self.texts, forms, strict=True)):
                t.setText(f"{mib(f.bytes_moved)}")
                t.setPos(i, max(f.bytes_read, f.bytes_written) / MIB * 1.2)
            self._info = info
        i = ORDER.index(info.execution)
        if record is None:
            self.counted.setOpts(x=[], height=[])
            return
        self.counted.setOpts(x=[i - 0.16, i + 0.16],
                             height=[record.bytes_read / MIB, record.bytes_written / MIB])
        done = record.bytes_read + record.bytes_written
        total = max(1, info.closed_forms[info.execution].bytes_moved)
        set_title(self.item, f"bytes moved ({100 * done / total:.0f}% counted)")


def bars_legend_html() -> str:
    return (f"<span style='color:{READ_COLOR}'>□</span>&nbsp;read, "
            f"<span style='color:{WRITE_COLOR}'>□</span>&nbsp;{nowrap('written (closed form)')}"
            f" &nbsp; <span style='color:{COUNTED_COLOR}'>■</span>&nbsp;"
            f"{nowrap('counted so far')} by the stepped engine (read | written)")


def roofline_scene(info, roofs) -> RooflineScene:
    """The three executions' closed-form intensity on each roof (attainable FLOP/s there),
    and tiled attention at growing square tiles on the roof with the highest knee (a GPU's):
    the tile grows, the intensity grows, and attention crosses from memory-bound to
    compute-bound."""
    lines = tuple(RoofLine(label, flops, bw, measured) for label, flops, bw, measured in roofs)
    points = []
    for roof in lines:
        for e in ORDER:
            f = info.closed_forms[e]
            if f.bytes_moved and f.flops:
                points.append(RooflinePoint(  # one series per execution, on every roof
                    f"{NAMES[e]} on {roof.label}", NAMES[e],
                    f.flops, f.bytes_moved, min(roof.peak_flops, f.intensity * roof.bw_bytes_per_s),
                    False, f"N = {info.n}, d = {info.d}, Br = {info.br}, Bc = {info.bc}"))
    if lines:  # on the roof with the highest knee: where the crossing shows
        roof = max(lines, key=lambda r: r.peak_flops / r.bw_bytes_per_s)
        for t in ROOFLINE_TILES:
            f = tiled_traffic(info.n, info.d, t, t, info.causal, info.element_bytes, info.heads)
            points.append(RooflinePoint(f"tiled Br = Bc = {t}", "tiled, Br = Bc = 16…1024",
                                        f.flops, f.bytes_moved,
                                        min(roof.peak_flops, f.intensity * roof.bw_bytes_per_s),
                                        False, f"{mib(f.bytes_moved)} moved"))
    return RooflineScene(lines, tuple(points), "attention on the roofline (fp32, predicted)")


class AttentionRoofline(RooflinePlot):
    def __init__(self, parent=None):
        super().__init__(parent)
        # a legend inside covers points on a plot this small: `legend_html` goes under it
        self.legend.setVisible(False)
        self.legend_label = QLabel("")
        self.legend_label.setWordWrap(True)

    def draw_run(self, info, roofs) -> None:
        key = (info.n, info.d, info.br, info.bc, info.causal, info.heads, tuple(roofs))
        if getattr(self, "_key", None) != key:
            self._key = key
            scene = roofline_scene(info, roofs)
            self.draw(scene)
            self.legend_label.setText(legend_html(scene))


SYMBOL_TEXT = {"o": "○", "t": "▽", "s": "□", "d": "◇"}


def legend_html(scene: RooflineScene) -> str:
    """The roofs and point series in RooflinePlot's colours and symbols."""
    parts = [f"<span style='color:{color(i)}'>{'━' if r.measured else '╌'}</span>&nbsp;"
             f"{nowrap(r.label)}" for i, r in enumerate(scene.roofs)]
    series = list(dict.fromkeys(p.series for p in scene.points))
    parts += [f"<span style='color:{color(len(scene.roofs) + i)}'>"
              f"{SYMBOL_TEXT.get(SYMBOLS[i % len(SYMBOLS)], '•')}</span>&nbsp;{nowrap(name)}"
              for i, name in enumerate(series)]
    return " &nbsp; ".join(parts)


def closed_forms_html(info) -> str:
    """The closed forms with this run's numbers substituted."""
    n, d, h, e, br, bc = info.n, info.d, info.heads, info.element_bytes, info.br, info.bc
    f = info.closed_forms
    passes = math.ceil(n / br)
    splits = math.ceil(n / bc)
    hh = f"{h}·" if h > 1 else ""
    kv = ("2d·Σ<sub>i</sub> cols<sub>i</sub> (causal: K tiles after a Q tile's last row "
          "skipped)" if info.causal else f"⌈N/Br⌉·2Nd = {passes}·2·{n}·{d}")
    rows = [
        "<b>Main-memory traffic</b> (e = "
        f"{e} bytes per element, N = {n}, d = {d}, Br = {br}, Bc = {bc}, H = {h})",
        f"<b>naive</b> reads {hh}(3Nd + 2N²)·e = {hh}(3·{n}·{d} + 2·{n}²)·{e} = "
        f"<b>{mib(f['naive'].bytes_read)}</b>; writes {hh}(2N² + Nd)·e = "
        f"<b>{mib(f['naive'].bytes_written)}</b> — S and P materialised",
        f"<b>tiled</b> reads {hh}(Nd + {kv})·e = <b>{mib(f['tiled'].bytes_read)}</b>; "
        f"writes {hh}Nd·e = <b>{mib(f['tiled'].bytes_written)}</b> — Θ(N²d²/M) for an "
        "on-chip memory of M",
        f"<b>split-K</b> (one decode row, S = ⌈N/Bc⌉ = {splits} chunks) reads "
        f"{hh}(Sd + 2Nd + S(d+2))·e = <b>{mib(f['split_k'].bytes_read)}</b>; writes "
        f"{hh}(S(d+2) + d)·e = <b>{mib(f['split_k'].bytes_written)}</b>",
    ]
    return "<br>".join(rows)


def counted_html(info, record) -> str:
    """Where the stepped engine's count stands after `record`."""
    if record is None:
        return ""
    form = info.closed_forms[info.execution]
    chip = f"on chip this step: {mib(record.on_chip_bytes)}"
    if info.on_chip_bytes:
        fits = "fits in" if record.on_chip_bytes <= info.on_chip_bytes else "exceeds"
        chip += f" ({fits} M = {mib(info.on_chip_bytes)})"
    return (f"<b>counted</b> ({NAMES[info.execution]}, step {record.step + 1:,} of "
            f"{record.steps_total:,}, {record.phase}): read {mib(record.bytes_read)} "
            f"of {mib(form.bytes_read)}, written {mib(record.bytes_written)} of "
            f"{mib(form.bytes_written)}; {chip}")


def formula_html(info, record) -> str:
    """The closed forms with the numbers substituted, and where the count stands."""
    return closed_forms_html(info) + "<br>" + counted_html(info, record)


class FormulaText(QWidget):
    """The closed forms (laid out once per run) over the count's line (every step)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setStyleSheet("QLabel { background: #fafafa; }")
        self.forms, self.counted = QLabel(), QLabel()
        for label in (self.forms, self.counted):
            label.setWordWrap(True)
            label.setTextFormat(label.textFormat().RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(0)
        layout.addWidget(self.forms)
        layout.addWidget(self.counted)
        self._info = None

    def setText(self, text: str) -> None:  # noqa: N802 - a message in place of the forms
        self._info = None
        self.forms.setText(text)
        self.counted.setText("")

    def text(self) -> str:
        return self.forms.text() + self.counted.text()

    def draw(self, info, record) -> None:
        if info is not self._info:
            self._info = info
            self.forms.setText(closed_forms_html(info))
        self.counted.setText(counted_html(info, record))
