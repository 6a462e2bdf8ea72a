"""The snapshot's `labs.cluster`: the settings, the run (per request, per instance, per KV
transfer: records.ClusterState), its metrics and the layout search's grid; `cluster_section`
writes it, `read_cluster_section` reads it back strictly into a ClusterSnapshot."""

from __future__ import annotations

from inferlab.engines.cluster.cluster import ClusterResult
from inferlab.engines.cluster.peak_fleet import PeakFleet
from inferlab.engines.fields import Setting, read_fields, read_object
from inferlab.engines.labs.cluster.autoscaling import read_autoscale_metrics
from inferlab.engines.labs.cluster.records import (
    NUMBER,
    ClusterSnapshot,
    ClusterState,
    cluster_state,
    read_search_summary,
)
from inferlab.engines.labs.cluster.session import cluster_metrics
from inferlab.engines.labs.cluster.settings import check_cluster_settings
from inferlab.engines.serve.metrics import read_serving_metrics
from inferlab.engines.trace.snapshot import lab_section, section_field


def cluster_section(settings: dict, result: ClusterResult | None,
                    search: dict | None = None, peak: PeakFleet | None = None) -> dict:
    """The section of a run (or none) and of a layout search's summary (or none); an
    autoscaled run's metrics hold the peak fleet `peak` it was judged against."""
    state = cluster_state(result).to_dict() if result is not None else {}
    if search is not None:
        state["search"] = search
    return lab_section(settings, state,
                       cluster_metrics(result, settings, peak) if result is not None else {})


_EXTRA_METRICS = {"gpus": Setting("int", 1), "layout": Setting("str", max_len=200),
                  "slo_attainment": Setting("float", 0, 1),
                  "goodput_per_gpu": NUMBER, "prefix_hit_rate": Setting("float", 0, 1),
                  "kv_transfer_s_total": NUMBER,
                  "utilization": Setting("float-list", 0, 1.000001, max_len=4096),
                  "autoscale": read_autoscale_metrics}


def read_cluster_section(sec) -> ClusterSnapshot:
    """The section read once, strictly: ValueError names the bad field."""
    where = "labs.cluster"
    read_object(sec, where)
    settings = check_cluster_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    metrics = read_object(section_field(sec, "metrics", where), f"{where}.metrics")
    search = None
    if "search" in state:
        search = read_search_summary(state["search"], f"{where}.state.search")
    if "requests" not in state:  # no run kept (nothing yet, or a layout search alone)
        return ClusterSnapshot(settings, None, metrics, search)
    metrics = read_serving_metrics(metrics, f"{where}.metrics") | read_fields(
        metrics, _EXTRA_METRICS, f"{where}.metrics", optional={"autoscale": None})
    if metrics["autoscale"] is None:
        del metrics["autoscale"]
    return ClusterSnapshot(settings, ClusterState.from_dict(state, f"{where}.state"), metrics,
                           search)
