"""The speculative lab's Training tab: a draft head's training record drawn — training loss,
and the held-out acceptance (tokens per target forward, first-token agreement) after each
epoch, beside the data it learnt from, its file and the time it took — and a training run's
progress as the lab streams it.

It draws what it is given and starts nothing: `draw_head(record, path, file_bytes, note)`
takes a head file's JSON record (engines/speculative/heads/head_file.py: its "training"
holds the settings, the curve and the data sizes); `begin_run`, `add_point`, `set_progress`
and `end_run` show a run in progress, the curve growing one epoch at a time over the head
drawn before it (grey, dashed). Its signals ask the lab for work.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inferlab.views.fact_table import FactTable
from inferlab.views.style import fixed_plot, pen

KINDS = (("eagle", "EAGLE head", "one decoder layer over the target's last hidden state and "
          "the next token's embedding, predicting the next hidden state"),
         ("medusa", "Medusa heads", "K residual blocks on the last hidden state, head k "
          "predicting the token k after the next"))
HEAD = "#0072B2"
EARLIER = "#9A9A9A"
MAX_EPOCHS = 50


def _points(record: dict | None) -> list[dict]:
    return list(((record or {}).get("training") or {}).get("curve") or [])


def _mb(n_bytes: int | None) -> str:
    return "—" if n_bytes is None else f"{n_bytes / 1e6:,.1f} MB"


def _seconds(s) -> str:
    if s is None:
        return "—"
    return f"{s:,.1f} s" if s < 120 else f"{s:,.0f} s ({s / 60:.1f} min)"


def _times(weight: float) -> str:
    """A loss term's weight as a factor: none where it is 1."""
    return "" if weight == 1 else f"{weight:g}·"


