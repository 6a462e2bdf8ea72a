"""Roofline lab: the measured roof of this device, datasheet roofs, and operations on them."""

from __future__ import annotations

from inferlab.app.labs.base import Lab
from inferlab.engines.hardware.microbench import measure_op_points, measure_roofs
from inferlab.engines.hardware.op_points import NATIVE_SUFFIX
from inferlab.engines.hardware.presets import all_hardware_presets
from inferlab.engines.labs.roofline.section import (
    ROOFLINE_DEFAULTS,
    ROOFLINE_SETTINGS,
    read_roofline_section,
    roofline_section,
)
from inferlab.engines.model.config import list_model_presets, load_model_preset
from inferlab.engines.roofline.costs import decode_batch_sweep, prefill_length_sweep
from inferlab.engines.roofline.formulas import attainable_flops
from inferlab.engines.fields import clean_settings
from inferlab.views.roofline_plot import RoofLine, RooflinePoint, RooflineScene
from inferlab.views.roofline_view import RooflineView

DECODE_BATCHES = (1, 4, 16, 64, 256)
PREFILL_LENGTHS = (16, 128, 1024)


def preset_peak(preset, dtype: str) -> float | None:
    """A preset's peak for `dtype`, falling back to its 16-bit figure (fp32 never borrows)."""
    peaks = preset.peak_flops
    if dtype in peaks:
        return peaks[dtype]
    for alt in ("bf16", "fp16") if dtype != "fp32" else ():
        if alt in peaks:
            return peaks[alt]
    return None


def build_scene(settings: dict, roofs, points, cfg, presets) -> tuple[RooflineScene, tuple]:
    """The plot's record, and (label, peak, bw) of the roof the formula panel explains."""
    dtype = settings["dtype"]
    lines: list[RoofLine] = []
    main = (None, None, None)
    if roofs is not None:
        peak = roofs.peak_flops.get(dtype) or roofs.peak_flops.get("fp32")
        used = dtype if dtype in roofs.peak_flops else "fp32"
        label = f"{roofs.device} measured ({used})"
        lines.append(RoofLine(label, peak, roofs.bw_bytes_per_s, measured=True))
        main = (label, peak, roofs.bw_bytes_per_s)
    for preset in presets:
        if preset.id in settings.get("presets", []):
            peak = preset_peak(preset, dtype)
            if peak:
                lines.append(RoofLine(f"{preset.name} (datasheet)", peak, preset.bandwidth_bytes_per_s))
                if main[0] is None:
                    main = (lines[-1].label, peak, preset.bandwidth_bytes_per_s)
    scene_points: list[RooflinePoint] = []
    _, peak, bw = main
    if cfg is not None and peak:
        context = int(settings["context"])
        wd, kd = settings["weight_dtype"], settings["kv_dtype"]
        for batch, cost in zip(DECODE_BATCHES, decode_batch_sweep(cfg, context, DECODE_BATCHES, wd, kd), strict=True):
            scene_points.append(_analytic(cost, f"decode B={batch}, L={context}", f"{cfg.name} decode", peak, bw))
        for length, cost in zip(PREFILL_LENGTHS, prefill_length_sweep(cfg, PREFILL_LENGTHS, 1, wd, kd), strict=True):
            scene_points.append(_analytic(cost, f"prefill L={length}", f"{cfg.name} prefill", peak, bw))
    for point in points:
        series = "measured GEMV-like (decode), torch" if point.name.startswith(
            ("gemv", "skinny", "decode")) else "measured matmul"
        if point.name.endswith(NATIVE_SUFFIX):
            series = "measured GEMV-like (decode), native kernels"
        scene_points.append(RooflinePoint(point.name, series, point.flops, point.bytes_moved,
                                          point.achieved_flops_per_s, measured=True,
                                          detail=f"{point.seconds * 1e3:.3f} ms per call"))
    title = "Roofline — measured on this machine" if roofs is not None else "Roofline — datasheet"
    return RooflineScene(tuple(lines), tuple(scene_points), title), main


def _analytic(cost, label, series, peak, bw) -> RooflinePoint:
    predicted = float(attainable_flops(peak, bw, cost.intensity))
    time_s = cost.predicted_time_s(peak, bw)
    return RooflinePoint(label, series, cost.flops, cost.bytes_moved, predicted, measured=False,
                         detail=f"predicted {time_s * 1e3:.3g} ms ({cost.bound(peak, bw)}-bound)")


