"""The cluster lab's autoscaling figures: an autoscaled run's GPU-hours and SLO attainment
beside the fixed fleet sized for the peak (engines/cluster/peak_fleet.py), as the summary
prints them and the snapshot's metrics keep them; `read_autoscale_metrics` reads them back
strictly (ValueError naming the field).

    gpu_hours_vs_peak_fleet = autoscaled GPU-hours / the peak fleet's GPU-hours
"""

from __future__ import annotations

from inferlab.engines.cluster.autoscale_records import AutoscaleRun
from inferlab.engines.cluster.peak_fleet import PeakFleet
from inferlab.engines.fields import Setting, read_fields, read_list

_NUMBER = Setting("float", 0)
_FRACTION = Setting("float", 0, 1)


def autoscale_metrics(run: AutoscaleRun, attainment: float, peak: PeakFleet | None) -> dict:
    """The autoscaled run's figures (`attainment`: its share within both SLOs) and, when
    given, the peak fleet's."""
    out = {"gpu_hours": run.gpu_hours, "slo_attainment": attainment,
           "peak_replicas": run.peak_replicas, "replicas_started": len(run.replicas),
           "cold_start_s": run.cold_start_s, "peak_fleet": None,
           "gpu_hours_vs_peak_fleet": None}
    if peak is not None:
        out["peak_fleet"] = peak.to_dict()
        out["gpu_hours_vs_peak_fleet"] = (run.gpu_hours / peak.gpu_hours
                                          if peak.gpu_hours > 0 else None)
    return out


def _probe(value, where: str) -> list:
    got = read_list(value, lambda v, w: Setting("float", 0)(v, w), where, max_len=3)
    if len(got) != 3:
        raise ValueError(f"{where}: expected [replicas, attainment, gpu_hours]")
    return got


def _peak(value, where: str) -> dict | None:
    if value is None:
        return None
    return read_fields(value, {
        "replicas": Setting("int", 1, 1024), "slo_attainment": _FRACTION,
        "gpu_hours": _NUMBER, "basis": Setting("str", max_len=200),
        "probes": lambda v, w: read_list(v, _probe, w, max_len=64)}, where)


def read_autoscale_metrics(value, where: str) -> dict:
    """`autoscale_metrics`' dict read back strictly."""
    return read_fields(value, {
        "gpu_hours": _NUMBER, "slo_attainment": _FRACTION,
        "peak_replicas": Setting("int", 0), "replicas_started": Setting("int", 0),
        "cold_start_s": _NUMBER, "peak_fleet": _peak,
        "gpu_hours_vs_peak_fleet": Setting("float", 0, none=True)}, where)
