"""The roofline lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_roofline_section`'s records: the measured roof at the settings' compute dtype (fp32
where the device measured no peak for it, as the lab draws it), min(P, I × W) over the
intensities `roofline_curve` spans, and every measured operation at (I = F / B, achieved
FLOP/s). `roof_curve` is the hardware lab's too.
"""

from __future__ import annotations

from inferlab.engines.labs.roofline.records import RooflineSnapshot
from inferlab.engines.roofline.formulas import roofline_curve
from inferlab.engines.trace.overlay import Curve, Plot

X_LABEL = "arithmetic intensity (FLOP/byte)"
Y_LABEL = "FLOP/s"


def roof_curve(name: str, peak_flops: float, bw_bytes_per_s: float,
               dashed: bool = False) -> Curve:
    """min(P, I × W) over `roofline_curve`'s intensities."""
    intensity, attainable = roofline_curve(peak_flops, bw_bytes_per_s)
    return Curve(name, intensity, attainable, dashed=dashed)


def roofline_plots(snapshot: RooflineSnapshot) -> list[Plot]:
    """`snapshot`: what read_roofline_section returns. No plot without a measured roof or
    point."""
    roofs, points = snapshot.roofs, snapshot.points
    curves = []
    if roofs is not None:
        dtype = snapshot.roof_dtype()
        curves.append(roof_curve(f"{roofs.device} roof ({dtype})", roofs.peak_flops[dtype],
                                 roofs.bw_bytes_per_s))
    if points:
        curves.append(Curve("measured operations", [p.intensity for p in points],
                            [p.achieved_flops_per_s for p in points], "points"))
    if not curves:
        return []
    return [Plot("Measured roofline", X_LABEL, Y_LABEL, tuple(curves), log_x=True, log_y=True)]
