"""The roofline lab's formulas with a snapshot's numbers (what its formula panel shows): the
knee of each measured roof, and each measured operation's place under it. Every number comes
from engines/roofline/formulas.py, where the formulas live.
"""

from __future__ import annotations

from inferlab.engines.labs.roofline.records import RooflineSnapshot
from inferlab.engines.roofline.formulas import (
    arithmetic_intensity,
    attainable_flops,
    bound,
    knee_intensity,
)
from inferlab.engines.roofline.units import format_bandwidth, format_flops

MAX_POINTS = 12
"""Measured operations substituted, at most (the rest are in the snapshot's state)."""


def roofline_formulas(snapshot: RooflineSnapshot) -> list[tuple[str, str]]:
    """`snapshot`: what read_roofline_section returns. (formula, substituted) pairs; none
    without a measured roof."""
    roofs, points = snapshot.roofs, snapshot.points
    if roofs is None:
        return []
    w = roofs.bw_bytes_per_s
    out = []
    for dtype, p in roofs.peak_flops.items():
        out.append((f"knee I* = P / W ({roofs.device}, {dtype})",
                    f"{format_flops(p)} / {format_bandwidth(w)} = "
                    f"{float(knee_intensity(p, w)):.4g} FLOP/byte"))
    dtype = snapshot.roof_dtype()
    p = roofs.peak_flops[dtype]
    for point in points[:MAX_POINTS]:
        i = float(arithmetic_intensity(point.flops, point.bytes_moved))
        roof = float(attainable_flops(p, w, i))
        out.append((f"attainable = min(P, I × W), I = F / B ({point.name}, {dtype})",
                    f"I = {point.flops:.4g} FLOP / {point.bytes_moved:.4g} B = {i:.4g} "
                    f"FLOP/byte; min({format_flops(p)}, {i:.4g} × {format_bandwidth(w)}) = "
                    f"{format_flops(roof)}, {bound(point.flops, point.bytes_moved, p, w)}-"
                    f"bound; measured {format_flops(point.achieved_flops_per_s)} = "
                    f"{100 * point.achieved_flops_per_s / roof:.0f} % of it"))
    return out