class CurvePlot:
    """One plot of the Training tab: a quantity against epochs, for the head drawn (solid)
    and, during a run, the head drawn before it (dashed)."""

    def __init__(self, title: str, left: str, key: str, empty_range: tuple[float, float],
                 scale: float = 1.0, falling: bool = False):
        """`empty_range`: the y range with no point to draw; `falling`: the quantity falls as
        training goes (the legend at the top right, off the curve; at the bottom right for a
        rising one)."""
        self.key, self.scale, self.left, self.empty_range = key, scale, left, empty_range
        self.widget = pg.PlotWidget()
        self.plot = fixed_plot(self.widget, title, left, "epoch (0: before training)")
        self.legend = self.plot.addLegend(offset=(-10, 10 if falling else -10))
        self.earlier = self.plot.plot([], [], pen=pen(EARLIER, 2, dashed=True), symbol="o",
                                      symbolSize=5, symbolBrush=EARLIER, symbolPen=None,
                                      name="the head before")
        self.head = self.plot.plot([], [], pen=pen(HEAD, 2), symbol="o", symbolSize=7,
                                   symbolBrush=HEAD, symbolPen=None, name="this head")
        self.legend.setVisible(False)

    def xy(self, points: Sequence[dict]) -> tuple[list[int], list[float]]:
        shown = [p for p in points if p.get(self.key) is not None]
        return [p["epoch"] for p in shown], [self.scale * p[self.key] for p in shown]

    def draw(self, points: Sequence[dict], earlier: Sequence[dict], head_name: str) -> None:
        self.head.setData(*self.xy(points))
        self.earlier.setData(*self.xy(earlier))
        if self.xy(points)[0] or self.xy(earlier)[0]:
            self.plot.enableAutoRange(axis="y")
        else:  # nothing drawn: not the last head's range
            self.plot.setYRange(*self.empty_range, padding=0.05)
        self.legend.setVisible(bool(earlier))
        self.legend.items[1][1].setText(head_name)
        last = max([p["epoch"] for p in (*points, *earlier)], default=1)
        self.plot.setXRange(0, max(1, last), padding=0.05)
        ticks = range(0, max(1, last) + 1, max(1, last // 10))
        self.plot.getAxis("bottom").setTicks([[(e, str(e)) for e in ticks]])


class TrainingPanel(QWidget):
    """A head's training record and a training run's progress. Signals: `train_requested(kind,
    epochs)`, `cancel_requested()`, `kind_changed(kind)` (show that kind's head)."""

    train_requested = Signal(str, int)
    cancel_requested = Signal()
    kind_changed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.record: dict | None = None
        self.points: list[dict] = []
        self.earlier: list[dict] = []
        self._build()
        self.draw_head(None)

    # ---- construction ---------------------------------------------------------------------
    def _build(self) -> None:
        self.kind = QComboBox()
        for key, label, tip in KINDS:
            self.kind.addItem(label, key)
            self.kind.setItemData(self.kind.count() - 1, tip, Qt.ToolTipRole)
        self.kind.setToolTip("Which head: the one shown below, and the one Train head trains")
        self.kind.currentIndexChanged.connect(lambda _i: self.kind_changed.emit(self.kind_key()))
        self.epochs = QSpinBox()
        self.epochs.setRange(1, MAX_EPOCHS)
        self.epochs.setValue(4)
        self.epochs.setSuffix(" epochs")
        self.epochs.setToolTip("Passes over the training windows; the held-out acceptance is "
                               "measured after each")
        self.train_button = QPushButton("Train head")
        self.train_button.setToolTip(
            "Train a head of this kind for the lab's model on the CPU, as `inferlab train-head` "
            "does: the model's own answers to the training prompts first (kept in the user "
            "cache, so a second training starts at once), then the epochs. The head is saved "
            "in the user cache, where the lab's drafter finds it")
        self.train_button.clicked.connect(
            lambda: self.train_requested.emit(self.kind_key(), self.epochs.value()))
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the training at its next step; nothing is saved")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumWidth(220)
        self.progress = QLabel("")
        self.progress.setStyleSheet("color: #555")
        self.progress.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Head"))
        row.addWidget(self.kind)
        row.addWidget(self.epochs)
        row.addWidget(self.train_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.progress_bar)
        row.addWidget(self.progress, 1)

        self.status = QLabel()
        self.status.setWordWrap(True)

        self.loss_plot = CurvePlot("Training loss (epoch mean)", "loss per batch",
                                   "train_loss", (0.0, 1.0), falling=True)
        self.tokens_plot = CurvePlot("Held-out: tokens per forward",
                                     "tokens per target forward", "tokens_per_forward",
                                     (1.0, 2.0))
        self.agreement_plot = CurvePlot("Held-out: first-token agreement",
                                        "first draft = target's token (%)",
                                        "first_token_agreement", (0.0, 100.0), 100.0)
        self.plots = (self.loss_plot, self.tokens_plot, self.agreement_plot)
        plots = QHBoxLayout()
        plots.setContentsMargins(0, 0, 0, 0)
        for p in self.plots:
            plots.addWidget(p.widget, 1)

        self.facts = FactTable(("Data, file and time", "Value"))
        self.settings_table = FactTable(("Training setting", "Value"))
        tables = QHBoxLayout()
        tables.setContentsMargins(0, 0, 0, 0)
        tables.addWidget(self.facts, 3)
        tables.addWidget(self.settings_table, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addLayout(plots, 3)
        layout.addLayout(tables, 2)
        self.set_busy(False)

    def kind_key(self) -> str:
        return self.kind.currentData()

    def set_kind(self, kind: str) -> None:
        """Select `kind` without asking for its head (the lab shows it)."""
        self.kind.blockSignals(True)
        self.kind.setCurrentIndex(max(0, self.kind.findData(kind)))
        self.kind.blockSignals(False)

    # ---- the head ---------------------------------------------------------------------------
    def draw_head(self, record: dict | None, path: str | Path = "", file_bytes: int | None = None,
                  note: str = "", earlier: Sequence[dict] = ()) -> None:
        """Show a head file's record (None: no head; `note` says why), its file and size;
        `earlier`: another head's curve points drawn dashed beside it (the head before a run)."""
        self.record, self.path, self.file_bytes = record, str(path), file_bytes
        self.points = _points(record)
        self.earlier = list(earlier)
        self._draw_curves()
        self._draw_tables()
        self.set_status(note)

    def _draw_curves(self) -> None:
        name = "this training" if self.earlier else "this head"
        for p in self.plots:
            p.draw(self.points, self.earlier, name)
        s = self._settings()
        kind = (self.record or {}).get("kind", s.get("kind"))
        loss, k = "", s.get("eval_k")
        if kind == "medusa":
            loss = "Σₖ 0.8ᵏ·CE(head k) / Σₖ 0.8ᵏ "
            if k is not None:  # a chain is as long as the heads
                k = min(k, s.get("n_medusa", k))
        elif kind == "eagle":
            reg, cls = s.get("reg_weight", 1.0), s.get("cls_weight", 0.1)
            loss = f"{_times(reg)}SmoothL1 + {_times(cls)}CE "
        self.loss_plot.plot.setLabel("left", f"{loss}per batch" if loss else self.loss_plot.left)
        chain = "" if k is None else f" (K = {k})"
        self.tokens_plot.plot.setLabel("left", f"{self.tokens_plot.left}{chain}")

    def _settings(self) -> dict:
        return dict(((self.record or {}).get("training") or {}).get("settings") or {})

    def _draw_tables(self) -> None:
        r = self.record or {}
        t = r.get("training") or {}
        last = self.points[-1] if self.points else {}

        def n(key):
            v = t.get(key)
            return "—" if v is None else f"{v:,}"

        def pct(v):
            return "—" if v is None else f"{100 * v:.1f} %"

        vocab = r.get("draft_vocab_size")
        full = r.get("vocab_size")
        features = t.get("features_s")
        cached = " (read from the cache)" if t.get("features_cached") else ""
        threads = t.get("torch_threads")
        self.facts.set_rows([
            ("Head file", Path(self.path).name if self.path else "—", {"tip": self.path}),
            ("File size", _mb(self.file_bytes)),
            ("Training sequences", n("train_sequences"),
             {"tip": "the model's greedy answers to the training prompts, and the shipped "
                     "texts read as they are"}),
            ("Training tokens", n("train_tokens")),
            ("Held-out sequences", n("held_out_sequences"),
             {"tip": "prompts never trained on: the acceptance curve is measured on the "
                     "model's answers to them"}),
            ("Draft vocabulary", "—" if vocab is None else
             f"{vocab:,} of {full:,} tokens" if full else f"{vocab:,} tokens",
             {"tip": "the most frequent target tokens in the training answers: the head "
                     "scores only these (EAGLE-3)"}),
            ("Its coverage: training / held-out tokens",
             f"{pct(t.get('draft_vocab_coverage_train'))} / "
             f"{pct(t.get('draft_vocab_coverage_held_out'))}",
             {"tip": "the share of the greedy tokens that are in the draft vocabulary"}),
            ("Epochs · optimizer steps", "—" if not last else f"{last['epoch']} · {n('steps')}"),
            ("Training time", _seconds(t.get("train_s"))
             + ("" if threads is None else f" on {threads} thread{'s' * (threads != 1)}")),
            ("Features time", _seconds(features) + cached,
             {"tip": "the model's answers and hidden states, computed once per model and "
                     "training data"}),
            ("Held-out after training",
             "—" if not last else f"{last['tokens_per_forward']:.2f} tokens per forward, "
             f"{pct(last['first_token_agreement'])} first-token agreement"),
        ])
        s = self._settings()
        rows = [(name, str(s[key])) for name, key in (
            ("kind", "kind"), ("seed", "seed"), ("learning rate", "lr"),
            ("windows per batch", "batch_windows"), ("tokens per window", "window_tokens"),
            ("feature noise ±", "feature_noise"), ("second-step weight", "step2_weight"),
            ("Medusa heads", "n_medusa"), ("acceptance measured at K", "eval_k"),
            ("longest answer per prompt", "max_new_tokens")) if key in s
            and not (key == "n_medusa" and s.get("kind") != "medusa")
            and not (key in ("feature_noise", "step2_weight") and s.get("kind") == "medusa")]
        self.settings_table.set_rows(rows)

    # ---- a run in progress --------------------------------------------------------------------
    def begin_run(self, settings: dict) -> None:
        """A run with these training settings (train.TrainSettings as a dict) started: its
        curve will grow over the head drawn now (dashed); the tables show its settings, and
        its data once it is saved."""
        self.earlier = self.points
        self.points = []
        self.record = {"kind": settings["kind"], "training": {"settings": dict(settings)}}
        self.path, self.file_bytes = "", None
        self._draw_curves()
        self._draw_tables()
        self.set_busy(True)
        self.set_progress("load", 0, 0, None)
        epochs = settings["epochs"]
        self.set_status(f"Training the {dict((k, lbl) for k, lbl, _ in KINDS)[settings['kind']]} "
                        f"for {epochs} epoch{'s' * (epochs != 1)}…")

    def add_point(self, point: dict) -> None:
        """One curve point of the run (train.CurvePoint as a dict)."""
        self.points.append(point)
        self._draw_curves()

    def set_progress(self, stage: str, done: int, total: int, loss: float | None) -> None:
        """The run's stage ("generate": the model answering the training prompts; "train":
        optimizer steps), how far it is, and the last batch's loss."""
        self.progress_bar.setRange(0, max(total, 1) if total else 0)
        self.progress_bar.setValue(min(done, total) if total else 0)
        what = {"load": "loading the model", "generate": "the model answering the training "
                "prompts"}.get(stage, stage)
        text = f"{what}: {done:,} / {total:,}" if total else f"{what}…"
        if stage == "train":
            text = f"training: step {done:,} / {total:,}"
        if loss is not None:
            text += f", loss {loss:.4f}"
        self.progress.setText(text)

    def end_run(self, message: str, error: bool = False) -> None:
        self.set_busy(False)
        self.progress.setText("")
        self.progress_bar.setRange(0, 1)
        self.progress_bar.setValue(0)
        self.set_status(message, error)

    def set_busy(self, busy: bool, read_only: bool = False) -> None:
        self.train_button.setEnabled(not busy and not read_only)
        self.cancel_button.setEnabled(busy)
        self.kind.setEnabled(not busy)
        self.epochs.setEnabled(not busy)
        self.progress_bar.setVisible(busy)

    def set_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #B71C1C" if error else "color: #555")
        self.status.setText(text)
        self.status.setVisible(bool(text))
