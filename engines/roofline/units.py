"""Human-readable sizes and rates, always saying which unit system they use.

Binary units are powers of 1024 (KiB, MiB, GiB: GiB = 2^30 bytes); decimal units are
powers of 1000 (kB, MB, GB: GB = 10^9 bytes, what GPU datasheets mean).
"""

from __future__ import annotations

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_DECIMAL = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
_FLOPS = ("FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s", "EFLOP/s")


def format_bytes(n: float, binary: bool = True) -> str:
    """Bytes with two decimals: 2**33 → "8.00 GiB" (binary) or "8.59 GB" (decimal)."""
    units, step = (_BINARY, 1024.0) if binary else (_DECIMAL, 1000.0)
    value, i = abs(float(n)), 0
    while value >= step and i < len(units) - 1:
        value, i = value / step, i + 1
    if round(value, 2 if i else 0) >= step and i < len(units) - 1:  # 1023.999 KiB → 1.00 MiB
        value, i = value / step, i + 1
    sign = "-" if n < 0 else ""
    if i == 0:
        return f"{sign}{value:.0f} B"
    return f"{sign}{value:.2f} {units[i]}"


def format_flops(x: float) -> str:
    """FLOP/s with three significant digits in decimal units: 9.52e10 → "95.2 GFLOP/s"."""
    return _three_digits(x, _FLOPS)


def format_bandwidth(bw_bytes_per_s: float) -> str:
    """Bandwidth in decimal units, three significant digits: 3.35e12 → "3.35 TB/s"."""
    return _three_digits(bw_bytes_per_s, tuple(f"{u}/s" for u in _DECIMAL))


def _three_digits(x: float, units: tuple[str, ...]) -> str:
    value, i = abs(float(x)), 0
    while value >= 1000.0 and i < len(units) - 1:
        value, i = value / 1000.0, i + 1
    text = f"{value:.3g}"
    if float(text) >= 1000.0 and i < len(units) - 1:  # 999.7 rounds up to the next unit
        value, i = value / 1000.0, i + 1
        text = f"{value:.3g}"
    return f"{'-' if x < 0 else ''}{text} {units[i]}"
