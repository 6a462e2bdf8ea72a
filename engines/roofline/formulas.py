"""The roofline model: every roofline formula lives here, once.

Notation: F = FLOPs of an operation, B = bytes it moves to and from memory,
P = peak FLOP/s, W = memory bandwidth in bytes/s, I = F / B (FLOP/byte).
Every function takes plain floats or numpy arrays (element-wise).
"""

from __future__ import annotations

import numpy as np


def arithmetic_intensity(flops, bytes_moved):
    """I = F / B in FLOP/byte (inf when nothing is moved)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(flops, bytes_moved)


def attainable_flops(peak_flops, bw_bytes_per_s, intensity):
    """Roofline: attainable FLOP/s = min(P, I × W)."""
    return np.minimum(peak_flops, np.multiply(intensity, bw_bytes_per_s))


def knee_intensity(peak_flops, bw_bytes_per_s):
    """Ridge point I* = P / W (FLOP/byte): below it an op is memory-bound."""
    return np.true_divide(peak_flops, bw_bytes_per_s)


def predicted_time_s(flops, bytes_moved, peak_flops, bw_bytes_per_s):
    """Roofline time t = max(F / P, B / W) seconds (compute and traffic fully overlapped)."""
    return np.maximum(np.true_divide(flops, peak_flops), np.true_divide(bytes_moved, bw_bytes_per_s))


def bound(flops, bytes_moved, peak_flops, bw_bytes_per_s) -> str:
    """"memory" when I = F / B < I* = P / W, else "compute" (scalars only)."""
    intensity = arithmetic_intensity(flops, bytes_moved)
    return "memory" if intensity < knee_intensity(peak_flops, bw_bytes_per_s) else "compute"


def roofline_curve(peak_flops, bw_bytes_per_s, i_min=1 / 16, i_max=4096, n=256):
    """The roof to draw: n log-spaced intensities in [i_min, i_max] and min(P, I × W) there.

    When the knee P / W lies inside the range, the grid point nearest to it (in log space)
    is moved onto it, so the drawn corner is exact. Returns (intensity, attainable) arrays.
    """
    if not 0 < i_min < i_max or n < 2:
        raise ValueError(f"need 0 < i_min < i_max and n >= 2, got {i_min}, {i_max}, {n}")
    intensity = np.geomspace(i_min, i_max, n)
    knee = float(knee_intensity(peak_flops, bw_bytes_per_s))
    if i_min < knee < i_max:
        intensity[np.argmin(np.abs(np.log(intensity) - np.log(knee)))] = knee
    return intensity, attainable_flops(peak_flops, bw_bytes_per_s, intensity)
