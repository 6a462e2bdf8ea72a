"""Quantization lab: one linear's weights under one scheme (grid, error, scales), and whole-
model runs of every checked scheme (perplexity, weight and KV bytes, decode tokens/s of the
model running the stored codes, a sample) side by side.

The session (engines/labs/quant/session.py: the model, held-out tokens, the fp32 sample) is
opened in a worker; the layer drawing is computed on the GUI thread (one matrix, tens of
milliseconds); each scheme of a run is its own worker task, so results appear one by one and
Cancel stops between — or inside, through the progress callback — GPTQ's and AWQ's layers.
"""

from __future__ import annotations

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.quant.records import QuantSnapshot
from inferlab.engines.labs.quant.section import quant_section
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.labs.quant.settings import PPL_KEYS, QUANT_DEFAULTS, QUANT_SETTINGS
from inferlab.engines.model.cache import model_choices, resolve_model_name
from inferlab.engines.quant.errors import QuantError
from inferlab.views.quant_view import QuantView

LAYER_KEYS = ("layer", "linear", "layer_scheme")


def method_text(how: dict) -> str:
    """How perplexity was computed, in words."""
    w, s = how["ppl_window_tokens"], how["ppl_stride_tokens"]
    if how["ppl_convention"] == "llama.cpp":
        return (f"llama.cpp's convention (chunks of n_ctx = {w:,} tokens, the second half "
                "of each scored)")
    return f"sliding windows of {w:,} tokens, stride {s:,}"


