"""The speculative lab's view: its controls, the token stream coloured by each token's fate,
the run's statistics, the acceptance rate by draft position, and tokens per target forward
against the theory curve (1 − α^(K+1)) / (1 − α) for the measured α.

A token-tree step that branched (tree width > 1) ends with a small "tree N" mark; hovering it shows the tree, the
accepted path in bold green, as a small indented drawing.

It draws records (`draw(header, steps)`: a `SpeculativeHeader` and `SpeculativeStep`s); its
signals ask the lab for work. The step slider shows the run up to an earlier step.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTextBrowser,
    QToolTip,
    QVBoxLayout,
)

from inferlab.engines.labs.speculative.metrics import speculative_metrics
from inferlab.engines.labs.speculative.session import SpeculativeHeader
from inferlab.engines.labs.speculative.settings import (
    HEAD_DRAFTERS,
    MAX_K,
    MAX_TOKENS,
    MAX_TREE_WIDTH,
    TREE_DRAFTERS,
    parse_drafter,
    speculative_prompts,
)
from inferlab.engines.model.cache import model_choices
from inferlab.engines.speculative.decoder import SpeculativeStep
from inferlab.engines.speculative.statistics import (
    expected_tokens_per_forward,
    expected_tokens_positional,
)
from inferlab.views.choices import kernel_choice, select_choice
from inferlab.views.fact_table import FactTable
from inferlab.views.speculative_sweep import SweepPanel
from inferlab.views.stepped_controls import SteppedView
from inferlab.views.style import style_plot

FATES = (  # key, colour, legend text, what it means
    ("accepted", "#009E73", "accepted draft", "a draft token the target accepted"),
    ("rejected", "#D55E00", "rejected draft", "a draft the target threw away (not emitted; "
                                              "struck through)"),
    ("resampled", "#E69F00", "resampled", "the target's own token at the first rejection"),
    ("bonus", "#0072B2", "bonus", "the target's token after every draft was accepted (or "
                                  "a step with no draft)"),
)
COLOR = {key: c for key, c, _, _ in FATES}
PROMPT_COLOR = "#8A8A8A"
PROMPT_TOKENS_SHOWN = 120
DRAFTERS = (("ngram", "n-gram lookup", "the longest suffix match in prompt + output; "
             "no model"),
            ("layerskip", "layer-skip", "the target's first N layers + its final "
             "norm and head, sharing its weights; drafts well only from a checkpoint trained "
             "for early exit (LayerSkip's layer dropout and early-exit loss)"),
            ("skip:auto", "skip self-draft (auto)", "the target with a set of intermediate "
             "layers left out, no training (Draft & Verify, SWIFT): the set is searched on "
             "the shipped calibration text once per model, then kept in the user cache (the "
             "first search runs the model hundreds of times: about 10 CPU-minutes for Gemma 3 "
             "270M's 18 layers on this project's 2-core machines)"),
            ("quant:int8", "quantized self-draft (INT8)", "the target itself with INT8 "
             "weights on the low-bit kernels: nearly the target's tokens, fewer bytes"),
            ("quant:int4", "quantized self-draft (INT4)", "the target itself with INT4 "
             "weights in groups of 128: cheaper still, accepted less often"),
            ("tiny", "tiny model", "a smaller model with the same tokenizer: the seeded tiny "
             "model (1 layer); only for the tiny and tiny-moe targets (their byte vocabulary: "
             "SmolLM2 and Gemma 3 refuse it)"),
            ("eagle", "EAGLE head", "one decoder layer over the target's last hidden state "
             "and the next token, trained from the target's own outputs (inferlab "
             "train-head; SmolLM2's ships): drafts a chain, or with tree width W > 1 a "
             "dynamic tree (EAGLE-2: the most confident nodes), scored by the target's head "
             "over its 8,192 most frequent tokens"),
            ("medusa", "Medusa heads", "K residual blocks on the target's last hidden state, "
             "head k guessing the token k ahead, all in one call (inferlab train-head --kind "
             "medusa; none ships)"))


def _model_items() -> list[tuple[str, str]]:
    short = {"tiny": "tiny (random, fast)"}
    return [(spec, short.get(spec, label)) for spec, label in model_choices() if spec != "auto"]


def token_html(text: str, token_id: int) -> str:
    """One token's text made visible: newlines as ↵, control bytes and lone bytes by id."""
    if text == "" or "\ufffd" in text or any(ord(c) < 32 and c not in "\n\t" for c in text):
        return f"<small>⟨{token_id}⟩</small>"
    return html.escape(text).replace("\n", "↵\n").replace("\t", "⇥")


