"""The memory (KV/VRAM) lab's view: inputs, the numbers (KV by layer kind, MLA, a MoE's total
and active weights), the budget bar, MLA/MHA/GQA/MQA."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.dtypes import DTYPE_NAMES, bytes_per_element
from inferlab.engines.labs.memory.session import model_memory
from inferlab.engines.roofline.memory import MAX_COUNT
from inferlab.engines.roofline.parallel import gpu_share
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.choices import refill_choices
from inferlab.views.fact_table import FactTable
from inferlab.views.style import style_plot

GIB = 2**30
SEGMENT_COLORS = {"weights": "#0072B2", "KV cache": "#E69F00", "free": "#C8E6C9",
                  "not usable (1 − utilisation)": "#D0D0D0", "over budget": "#D55E00"}


class MemoryView(QWidget):
    """Inputs on the left; results, the budget bar and attention variants on the right."""

    settings_changed = Signal(dict)
    import_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        form_box = QGroupBox("Inputs")
        form = QFormLayout(form_box)
        self.model = QComboBox()
        self.model.setToolTip("Model architecture (presets with sources in assets/models)")
        import_button = QPushButton("Import config.json…")
        import_button.setToolTip("Read a Hugging Face config.json (num_key_value_heads, head_dim…)")
        import_button.clicked.connect(self.import_requested)
        form.addRow("Model", self.model)
        form.addRow("", import_button)
        self.context = QSpinBox()
        self.context.setRange(1, 10_000_000)
        self.context.setSingleStep(1024)
        self.context.setSuffix(" tokens")
        self.context.setToolTip("Tokens held in the KV cache per request (prompt + output)")
        form.addRow("Context length", self.context)
        self.batch = QSpinBox()
        self.batch.setRange(1, 100_000)
        self.batch.setToolTip("Requests resident at once (batch / concurrency)")
        form.addRow("Batch (concurrency)", self.batch)
        self.weight_dtype = QComboBox()
        self.kv_dtype = QComboBox()
        for combo in (self.weight_dtype, self.kv_dtype):
            combo.addItems(list(DTYPE_NAMES))
        self.weight_dtype.setToolTip("Storage format of the weights")
        self.kv_dtype.setToolTip("Storage format of cached keys and values")
        form.addRow("Weight dtype", self.weight_dtype)
        form.addRow("KV dtype", self.kv_dtype)
        self.target = QComboBox()
        self.target.setToolTip("Device whose memory and bandwidth bound the batch")
        form.addRow("Device", self.target)
        self.utilization = QDoubleSpinBox()
        self.utilization.setRange(0.05, 1.0)
        self.utilization.setSingleStep(0.05)
        self.utilization.setDecimals(2)
        self.utilization.setToolTip("Fraction of device memory the server may use "
                                    "(vLLM's gpu_memory_utilization)")
        form.addRow("Memory utilisation", self.utilization)
        self.tp = QSpinBox()
        self.tp.setRange(1, 1024)
        self.tp.setToolTip("Tensor-parallel degree t: each GPU holds 1/t of every layer's "
                           "weights and 1/t of the KV heads (at least one)")
        self.pp = QSpinBox()
        self.pp.setRange(1, 1024)
        self.pp.setToolTip("Pipeline stages p: each GPU holds ⌈layers / p⌉ layers, weights "
                           "and KV alike")
        self.tp.setPrefix("t = ")
        self.pp.setPrefix("p = ")
        split = QHBoxLayout()  # one row: the form stays as tall as it was
        split.addWidget(self.tp)
        split.addWidget(self.pp)
        form.addRow("Parallel t × p", split)
        self.model_note = QLabel()
        self.model_note.setWordWrap(True)
        self.model_note.setStyleSheet("color: #555")
        form.addRow(self.model_note)

        for w in (self.model, self.weight_dtype, self.kv_dtype, self.target):
            w.currentIndexChanged.connect(self._emit)
        for w in (self.context, self.batch, self.utilization, self.tp, self.pp):
            w.valueChanged.connect(self._emit)

        results_box = QGroupBox("Results")
        self.results = FactTable(("Quantity", "Value", "Formula"))
        QVBoxLayout(results_box).addWidget(self.results)
        # rows are as tall as their text at the columns' final widths, not those of set_rows
        self.results.horizontalHeader().sectionResized.connect(
            lambda *_: self.results.resizeRowsToContents())

        self.budget_plot = pg.PlotWidget()
        self.budget_plot.setMinimumHeight(150)
        bp = self.budget_plot.getPlotItem()
        bp.setLabel("bottom", "memory (GiB = 2³⁰ bytes)")
        bp.hideAxis("left")
        bp.setMouseEnabled(x=False, y=False)
        style_plot(bp)
        self.budget_legend = bp.addLegend(offset=(5, 5), colCount=2)

        self.variants_box = variants_box = QGroupBox("Same model with MHA vs GQA vs MQA")
        self.variants = FactTable(("Attention", "KV heads", "KV / token", "KV / request", "KV for batch", "Max batch"))
        QVBoxLayout(variants_box).addWidget(self.variants)

        # the tables are as tall as their rows (a MoE's or a windowed model's rows included),
        # the budget bar takes the rest
        for box, table in ((results_box, self.results), (variants_box, self.variants)):
            table.setSizeAdjustPolicy(QAbstractScrollArea.AdjustToContents)
            table.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Maximum)
            box.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Maximum)
        right = QVBoxLayout()
        right.addWidget(results_box)
        right.addWidget(self.budget_plot, 1)
        right.addWidget(variants_box)
        layout = QHBoxLayout(self)
        form_box.setMaximumWidth(340)
        layout.addWidget(form_box)
        layout.addLayout(right, 1)

    # inputs ---------------------------------------------------------------------------------
    def set_choices(self, models: list[tuple[str, str]], targets: list[tuple[str, str]]) -> None:
        """`models`, `targets`: (id, label) pairs."""
        self._quiet = True
        refill_choices(self.model, models)
        refill_choices(self.target, targets)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for combo, key in ((self.model, "model"), (self.target, "target")):
            index = combo.findData(s.get(key))
            if index >= 0:
                combo.setCurrentIndex(index)
        for combo, key in ((self.weight_dtype, "weight_dtype"), (self.kv_dtype, "kv_dtype")):
            index = combo.findText(str(s.get(key, "")))
            if index >= 0:
                combo.setCurrentIndex(index)
        self.context.setValue(int(s.get("context", 8192)))
        self.batch.setValue(int(s.get("batch", 1)))
        self.utilization.setValue(float(s.get("utilization", 0.9)))
        self.tp.setValue(int(s.get("tp", 1)))
        self.pp.setValue(int(s.get("pp", 1)))
        self._quiet = False

    def settings(self) -> dict:
        return {
            "model": self.model.currentData(),
            "context": self.context.value(),
            "batch": self.batch.value(),
            "weight_dtype": self.weight_dtype.currentText(),
            "kv_dtype": self.kv_dtype.currentText(),
            "target": self.target.currentData(),
            "utilization": round(self.utilization.value(), 4),
            "tp": self.tp.value(),
            "pp": self.pp.value(),
        }

    def set_read_only(self, read_only: bool) -> None:
        for w in (self.model, self.context, self.batch, self.weight_dtype, self.kv_dtype,
                  self.target, self.utilization, self.tp, self.pp):
            w.setEnabled(not read_only)

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    # rendering -------------------------------------------------------------------------------
    def draw(self, cfg, plan, variants: dict, target_label: str) -> None:
        """`variants`: attention kind → (ModelConfig, MemoryPlan)."""
        model = model_memory(cfg, plan)
        self.model_note.setText(_describe(cfg) + (f"\nSource: {cfg.source}" if cfg.source else ""))
        self.model_note.setToolTip(cfg.notes)
        t, p = plan.tp, plan.pp
        split = t * p > 1
        per_gpu = f" (one GPU of {t * p})" if split else ""
        tps = plan.decode_tokens_per_s_bound
        rows = [
            ("KV bytes per token" + per_gpu, _both(plan.kv_bytes_per_token),
             _kv_token_formula(cfg, plan, model)),
            ("KV per request" + per_gpu, _both(plan.kv_bytes_per_request),
             _kv_request_formula(plan, model)),
            *_kind_rows(model, plan.context),
            ("KV for the batch" + per_gpu, _both(plan.kv_bytes_total), f"× batch {plan.batch}"),
            ("Weights" + per_gpu, _both(plan.weight_bytes),
             (f"{cfg.n_params / 1e9:,.2f} B params, all experts," if cfg.is_moe
              else f"{cfg.n_params:,} params")
             + f" × {plan.weight_dtype}" + (f" ÷ (t × p = {t * p})" if split else "")),
            *_moe_rows(cfg, plan, model),
            ("Total", _both(plan.total_bytes), "weights + KV"),
            ("Budget", _both(plan.budget_bytes), f"{target_label} × utilisation"),
            ("Fits", "yes" if plan.fits else "NO", f"headroom {format_bytes(plan.headroom_bytes)}"),
            ("Largest batch at this context", f"{plan.max_batch:,}", "(budget − weights) ÷ KV per request"),
            ("Longest context at this batch", _context(plan.max_context),
             "(budget − weights) ÷ (KV per token × batch)" if not model.windowed
             else "batch × KV per request ≤ budget − weights"),
            ("Decode tokens/s upper bound",
             "— (no bandwidth known)" if tps is None else f"{tps:,.0f} tokens/s",
             "batch × B ÷ (weights read per step + batch KV)" if cfg.is_moe
             else "batch × B ÷ (weights + batch KV) bytes per step"),
        ]
        exact = {"KV bytes per token" + per_gpu: plan.kv_bytes_per_token,
                 "KV per request" + per_gpu: plan.kv_bytes_per_request,
                 "KV for the batch" + per_gpu: plan.kv_bytes_total,
                 "Weights" + per_gpu: plan.weight_bytes,
                 "Total": plan.total_bytes, "Budget": plan.budget_bytes}
        self.results.set_rows([row + ({"tip": f"{exact[row[0]]:,} bytes"},) if row[0] in exact else row
                               for row in rows])
        self._render_budget(plan)
        self.variants_box.setTitle("Same model with " + " vs ".join(variants))
        vrows = []
        for kind, (vcfg, vplan) in variants.items():
            heads = "latent" if vcfg.is_mla else vcfg.n_kv_heads
            vrows.append((kind, heads, format_bytes(vplan.kv_bytes_per_token),
                          format_bytes(vplan.kv_bytes_per_request), format_bytes(vplan.kv_bytes_total),
                          f"{vplan.max_batch:,}"))
        self.variants.set_rows(vrows)

    def _render_budget(self, plan) -> None:
        item = self.budget_plot.getPlotItem()
        item.clear()
        self.budget_legend.clear()
        used = plan.weight_bytes + plan.kv_bytes_total
        segments = [("weights", plan.weight_bytes), ("KV cache", plan.kv_bytes_total)]
        if used <= plan.budget_bytes:
            segments.append(("free", plan.budget_bytes - used))
        segments.append(("not usable (1 − utilisation)", plan.device_memory_bytes - plan.budget_bytes))
        x0 = 0.0
        for name, nbytes in segments:
            width = max(nbytes, 0) / GIB
            bar = pg.BarGraphItem(x0=[x0], y=[0], width=[width], height=[0.6],
                                  brush=SEGMENT_COLORS[name], pen=pg.mkPen("#555", width=0.5))
            item.addItem(bar)
            self.budget_legend.addItem(bar, f"{name}: {width:.2f} GiB")
            x0 += width
        if used > plan.budget_bytes:
            over = pg.InfiniteLine(pos=plan.budget_bytes / GIB, angle=90,
                                   pen=pg.mkPen(SEGMENT_COLORS["over budget"], width=2),
                                   label="budget", labelOpts={"position": 0.9})
            item.addItem(over)
        gpus = plan.tp * plan.pp
        of = f" of one GPU (t × p = {gpus} GPUs)" if gpus > 1 else ""
        item.setTitle(f"Memory budget{of}: {format_bytes(used)} used of "
                      f"{format_bytes(plan.budget_bytes)} usable")
        item.setYRange(-0.6, 2.0)  # the legend's two rows above the bar
        item.setXRange(0, max(x0, used / GIB) * 1.02)


def _both(nbytes) -> str:
    """Binary and decimal units side by side: GiB and GB are never confused."""
    return f"{format_bytes(nbytes)} = {format_bytes(nbytes, binary=False)}"


def _describe(cfg) -> str:
    """The model's description in a sentence or two: layers by kind, attention, experts."""
    kinds = [cfg.layer_kind(i) for i in range(cfg.n_layers)]
    layers = f"{cfg.n_layers} layers"
    if any(k != "full" for k in kinds):
        windowed = next(k for k in kinds if k != "full")
        layers += (f" ({kinds.count('full')} full, {len(kinds) - kinds.count('full')} "
                   f"{windowed} of {cfg.sliding_window:,} tokens)")
    if cfg.is_mla:
        attention = (f"{cfg.n_heads} heads, MLA (latent {cfg.kv_lora_rank} + RoPE key "
                     f"{cfg.qk_rope_head_dim} per token per layer)")
    else:
        attention = (f"{cfg.n_heads} heads, {cfg.n_kv_heads} KV heads ({cfg.attention_kind}), "
                     f"d_head {cfg.d_head}")
    params = f"{cfg.n_params / 1e9:.2f} B params"
    if cfg.is_moe:
        shared = f" + {cfg.n_shared_experts} shared" if cfg.n_shared_experts else ""
        params = (f"{cfg.n_moe_layers} MoE layers of {cfg.n_experts} experts (top "
                  f"{cfg.n_experts_active}{shared}); {params}, "
                  f"{cfg.n_params_active / 1e9:.2f} B active per token")
    return f"{cfg.name}: {layers}, d_model {cfg.d_model}, {attention}. {params}."


