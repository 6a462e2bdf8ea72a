"""The KV lab's view: controls, the paged pool grid, the sequences and their block tables, the
contiguous address line and the memory/waste curves. It draws records; it starts no work.

A model with sliding-window layers keeps one block table per layer group: the grid is the
first group's pool, a line under it gives each group's blocks and the bytes held against
keeping every token, and the selected sequence's table has a column per group ("—" where
the window dropped the block).

The view keeps the records it was given so the step slider can show any earlier step, and a
selected sequence stays selected across steps.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from inferlab.engines.labs.kv.records import KVRunInfo, KVStepRecord, SeqInfo
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.choices import kernel_choice, select_choice
from inferlab.views.kv_contiguous import ContiguousLine, KVCurves
from inferlab.views.kv_grid import (
    CACHED_CODE,
    FREE_CODE,
    SHARED_CODE,
    KVGridPlot,
    lut_hex,
    seq_color_hex,
)
from inferlab.views.radix_tree import LEGEND as TREE_LEGEND
from inferlab.views.radix_tree import RadixTreePlot
from inferlab.views.stepped_controls import SteppedView
from inferlab.views.trace_form import TraceForm

SEQ_COLUMNS = ("seq", "paged", "contig.", "tokens", "cached", "output so far", "prompt")


def _swatch(colors: Sequence[str]) -> QWidget:
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(1)
    for color in colors:
        cell = QLabel()
        cell.setFixedSize(11, 11)
        cell.setStyleSheet(f"background: {color}; border: 1px solid #8A8A8A;")
        row.addWidget(cell)
    return box


LEGEND = (
    ([seq_color_hex(i) for i in range(4)], "one colour per sequence"),
    ([seq_color_hex(i, True) for i in range(4)], "its block is partly empty"),
    ([lut_hex(SHARED_CODE)], "shared (ref > 1)"),
    ([lut_hex(CACHED_CODE)], "cached-free (prefix kept)"),
    ([lut_hex(FREE_CODE)], "free"),
)


def legend_widget() -> QWidget:
    """What the grid's colours mean: bordered swatches (a free cell is nearly white)."""
    box = QWidget()
    grid = QGridLayout(box)
    grid.setContentsMargins(0, 0, 0, 0)
    grid.setHorizontalSpacing(4)
    grid.setVerticalSpacing(1)
    for i, (colors, text) in enumerate(LEGEND):
        r, c = divmod(i, 3)
        grid.addWidget(_swatch(colors), r, 2 * c)
        grid.addWidget(QLabel(text), r, 2 * c + 1)
    grid.setColumnStretch(5, 1)
    return box


def _swatch_legend(items: Sequence[tuple[str, str]]) -> QWidget:
    """One row of (text, colour) swatches (the prefix tree's legend)."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(4)
    for text, color in items:
        row.addWidget(_swatch([color]))
        row.addWidget(QLabel(text))
        row.addSpacing(6)
    row.addStretch(1)
    return box


PREFIX_ITEMS = (("hash:lru", "block hashes"), ("radix:lru", "radix tree, LRU"),
                ("radix:lfu", "radix tree, LFU"), ("radix:fifo", "radix tree, FIFO"),
                ("none:lru", "off"))
"""The prefix combo's items: "cache:eviction order" (the block hashes always free LRU)."""


def prefix_settings(key: str) -> dict:
    """A PREFIX_ITEMS key as the lab's two settings."""
    cache, _, order = key.partition(":")
    return {"prefix_cache": cache, "eviction_policy": order}


