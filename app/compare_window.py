"""File ▸ Compare snapshots…: a window over two snapshot files — the comparison table
(views/snapshot_compare.py), the labs' plots with A and B overlaid (views/overlay_plots.py,
app/compare_plots.py) in a second tab, and a button that writes the pair as one HTML
report."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
)

from inferlab.app.compare_plots import lab_overlays, overlay_pngs
from inferlab.app.labs.registry import lab_headlines
from inferlab.app.report import build_report, write_report
from inferlab.engines.trace.compare import compare_snapshots
from inferlab.engines.trace.snapshot import read_snapshot
from inferlab.views.overlay_plots import OverlayPlotsView
from inferlab.views.snapshot_compare import SnapshotCompareView


class CompareWindow(QDialog):
    """Non-modal; reads both files when built (SnapshotError / OSError for a bad one)."""

    def __init__(self, a: str | Path, b: str | Path, parent=None) -> None:
        super().__init__(parent)
        self.paths = (Path(a), Path(b))
        self.snapshots = (read_snapshot(a), read_snapshot(b))
        self.comparison = compare_snapshots(*self.snapshots, headlines=lab_headlines())
        self.setWindowTitle(f"Compare {self.paths[0].name} → {self.paths[1].name}")
        self.setWindowFlag(Qt.WindowType.WindowMaximizeButtonHint, True)
        self.resize(1000, 700)
        names = self.paths[0].name, self.paths[1].name
        self.view = SnapshotCompareView()
        self.view.render(self.comparison, *names)
        self.overlays = lab_overlays(*self.snapshots, self.comparison.labs, *names)
        self.plots = OverlayPlotsView()
        self.plots.render(self.overlays, *names)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.view, "Figures")
        self.tabs.addTab(self.plots, f"Plots ({self.plots.plot_count()})")
        report = QPushButton("Export report (HTML)…")
        report.clicked.connect(self.export_report_dialog)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(report)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(buttons)

    def export_report(self, path: str | Path) -> Path:
        """The pair's comparison report: the tables and the overlaid plots (no page images:
        the window shows live labs, not these snapshots — `inferlab report A --compare B`
        renders those)."""
        (a, b), (pa, pb) = self.snapshots, self.paths
        return write_report(path, build_report(a, pa.name, None, b, pb.name, None,
                                               self.comparison,
                                               overlays=overlay_pngs(self.overlays,
                                                                     pa.name, pb.name)))

    def export_report_dialog(self) -> None:
        default = str(self.paths[1].with_suffix(".html"))
        path, _ = QFileDialog.getSaveFileName(self, "Export comparison report", default,
                                              "HTML report (*.html)")
        if not path:
            return
        try:
            self.export_report(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot export report", str(exc))
