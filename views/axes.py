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


LABELLED_MANTISSAS = (1.0, 2.0, 5.0)
"""The ticks of a decade that carry a label (pyqtgraph's minor ticks at 2× … 9× stay as
ticks): every one labelled crowds a two-decade axis into 300400500…"""


def labelled(log_values) -> list[bool]:
    """Which of a log axis's tick positions (log10 of the value) are labelled: those at 1×,
    2× and 5× a power of ten where there are at least two such; all of them otherwise (a
    range under a decade keeps its own ticks)."""
    keep = [round(10 ** (v - math.floor(v)), 6) in LABELLED_MANTISSAS for v in log_values]
    return keep if sum(keep) >= 2 else [True] * len(keep)


class LogSIAxis(pg.AxisItem):
    """For log-mode plots: ticks at decades (and 2× … 9× where they fit), SI-labelled at
    1×, 2× and 5× a decade (`labelled`)."""

    def __init__(self, orientation: str, unit: str = "", **kwargs):
        super().__init__(orientation, **kwargs)
        self.unit = unit
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        return [si_label(10**v) if keep else ""
                for v, keep in zip(values, labelled(values), strict=True)]
