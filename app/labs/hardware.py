"""Hardware lab: what this machine is, what it is doing, and its measured roofs."""

from __future__ import annotations

from PySide6.QtCore import QTimer

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings
from inferlab.engines.hardware.telemetry import TelemetrySampler
from inferlab.engines.labs.hardware.records import HardwareSnapshot
from inferlab.engines.labs.hardware.section import hardware_section
from inferlab.engines.labs.hardware.session import hardware_roofs, start_sampler
from inferlab.engines.labs.hardware.settings import HARDWARE_DEFAULTS, HARDWARE_SETTINGS
from inferlab.views.hardware_view import HardwareView

REFRESH_MS = 250  # the charts redraw at 4 Hz; samples arrive at 1–10 Hz


class HardwareLab(Lab):
    """Device facts, live telemetry, measured roofs. Built before the device list is known
    (the window's first lab at start-up): CPU and RAM telemetry start at once, the device
    facts and the GPUs' charts follow when the list arrives, as in nvitop."""

    lab_id = "hardware"
    needs_devices = False

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = HardwareView()
        self.widget = self.view
        saved = clean_settings(self.saved_settings(), HARDWARE_SETTINGS, HARDWARE_DEFAULTS)
        self.sample_hz = float(saved["sample_hz"])
        self.view.rate.setValue(int(self.sample_hz))
        self.sampler = self._start_sampler()
        self._snapshot_history = None
        self._shut_down = False
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh_telemetry)
        self.timer.start()
        self.view.measure_requested.connect(self.measure)
        self.view.rate_changed.connect(self._set_rate)
        context.device_changed.connect(lambda _d: self._render_device())
        context.devices_changed.connect(self._on_devices_known)
        context.roofs_changed.connect(lambda _d: self._render_device())
        self._render_device()

    def _start_sampler(self) -> TelemetrySampler:
        """Sample the host and every GPU of the device list (none while it is unknown)."""
        gpus = None if self.context.devices else []  # None: every CUDA device torch sees
        return start_sampler(self.sample_hz, gpus)

    def _on_devices_known(self) -> None:
        if self._shut_down:
            return
        if not self.sampler.gpu_ids and any(d.kind == "cuda" for d in self.context.devices):
            self.sampler.stop()  # started before the list: watch its GPUs from now on
            self.sampler = self._start_sampler()
        self._render_device()

    def activated(self) -> None:
        """Measure the roofs once, at first sight, unless other work is running (or the
        device list is not known yet: the window calls again when it is)."""
        if self.context.devices and self.context.roofs() is None and not self.context.running_tasks():
            self.measure()

    def _render_device(self) -> None:
        if self.read_only:
            return
        if not self.context.devices:
            error = self.context.discovery_error
            self.view.render_no_device(f"device discovery failed: {error}" if error
                                       else "detecting devices…")
            return
        self.view.render_device(self.context.device().to_dict())
        self.view.render_roofs(self.context.roofs(), busy=self.busy())

    def refresh_telemetry(self) -> None:
        if self.read_only or not self.view.isVisible():
            return
        self.view.render_telemetry(self.sampler.history())

    def _set_rate(self, hz: float) -> None:
        self.sample_hz = hz
        self.sampler.set_rate(hz)

    def measure(self) -> None:
        if self.busy() or self.read_only or not self.context.devices:
            return
        device = self.context.device_id

        def work(progress, should_stop):
            return hardware_roofs(device, quick=self.context.quick, progress=progress,
                                  should_stop=should_stop)

        self.run_task(f"Measuring roofs on {device}", work, self.context.set_roofs,
                      on_end=self._render_device)
        self._render_device()

    # settings and snapshots -----------------------------------------------------------------
    def settings(self) -> dict:
        return {"sample_hz": self.sample_hz, "device": self.context.device_id}

    def snapshot_section(self) -> dict:
        return hardware_section(self.settings(), self.context.devices,
                                         self.sampler.history(), self.context.all_roofs())

    def show_snapshot(self, record: HardwareSnapshot) -> None:
        self.read_only = True
        device = record.shown_device()
        if device is not None:
            self.view.render_device(device)
        self.view.render_roofs(record.roofs.get(device.get("id")) if device else None)
        self.view.measure_button.setEnabled(False)
        self.view.rate.setEnabled(False)
        if record.telemetry is not None:
            self.view.render_telemetry(record.telemetry)

    def show_live(self) -> None:
        super().show_live()
        self.view.rate.setEnabled(True)
        self._render_device()
        self.refresh_telemetry()

    def shutdown(self) -> None:
        self._shut_down = True
        self.timer.stop()
        self.sampler.stop()