def _kv_token_formula(cfg, plan, model) -> str:
    share = gpu_share(cfg, plan.tp, plan.pp, plan.weight_dtype, plan.kv_dtype)
    b = bytes_per_element(plan.kv_dtype)
    t, p = plan.tp, plan.pp
    if cfg.is_mla:  # the latent serves every head: each GPU of t keeps it whole
        return (f"{share.layers} layers × ({cfg.kv_lora_rank} latent + {cfg.qk_rope_head_dim} "
                f"RoPE) × {b:g} B" + (f"  (⌈{cfg.n_layers} / p={p}⌉ layers)" if p > 1 else ""))
    return (f"2 × {share.layers} layers × {share.kv_heads} KV heads × {cfg.d_head} × {b:g} B"
            + (f"  (⌈{cfg.n_layers} / p={p}⌉ layers, max(1, {cfg.n_kv_heads} / t={t}) heads)"
               if t * p > 1 else ""))


def _kv_request_formula(plan, model) -> str:
    if not model.windowed:
        return f"× {plan.context} tokens"
    ratio = plan.kv_bytes_per_request / model.kv_bytes_all_global
    return (f"Σ layers min({plan.context}, W): {ratio:.1%} of all-global "
            f"{format_bytes(model.kv_bytes_all_global)}")


