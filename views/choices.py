"""Combo boxes of (key, label) choices whose list the lab refills."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox


def refill_choices(combo: QComboBox, items) -> None:
    """Replace `combo`'s items by `items`, (key, label) pairs with the key as item data; the
    key that was chosen stays chosen where it is still offered."""
    current = combo.currentData()
    combo.clear()
    for key, label in items:
        combo.addItem(label, key)
    if current is not None and combo.findData(current) >= 0:
        combo.setCurrentIndex(combo.findData(current))
