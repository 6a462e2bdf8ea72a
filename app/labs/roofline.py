"""Roofline lab: the measured roof of this device, datasheet roofs, and operations on them.

The model placed on them is a preset, or a model the app loads by name (Gemma 3 270M,
tiny-moe) by its own description: loaded in a worker the first time it is chosen (no lab had
it yet), the plot redrawn when it arrives."""

from __future__ import annotations

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings
from inferlab.engines.hardware.op_points import NATIVE_SUFFIX
from inferlab.engines.hardware.presets import all_hardware_presets
from inferlab.engines.labs.roofline.records import RooflineSnapshot
from inferlab.engines.labs.roofline.section import roofline_section
from inferlab.engines.labs.roofline.session import (
    measure_roofline,
    model_steps,
    preset_peak,
    roofline_model,
)
from inferlab.engines.labs.roofline.settings import ROOFLINE_DEFAULTS, ROOFLINE_SETTINGS
from inferlab.engines.model.cache import description_choices, model_description
from inferlab.engines.model.registry import MODEL_NAMES
from inferlab.engines.roofline.formulas import attainable_flops
from inferlab.views.roofline_plot import RoofLine, RooflinePoint, RooflineScene
from inferlab.views.roofline_view import RooflineView


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
        scene_points += [_analytic(cost, label, series, peak, bw)
                         for label, series, cost in model_steps(cfg, settings)]
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
        self.view.set_choices([(p.id, p.name) for p in self.presets], description_choices())
        self._describing: set[str] = set()  # registry models whose description is loading
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

    def redraw(self) -> None:
        if self.read_only:
            replay = self._replay
            settings, roofs, points, cfg = (replay.settings, replay.roofs, replay.points,
                                            replay.model_config)
        else:
            settings, roofs = self._settings, self.context.roofs()
            points = self.points.get(self.context.device_id, [])
            cfg = self._model(settings["model"])
        scene, self._main = build_scene(settings, roofs, points, cfg, self.presets)
        self.view.plot.draw(scene)
        # Until the user hovers, explain the first modelled decode step (the memory-bound case).
        self._default_point = next((p for p in scene.points if not p.measured), None)
        self.view.formula.draw(*self._main, point=self._default_point)
        if not self.busy() and not self.read_only:
            loading = settings["model"] in self._describing
            self.view.set_busy(False, f"Loading {settings['model']} to read its description…"
                               if loading else "" if roofs is not None else
                               "Not measured yet: press the button to measure this device.")

    def _model(self, model_id: str):
        """The model to place, or None; a registry model no lab has loaded yet is loaded in a
        worker (`cache.model_description`) and the plot redrawn when it arrives."""
        cfg = roofline_model(model_id, load=False)
        if cfg is None and model_id in MODEL_NAMES and model_id not in self._describing:
            self._describing.add(model_id)

            def arrived(_cfg) -> None:
                self._describing.discard(model_id)
                self.redraw()

            def failed(message: str) -> None:
                self._describing.discard(model_id)
                self.view.set_busy(self.busy(), f"{model_id}: {message}")

            self.context.run_task(f"Roofline lab: load {model_id}",
                                  lambda _progress, _stop: model_description(model_id),
                                  arrived, failed)
        return cfg

    def _on_hover(self, point) -> None:
        self.view.formula.draw(*self._main, point=point or self._default_point)

    def measure(self) -> None:
        if self.busy() or self.read_only:
            return
        device, dtype = self.context.device_id, self._settings["dtype"]
        self.view.set_busy(True, f"Measuring {device}…")

        def work(progress, should_stop):
            return measure_roofline(device, dtype, self.context.quick, progress, should_stop)

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
                                roofline_model(self._settings["model"], load=False))

    def show_snapshot(self, record: RooflineSnapshot) -> None:
        self._replay = record
        self.read_only = True
        self.view.set_settings(record.settings)
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
