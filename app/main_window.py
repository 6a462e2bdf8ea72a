"""The main window: lab sidebar, device bar, menus, status bar with task progress."""

from __future__ import annotations

import html
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inferlab.app import snapshot_io
from inferlab.app.context import AppContext
from inferlab.app.export import export_widget
from inferlab.app.labs import registry


class MainWindow(QMainWindow):
    """Labs in a sidebar; the device bar on top; progress of background work below."""

    def __init__(self, context: AppContext | None = None, settings: QSettings | None = None):
        super().__init__()
        self.context = context or AppContext(settings=settings)
        self.settings = self.context.settings
        self.setWindowTitle("InferLab")
        self.resize(1280, 800)
        self.labs = [registry.resolve(spec.controller)(self.context, parent=self)
                     for spec in registry.LABS]
        self._snapshot_path: Path | None = None
        self.snapshot_problems: dict[str, str] = {}  # lab id -> why the open snapshot's section was not shown

        self._build_device_bar()
        self._build_center()
        self._build_status_bar()
        self._build_menus()
        self._connect_context()
        self._restore_window_state()

    # construction ---------------------------------------------------------------------------
    def _build_device_bar(self) -> None:
        bar = QToolBar("Device", self)
        bar.setObjectName("device_bar")
        bar.setMovable(False)
        bar.addWidget(QLabel(" Compute device: "))
        self.device_combo = QComboBox()
        self.device_combo.setToolTip("The device engines run on (torch device). "
                                     "Switching re-targets measurements and models.")
        for info in self.context.devices:
            self.device_combo.addItem(f"{info.id} — {info.name}", info.id)
        self.device_combo.setCurrentIndex(self.context.device_ids().index(self.context.device_id))
        self.device_combo.currentIndexChanged.connect(
            lambda i: self.context.set_device(self.device_combo.itemData(i)))
        bar.addWidget(self.device_combo)
        spacer = QWidget()
        spacer.setSizePolicy(spacer.sizePolicy().horizontalPolicy().Expanding,
                             spacer.sizePolicy().verticalPolicy().Preferred)
        bar.addWidget(spacer)
        self.board_label = QLabel()
        self.board_label.setToolTip("Microcontroller board on a serial port (MCU lab)")
        self._show_board(self.context.board)
        bar.addWidget(self.board_label)
        self.addToolBar(Qt.TopToolBarArea, bar)

    def _build_center(self) -> None:
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("lab_list")
        self.sidebar.setFixedWidth(160)
        self.stack = QStackedWidget()
        for index, lab in enumerate(self.labs, start=1):
            item = QListWidgetItem(lab.title)
            item.setData(Qt.UserRole, lab.lab_id)
            item.setToolTip(f"{lab.summary}\nCtrl+{index}")
            self.sidebar.addItem(item)
            self.stack.addWidget(lab.widget)
        self.sidebar.currentRowChanged.connect(self._on_lab_row)

        self.banner = QFrame()
        self.banner.setObjectName("snapshot_banner")
        self.banner.setStyleSheet("#snapshot_banner { background: #fff4ce; border-bottom: 1px solid #e0c060; }")
        row = QHBoxLayout(self.banner)
        row.setContentsMargins(8, 4, 8, 4)
        self.banner_label = QLabel()
        row.addWidget(self.banner_label, 1)
        back = QPushButton("Back to live")
        back.setToolTip("Leave the snapshot and show live data again (Esc)")
        back.clicked.connect(self.show_live)
        row.addWidget(back)
        self.banner.hide()

        right = QWidget()
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.banner)
        column.addWidget(self.stack, 1)

        central = QWidget()
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.sidebar)
        row.addWidget(right, 1)
        self.setCentralWidget(central)

    def _build_status_bar(self) -> None:
        status = self.statusBar()
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop the running measurement (Esc)")
        self.cancel_button.clicked.connect(self.context.cancel_tasks)
        self.cancel_button.hide()
        status.addPermanentWidget(self.progress)
        status.addPermanentWidget(self.cancel_button)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open snapshot…", QKeySequence.Open, self.open_snapshot_dialog)
        self._action(file_menu, "&Export snapshot…", QKeySequence.Save, self.export_snapshot_dialog)
        self._action(file_menu, "Export &view as PNG/SVG…", "Ctrl+E", self.export_view_dialog)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", QKeySequence.Quit, self.close)

        view_menu = self.menuBar().addMenu("&View")
        for index, lab in enumerate(self.labs, start=1):
            self._action(view_menu, lab.title, f"Ctrl+{index}",
                         lambda _=False, i=index - 1: self.sidebar.setCurrentRow(i))
        view_menu.addSeparator()
        self._action(view_menu, "Back to &live data", "Esc", self._escape)

        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About InferLab", None, self.show_about)

    def _action(self, menu, text, shortcut, slot) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        self.addAction(action)
        return action

    def _connect_context(self) -> None:
        ctx = self.context
        ctx.task_started.connect(self._on_task_started)
        ctx.task_progress.connect(self._on_task_progress)
        ctx.task_ended.connect(self._on_task_ended)
        ctx.device_changed.connect(self._on_device_changed)
        ctx.board_changed.connect(self._show_board)

    def _restore_window_state(self) -> None:
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        last = str(self.settings.value("window/lab", "hardware"))
        ids = [lab.lab_id for lab in self.labs]
        self.sidebar.setCurrentRow(ids.index(last) if last in ids else 0)

    # labs -------------------------------------------------------------------------------------
    def lab(self, lab_id: str):
        for lab in self.labs:
            if lab.lab_id == lab_id:
                return lab
        raise ValueError(f"unknown lab {lab_id!r}; labs: {', '.join(lab.lab_id for lab in self.labs)}")

    def current_lab(self):
        return self.labs[max(self.sidebar.currentRow(), 0)]

    def show_lab(self, lab_id: str) -> None:
        self.sidebar.setCurrentRow([lab.lab_id for lab in self.labs].index(self.lab(lab_id).lab_id))

    def _on_lab_row(self, row: int) -> None:
        if row < 0:
            return
        self.stack.setCurrentIndex(row)
        lab = self.labs[row]
        self.settings.setValue("window/lab", lab.lab_id)
        if not lab.read_only:
            lab.activated()

    # device and board ---------------------------------------------------------------------------
    def _on_device_changed(self, device_id: str) -> None:
        index = self.context.device_ids().index(device_id)
        if self.device_combo.currentIndex() != index:
            self.device_combo.setCurrentIndex(index)
        self.statusBar().showMessage(f"Device: {device_id}", 4000)

    def _show_board(self, text: str) -> None:
        self.board_label.setText(f"  Board: {text}  ")

    # tasks --------------------------------------------------------------------------------------
    def _on_task_started(self, name: str) -> None:
        self.progress.setValue(0)
        self.progress.setFormat(f"{name} %p%")
        self.progress.show()
        self.cancel_button.show()
        self.statusBar().showMessage(f"{name}…")

    def _on_task_progress(self, name: str, fraction: float, message: str) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, fraction)) * 1000))
        if message:
            self.statusBar().showMessage(f"{name}: {message}")

    def _on_task_ended(self, name: str, outcome: str) -> None:
        if not self.context.running_tasks():
            self.progress.hide()
            self.cancel_button.hide()
        text = {"ok": f"{name}: done", "cancelled": f"{name}: cancelled"}.get(outcome, f"{name}: {outcome}")
        self.statusBar().showMessage(text, 8000)

    def _escape(self) -> None:
        if self.context.running_tasks():
            self.context.cancel_tasks()
        elif self._snapshot_path is not None:
            self.show_live()

    # snapshots ---------------------------------------------------------------------------------
    def export_snapshot(self, path: str | Path) -> Path:
        snapshot = snapshot_io.collect_snapshot(self.context, self.labs, self.current_lab().lab_id)
        return snapshot_io.save(path, snapshot)

    def open_snapshot(self, path: str | Path) -> None:
        """Show a snapshot read-only in every lab it has. Raises SnapshotError / ValueError."""
        snapshot = snapshot_io.load(path)
        restored, problems = snapshot_io.restore_labs(self.labs, snapshot)
        self._snapshot_path = Path(path)
        created = snapshot.created_utc.replace("T", " ")[:19]
        not_shown = "".join(f"<br><b>Not shown: {html.escape(lab_id)}</b> — {html.escape(why)}"
                            for lab_id, why in problems.items())
        self.banner_label.setText(
            f"Snapshot <b>{html.escape(Path(path).name)}</b> (taken {created} UTC on "
            f"{html.escape(str(snapshot.host.get('hostname', '?')))}) — read-only: "
            f"{', '.join(restored)}{not_shown}")
        self.snapshot_problems = problems
        self.banner.show()
        if snapshot.active_lab in restored:
            self.show_lab(snapshot.active_lab)

    def show_live(self) -> None:
        for lab in self.labs:
            if lab.read_only:
                lab.show_live()
        self._snapshot_path = None
        self.banner.hide()
        self.current_lab().activated()

    def open_snapshot_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open snapshot", self._last_dir(),
                                              "InferLab snapshot (*.json);;All files (*)")
        if not path:
            return
        self._remember_dir(path)
        try:
            self.open_snapshot(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot open snapshot", str(exc))

    def export_snapshot_dialog(self) -> None:
        default = str(Path(self._last_dir()) / time.strftime("inferlab-%Y%m%d-%H%M%S.json"))
        path, _ = QFileDialog.getSaveFileName(self, "Export snapshot", default,
                                              "InferLab snapshot / Perfetto trace (*.json)")
        if not path:
            return
        self._remember_dir(path)
        try:
            written = self.export_snapshot(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot export snapshot", str(exc))
            return
        self.statusBar().showMessage(f"Snapshot written to {written} (opens in Perfetto too)", 8000)

    def export_view(self, path: str | Path) -> Path:
        return export_widget(self.current_lab().export_widget(), path)

    def export_view_dialog(self) -> None:
        lab = self.current_lab()
        default = str(Path(self._last_dir()) / f"inferlab-{lab.lab_id}.png")
        path, _ = QFileDialog.getSaveFileName(self, "Export view", default,
                                              "PNG image (*.png);;SVG vector image (*.svg)")
        if not path:
            return
        self._remember_dir(path)
        try:
            written = self.export_view(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot export view", str(exc))
            return
        self.statusBar().showMessage(f"View written to {written}", 8000)

    def _last_dir(self) -> str:
        return str(self.settings.value("window/last_dir", str(Path.home())))

    def _remember_dir(self, path: str) -> None:
        self.settings.setValue("window/last_dir", str(Path(path).parent))

    # about ---------------------------------------------------------------------------------------
    def about_text(self) -> str:
        from inferlab.app.about import versions

        rows = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in versions().items())
        return (f"<h3>InferLab</h3><p>See what decides inference cost, on your own hardware.</p>"
                f"<table>{rows}</table>")

    def show_about(self) -> None:
        QMessageBox.about(self, "About InferLab", self.about_text())

    # life cycle -----------------------------------------------------------------------------------
    def quit_after_first_paint(self) -> None:
        """For the start-up benchmark: print seconds since process start at first paint, quit."""
        self._paint_probe = _FirstPaintProbe(self)
        self.installEventFilter(self._paint_probe)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.settings.setValue("window/geometry", self.saveGeometry())
        for lab in self.labs:
            lab.save_settings()
            lab.shutdown()
        self.context.cancel_tasks()
        self.context.wait_for_tasks(10000)
        super().closeEvent(event)


class _FirstPaintProbe(QObject):
    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Paint and not getattr(self, "_seen", False):
            self._seen = True
            import psutil

            started = psutil.Process().create_time()
            print(f"first_paint_s={time.time() - started:.3f}", flush=True)
            QTimer.singleShot(0, obj.close)
        return False
