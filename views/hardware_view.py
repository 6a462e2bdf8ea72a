"""The hardware lab's view: device facts, live telemetry, measured roofs."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.roofline.units import format_bytes, format_flops
from inferlab.views.fact_table import FactTable
from inferlab.views.strip_chart import StripChart

GIB = 2**30


class HardwareView(QWidget):
    """Draws DeviceInfo, TelemetryHistory and MeasuredRoofs records; starts nothing itself."""

    measure_requested = Signal()
    rate_changed = Signal(float)

    def __init__(self, parent=None):
        super().__init__(parent)
        splitter = QSplitter(Qt.Horizontal)

        left = QWidget()
        left_col = QVBoxLayout(left)
        facts_box = QGroupBox("Device")
        self.facts = FactTable()
        QVBoxLayout(facts_box).addWidget(self.facts)
        left_col.addWidget(facts_box, 3)

        roofs_box = QGroupBox("Measured roofs (this device)")
        roofs_col = QVBoxLayout(roofs_box)
        self.roofs_table = FactTable(("Roof", "Measured", "How"))
        roofs_col.addWidget(self.roofs_table)
        row = QHBoxLayout()
        self.measure_button = QPushButton("Measure roofs")
        self.measure_button.setToolTip(
            "Run the micro-benchmarks on the selected device: peak matmul FLOP/s per dtype "
            "and copy bandwidth (median of repeats, after warm-up). Ctrl+R")
        self.measure_button.setShortcut("Ctrl+R")
        self.measure_button.clicked.connect(self.measure_requested)
        row.addWidget(self.measure_button)
        self.roofs_note = QLabel("Not measured yet.")
        self.roofs_note.setWordWrap(True)
        row.addWidget(self.roofs_note, 1)
        roofs_col.addLayout(row)
        left_col.addWidget(roofs_box, 2)

        right = QWidget()
        right_col = QVBoxLayout(right)
        rate_row = QHBoxLayout()
        rate_row.addWidget(QLabel("Telemetry"))
        rate_row.addStretch(1)
        rate_row.addWidget(QLabel("sample rate:"))
        self.rate = QSpinBox()
        self.rate.setRange(1, 10)
        self.rate.setSuffix(" Hz")
        self.rate.setToolTip("Samples per second of the telemetry thread (1–10 Hz)")
        self.rate.valueChanged.connect(lambda v: self.rate_changed.emit(float(v)))
        rate_row.addWidget(self.rate)
        right_col.addLayout(rate_row)
        self.charts_grid = QGridLayout()
        right_col.addLayout(self.charts_grid, 1)
        self.cpu_chart = StripChart("CPU utilisation per core", "CPU (%)", (0, 100))
        self.ram_chart = StripChart("Memory in use", "RAM (GiB)", (0, 1))
        self.charts_grid.addWidget(self.cpu_chart, 0, 0)
        self.charts_grid.addWidget(self.ram_chart, 0, 1)
        self.gpu_charts: list[StripChart] = []
        self.no_gpu_label = QLabel("No CUDA GPU visible to torch (or no NVML): "
                                   "GPU utilisation, memory, power and SM clock appear here when one is.")
        self.no_gpu_label.setWordWrap(True)
        self.no_gpu_label.setStyleSheet("color: #666")
        right_col.addWidget(self.no_gpu_label)

        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([460, 640])
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)

    # rendering ------------------------------------------------------------------------------------
    def render_device(self, info: dict) -> None:
        """`info`: a DeviceInfo's to_dict() (live or from a snapshot)."""
        memory = int(info.get("memory_bytes") or 0)
        freq = info.get("freq_mhz")
        rows = [
            ("Id", info.get("id", "?")),
            ("Kind", info.get("kind", "?")),
            ("Name", info.get("name", "?")),
            ("Cores (physical)", info.get("cores", "—")),
            ("Threads (logical)", info.get("threads", "—")),
            ("Memory", f"{format_bytes(memory)}  ({format_bytes(memory, binary=False)})"),
            ("Frequency", "—" if not freq else f"{freq:.0f} MHz"),
            ("Compute dtypes", ", ".join(info.get("compute_dtypes") or ())),
        ]
        for key, value in (info.get("details") or {}).items():
            rows.append((key.replace("_", " ").capitalize(), _fmt(value)))
        self.facts.set_rows(rows)

    def render_no_device(self, message: str) -> None:
        """No device to describe yet (`message`: why); nothing to measure on."""
        self.facts.set_rows([("Device", message)])
        self.roofs_table.set_rows([])
        self.roofs_note.setText("Not measured yet.")
        self.measure_button.setEnabled(False)

    def render_roofs(self, roofs, busy: bool = False) -> None:
        self.measure_button.setEnabled(not busy)
        if roofs is None:
            self.roofs_table.set_rows([])
            self.roofs_note.setText("Measuring…" if busy else "Not measured yet.")
            return
        rows = []
        for dtype, flops in roofs.peak_flops.items():
            rows.append((f"Peak matmul {dtype}", format_flops(flops),
                         f"{roofs.matmul_n}² matmul, median of {roofs.repeats}"))
        rows.append(("Memory bandwidth", f"{roofs.bw_bytes_per_s / 1e9:.1f} GB/s",
                     f"copy of {format_bytes(roofs.copy_bytes)}, read + write counted"))
        for dtype, flops in roofs.peak_flops.items():
            rows.append((f"Knee {dtype}", f"{flops / roofs.bw_bytes_per_s:.2f} FLOP/byte",
                         "peak ÷ bandwidth"))
        self.roofs_table.set_rows(rows)
        self.roofs_note.setText("Measuring…" if busy else f"Measured on {roofs.device}.")

    def render_telemetry(self, history) -> None:
        t = history.t_s
        if history.cpu_percent.ndim == 2 and history.cpu_percent.shape[1]:
            cores = {f"core {i}": history.cpu_percent[:, i] for i in range(history.cpu_percent.shape[1])}
        else:
            cores = {}
        self.cpu_chart.set_series(t, cores, legend=True)
        ram_gib = np.asarray(history.ram_used_bytes, dtype=float) / GIB
        self.ram_chart.set_series(t, {"used": ram_gib})
        total_gib = history.ram_total_bytes / GIB
        if self.ram_chart.set_title_once(f"Memory in use (of {total_gib:.1f} GiB)"):
            self.ram_chart.set_y_range(0, total_gib)
        self._render_gpus(history)

    def _render_gpus(self, history) -> None:
        gpus = list(getattr(history, "gpus", ()) or ())
        self.no_gpu_label.setVisible(not gpus)
        if not gpus:
            return
        if not self.gpu_charts:
            specs = [("GPU utilisation", "utilisation (%)", (0, 100)), ("GPU memory in use", "memory (GiB)", None),
                     ("GPU power", "power (W)", None), ("SM clock", "clock (MHz)", None)]
            for i, (title, label, rng) in enumerate(specs):
                chart = StripChart(title, label, rng)
                self.gpu_charts.append(chart)
                self.charts_grid.addWidget(chart, 1 + i // 2, i % 2)
        t = history.t_s
        fields = ("util_percent", "mem_used_bytes", "power_w", "sm_clock_mhz")
        for chart, field in zip(self.gpu_charts, fields, strict=True):
            series = {}
            for index, gpu in enumerate(gpus):
                values = np.asarray(getattr(gpu, field), dtype=float)
                if field == "mem_used_bytes":
                    values = values / GIB
                series[f"cuda:{index}"] = values
            chart.set_series(t, series, legend=len(gpus) > 1)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)