class RooflineLab(Lab):
    lab_id = "roofline"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = RooflineView()
        self.widget = self.view
        self.presets = all_hardware_presets()
        self.view.set_choices([(p.id, p.name) for p in self.presets],
                              [(m, load_model_preset(m).name) for m in list_model_presets()])
        self._settings = clean_settings(self.saved_settings(), ROOFLINE_SETTINGS,
                                        ROOFLINE_DEFAULTS)
        self.view.set_settings(self._settings)
        self._settings = self.view.settings()
        self.points: dict[str, list] = {}
        self._auto_started = False
        self._replay = None
        self.view.settings_changed.connect(self._on_settings)
        self.view.measure_requested.connect(self.measure)
        self.view.plot.point_hovered.connect(self._on_hover)
        context.roofs_changed.connect(lambda _d: self.redraw())
        context.device_changed.connect(lambda _d: self.redraw())
        self.redraw()

    def _on_settings(self, settings: dict) -> None:
        self._settings = settings
        self.redraw()

    def activated(self) -> None:
        """Measure roofs and operations once, at first sight; after other work if any runs."""
        missing = self.context.roofs() is None or not self.points.get(self.context.device_id)
        if self._auto_started or not missing or self.read_only:
            return
        if self.context.running_tasks():
            self.view.set_busy(False, "Waiting for the running measurement…")
            self.context.task_ended.connect(self._retry_activation)
            return
        self._auto_started = True
        self.measure()

    def _retry_activation(self, *_args) -> None:
        if not self.context.running_tasks():
            self.context.task_ended.disconnect(self._retry_activation)
            if self.widget.isVisible():
                self.activated()

    def _model(self, model_id):
        try:
            return load_model_preset(model_id)
        except ValueError:
            return None

    def redraw(self) -> None:
        if self.read_only:
            settings, roofs, points, cfg = self._replay
        else:
            settings, roofs = self._settings, self.context.roofs()
            points, cfg = self.points.get(self.context.device_id, []), self._model(settings["model"])
        scene, self._main = build_scene(settings, roofs, points, cfg, self.presets)
        self.view.plot.draw(scene)
        # Until the user hovers, explain the first modelled decode step (the memory-bound case).
        self._default_point = next((p for p in scene.points if not p.measured), None)
        self.view.formula.draw(*self._main, point=self._default_point)
        if not self.busy() and not self.read_only:
            self.view.set_busy(False, "" if roofs is not None else
                               "Not measured yet: press the button to measure this device.")

    def _on_hover(self, point) -> None:
        self.view.formula.draw(*self._main, point=point or self._default_point)

    def measure(self) -> None:
        if self.busy() or self.read_only:
            return
        device = self.context.device_id
        dtype = self._settings["dtype"] if self._settings["dtype"] in ("fp32", "bf16", "fp16") else "fp32"
        self.view.set_busy(True, f"Measuring {device}…")

        def work(progress, should_stop):
            roofs = measure_roofs(device, quick=self.context.quick, progress=lambda f, m: progress(0.7 * f, m),
                                  should_stop=should_stop)
            if dtype not in roofs.peak_flops:
                used = "fp32"
            else:
                used = dtype
            points = measure_op_points(device, dtype=used, quick=self.context.quick,
                                       progress=lambda f, m: progress(0.7 + 0.3 * f, m),
                                       should_stop=should_stop)
            return roofs, points

        def result(value):
            roofs, points = value
            self.points[roofs.device] = points
            self.context.set_roofs(roofs)

        self.run_task(f"Measuring roofline on {device}", work, result, on_end=self._measure_done)

    def _measure_done(self) -> None:
        self.view.set_busy(False, "")
        self.redraw()

    # settings and snapshots ----------------------------------------------------------------------
    def settings(self) -> dict:
        return dict(self._settings)

    def snapshot_section(self) -> dict:
        return roofline_section(self._settings, self.context.roofs(),
                                         self.points.get(self.context.device_id, []),
                                         self._model(self._settings["model"]))

    def show_snapshot(self, section: dict) -> None:
        settings, roofs, points, cfg = read_roofline_section(section)
        self._replay = (settings, roofs, points, cfg)
        self.read_only = True
        self.view.set_settings(settings)
        self.view.set_read_only(True)
        self.view.set_busy(False, "Snapshot (read-only)")
        self.view.measure_button.setEnabled(False)
        self.redraw()

    def show_live(self) -> None:
        super().show_live()
        self._replay = None
        self.view.set_read_only(False)
        self.view.set_settings(self._settings)
        self.redraw()
