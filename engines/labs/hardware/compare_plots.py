"""The hardware lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_hardware_section`'s records: every measured roof (each device's, each dtype's:
fp32 solid, the others dashed; the roofline lab's `roof_curve`), and the telemetry against
time since its first sample (two runs aligned at t = 0): the CPU's utilisation as the mean
over its logical cores, and each GPU's utilisation (gaps where NVML gave no reading).
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.labs.hardware.records import HardwareSnapshot
from inferlab.engines.labs.roofline.compare_plots import X_LABEL, Y_LABEL, roof_curve
from inferlab.engines.trace.overlay import Curve, Plot


def hardware_plots(snapshot: HardwareSnapshot) -> list[Plot]:
    """`snapshot`: what read_hardware_section returns."""
    history, roofs = snapshot.telemetry, snapshot.roofs
    plots = []
    curves = tuple(roof_curve(f"{device} {dtype}", peak, r.bw_bytes_per_s,
                              dashed=dtype != "fp32")
                   for device, r in roofs.items() for dtype, peak in r.peak_flops.items())
    if curves:
        plots.append(Plot("Measured roofs", X_LABEL, Y_LABEL, curves, log_x=True, log_y=True))
    if history is not None and history.t_s.size:
        t_s = history.t_s - history.t_s[0]
        with np.errstate(all="ignore"):  # a sample with no core reading is a gap (NaN)
            cpu = np.nanmean(history.cpu_percent, axis=1) if history.cpu_percent.shape[1] \
                else np.full(t_s.shape, np.nan)
        plots.append(Plot("CPU utilisation (mean of the logical cores)",
                          "time since the first sample (s)", "utilisation (%)",
                          (Curve("CPU", t_s, cpu),)))
        if history.gpus:
            plots.append(Plot("GPU utilisation", "time since the first sample (s)",
                              "utilisation (%)",
                              tuple(Curve(g.id, t_s, g.util_percent) for g in history.gpus)))
    return plots