def _kind_rows(model, context: int) -> list[tuple]:
    """One row per layer kind where the model has windowed layers."""
    if not model.windowed:
        return []
    rows = []
    for k in model.kv_kinds:
        held = f"min({context}, {k.window})" if k.window else f"{context}"
        what = f"{k.layers} {k.kind} layers" + (f", W {k.window:,}" if k.window else "")
        rows.append((f"   {what}", _both(k.bytes_per_request),
                     f"{k.bytes_per_token:,} B per token × {held} tokens"))
    return rows


def _moe_rows(cfg, plan, model) -> list[tuple]:
    """Weights one token and one decode step read (one GPU's share), for a MoE."""
    if not cfg.is_moe:
        return []
    split = f" ÷ {plan.tp * plan.pp}" if plan.tp * plan.pp > 1 else ""
    k, e = cfg.n_experts_active, cfg.n_experts
    return [
        ("   read per token", _both(model.weight_bytes_active_per_token),
         f"{model.params_active / 1e9:,.2f} B active params ({k} of {e} experts){split}",
         {"tip": f"{model.params_active:,} parameters: the dense part and, in each of the "
                 f"{cfg.n_moe_layers} MoE layers, {k} routed experts of {e}"}),
        ("   read per decode step", _both(plan.weight_bytes_per_step),
         f"{model.experts_touched:.1f} of {e} experts per layer at batch {plan.batch}{split}",
         {"tip": "distinct experts a batch of B tokens touches under uniform routing: "
                 f"E·(1 − (1 − k/E)^B) = {e}·(1 − (1 − {k}/{e})^{plan.batch}) = "
                 f"{model.experts_touched:.2f}"}),
    ]


def _context(tokens: int) -> str:
    return "unbounded (every layer windowed)" if tokens == MAX_COUNT else f"{tokens:,} tokens"
