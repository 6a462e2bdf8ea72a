"""The main window: lab sidebar, device bar, menus, status bar with task progress."""

from __future__ import annotations

import html
import sys
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer, Signal
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
from inferlab.app.about import versions
from inferlab.app.context import AppContext
from inferlab.app.export import export_widget, widget_png
from inferlab.app.gui import configure_plots, seconds_since_process_start
from inferlab.app.labs import registry
from inferlab.app.report import build_report, report_path, write_report
from inferlab.engines.model.gemma_file import GEMMA_TERMS, GEMMA_TERMS_URL

START_FALLBACK_MS = 1000  # deferred start-up begins at first paint, or this long after show


class MainWindow(QMainWindow):
    """Labs in a sidebar; the device bar on top; progress of background work below.

    The sidebar, menus and device bar come from the registry alone; each lab's page is a
    placeholder until its controller is built. `deferred=False` (tests, screenshots, benches):
    the constructor builds every lab, after the device list. `deferred=True` (`inferlab`):
    the constructor builds only that shell, so the first paint imports neither torch nor
    pyqtgraph; after it the devices are discovered on a worker thread and the labs are built
    one per event-loop turn, the current lab first (a lab that draws before the device list
    is known says so with `needs_devices = False`). `labs`, `lab(id)`, `current_lab()` and
    the snapshot functions build what they need at once.
    """

    lab_built = Signal(str)  # lab id: its controller and page now exist
    startup_finished = Signal()  # deferred start-up: every lab is built

    def __init__(self, context: AppContext | None = None, settings: QSettings | None = None,
                 deferred: bool = False, lazy: bool = False):
        """`deferred`: the first paint before anything slow (the app's start-up: devices
        found and labs built after it); `lazy`: each lab built when it is first shown or
        asked for (a window used for a lab or two: building all eleven takes ~1 s)."""
        super().__init__()
        self.context = context or AppContext(settings=settings, discover=not deferred)
        self.settings = self.context.settings
        self.setWindowTitle("InferLab")
        self.resize(1280, 800)
        self.specs = registry.LABS
        self._labs: dict = {}  # lab id -> controller, once built
        self._deferred = deferred
        self._lazy = False  # set once the window is whole: a lab built before would miss it
        self._started = False  # deferred start-up began
        self._step_pending = False
        self._closing = False
        self._snapshot_path: Path | None = None
        self._compare_windows: list = []  # open comparison windows (kept alive here)
        self.snapshot_problems: dict[str, str] = {}  # lab id -> why the open snapshot's section was not shown

        self._build_device_bar()
        self._build_center()
        self._build_status_bar()
        self._build_menus()
        self._connect_context()
        if deferred:
            self._start_trigger = _OnFirstPaint(
                self, lambda: QTimer.singleShot(0, self._start_deferred))
        elif lazy:
            self._lazy = True
            self.current_lab()
        else:
            self.build_all_labs()
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
        self._fill_device_combo()
        self.device_combo.currentIndexChanged.connect(self._on_device_row)
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
        for index, spec in enumerate(self.specs, start=1):
            item = QListWidgetItem(spec.title)
            item.setData(Qt.UserRole, spec.id)
            item.setToolTip(f"{spec.summary}\nCtrl+{index}")
            self.sidebar.addItem(item)
            self.stack.addWidget(_placeholder(f"Loading {spec.title}…"))
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
        self._action(file_menu, "&Compare snapshots…", None, self.compare_snapshots_dialog)
        self._action(file_menu, "Export &report (HTML)…", None, self.export_report_dialog)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", QKeySequence.Quit, self.close)

        view_menu = self.menuBar().addMenu("&View")
        for index, spec in enumerate(self.specs, start=1):
            self._action(view_menu, spec.title, f"Ctrl+{index}",
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
        ctx.devices_changed.connect(self._on_devices_known)
        ctx.board_changed.connect(self._show_board)

    def _restore_window_state(self) -> None:
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        last = str(self.settings.value("window/lab", "hardware"))
        ids = [spec.id for spec in self.specs]
        self.sidebar.setCurrentRow(ids.index(last) if last in ids else 0)

    # labs -------------------------------------------------------------------------------------
    @property
    def labs(self) -> list:
        """Every lab controller, in sidebar order (builds those not built yet)."""
        self.build_all_labs()
        return [self._labs[spec.id] for spec in self.specs]

    def lab(self, lab_id: str):
        """The controller of `lab_id` (built now if it was not yet)."""
        return self._ensure_lab(self._spec(lab_id))

    def current_lab(self):
        return self._ensure_lab(self.specs[max(self.sidebar.currentRow(), 0)])

    def show_lab(self, lab_id: str) -> None:
        self.sidebar.setCurrentRow(self.specs.index(self._spec(lab_id)))

    def build_all_labs(self) -> None:
        for spec in self.specs:
            self._ensure_lab(spec)

    def _spec(self, lab_id: str):
        for spec in self.specs:
            if spec.id == lab_id:
                return spec
        raise ValueError(f"unknown lab {lab_id!r}; labs: {', '.join(s.id for s in self.specs)}")

    def _ensure_lab(self, spec):
        if spec.id not in self._labs:
            controller = registry.resolve(spec.controller)
            if controller.needs_devices:
                self.context.wait_for_devices()
            self._build_lab(spec, controller)
        return self._labs[spec.id]

    def _build_lab(self, spec, controller) -> None:
        """Build a lab's controller and put its widget where its placeholder was."""
        if self._deferred:
            configure_plots()  # before the first view: launch() left it to the window
        lab = controller(self.context, parent=self)
        self._labs[spec.id] = lab
        row = self.specs.index(spec)
        placeholder = self.stack.widget(row)
        self.stack.insertWidget(row, lab.widget)
        self.stack.removeWidget(placeholder)
        placeholder.deleteLater()
        if row == self.sidebar.currentRow():
            self.stack.setCurrentIndex(row)
            if not lab.read_only:
                lab.activated()
        self.lab_built.emit(spec.id)

    def _on_lab_row(self, row: int) -> None:
        if row < 0:
            return
        self.stack.setCurrentIndex(row)
        spec = self.specs[row]
        self.settings.setValue("window/lab", spec.id)
        lab = self._labs.get(spec.id)
        if lab is None and self._lazy:
            self._ensure_lab(spec)  # shown and activated as it is built
        elif lab is None:
            self._schedule_startup_step()  # deferred start-up: this lab is built next
        elif not lab.read_only:
            lab.activated()

    # deferred start-up ----------------------------------------------------------------------
    def _start_deferred(self) -> None:
        """After the first paint: discover the devices off the GUI thread, build the labs."""
        if self._started or self._closing:
            return
        self._started = True
        self.statusBar().showMessage("Detecting devices…")
        self.context.discover_in_background()
        self._schedule_startup_step()

    def _schedule_startup_step(self) -> None:
        if self._started and not self._step_pending and not self._closing:
            self._step_pending = True
            QTimer.singleShot(0, self._startup_step)

    def _startup_step(self) -> None:
        """Build one lab: the current one first, the others in sidebar order. Before the
        device list is known only the current lab is tried, and only if it draws without."""
        self._step_pending = False
        if self._closing:
            return
        pending = [spec for spec in self.specs if spec.id not in self._labs]
        if not pending:
            self.startup_finished.emit()
            return
        current = self.specs[max(self.sidebar.currentRow(), 0)]
        spec = current if current in pending else pending[0]
        if not self.context.devices:
            if spec is not current:
                return  # devices_changed resumes
            controller = registry.resolve(spec.controller)
            if controller.needs_devices:
                return
        else:
            controller = registry.resolve(spec.controller)
        self._build_lab(spec, controller)
        self._schedule_startup_step()

    @property
    def started_up(self) -> bool:
        """Every lab is built."""
        return all(spec.id in self._labs for spec in self.specs)

    # device and board ---------------------------------------------------------------------------
    def _fill_device_combo(self) -> None:
        combo = self.device_combo
        combo.blockSignals(True)
        combo.clear()
        for info in self.context.devices:
            combo.addItem(f"{info.id} — {info.name}", info.id)
        if self.context.devices:
            combo.setCurrentIndex(self.context.device_ids().index(self.context.device_id))
        elif self.context.discovery_error:
            combo.addItem(f"no devices: {self.context.discovery_error}")
        else:
            combo.addItem("detecting devices…")
        combo.setEnabled(bool(self.context.devices))
        combo.blockSignals(False)

    def _on_device_row(self, row: int) -> None:
        device_id = self.device_combo.itemData(row)
        if device_id is not None:
            self.context.set_device(device_id)

    def _on_devices_known(self) -> None:
        if self._closing:
            return  # a discovery that ended as the window closed: start nothing
        self._fill_device_combo()
        if not self.context.devices:
            why = f"device discovery failed: {self.context.discovery_error}"
            self.statusBar().showMessage(why[0].upper() + why[1:])
            for row, spec in enumerate(self.specs):
                if spec.id not in self._labs:
                    self.stack.widget(row).setText(f"Cannot open {spec.title}: {why}")
            return
        self.statusBar().showMessage(f"Devices: {', '.join(self.context.device_ids())}", 4000)
        lab = self._labs.get(self.specs[max(self.sidebar.currentRow(), 0)].id)
        if lab is not None and not lab.read_only:
            lab.activated()  # its default work may have waited for a device
        self._schedule_startup_step()

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
        for lab in self._labs.values():
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
        lab_id = self.specs[max(self.sidebar.currentRow(), 0)].id
        default = str(Path(self._last_dir()) / f"inferlab-{lab_id}.png")
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

    def compare_snapshots(self, a: str | Path, b: str | Path):
        """Open a window comparing snapshot files `a` and `b` (figures, settings, host facts).
        Raises SnapshotError / ValueError / OSError for a file that cannot be read."""
        from inferlab.app.compare_window import CompareWindow

        window = CompareWindow(a, b, parent=self)
        window.show()
        self._compare_windows.append(window)
        return window

    def compare_snapshots_dialog(self) -> None:
        paths = []
        for which in ("A (the baseline)", "B"):
            path, _ = QFileDialog.getOpenFileName(self, f"Compare snapshots: {which}",
                                                  self._last_dir(),
                                                  "InferLab snapshot (*.json);;All files (*)")
            if not path:
                return
            self._remember_dir(path)
            paths.append(path)
        try:
            self.compare_snapshots(*paths)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot compare snapshots", str(exc))

    def export_report(self, path: str | Path) -> Path:
        """Write the session as one HTML report: every lab's figures and settings, the
        current lab's page as an embedded PNG."""
        path = report_path(path)
        lab = self.current_lab()
        snapshot = snapshot_io.collect_snapshot(self.context, self.labs, lab.lab_id)
        png = widget_png(lab.export_widget())
        return write_report(path, build_report(snapshot, "this session", {lab.lab_id: png}))

    def export_report_dialog(self) -> None:
        default = str(Path(self._last_dir()) / time.strftime("inferlab-%Y%m%d-%H%M%S.html"))
        path, _ = QFileDialog.getSaveFileName(self, "Export report", default,
                                              "HTML report (*.html)")
        if not path:
            return
        self._remember_dir(path)
        try:
            written = self.export_report(path)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self, "Cannot export report", str(exc))
            return
        self.statusBar().showMessage(f"Report written to {written} (opens in any browser)", 8000)

    def _last_dir(self) -> str:
        return str(self.settings.value("window/last_dir", str(Path.home())))

    def _remember_dir(self, path: str) -> None:
        self.settings.setValue("window/last_dir", str(Path(path).parent))

    # about ---------------------------------------------------------------------------------------
    def about_text(self) -> str:
        rows = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in versions().items())
        return (f"<h3>InferLab</h3><p>See what decides inference cost, on your own hardware.</p>"
                f"<table>{rows}</table><p><small>Models: SmolLM2-135M-Instruct (Apache 2.0, "
                f"Hugging Face). Gemma 3 270M: {GEMMA_TERMS} "
                f"(<a href=\"{GEMMA_TERMS_URL}\">{GEMMA_TERMS_URL}</a>).</small></p>")

    def show_about(self) -> None:
        QMessageBox.about(self, "About InferLab", self.about_text())

    # life cycle -----------------------------------------------------------------------------------
    def showEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        if self._deferred and not self._started:
            QTimer.singleShot(START_FALLBACK_MS, self._start_deferred)  # if no paint comes

    def quit_after_first_paint(self, wait_for_labs: bool = False) -> None:
        """For the start-up bench and tests: at first paint print the seconds since the
        process started and whether torch was imported by then; with `wait_for_labs` go on
        (deferred start-up) to print when the current lab and then every lab was built; close."""
        def report(**figures) -> None:
            for key, value in figures.items():
                print(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}", flush=True)

        def first_paint() -> None:
            report(first_paint_s=seconds_since_process_start(),
                   torch_imported_at_first_paint="torch" in sys.modules)
            if not wait_for_labs or self.started_up:
                QTimer.singleShot(0, self.close)

        def lab_built(lab_id: str) -> None:
            if lab_id == self.specs[max(self.sidebar.currentRow(), 0)].id:
                report(current_lab=lab_id, current_lab_ready_s=seconds_since_process_start())

        def labs_ready() -> None:
            report(labs_ready_s=seconds_since_process_start(), labs=",".join(lab.lab_id for lab in self.labs))
            QTimer.singleShot(0, self.close)

        self._paint_probe = _OnFirstPaint(self, first_paint)
        if wait_for_labs:
            self.lab_built.connect(lab_built)
            self.startup_finished.connect(labs_ready)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self._closing = True
        self.settings.setValue("window/geometry", self.saveGeometry())
        for lab in self._labs.values():
            lab.save_settings()
            lab.shutdown()
        self.context.cancel_tasks()
        self.context.wait_for_tasks(10000)
        super().closeEvent(event)


def _placeholder(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("lab_placeholder")
    label.setAlignment(Qt.AlignCenter)
    label.setStyleSheet("color: #777")
    return label


class _OnFirstPaint(QObject):
    """Calls `callback` once, when `widget` gets its first paint event (before it paints)."""

    def __init__(self, widget: QWidget, callback):
        super().__init__(widget)
        self._callback = callback
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Paint:
            obj.removeEventFilter(self)
            self._callback()
        return False
