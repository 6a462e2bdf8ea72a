"""Combo boxes of (key, label) choices whose list the lab refills."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from inferlab.engines.kernels import KERNEL_LABELS, KERNEL_SETTING_CHOICES


def refill_choices(combo: QComboBox, items) -> None:
    """Replace `combo`'s items by `items`, (key, label) pairs with the key as item data; the
    key that was chosen stays chosen where it is still offered."""
    current = combo.currentData()
    combo.clear()
    for key, label in items:
        combo.addItem(label, key)
    if current is not None and combo.findData(current) >= 0:
        combo.setCurrentIndex(combo.findData(current))


def select_choice(combo: QComboBox, key) -> None:
    """Choose the item whose data is `key` (the first item where none is)."""
    combo.setCurrentIndex(max(0, combo.findData(key)))


def kernel_choice() -> QComboBox:
    """A lab's kernel-path combo (auto / native kernels / torch ops), item data the
    `kernels` setting's value."""
    combo = QComboBox()
    for key in KERNEL_SETTING_CHOICES:
        combo.addItem(KERNEL_LABELS[key], key)
    combo.setToolTip("Which kernels the lab's model runs on: the native CPU library "
                     "(engines/kernels: skinny products, paged attention in place, fused small "
                     "ops) or torch's own ops, the reference; auto: the app's choice (native "
                     "unless started with --kernels torch)")
    return combo