class QuantLab(Lab):
    lab_id = "quant"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = QuantView()
        self.widget = self.view
        self.session = None
        self.layer = None
        self.runs: list = []
        self._opening = None
        self._queue: list[str] = []
        self._run_task = None
        self._settings = clean_settings(self.saved_settings(), QUANT_SETTINGS, QUANT_DEFAULTS)
        self.view.set_models(model_choices())
        self.view.set_settings(self._settings)
        self._settings = self.view.settings()
        self.view.settings_changed.connect(self._on_settings)
        self.view.run_requested.connect(self.run_schemes)
        self.view.cancel_requested.connect(self.cancel)
        self.view.set_status("The lab loads its model when it is first shown.")

    def settings(self) -> dict:
        return dict(self._settings)

    # ---- the session --------------------------------------------------------------------
    def activated(self) -> None:
        if self.session is None and self._opening is None and not self.read_only:
            self.open_session()

    def open_session(self) -> None:
        spec, device = self._settings["model"], self.context.device_id
        path = self._settings.get("kernels", "auto")
        self.view.set_status(f"Loading {spec} and tokenizing the held-out text…")

        def work(progress, _should_stop):
            return QuantSession.open(spec, device, progress=progress, kernel_setting=path)

        self._opening = self.run_task("Quant lab: load the model", work, self._opened,
                                      self._failed, on_end=self._opening_ended)

    def _opening_ended(self) -> None:
        self._opening = None

    def _opened(self, session) -> None:
        if session.model_name != self._resolved(self._settings["model"]):
            return  # the model was changed while this one loaded: that load follows
        self.session, self.runs = session, []
        problem = self._apply_perplexity()
        self.view.set_n_layers(session.n_layers)
        self._settings["layer"] = min(self._settings["layer"], session.n_layers - 1)
        self.view.set_settings(self._settings)
        self.redraw_layer()
        self.view.draw_runs([], self._runs_note())
        source = f" {session.source_note}." if session.source_note else ""
        self.view.set_status(problem or (
            f"{session.model_name}: {session.n_layers} layers, {len(session.eval_sets)} "
            f"held-out texts ({session.eval_tokens:,} tokens).{source} Pick a layer and "
            "scheme, or check schemes and Run."))

    def _apply_perplexity(self) -> str:
        """The perplexity settings onto the session; the problem with them, or ""."""
        s = self._settings
        try:
            self.session.set_perplexity(s["ppl_window_tokens"], s["ppl_stride_tokens"],
                                        s["ppl_convention"])
        except ValueError as e:
            return f"Perplexity: {e}; runs keep the previous window and stride."
        return ""

    @staticmethod
    def _resolved(spec: str) -> str:
        return resolve_model_name(spec)

    def _failed(self, message: str) -> None:
        self.view.set_status(f"Failed: {message}")

    def _on_settings(self, settings: dict) -> None:
        changed = {k for k in settings if settings[k] != self._settings.get(k)}
        self._settings = settings
        self.save_settings()
        if self.read_only:
            return
        if changed & {"model", "kernels"}:  # a model built for the other path
            self.cancel()
            self.session, self.layer, self.runs = None, None, []
            self.open_session()
        elif changed & set(LAYER_KEYS):
            self.redraw_layer()
        if changed & set(PPL_KEYS) and self.session is not None:
            problem = self._apply_perplexity()
            if not problem and self.runs:  # scored another way: not comparable any more
                self.runs = []
                self.view.draw_runs([], self._runs_note())
            self.view.set_status(problem or f"Perplexity: {self._method_text()}. Run the "
                                 "schemes again to score them this way.")

    # ---- the layer ------------------------------------------------------------------------
    def redraw_layer(self) -> None:
        s = self.session
        if s is None:
            return
        try:
            self.layer = s.analyse(self._settings["layer"], self._settings["linear"],
                                   self._settings["layer_scheme"])
        except QuantError as e:
            self.layer = None
            self.view.draw_layer(None, str(e))
            return
        self.view.draw_layer(self.layer, "GPTQ, AWQ and Wanda need the whole model's "
                             "calibration: their per-linear SQNR is on the Model tab.")

    # ---- whole-model runs -----------------------------------------------------------------
    def run_schemes(self) -> None:
        if self.session is None or self._run_task is not None or self.read_only:
            return
        names = list(self._settings["schemes"])
        if not names:
            self.view.set_status("Check at least one scheme to run.")
            return
        if "fp32" in names:  # the baseline first: the table's Δ and × columns need it
            names.remove("fp32")
            names.insert(0, "fp32")
        self._queue = names
        self.view.set_busy(True)
        self._next()

    def _next(self) -> None:
        if not self._queue:
            self._run_task = None
            self.view.set_busy(False)
            self.view.set_status(f"{len(self.runs)} schemes run on {self.session.model_name}.")
            return
        name = self._queue.pop(0)
        session = self.session
        decode = self._settings["decode_tokens"] if self._settings["measure_speed"] else None
        done_before, total = len(self.runs), len(self.runs) + 1 + len(self._queue)

        def work(progress, _should_stop):
            def scaled(fraction, message=""):
                progress((done_before + fraction) / max(total, 1), message)

            scaled(0.0, f"{name}: quantizing")
            return session.run(name, decode, scaled)

        self._run_task = self.run_task(f"Quant lab: {name}", work, self._ran, self._run_failed,
                                       on_end=self._run_ended)
        self._run_task.progress.connect(self.view.set_progress)

    def _ran(self, run) -> None:
        self.runs = [r for r in self.runs if r.scheme != run.scheme] + [run]
        self.view.draw_runs(self.runs, self._runs_note())

    def _run_failed(self, message: str) -> None:
        self._queue.clear()
        self.view.set_status(f"Failed: {message}")

    def _run_ended(self) -> None:
        task, self._run_task = self._run_task, None
        if task is not None and task.should_stop():
            self._queue.clear()
            self.view.set_busy(False)
            self.view.set_status("Cancelled.")
            return
        if self.session is not None:
            self._next()

    def cancel(self) -> None:
        self._queue.clear()
        if self._run_task is not None:
            self._run_task.stop()

    def _method_text(self) -> str:
        return method_text(self.session.ppl_method())

    def _runs_note(self) -> str:
        s = self.session
        if s is None:
            return ""
        texts = ", ".join(f"{k} {len(v):,}" for k, v in s.eval_sets.items())
        return (f"{s.model_name}: perplexity is the mean over {len(s.eval_sets)} held-out "
                f"texts ({texts} tokens), {self._method_text()}; decode greedy, one stream, "
                "prefill excluded, on the codes each scheme stores (“Runs as”); “Agrees”: "
                "leading tokens of the sample equal to fp32's.")

    # ---- snapshots ------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        s = self.session
        if s is None:
            return quant_section(self.settings(), None, 0, self.layer, self.runs)
        return quant_section(self.settings(), s.model_name,
                             {k: len(v) for k, v in s.eval_sets.items()}, self.layer,
                             self.runs, s.ppl_method())

    def show_snapshot(self, record: QuantSnapshot) -> None:
        settings, model, runs = record.settings, record.model, record.runs
        self.cancel()
        self.read_only = True
        self.view.set_read_only(True)
        self.view.set_n_layers(max(self._settings["layer"], settings["layer"]) + 1)
        self.view.set_settings(settings)
        if model is None:
            self.view.draw_layer(None, "This snapshot holds no quantization run.")
            self.view.draw_runs([])
            self.view.set_status("Read-only snapshot: the quantization lab had not run.")
            return
        self.view.draw_layer(record.layer, "")
        texts = ", ".join(f"{k} {n:,}" for k, n in record.eval_texts.items()) or \
            f"{record.eval_tokens:,}"
        method = ("" if record.ppl_window_tokens is None
                  else f", {method_text(record.ppl_method())}")
        self.view.draw_runs(list(runs), f"{model}: perplexity on held-out texts ({texts} "
                                        f"tokens){method}.")
        if runs:
            self.view.tabs.setCurrentWidget(self.view.model_panel)
        self.view.set_status(f"Read-only snapshot: {model}, {len(runs)} schemes run.")

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        if self.session is not None:
            self.view.set_n_layers(self.session.n_layers)
        self.view.set_settings(self._settings)
        self.view.draw_layer(self.layer, "" if self.layer else "No layer drawn yet.")
        self.view.draw_runs(self.runs, self._runs_note())