class SpeculativeView(SteppedView):
    """Everything the speculative lab shows. Signals ask the lab for work; `draw` shows
    records."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.header: SpeculativeHeader | None = None
        self.steps: Sequence[SpeculativeStep] = ()
        self.metrics: dict = {}
        self.prompts = speculative_prompts()
        self._build()

    # ---- construction ---------------------------------------------------------------------
    def _spin(self, cls, low, high, tip: str, suffix: str = "", decimals: int | None = None):
        spin = cls()
        spin.setRange(low, high)
        if decimals is not None:
            spin.setDecimals(decimals)
            spin.setSingleStep(0.1)
        if suffix:
            spin.setSuffix(suffix)
        spin.setToolTip(tip)
        spin.editingFinished.connect(self._emit)
        spin.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        return spin

    def _build(self) -> None:
        self.model = QComboBox()
        for spec, label in _model_items():
            self.model.addItem(label, spec)
        self.model.setToolTip("The target model: its outputs are what speculative decoding "
                              "must reproduce exactly")
        self.drafter = QComboBox()
        for key, label, tip in DRAFTERS:
            self.drafter.addItem(label, key)
            self.drafter.setItemData(self.drafter.count() - 1, tip, Qt.ToolTipRole)
        self.drafter.setToolTip("Who proposes the K draft tokens")
        self.layers = self._spin(QSpinBox, 1, 63, "Layer-skip: the target's first N layers "
                                 "draft")
        self.layers.setSuffix(" layers")
        self.layers.setMinimumWidth(90)
        self.k = self._spin(QSpinBox, 1, MAX_K, "K: draft tokens per step; the target "
                            "verifies K + 1 positions in one forward")
        self.tree_width = self._spin(QSpinBox, 1, MAX_TREE_WIDTH, "Tree width W: up to W "
                                     "candidates a step (the n-gram matches, or the EAGLE "
                                     "head's most confident paths, at most K·W nodes), merged "
                                     "by shared prefixes into one token tree and verified in "
                                     "the same one forward (1: a chain of K drafts; n-gram "
                                     "and EAGLE drafters only)")
        self.temperature = self._spin(QDoubleSpinBox, 0.0, 10.0, "0: greedy (accept while the "
                                      "target's argmax agrees); above 0: exact rejection "
                                      "sampling", decimals=2)
        self.top_p = self._spin(QDoubleSpinBox, 0.01, 1.0, "Nucleus sampling, applied to p and "
                                "q alike (ignored when greedy)", decimals=2)
        self.max_tokens = self._spin(QSpinBox, 1, MAX_TOKENS, "Tokens to generate at most",
                                     suffix=" tok")
        self.max_tokens.setMinimumWidth(80)
        self.kernels = kernel_choice()
        self.kernels.currentIndexChanged.connect(self._emit)
        for combo in (self.model, self.drafter):
            combo.currentIndexChanged.connect(self._emit)
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(14)
        self.drafter.currentIndexChanged.connect(self._drafter_changed)
        self.build_controls("step", "Decode the prompt again from the start (Ctrl+R)",
                            "One draft-verify step: draft K, one target forward (N)",
                            "Run to the end of the output, or pause (Space)",
                            "Show the run up to an earlier step (drag); the latest at the right "
                            "end", 150)
        row = self.control_row((("Model", self.model, 2), ("Drafter", self.drafter, 2),
                                ("", self.layers, 0), ("K", self.k, 0),
                                ("Tree width", self.tree_width, 0),
                                ("Kernels", self.kernels, 0)))

        self.prompt_choice = QComboBox()
        for p in self.prompts:
            self.prompt_choice.addItem(f"{p.group} · {p.kind}: {p.title}", p.text)
        self.prompt_choice.addItem("your own prompt (edit the text)", None)
        self.prompt_choice.setToolTip(
            "Shipped prompts in two groups. Grounded (summarise, edit code, fix spelling, "
            "quote a passage): the answer copies from the prompt, where prompt lookup pays. "
            "Open (chat): little to copy, the control")
        self.prompt_choice.currentIndexChanged.connect(self._prompt_chosen)
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setToolTip("The prompt; Use prompt decodes it")
        margin = self.prompt_edit.document().documentMargin()
        self.prompt_edit.setFixedHeight(int(5 * self.prompt_edit.fontMetrics().lineSpacing() + 2 * margin
                                            + 2 * self.prompt_edit.frameWidth()) + 2)
        self.use_prompt = QPushButton("Use prompt")
        self.use_prompt.setToolTip("Decode the text on the left")
        self.use_prompt.clicked.connect(self._emit)
        self.raw = QCheckBox("raw (no chat template)")
        self.raw.setToolTip("Encode the prompt as it is, as `inferlab generate --raw` does")
        self.raw.toggled.connect(self._emit)
        prompt_side = QVBoxLayout()
        prompt_side.setContentsMargins(0, 0, 0, 0)
        prompt_side.addWidget(self.prompt_choice)
        sampling = QHBoxLayout()
        for label, widget in (("Temperature", self.temperature), ("top-p", self.top_p),
                              ("Max", self.max_tokens)):
            sampling.addWidget(QLabel(label))
            sampling.addWidget(widget)
        prompt_side.addLayout(sampling)
        buttons = QHBoxLayout()
        buttons.addWidget(self.raw)
        buttons.addStretch(1)
        buttons.addWidget(self.use_prompt)
        prompt_side.addLayout(buttons)
        prompt_row = QHBoxLayout()
        prompt_row.setContentsMargins(0, 0, 0, 0)
        prompt_row.addWidget(QLabel("Prompt"))
        prompt_row.addLayout(prompt_side)
        prompt_row.addWidget(self.prompt_edit, 1)

        legend = QHBoxLayout()
        legend.setContentsMargins(0, 0, 0, 0)
        legend.addWidget(QLabel("Tokens:"))
        self.legend_labels = []
        for text, colour, tip in ((("prompt", PROMPT_COLOR, "the prompt (its last "
                                    f"{PROMPT_TOKENS_SHOWN} tokens)"),)
                                  + tuple((name, c, t) for _, c, name, t in FATES)):
            strike = "text-decoration: line-through;" if text == "rejected draft" else ""
            label = QLabel(f"<span style='color:{colour}; font-size: 14pt'>■</span> "
                           f"<span style='{strike}'>{text}</span>")
            label.setToolTip(tip)
            legend.addWidget(label)
            self.legend_labels.append(label)
        legend.addWidget(QLabel("<span style='color:#999'>|</span> one step"))
        self.hover = QLabel("Hover a token for its p (target) and q (draft).")
        self.hover.setStyleSheet("color: #555")
        self.hover.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.hover.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        legend.addWidget(self.hover, 1)

        self.stream = QTextBrowser()
        self.stream.setOpenLinks(False)
        self.stream.setOpenExternalLinks(False)
        self.stream.document().setDefaultStyleSheet("a { text-decoration: none; }")
        self.stream.highlighted.connect(self._hovered)
        self.stream.anchorClicked.connect(self._hovered)
        self.stream.setMinimumHeight(120)
        self._follow_end = False  # the stream shows its end as its layout grows, until the
        # user scrolls it (the document lays out lazily, after the step is drawn)
        bar = self.stream.verticalScrollBar()
        bar.rangeChanged.connect(self._stream_laid_out)
        bar.actionTriggered.connect(self._stream_scrolled)
        bar.sliderPressed.connect(self._stream_scrolled)
        self.stats = FactTable(("Statistic", "Value"))
        self.stats.setFixedWidth(360)

        self.position_plot = pg.PlotWidget()
        p = self.position_plot.getPlotItem()
        style_plot(p)
        p.setTitle("Acceptance by draft position")
        p.setLabel("bottom", "draft position i (1 = a step's first)")
        p.setLabel("left", "steps accepting draft i (%)")
        p.setYRange(0, 100, padding=0.02)
        p.setMouseEnabled(x=False, y=False)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush=COLOR["accepted"],
                                    pen=pg.mkPen(None))
        p.addItem(self.bars)

        self.theory_plot = pg.PlotWidget()
        t = self.theory_plot.getPlotItem()
        style_plot(t)
        t.setTitle("Tokens per forward against the theory")
        t.setLabel("bottom", "α (per-draft acceptance probability)")
        t.setLabel("left", "tokens per target forward")
        t.setXRange(0, 1, padding=0.02)
        t.setMouseEnabled(x=False, y=False)
        self.theory_legend = t.addLegend(offset=(10, 10))
        self.theory_curve = t.plot([], [], pen=pg.mkPen("#555555", width=2), name="theory")
        self.measured_point = t.plot([], [], pen=None, symbol="o", symbolSize=11,
                                     symbolBrush="#D55E00", symbolPen=None,
                                     name="measured: forwards that drafted")
        self.all_point = t.plot([], [], pen=None, symbol="s", symbolSize=9,
                                symbolBrush="#0072B2", symbolPen=None,
                                name="measured: every forward")
        self.head_line = t.plot([], [], pen=pg.mkPen("#009E73", width=2, style=Qt.DashLine))
        self.theory_note = QLabel()
        self.theory_note.setWordWrap(True)
        self.theory_note.setStyleSheet("color: #555")

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.stream, 1)
        top.addWidget(self.stats)
        plots = QHBoxLayout()
        plots.setContentsMargins(0, 0, 0, 0)
        self.sweep_panel = SweepPanel()
        plots.addWidget(self.position_plot, 2)
        plots.addWidget(self.theory_plot, 3)
        plots.addWidget(self.sweep_panel, 3)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(prompt_row)
        layout.addWidget(self.status)
        layout.addLayout(legend)
        layout.addLayout(top, 3)
        layout.addLayout(self.slider_row)
        layout.addLayout(plots, 3)
        layout.addWidget(self.theory_note)
        self._drafter_changed()
        self.show_stats({})

    # ---- settings --------------------------------------------------------------------------
    def _drafter_changed(self, *_args) -> None:
        self.layers.setEnabled(self.drafter.currentData() == "layerskip" and not self.read_only)
        self.tree_width.setEnabled(self.drafter.currentData() in TREE_DRAFTERS
                                   and not self.read_only)

    def _prompt_chosen(self, *_args) -> None:
        text = self.prompt_choice.currentData()
        if text is None or self._quiet:
            return
        self._quiet = True
        self.prompt_edit.setPlainText(text)
        self._quiet = False
        self._emit()

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        index = self.model.findData(s.get("model"))
        if index >= 0:
            self.model.setCurrentIndex(index)
        try:
            kind, n = parse_drafter(s.get("drafter", "ngram"))
        except ValueError:
            kind, n = "ngram", None
        data = kind if kind in ("ngram", "layerskip", "tiny", *HEAD_DRAFTERS) else s.get("drafter")
        if kind == "skip" and self.drafter.findData(data) < 0:  # a set named by hand
            self.drafter.addItem(f"skip self-draft ({data[len('skip:'):]})", data)
        self.drafter.setCurrentIndex(max(self.drafter.findData(data), 0))
        if kind == "layerskip":
            self.layers.setValue(n)
        self.k.setValue(int(s.get("k", 4)))
        self.tree_width.setValue(int(s.get("tree_width", 1)))
        self.temperature.setValue(float(s.get("temperature", 0.0)))
        self.top_p.setValue(float(s.get("top_p", 1.0)))
        self.max_tokens.setValue(int(s.get("max_tokens", 64)))
        self.raw.setChecked(bool(s.get("raw", False)))
        select_choice(self.kernels, s.get("kernels", "auto"))
        prompt = s.get("prompt", "")
        index = self.prompt_choice.findData(prompt)
        self.prompt_choice.setCurrentIndex(index if index >= 0
                                           else self.prompt_choice.count() - 1)
        self.prompt_edit.setPlainText(prompt)
        self._drafter_changed()
        self._quiet = False

    def settings(self) -> dict:
        kind = self.drafter.currentData()
        drafter = f"layerskip:{self.layers.value()}" if kind == "layerskip" else kind
        width = self.tree_width.value() if kind in TREE_DRAFTERS else 1
        return {"model": self.model.currentData(), "drafter": drafter, "k": self.k.value(),
                "tree_width": width,
                "temperature": round(self.temperature.value(), 4),
                "top_p": round(self.top_p.value(), 4), "max_tokens": self.max_tokens.value(),
                "raw": self.raw.isChecked(), "prompt": self.prompt_edit.toPlainText(),
                "kernels": self.kernels.currentData()}

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def set_read_only(self, read_only: bool) -> None:
        super().set_read_only(read_only)
        for w in (self.model, self.drafter, self.k, self.tree_width, self.temperature,
                  self.top_p, self.kernels, self.max_tokens, self.prompt_choice,
                  self.use_prompt, self.raw):
            w.setEnabled(not read_only)
        self.prompt_edit.setReadOnly(read_only)
        self.sweep_panel.set_busy(False, read_only)
        self._drafter_changed()

    # ---- drawing -----------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.header, self.steps = None, ()
        self.stream.setHtml(f"<p style='color:#555'>{html.escape(message)}</p>")
        self.clear_steps()
        self.show_stats({})
        self.bars.setOpts(x=[], height=[])
        for item in (self.theory_curve, self.measured_point, self.all_point, self.head_line):
            item.setData([], [])
        self.theory_note.setText("")

    def draw(self, header: SpeculativeHeader | None, steps: Sequence[SpeculativeStep],
             index: int | None = None) -> None:
        """Show a run: its header and the steps so far, up to step `index` (default: the
        latest, or where the slider was)."""
        if header is None:
            self.clear("")
            return
        self.header, self.steps = header, steps
        index = self.follow(len(steps), index)
        if header.n_layers > 1:
            self.layers.setMaximum(header.n_layers - 1)
        self.show_step(index)

    def _stream_laid_out(self, _low: int, _high: int) -> None:
        if self._follow_end:  # once the text edit has placed its own scroll too
            QTimer.singleShot(0, self, self._to_end)  # dropped with the view

    def _to_end(self) -> None:
        if self._follow_end:
            bar = self.stream.verticalScrollBar()
            bar.setValue(bar.maximum())

    def _stream_scrolled(self, *_args) -> None:
        self._follow_end = False

    def show_step(self, index: int) -> None:
        header = self.header
        steps = list(self.steps[:index + 1]) if self.steps else []
        self.stream.setHtml(self.stream_html(header, steps))
        bar = self.stream.verticalScrollBar()
        bar.setValue(bar.maximum())
        self._follow_end = True
        m = self.metrics = speculative_metrics(steps, header.k)
        self.show_stats(m)
        self._show_plots(m, header.k)
        if steps:
            s = steps[-1]
            self.step_label.setText(f"step {s.index} / {self.steps[-1].index}: "
                                    f"{len(s.token_ids)} token(s), {s.n_accepted} of "
                                    f"{len(s.drafted)} drafts"
                                    + (f", a tree of {len(s.tree_tokens)} nodes"
                                       if len(s.tree_tokens) > len(s.drafted) else ""))
        else:
            self.step_label.setText("step —")

    def stream_html(self, header: SpeculativeHeader, steps) -> str:
        prompt = header.prompt_token_ids
        cut = len(prompt) > PROMPT_TOKENS_SHOWN
        parts = ["…" if cut else ""]
        parts += [token_html(header.text(t), t) for t in prompt[-PROMPT_TOKENS_SHOWN:]]
        out = [f"<span style='color:{PROMPT_COLOR}'>{''.join(parts)}</span>"]
        for s in steps:
            out.append("<span style='color:#BBBBBB'>|</span>")
            n = s.n_accepted
            pieces = []
            for j, (t, fate) in enumerate(zip(s.token_ids, s.fates, strict=True)):
                if j == n and n < len(s.drafted):  # the rejected drafts before the target's
                    pieces += [self._token(header, d, "rejected", s.index, n + r)
                               for r, d in enumerate(s.drafted[n:])]
                pieces.append(self._token(header, t, fate.value, s.index, j))
            if len(s.token_ids) <= n and n < len(s.drafted):  # cut before its last token
                pieces += [self._token(header, d, "rejected", s.index, n + r)
                           for r, d in enumerate(s.drafted[n:])]
            if len(s.tree_tokens) > len(s.drafted):  # it branched: hover the mark
                pieces.append(f"<a href='tree:{s.index}' style='color:#777777'><sup>"
                              f"tree {len(s.tree_tokens)}</sup></a>")
            out.append("".join(pieces))
        return ("<div style='white-space: pre-wrap; font-family: monospace; "
                f"font-size: 11pt'>{''.join(out)}</div>")

    def _token(self, header, token_id: int, kind: str, step: int, j: int) -> str:
        strike = "text-decoration: line-through;" if kind == "rejected" else ""
        return (f"<a href='tok:{step}:{j}:{kind}' style='color:{COLOR[kind]}; {strike}'>"
                f"{token_html(header.text(token_id), token_id)}</a>")

    def tree_html(self, s: SpeculativeStep) -> str:
        """A tree step drawn as indented text: one line per node, the accepted path in bold
        green, then the token the target added."""
        tree, h = s.tree, self.header
        on_path = set(s.tree_path)
        n_cand = sum(1 for i in range(len(tree)) if not tree.children(i))
        lines = [f"<b>step {s.index}: a token tree of {len(tree)} nodes from {n_cand} "
                 f"candidate(s)</b>, {s.n_accepted} accepted", "root (the last token)"]

        def walk(node: int, prefix: str) -> None:
            kids = tree.children(node)
            for j, child in enumerate(kids):
                last = j == len(kids) - 1
                text = f"“{token_html(h.text(tree.tokens[child]), tree.tokens[child])}”"
                if child in on_path:
                    text = f"<b style='color:{COLOR['accepted']}'>✓ {text}</b>"
                else:
                    text = f"<span style='color:#888888'>· {text}</span>"
                lines.append(f"{prefix}{'└─' if last else '├─'} {text}")
                walk(child, prefix + ("   " if last else "│  "))

        walk(-1, "")
        if len(s.token_ids) > s.n_accepted:
            t, fate = s.token_ids[s.n_accepted], s.fates[s.n_accepted]
            lines.append(f"then “{token_html(h.text(t), t)}” from the target "
                         f"(<span style='color:{COLOR[fate.value]}'>{fate.value}</span>)")
        return ("<pre style='font-family: monospace; margin: 0'>" + "\n".join(lines)
                + "</pre>")

    def describe(self, url: str) -> str:
        """The hover text of a token link `tok:<step>:<position>:<kind>`, or of a tree step's
        mark `tree:<step>` (its tree, as `tree_html`)."""
        if url.startswith("tree:"):
            try:
                s = self.steps[int(url[5:])]
            except (ValueError, IndexError):
                return ""
            return self.tree_html(s) if s.tree_tokens else ""
        try:
            _, step, j, kind = url.split(":")
            s = self.steps[int(step)]
            j = int(j)
        except (ValueError, IndexError):
            return ""
        h = self.header
        if kind == "rejected":
            t = s.drafted[j]
            tested = "rejected by the target" if j == s.n_accepted else \
                "never tested (after the first rejection)"
            return (f"step {s.index}, draft {j + 1}: {h.text(t)!r} (id {t}), {tested}; "
                    "not emitted")
        t, p, q = s.token_ids[j], s.p[j], s.q[j]
        name = {"accepted": f"accepted draft {j + 1}", "resampled": "resampled by the target",
                "bonus": "bonus token from the target"}[kind]
        text = f"step {s.index}, {name}: {h.text(t)!r} (id {t}) · p = {p:.3f}"
        if q is not None:
            text += f" · q = {q:.3f}"
            if q > 0:
                text += f" · min(1, p/q) = {min(1.0, p / q):.3f}"
        return text

    def _hovered(self, url: QUrl) -> None:
        text = self.describe(url.toString()) if url.toString() else ""
        line = text
        if text.startswith("<pre"):  # a tree: its first line beside the legend
            line = html.unescape(text.split("\n", 1)[0].split("</b>", 1)[0].split("<b>")[-1])
        self.hover.setText(line or "Hover a token for its p (target) and q (draft).")
        if text:
            QToolTip.showText(QCursor.pos(), text, self.stream)

    def show_stats(self, m: dict) -> None:
        def f(key, fmt="{:.3f}"):
            v = m.get(key)
            return "—" if v is None else fmt.format(v)

        k = self.header.k if self.header is not None else None
        rows = [
            ("Target forwards", f("target_forwards", "{:,}"), {"tip": "one per step"}),
            ("Tokens emitted", f("tokens", "{:,}")),
            ("Acceptance rate", f("acceptance_rate", "{:.1%}"),
             {"tip": "accepted drafts ÷ drafted tokens (vLLM's definition)"}),
            ("α (accepted ÷ drafts tested)", f("alpha"),
             {"tip": "a step stops testing at its first rejection: the geometric model's "
                     "per-draft acceptance"}),
            ("Mean acceptance length", f("mean_acceptance_length", "{:.2f}"),
             {"tip": "1 + accepted ÷ steps that drafted (vLLM)"}),
            ("Tokens per target forward", f("tokens_per_target_forward", "{:.2f}"),
             {"tip": "emitted tokens ÷ target forwards (steps with no draft count too)"}),
            (f"Theory (1 − α^(K+1))/(1 − α){'' if k is None else f', K = {k}'}",
             f("theory_tokens_per_forward", "{:.2f}")),
            ("Theory over the drafts made", f("theory_drafted_tokens_per_forward", "{:.2f}"),
             {"tip": "the mean of (1 − α^(kᵢ+1))/(1 − α) over the steps, kᵢ each step's own "
                     "draft length (a step with no draft emits one): against tokens per "
                     "target forward"}),
            ("Draft time (ms)", "—" if "draft_s" not in m else f"{1e3 * m['draft_s']:,.1f}"),
            ("Target forward time (ms)", "—" if "target_forward_s" not in m
             else f"{1e3 * m['target_forward_s']:,.1f}"),
        ]
        self.stats.set_rows(rows)

    def _head_expectation(self, k: int) -> float | None:
        """E(K) from a trained head's held-out per-position acceptance (a chain of K drafts;
        None for other drafters, trees, or a head measured at fewer than K positions)."""
        h = self.header
        if h is None or h.tree_width > 1 or len(h.head_accept_by_position) < k:
            return None
        return expected_tokens_positional(list(h.head_accept_by_position[:k]))

    def _show_plots(self, m: dict, k: int) -> None:
        rates = m.get("acceptance_rate_by_position") or []
        self.bars.setOpts(x=np.arange(1, len(rates) + 1), height=100 * np.asarray(rates),
                          width=0.6)
        n = max(k, len(rates))
        plot = self.position_plot.getPlotItem()
        plot.setXRange(0.4, n + 0.6, padding=0)
        every = max(1, n // 16)
        plot.getAxis("bottom").setTicks([[(i, str(i)) for i in range(1, n + 1, every)]])
        alphas = np.linspace(0.0, 1.0, 101)
        theory = np.array([expected_tokens_per_forward(float(a), k) for a in alphas])
        self.theory_curve.setData(alphas, theory)
        self.theory_legend.items[0][1].setText(f"theory (1 − α^(K+1)) / (1 − α), K = {k}")
        self.theory_plot.getPlotItem().setYRange(1, k + 1, padding=0.05)
        head_e = self._head_expectation(k)
        self.theory_legend.removeItem(self.head_line)  # in the legend only when drawn
        if head_e is None:
            self.head_line.setData([], [])
        else:
            self.head_line.setData([0.0, 1.0], [head_e, head_e])
            self.theory_legend.addItem(self.head_line, f"the head's held-out acceptance: "
                                                       f"E = {head_e:.2f}")
        if not m.get("target_forwards"):
            self.measured_point.setData([], [])
            self.all_point.setData([], [])
            self.theory_note.setText("")
            return
        a = m["alpha"]
        drafting = m["tokens_per_drafting_forward"]
        if drafting:
            self.measured_point.setData([a], [drafting])
        else:
            self.measured_point.setData([], [])
        self.all_point.setData([a], [m["tokens_per_target_forward"]])
        gap = (f"{drafting / m['theory_tokens_per_forward'] - 1:+.0%} from the theory"
               if drafting else "no step drafted yet")
        drafter = self.header.drafter if self.header is not None else ""
        why = ("no n-gram match, or the last token" if drafter.startswith("ngram")
               else "the last token, or K = 0 chosen")
        self.theory_note.setText(
            f"Measured α = {a:.3f} (K = {k}): the theory predicts "
            f"<b>{m['theory_tokens_per_forward']:.2f}</b> tokens per forward; the forwards "
            f"that drafted emitted <b>{drafting:.2f}</b> ({gap}), every forward "
            f"<b>{m['tokens_per_target_forward']:.2f}</b> (a forward with no draft — {why} — "
            "emits one); over the drafts the steps made, the theory "
            f"predicts <b>{m.get('theory_drafted_tokens_per_forward', 0.0):.2f}</b>."
            + ("" if head_e is None else
               " The head's own per-position acceptance on its held-out answers predicts "
               f"<b>{head_e:.2f}</b> (dashed: 1 + a₁ + a₁a₂ + …)."))
