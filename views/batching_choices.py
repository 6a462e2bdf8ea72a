"""The batching lab's choices, each (key, label, tooltip): policies, workloads, prefix caches,
eviction orders, queue orders; shared by the lab's controls and its Compare tab (and the KV
lab's eviction order)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

POLICY_LABELS = (
    ("continuous", "continuous, chunked",
     "vLLM v1: every iteration refills the batch; long prompts are prefilled in chunks "
     "beside the decodes, within the token budget"),
    ("continuous-no-chunking", "continuous, no chunking",
     "vLLM v0: a new request's whole prompt is prefilled first, pausing the decodes"),
    ("static", "static",
     "a batch is formed, run until every request in it has finished, then the next"),
)
WORKLOAD_LABELS = (
    ("lognormal", "seeded (distinct prompts)",
     "Poisson arrivals, lognormal prompt and output lengths, prompts that share nothing"),
    ("multi-turn", "multi-turn chat",
     "each turn's prompt is the conversation so far plus a new question"),
    ("few-shot", "few-shot", "one shared block of examples, then each request's question"),
    ("doc-qa", "document QA", "one long shared document, then each request's question"),
    ("parallel", "parallel branches", "n branches of one prefix arriving together"),
    ("agent", "agent loop", "a tool transcript that grows by one tool result per step"),
)
PREFIX_CACHE_LABELS = (
    ("hash", "block hashes", "vLLM: full blocks found by their chained hashes"),
    ("radix", "radix tree", "SGLang: any cached prefix, token by token, in a radix tree"),
    ("none", "off", "no prefix caching: every prompt computed whole"),
)
EVICTION_LABELS = (
    ("lru", "LRU", "the radix tree frees its least recently used unlocked leaf first"),
    ("lfu", "LFU", "the least hit unlocked leaf first (then the least recently used)"),
    ("fifo", "FIFO", "the oldest unlocked leaf first, however often it was hit"),
)
"""The radix tree's eviction orders (SGLang's three); the block hashes always free LRU."""
SCHEDULE_LABELS = (
    ("fcfs", "FCFS", "waiting requests admitted in arrival order"),
    ("lpm", "longest prefix first",
     "SGLang's LPM: the request with the most cached prompt tokens first (FCFS past 128 "
     "waiting)"),
)


def labelled_combo(items) -> QComboBox:
    """A combo of (key, label, tooltip) items, the key as item data."""
    combo = QComboBox()
    for value, label, tip in items:
        combo.addItem(label, value)
        combo.setItemData(combo.count() - 1, tip, Qt.ToolTipRole)
    return combo