class KVView(SteppedView):
    """Everything the KV lab shows. Signals ask the lab for work; `draw` shows records.
    `trace_requested(trace or None)`: the user chose a published trace (or cleared it) in the
    line under the controls; the lab reads it and shows what it runs with `show_trace`."""

    trace_requested = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._quiet = False
        self.info: KVRunInfo | None = None
        self.seq_infos: dict[str, SeqInfo] = {}
        self.records: list[KVStepRecord] = []
        self.selected: str | None = None
        self._build_controls()
        self._build_body()

    # ---- construction ---------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.scenario = QComboBox()
        self.scenario.setToolTip("The request stream to run (one click: it resets the run)")
        self.model = QComboBox()
        self.model.setToolTip("The model that generates the tokens (loaded once, kept)")
        self.block_size = QSpinBox()
        self.block_size.setRange(1, 1024)
        self.block_size.setSuffix(" tok")
        self.block_size.setToolTip("Tokens per KV block (vLLM's default is 16)")
        self.kv_dtype = QComboBox()
        for key, label in (("model", "as model"), ("int8", "INT8"), ("fp8-e4m3", "FP8 E4M3")):
            self.kv_dtype.addItem(label, key)
        self.kv_dtype.setToolTip("What the pool stores: the model's dtype, or INT8 / FP8 codes "
                                 "with one fp32 scale per token and head (vLLM's fp8 KV): "
                                 "fewer bytes per block, attention dequantizes on read")
        self.kernels = kernel_choice()
        self.prefix_cache = QComboBox()  # the prefix cache and, for the tree, its eviction
        for key, label in PREFIX_ITEMS:  # order: one combo, so that the row fits 1,200 px
            self.prefix_cache.addItem(label, key)
        self.prefix_cache.setToolTip(
            "How cached prefixes are found: vLLM's chained block hashes (whole blocks; the "
            "least recently used freed first), SGLang's radix tree over token ids (any "
            "length: a hit ending inside a block copies that block), evicting its least "
            "recently used, least hit or oldest unlocked leaf first; or no prefix caching")
        for combo in (self.prefix_cache, self.kv_dtype, self.kernels):  # one row that fits
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(4)                 # a 1200-pixel window
        self.n_blocks = QSpinBox()
        self.n_blocks.setRange(0, 1_000_000)
        self.n_blocks.setSpecialValueText("auto")
        self.n_blocks.setSuffix(" blocks")
        self.n_blocks.setToolTip("Blocks in the pool; auto sizes it from the scenario's "
                                 "requests. The contiguous allocator gets the same memory.")
        self.build_controls("step", "Start the scenario again from step 0 (Ctrl+R)",
                            "Run one engine step: one model forward (N)",
                            "Step until the scenario ends, or pause (Space)",
                            "Show an earlier step (drag), the latest at the right end", 90)
        self.kv_dtype.currentIndexChanged.connect(self._emit)
        self.kernels.currentIndexChanged.connect(self._emit)
        self.prefix_cache.currentIndexChanged.connect(self._emit)
        for combo in (self.scenario, self.model):
            combo.currentIndexChanged.connect(self._emit)
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(10)
        for spin in (self.block_size, self.n_blocks):
            spin.editingFinished.connect(self._emit)

        for w in (self.block_size, self.n_blocks):
            w.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
            w.setMinimumWidth(40)
        self.controls = self.control_row((("Scenario", self.scenario, 3),
                                          ("Model", self.model, 2),
                                          ("Block", self.block_size, 0),
                                          ("Pool", self.n_blocks, 0), ("KV", self.kv_dtype, 0),
                                          ("Prefix", self.prefix_cache, 0),
                                          ("Kernels", self.kernels, 0)))

        self.trace_form = TraceForm(lab_fields=True, none_text="none: the scenario", parent=self)
        self.trace_form.changed.connect(
            lambda: self.trace_requested.emit(self.trace_form.trace()))
        self.trace_line = self.trace_form.line()

        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setStyleSheet("color: #333")
        self.stats_line = QLabel()
        self.stats_line.setWordWrap(True)
        self.stats_line.setTextFormat(Qt.RichText)

    def _build_body(self) -> None:
        # the paged pool
        self.grid_title = QLabel("Paged KV pool")
        self.grid_title.setTextFormat(Qt.RichText)
        self.grid_title.setWordWrap(True)
        self.grid = KVGridPlot()
        self.grid.setMinimumHeight(160)
        self.legend = legend_widget()
        self.hover = QLabel(" ")
        self.hover.setStyleSheet("color: #444")
        self.hover.setWordWrap(True)
        self.grid.hovered.connect(lambda t: self.hover.setText(t or " "))
        self.grid.block_clicked.connect(self._on_block_clicked)
        pool_box = QWidget()
        pool_col = QVBoxLayout(pool_box)
        pool_col.setContentsMargins(0, 0, 0, 0)
        pool_col.setSpacing(2)
        self.groups_line = QLabel()
        self.groups_line.setTextFormat(Qt.RichText)
        self.groups_line.setWordWrap(True)
        self.groups_line.setToolTip(
            "A model with sliding-window layers keeps one block table per layer group, as "
            "vLLM's hybrid KV cache manager does: the full-attention layers hold every token, "
            "a window's layers only the blocks a query can still read (the ones behind the "
            "window go back to the pool). Closed form: every layer holds min(tokens, window).")
        self.groups_line.hide()
        pool_col.addWidget(self.grid_title)
        pool_col.addWidget(self.grid, 1)
        pool_col.addWidget(self.groups_line)
        pool_col.addWidget(self.legend)
        pool_col.addWidget(self.hover)

        # sequences and the selected one's block table
        self.seq_table = QTableWidget(0, len(SEQ_COLUMNS))
        self.seq_table.setHorizontalHeaderLabels(list(SEQ_COLUMNS))
        self.seq_table.verticalHeader().setVisible(False)
        self.seq_table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.seq_table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.seq_table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.seq_table.setWordWrap(False)
        header = self.seq_table.horizontalHeader()
        for c in range(len(SEQ_COLUMNS) - 2):
            header.setSectionResizeMode(c, QHeaderView.ResizeToContents)
        header.setSectionResizeMode(len(SEQ_COLUMNS) - 2, QHeaderView.Interactive)
        header.resizeSection(len(SEQ_COLUMNS) - 2, 220)
        header.setStretchLastSection(True)
        self.seq_table.itemSelectionChanged.connect(self._on_table_selection)
        self.seq_table.setToolTip("Click a sequence to highlight its blocks and regions")
        self.detail = QLabel("Select a sequence to see its block table and text.")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.RichText)
        self.detail.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.detail.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.block_table = QTableWidget(0, 4)
        self.block_table.setHorizontalHeaderLabels(["logical", "physical", "fill", "ref"])
        self.block_table.verticalHeader().setVisible(False)
        self.block_table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.block_table.setMaximumWidth(240)
        self.block_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.block_table.horizontalHeader().setStretchLastSection(True)
        self.block_table.setToolTip("The selected sequence's block table: logical block i "
                                    "lives in physical block table[i]")
        detail_row = QWidget()
        dl = QHBoxLayout(detail_row)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(self.block_table)
        detail_scroll = QScrollArea()
        detail_scroll.setWidget(self.detail)
        detail_scroll.setWidgetResizable(True)
        detail_scroll.setFrameShape(QScrollArea.NoFrame)
        dl.addWidget(detail_scroll, 1)
        seq_split = QSplitter(Qt.Vertical)
        seq_split.addWidget(self.seq_table)
        seq_split.addWidget(detail_row)
        seq_split.setSizes([200, 140])

        top = QSplitter(Qt.Horizontal)
        top.addWidget(pool_box)
        top.addWidget(seq_split)
        top.setStretchFactor(0, 4)
        top.setStretchFactor(1, 5)
        seq_split.setMinimumWidth(380)
        top.setSizes([500, 620])

        # the contiguous baseline and the curves
        self.contiguous_title = QLabel("Contiguous allocator on the same requests")
        self.contiguous_title.setTextFormat(Qt.RichText)
        self.contiguous_title.setWordWrap(True)
        self.line = ContiguousLine()
        self.line.setFixedHeight(64)
        self.line.hovered.connect(lambda t: self.hover.setText(t or " "))
        self.line.region_clicked.connect(self.select)
        self.curves = KVCurves()
        self.curves.setMinimumHeight(120)  # in a tab: its bar takes the other 30 pixels
        self.events = QPlainTextEdit()
        self.events.setReadOnly(True)
        self.events.setMaximumBlockCount(400)
        self.events.setPlaceholderText("What each step did")
        self.tree = RadixTreePlot()
        self.tree.hovered.connect(lambda t: self.tree_hover.setText(t or " "))
        self.tree_hover = QLabel(" ")
        self.tree_hover.setStyleSheet("color: #444")
        self.tree_hover.setWordWrap(True)
        tree_box = QWidget()
        tree_col = QVBoxLayout(tree_box)
        tree_col.setContentsMargins(0, 0, 0, 0)
        tree_col.setSpacing(2)
        tree_col.addWidget(self.tree, 1)
        tree_col.addWidget(_swatch_legend(TREE_LEGEND))
        tree_col.addWidget(self.tree_hover)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.curves, "Memory over steps")
        self.tabs.addTab(tree_box, "Prefix tree")
        self._tree_shown = False
        bottom_row = QSplitter(Qt.Horizontal)
        bottom_row.addWidget(self.tabs)
        bottom_row.addWidget(self.events)
        bottom_row.setSizes([700, 380])
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.setSpacing(2)
        bl.addWidget(self.contiguous_title)
        bl.addWidget(self.line)
        bl.addWidget(bottom_row, 1)

        body = QSplitter(Qt.Vertical)
        body.addWidget(top)
        body.addWidget(bottom)
        body.setSizes([380, 300])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(3)
        layout.addLayout(self.controls)
        layout.addWidget(self.trace_line)
        layout.addLayout(self.slider_row)
        head = QGridLayout()
        head.addWidget(self.description, 0, 0)
        head.addWidget(self.status, 1, 0)
        head.addWidget(self.stats_line, 2, 0)
        layout.addLayout(head)
        layout.addWidget(body, 1)

    # ---- settings --------------------------------------------------------------------------
    def set_choices(self, scenarios: Sequence[tuple[str, str, str]],
                    models: Sequence[tuple[str, str]]) -> None:
        """`scenarios`: (name, title, description); `models`: (spec, label)."""
        self._quiet = True
        self.scenario.clear()
        for i, (name, title, description) in enumerate(scenarios):
            self.scenario.addItem(title, name)
            self.scenario.setItemData(i, description, Qt.ToolTipRole)
        self.model.clear()
        for spec, label in models:
            self.model.addItem(label, spec)
        self._quiet = False

    def set_settings(self, s: dict) -> None:
        self._quiet = True
        for combo, key in ((self.scenario, "scenario"), (self.model, "model")):
            index = combo.findData(s.get(key))
            if index < 0 and key == "model":
                combo.addItem(str(s.get(key)), s.get(key))
                index = combo.count() - 1
            if index >= 0:
                combo.setCurrentIndex(index)
        self.block_size.setValue(int(s.get("block_size", 16)))
        self.n_blocks.setValue(int(s.get("n_blocks", 0) or 0))
        select_choice(self.kv_dtype, s.get("kv_dtype", "model"))
        select_choice(self.kernels, s.get("kernels", "auto"))
        cache = s.get("prefix_cache", "hash")
        order = s.get("eviction_policy", "lru") if cache == "radix" else "lru"
        select_choice(self.prefix_cache, f"{cache}:{order}")
        self._quiet = False
        self.show_trace(s.get("trace"))

    def show_trace(self, trace: dict | None) -> None:
        """The trace the lab runs (a checked `trace` setting), or None: its scenario."""
        self.trace_form.set_trace(trace)
        self.scenario.setEnabled(trace is None and not self.read_only)

    def settings(self) -> dict:
        return {"scenario": self.scenario.currentData(), "model": self.model.currentData(),
                "block_size": self.block_size.value(), "n_blocks": self.n_blocks.value(),
                "kv_dtype": self.kv_dtype.currentData(), "kernels": self.kernels.currentData(),
                **prefix_settings(self.prefix_cache.currentData())}

    def _emit(self, *_args) -> None:
        if not self._quiet:
            self.settings_changed.emit(self.settings())

    def set_read_only(self, read_only: bool) -> None:
        super().set_read_only(read_only)
        for w in (self.scenario, self.model, self.block_size, self.n_blocks, self.kv_dtype,
                  self.kernels, self.prefix_cache):
            w.setEnabled(not read_only)
        self.trace_form.set_read_only(read_only)
        if self.trace_form.trace() is not None:  # a trace runs in place of the scenario
            self.scenario.setEnabled(False)

    # ---- drawing -----------------------------------------------------------------------------
    def clear(self, message: str = "") -> None:
        self.info, self.seq_infos, self.records = None, {}, []
        self.seq_table.setRowCount(0)
        self.block_table.setRowCount(0)
        self.events.clear()
        self.stats_line.setText(message)
        self.clear_steps()

    def draw(self, info: KVRunInfo, seq_infos: Sequence[SeqInfo],
             records: Sequence[KVStepRecord], index: int | None = None) -> None:
        """Show a run: `records` so far, step `index` (default: the latest) in detail."""
        if not records:
            self.clear("No step yet: press Step or Run.")
            self.info = info
            self.description.setText(f"<b>{html.escape(info.scenario_title)}.</b> "
                                     f"{html.escape(info.scenario_description)}")
            return
        self.info = info
        self.seq_infos = {s.seq_id: s for s in seq_infos}
        self.records = list(records)
        index = self.follow(len(self.records), index)
        self.description.setText(f"<b>{html.escape(info.scenario_title)}.</b> "
                                 f"{html.escape(info.scenario_description)}")
        self.show_step(index)

    def colors(self) -> dict:
        return {sid: s.color for sid, s in self.seq_infos.items()}

    def show_step(self, index: int) -> None:
        info, rec = self.info, self.records[index]
        self.index = index
        self.step_label.setText(f"step {rec.step} / {self.records[-1].step}")
        colors = self.colors()
        self._draw_pool(info, rec, colors)
        n_slots = info.n_blocks * info.block_size
        c = rec.contiguous
        self.contiguous_title.setText(
            f"<b>Contiguous allocator on the same memory and requests</b>: each request "
            f"reserves max_seq_len = {info.max_seq_len} slots in one piece (first fit) · "
            f"{c.n_seqs} regions, {c.slots_reserved:,} of {n_slots:,} slots reserved, "
            f"<b>{c.waste_frac:.0%}</b> of them empty · pink: free gaps too small for a region "
            f"({c.slots_external_waste:,} slots)")
        self.line.draw(n_slots, info.max_seq_len, rec, colors, self.selected)
        self.curves.draw(self.records, info.bytes_per_slot, n_slots, rec.step)
        self._draw_tree(index)
        self._fill_seq_table(rec, colors)
        self._fill_detail(rec)
        self._fill_events(index)
        p = rec.paged
        saved = p.shared_saved_slots
        waiting = sum(1 for q in rec.seqs if q.status in ("waiting", "preempted"))
        self.stats_line.setText(
            f"Step <b>{rec.step}</b>{'' if rec.ran_model else ' (no model run)'}: "
            f"paged waste <b>{p.waste_frac:.1%}</b> vs contiguous <b>{c.waste_frac:.1%}</b> · "
            f"prefix-cache hit rate <b>{p.prefix_hit_rate:.0%}</b> "
            f"({p.prefix_hit_tokens:,} of {p.prefix_query_tokens:,} prompt tokens) · "
            f"{p.shared_blocks} shared blocks save {saved:,} slots · "
            f"{p.evictions} evictions · {waiting} waiting · running: {p.n_seqs} paged, "
            f"{c.n_seqs} contiguous"
            + (f" · {rec.step_s * 1e3:.0f} ms" if rec.step_s else ""))

    def _draw_tree(self, index: int) -> None:
        rec = self.records[index]
        if rec.radix is None:
            self.tree.draw(None, message="The prefix tree is drawn with the radix prefix cache "
                                         "(Prefix: radix tree).")
            return
        previous = self.records[index - 1].radix if index > 0 else None
        self.tree.draw(rec.radix, previous)
        if not self._tree_shown:  # the first radix run: show what it is about
            self._tree_shown = True
            self.tabs.setCurrentIndex(1)

    def pool_at(self, index: int):
        """(pool state, its step) shown for step `index`: its own, else the latest before it
        (a snapshot of a big pool keeps every k-th step's pool only)."""
        for rec in reversed(self.records[: index + 1]):
            if rec.pool is not None:
                return rec.pool, rec.step
        return None, None

    def _draw_pool(self, info: KVRunInfo, rec: KVStepRecord, colors: dict) -> None:
        p = rec.paged
        nbytes = info.n_blocks * info.block_size * info.bytes_per_slot
        size = f", {format_bytes(nbytes)}" if info.bytes_per_slot else ""
        pool, pool_step = self.pool_at(self.index)
        note = "" if pool_step in (None, rec.step) else \
            f" · <i>blocks as of step {pool_step} (this snapshot keeps some steps' pools)</i>"
        whose = f" ({html.escape(rec.groups[0].name)} layers)" if len(rec.groups) > 1 else ""
        self.grid_title.setText(
            f"<b>Paged KV pool</b>{whose}: {info.n_blocks:,} blocks × {info.block_size} "
            f"tokens{size} · "
            f"{p.blocks_used} used ({p.shared_blocks} shared) · {p.blocks_cached_free} "
            f"cached-free · {p.blocks_free} free · model {html.escape(info.model_id)} on "
            f"{html.escape(info.device)}{note}")
        self._draw_groups(rec)
        if pool is None:
            return
        seq_colors = np.array([colors.get(s, 0) for s in pool.seq_ids], dtype=np.int64)
        selected = pool.seq_ids.index(self.selected) if self.selected in pool.seq_ids else None
        self.grid.draw(pool, seq_colors, selected)

    def _draw_groups(self, rec: KVStepRecord) -> None:
        """The layer groups' line: each group's blocks, the bytes held against keeping every
        token, and the closed form (hidden without groups)."""
        if not rec.groups:
            self.groups_line.hide()
            return
        full = rec.full_bytes
        share = rec.held_bytes / full if full else 1.0
        parts = [f"<b>KV held</b> {format_bytes(rec.held_bytes)} of {format_bytes(full)} "
                 f"kept-everything (<b>{share:.0%}</b>; closed form {rec.kv_held_closed:.0%})"]
        for g in rec.groups:
            layers = f"{g.n_layers} layer{'s' if g.n_layers != 1 else ''}"
            parts.append(f"{html.escape(g.name)} ({layers}): {g.blocks_held:,} of "
                         f"{g.blocks_full:,} blocks")
        self.groups_line.setText(" · ".join(parts))
        self.groups_line.show()

    def _fill_seq_table(self, rec: KVStepRecord, colors: dict) -> None:
        table = self.seq_table
        self._quiet = True
        table.setRowCount(len(rec.seqs))
        select_row = -1
        for row, q in enumerate(rec.seqs):
            info = self.seq_infos.get(q.seq_id)
            prompt = info.user_text if info else ""
            tokens = f"{info.prompt_tokens}+{q.n_output}" if info else str(q.n_output)
            cells = (q.seq_id, q.status, q.contiguous_status, tokens,
                     str(q.n_cached) if q.n_cached else "", _short(q.output_text, 80),
                     _one_line(prompt))
            for col, text in enumerate(cells):
                item = table.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    table.setItem(row, col, item)
                item.setText(text)
            swatch = table.item(row, 0)
            swatch.setBackground(QBrush(QColor(seq_color_hex(colors.get(q.seq_id, 0)))))
            swatch.setForeground(QBrush(QColor("#FFFFFF")))
            tip = (f"{q.seq_id}: {q.message}\n" if q.message else "") + \
                (f"system: {info.system_text}\n" if info and info.system_text else "") + \
                f"user: {prompt}\noutput: {q.output_text}"
            for col in range(len(SEQ_COLUMNS)):
                table.item(row, col).setToolTip(tip)
            if q.status == "refused":
                table.item(row, 1).setForeground(QBrush(QColor("#B71C1C")))
            if q.seq_id == self.selected:
                select_row = row
        if select_row >= 0:
            table.selectRow(select_row)
        else:
            table.clearSelection()
        self._quiet = False

    def _fill_detail(self, rec: KVStepRecord) -> None:
        sid = self.selected
        q = rec.seq(sid) if sid else None
        if q is None:
            self.block_table.setRowCount(0)
            self.detail.setText("Select a sequence (table, grid or address line) to highlight "
                                "its blocks and see its block table and text.")
            return
        info = self.seq_infos.get(sid)
        pool, _step = self.pool_at(self.index)
        rows = []
        if pool is not None and sid in pool.seq_ids:
            table = pool.block_tables[pool.seq_ids.index(sid)]
            rows = [(str(i), _block_text(b),
                     f"{int(pool.n_tokens[b])}/{pool.block_size}" if b >= 0 else "",
                     str(int(pool.ref_count[b])) if b >= 0 else "")
                    for i, b in enumerate(table)]
        others = rec.groups[1:] if len(rec.groups) > 1 else ()
        heads = ["logical", _group_head(rec.groups[0]) if others else "physical", "fill",
                 "ref", *[_group_head(g) for g in others]]
        if self.block_table.columnCount() != len(heads):
            self.block_table.setColumnCount(len(heads))
            self.block_table.setMaximumWidth(240 + 60 * len(others))
        self.block_table.setHorizontalHeaderLabels(heads)
        if others:  # the other groups' entries beside the drawn pool's
            tables = [g.table(sid) for g in others]
            rows = [(*row, *[_block_text(t[i]) if i < len(t) else "" for t in tables])
                    for i, row in enumerate(rows)]
        self.block_table.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                self.block_table.setItem(r, c, QTableWidgetItem(text))
        region = next((g for g in rec.regions if g.seq_id == sid), None)
        where = (f"contiguous region {region.start}..{region.start + region.reserved - 1}, "
                 f"{region.filled}/{region.reserved} filled" if region else
                 f"contiguous: {q.contiguous_status}")
        n_held = sum(1 for row in rows if row[1] != DROPPED)
        parts = [f"<b>{html.escape(sid)}</b> — paged: {q.status}, {n_held} blocks, "
                 f"{q.kv_tokens} tokens in KV, {q.n_cached} from the prefix cache · {where}"]
        if rec.groups:
            parts.append(" · ".join(
                f"{html.escape(g.name)}: {sum(1 for b in g.table(sid) if b >= 0)} of "
                f"{len(g.table(sid))} blocks held" for g in rec.groups))
        if q.message:
            parts.append(f"<i>{html.escape(q.message)}</i>")
        if info is not None:
            if info.system_text:
                parts.append(f"<b>system</b>: {html.escape(_short(info.system_text, 160))}")
            sample = f" (sample {info.sample}, temperature {info.temperature:g})" \
                if info.temperature else ""
            parts.append(f"<b>user</b>{sample}: {html.escape(_short(info.user_text, 300))}")
        parts.append(f"<b>output</b> ({q.n_output} tokens): {html.escape(q.output_text)}")
        self.detail.setText("<br>".join(parts))

    def _fill_events(self, index: int) -> None:
        lines = []
        for rec in self.records[max(0, index - 4): index + 1]:
            for e in rec.events:
                lines.append(f"[{rec.step}] {e}")
        self.events.setPlainText("\n".join(lines))
        self.events.verticalScrollBar().setValue(self.events.verticalScrollBar().maximum())

    # ---- selection -----------------------------------------------------------------------
    def select(self, seq_id: str | None) -> None:
        """Highlight one sequence's blocks and region (None: no selection)."""
        self.selected = seq_id
        if self.records and 0 <= self.index < len(self.records):
            self.show_step(self.index)

    def _on_table_selection(self) -> None:
        if self._quiet:
            return
        rows = self.seq_table.selectionModel().selectedRows()
        if not rows:
            return
        item = self.seq_table.item(rows[0].row(), 0)
        if item is not None and item.text() != self.selected:
            self.select(item.text())

    def _on_block_clicked(self, block: int) -> None:
        pool = self.grid.pool
        owners = pool.owners_of(block) if pool is not None else []
        self.select(owners[0] if owners else None)


DROPPED = "—"
"""A block-table entry a sliding window dropped (block id -1)."""


def _block_text(block_id: int) -> str:
    return str(block_id) if block_id >= 0 else DROPPED


def _group_head(group) -> str:
    """A layer group's column: "full" or "W=512"."""
    return f"W={group.window}" if group.window else "full"


def _short(text: str, n: int) -> str:
    text = _one_line(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())
