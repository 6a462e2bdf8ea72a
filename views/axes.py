"""Axis ticks that read as numbers with units: 50G, 2T, 0.1 — not 5·10¹⁰."""

from __future__ import annotations

import math

import pyqtgraph as pg

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si_label(value: float) -> str:
    """3 significant digits with an SI prefix: 4.96e10 → '49.6G', 0.25 → '0.25'."""
    if value == 0 or not math.isfinite(value):
        return "0"
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.3g}"


class LogSIAxis(pg.AxisItem):
    """For log-mode plots: ticks at decades (and 2×, 5× where they fit), SI-labelled."""

    def __init__(self, orientation: str, unit: str = "", **kwargs):
        super().__init__(orientation, **kwargs)
        self.unit = unit
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        return [si_label(10**v) for v in values]
