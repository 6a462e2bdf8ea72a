"""What the cluster lab computes: its settings made into a ClusterConfig and the requests,
run to the end on the simulated clock or searched over layouts (one full run each), and a
run's score. The lab's worker (app/labs/cluster.py) and `inferlab run cluster` both drive a
`ClusterSession`; the section writer scores the run with `cluster_metrics`."""

from __future__ import annotations

from inferlab.engines.cluster.autoscaled import AutoscaledSimulation
from inferlab.engines.cluster.cluster import ClusterResult, ClusterSimulation
from inferlab.engines.cluster.fanout import Fanout
from inferlab.engines.cluster.goodput import score_run
from inferlab.engines.cluster.peak_fleet import PeakFleet, peak_fleet
from inferlab.engines.cluster.search import SearchResult, search_layouts
from inferlab.engines.labs.cluster.autoscaling import autoscale_metrics
from inferlab.engines.labs.cluster.settings import (
    autoscale_cold_start_s,
    autoscale_policy,
    cluster_config,
    cluster_requests,
    cluster_slo,
)


class ClusterSession:
    """The cluster and the requests of the lab's (checked) `settings`; `items`: a trace's
    WorkloadRequests instead of the settings' workload; `counts`: a MoE lab run's measured
    expert counts (expert_counts.MeasuredCounts) for expert_load counts."""

    def __init__(self, settings: dict, items=None, counts=None) -> None:
        self.settings = settings
        self.config = cluster_config(settings, counts)
        self.requests = cluster_requests(settings, self.config.model.vocab_size, items)

    def run(self, progress=None) -> ClusterResult:
        """Route and run every request to its end; `progress(fraction, message)`. With
        autoscale, the fleet grows and shrinks under the settings' KPA policy."""
        s = self.settings
        if s["autoscale"]:
            return AutoscaledSimulation(self.config, self.requests, autoscale_policy(s),
                                        autoscale_cold_start_s(s)).run(progress)
        return ClusterSimulation(self.config, self.requests).run(progress)

    def peak_fleet(self, progress=None) -> PeakFleet:
        """The fixed fleet (1 to max_replicas replicas of t GPUs) sized for the requests'
        peak: what an autoscaled run is judged against (engines/cluster/peak_fleet.py)."""
        s = self.settings
        return peak_fleet(self.config, self.requests, cluster_slo(s), s["attainment"],
                          s["max_replicas"], 1, progress)

    def search(self, kind: str, progress=None, fanout: Fanout | None = None) -> SearchResult:
        """Every layout of `kind` on the settings' GPUs, one full run each (serially, or
        as Ray tasks: `fanout`)."""
        s = self.settings
        return search_layouts(self.config, kind, s["gpus"], self.requests, cluster_slo(s),
                              s["attainment"], progress, fanout)


def cluster_metrics(result: ClusterResult, settings: dict, peak: PeakFleet | None = None
                    ) -> dict:
    """The batching lab's serving metrics of the whole cluster (its SLOs' goodput), plus
    goodput per GPU (DistServe's: 0 below the attainment goal), the attainment, the prefix
    hit rate, the GPUs and each instance's utilisation (busy / makespan); an autoscaled
    run adds its GPU-hours beside the peak fleet's (`peak`, when searched)."""
    score = score_run(result, cluster_slo(settings), settings["attainment"])
    return score.metrics.to_dict() | {
        "gpus": result.config.layout.n_gpus,
        "layout": result.config.layout.label,
        "slo_attainment": score.attainment,
        "goodput_per_gpu": score.goodput_per_gpu,
        "prefix_hit_rate": result.prefix_hit_rate(),
        "kv_transfer_s_total": sum(r.kv_transfer_s for r in result.requests),
        "utilization": [i.utilization(result.makespan_s) for i in result.instances],
    } | ({} if result.autoscale is None else {
        "autoscale": autoscale_metrics(result.autoscale, score.attainment, peak)})
