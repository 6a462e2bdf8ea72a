"""The attention lab's view: its controls, the tiles of Q, K, V, S and O with the current ones
lit, the score tile and the rows' m and ℓ, bytes moved per execution, the roofline, the
timings on this device and the closed forms with the numbers substituted.

It draws records (`draw(header, steps)`: an `AttentionHeader` and `AttentionStep`s); its
signals ask the lab for work. The step slider shows an earlier step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
)

from inferlab.engines.labs.attention.settings import ATTENTION_SETTINGS, on_chip_presets
from inferlab.views.attention_tiles import ScorePanel, TileGrids, TileStates, tile_legend_html
from inferlab.views.attention_timings import TimingsPlot
from inferlab.views.attention_traffic import (
    NAMES,
    AttentionRoofline,
    BytesBars,
    FormulaText,
    bars_legend_html,
)
from inferlab.views.choices import select_choice
from inferlab.views.stepped_controls import SteppedView


@dataclass(frozen=True)
class AttentionHeader:
    """What is drawn beside the steps: the run, and the roofs to place it on (label, peak
    FLOP/s, bandwidth bytes/s, measured?)."""

    info: object  # engines.labs.attention.records.AttentionRunInfo
    roofs: tuple = ()


SOURCE_LABELS = {"seeded": "seeded Q, K, V", "smollm2-135m": "SmolLM2 layer",
                 "gemma3-270m": "Gemma 3 270M layer", "tiny": "tiny model layer",
                 "tiny-moe": "tiny MoE layer"}
SPINS = (  # key, label, tooltip, suffix
    ("n", "N", "Rows of Q, K and V: the context length", ""),
    ("d", "d", "Head width", ""),
    ("heads", "heads", "Attention heads (each stepped in turn; bytes scale with them)", ""),
    ("br", "Br", "Q tile rows (the outer loop of FlashAttention-2)", ""),
    ("bc", "Bc", "K/V tile rows (the inner loop), and split-K's chunk", ""),
    ("on_chip_kib", "on-chip M", "On-chip memory M (a GPU's shared memory per SM, ~192 KiB "
     "on A100/H100; a CPU core's L2, 1 MiB on this EPYC): Br and Bc chosen from it as "
     "FlashAttention does, Bc = ⌈M/4d⌉, Br = min(Bc, d). 0: Br and Bc as set", " KiB"),
)


class AttentionView(SteppedView):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.header: AttentionHeader | None = None
        self.steps: Sequence = ()
        self._states: TileStates | None = None
        self._build()

    def _build(self) -> None:
        self.spins = {}
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for key, label, tip, suffix in SPINS:
            spin = QSpinBox()
            s = ATTENTION_SETTINGS[key]
            spin.setRange(int(s.low), int(s.high))
            spin.setToolTip(tip)
            if suffix:
                spin.setSuffix(suffix)
            if key == "on_chip_kib":
                spin.setSpecialValueText("off")
            spin.setMaximumWidth(90 if key == "on_chip_kib" else 72)
            spin.editingFinished.connect(self._emit)
            spin.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
            self.spins[key] = spin
            row.addWidget(QLabel(label))
            row.addWidget(spin)
        self.on_chip = QComboBox()
        self.on_chip.addItem("M preset…", 0)
        for label, kib in on_chip_presets().items():
            self.on_chip.addItem(f"{label}", kib)
        self.on_chip.setToolTip("Set the on-chip memory M from a GPU's shared memory or this "
                                "CPU's L2")
        self.on_chip.activated.connect(self._preset_chosen)
        self.on_chip.setMaximumWidth(110)
        row.addWidget(self.on_chip)
        self.source = QComboBox()
        for key, label in SOURCE_LABELS.items():
            self.source.addItem(label, key)
        self.source.setToolTip("Q, K, V: seeded normal values, or one layer of a real model "
                               "run on the shipped texts (its own head width d, q/k-norms and "
                               "RoPE per layer kind; N at most the text's ~7,700 tokens)")
        self.source.currentIndexChanged.connect(self._emit)
        self.source.currentIndexChanged.connect(self._source_changed)
        self.layer = QSpinBox()
        self.layer.setRange(0, int(ATTENTION_SETTINGS["layer"].high))
        self.layer.setPrefix("layer ")
        self.layer.setToolTip("The model layer whose Q, K, V are used")
        self.layer.editingFinished.connect(self._emit)
        second = QHBoxLayout()  # what runs: the inputs' source, the execution, the buttons
        second.setContentsMargins(0, 0, 0, 0)
        second.addWidget(self.source)
        second.addWidget(self.layer)
        self.causal = QCheckBox("causal")
        self.causal.setToolTip("Causal mask: the tiled execution skips K tiles after a Q "
                               "tile's last row")
        self.causal.toggled.connect(self._emit)
        self.execution = QComboBox()
        for key, label in NAMES.items():
            self.execution.addItem(label, key)
        self.execution.setToolTip("The execution stepped tile by tile (the other two are "
                                  "shown by their closed forms)")
        self.execution.currentIndexChanged.connect(self._emit)
        row.addWidget(self.causal)
        second.addWidget(QLabel("step"))
        second.addWidget(self.execution)
        self.build_controls("step", "Start again from the first tile (Ctrl+R)", "One tile (N)",
                            "Run to the last tile, or pause (Space)",
                            "Show an earlier step (drag)", 220)
        row.addStretch(1)
        second.addStretch(1)
        for b in self.buttons:
            second.addWidget(b)
        self.grids = TileGrids()
        self.grid_legend = QLabel(tile_legend_html())
        self.grid_legend.setWordWrap(True)
        self.bars_legend = QLabel(bars_legend_html())
        self.bars_legend.setWordWrap(True)
        self.scores = ScorePanel()
        self.bars = BytesBars()
        self.roofline = AttentionRoofline()
        self.timings = TimingsPlot()
        self.formula = FormulaText()
        top = QHBoxLayout()
        grid_side = QVBoxLayout()
        grid_side.addWidget(self.grids, 1)
        grid_side.addWidget(self.grid_legend)
        top.addLayout(grid_side, 4)
        top.addWidget(self.scores, 5)
        bottom = QHBoxLayout()
        bars_side = QVBoxLayout()
        bars_side.addWidget(self.bars, 1)
        bars_side.addWidget(self.bars_legend)
        bottom.addLayout(bars_side, 3)
        roof_side = QVBoxLayout()
        roof_side.addWidget(self.roofline, 1)
        roof_side.addWidget(self.roofline.legend_label)
        bottom.addLayout(roof_side, 4)
        bottom.addWidget(self.timings, 4)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(second)
        layout.addLayout(self.slider_row)
        layout.addWidget(self.status)
        layout.addLayout(top, 5)
        layout.addLayout(bottom, 4)
        layout.addWidget(self.formula)

    # ---- settings ------------------------------------------------------------------------------
    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for key, spin in self.spins.items():
            if key in s:
                spin.setValue(int(s[key]))
        self.causal.setChecked(bool(s.get("causal", False)))
        select_choice(self.execution, s.get("execution"))
        select_choice(self.source, s.get("source"))
        self.layer.setValue(int(s.get("layer", 0)))
        self._quiet = False
        self._source_changed()

    def settings(self) -> dict:
        return {**{k: spin.value() for k, spin in self.spins.items()},
                "causal": self.causal.isChecked(), "execution": self.execution.currentData(),
                "source": self.source.currentData(), "layer": self.layer.value()}

    def _preset_chosen(self, index: int) -> None:
        kib = self.on_chip.itemData(index)
        if kib:
            self.spins["on_chip_kib"].setValue(int(kib))
            self._emit()
        self.on_chip.setCurrentIndex(0)

    def _source_changed(self, *_args) -> None:
        """A model's layer has its own head width and seed: d and the layer spin follow."""
        seeded = self.source.currentData() == "seeded"
        self.spins["d"].setEnabled(seeded and not self.read_only)
        self.layer.setEnabled(not seeded and not self.read_only)

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def set_read_only(self, read_only: bool) -> None:
        super().set_read_only(read_only)
        for w in (*self.spins.values(), self.causal, self.execution, self.source, self.on_chip):
            w.setEnabled(not read_only)
        self.timings.set_read_only(read_only)
        self._source_changed()

    # ---- drawing -------------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.header, self.steps, self._states = None, (), None
        self.clear_steps()
        self.scores.clear()
        self.formula.setText(message)

    def draw(self, header: AttentionHeader | None, steps: Sequence, index: int | None = None):
        """Show a run up to step `index` (default: the latest, or where the slider was)."""
        if header is None:
            self.clear("")
            return
        if self.header is None or header.info is not self.header.info:
            self._states = TileStates(header.info)
        self.header, self.steps = header, steps
        self.show_step(self.follow(len(steps), index))

    def show_step(self, index: int) -> None:
        info = self.header.info
        record = self.steps[index] if 0 <= index < len(self.steps) else None
        previous = self.steps[index - 1] if record is not None and index > 0 else None
        self._states.advance(self.steps, max(index, 0))
        self.grids.draw(self._states, record)
        self.scores.draw(record, previous)
        self.bars.draw(info, record)
        self.roofline.draw_run(info, self.header.roofs)
        self.formula.draw(info, record)
        if record is None:
            self.step_label.setText("step —")
        else:
            self.step_label.setText(f"step {record.step + 1:,} of {record.steps_total:,}: "
                                    f"{record.phase}, rows {record.q_rows[0]}–"
                                    f"{record.q_rows[1] - 1}, keys {record.k_rows[0]}–"
                                    f"{record.k_rows[1] - 1}")
