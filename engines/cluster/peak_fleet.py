"""The fixed fleet an autoscaled one is judged against: the fewest replicas that, running the
whole time, serve the same requests with at least `attainment` of them within both SLOs
("sized for the peak"); or, when none up to the autoscaler's max does, that max.

    gpu_hours(n) = n × GPUs per replica × (last token − first arrival) / 3600

Found by galloping then bisecting over n in [lo, max_replicas] (lo, 2·lo, 4·lo, … until a
fleet meets the goal, then between the last miss and that fleet), each probe one full run,
on the premise that more replicas never serve the same requests worse (attainment
non-decreasing in n). Small fleets are probed first: a big fleet's run costs the most.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from inferlab.engines.cluster.autoscale_records import SECONDS_PER_HOUR
from inferlab.engines.cluster.cluster import ClusterConfig, ClusterResult, run_cluster
from inferlab.engines.cluster.goodput import slo_attainment
from inferlab.engines.cluster.layout import REPLICAS
from inferlab.engines.serve.metrics import SLO

SMALLEST = "smallest fixed fleet meeting the attainment"
AT_MAX = "max_replicas (no fixed fleet up to it meets the attainment)"


@dataclass(frozen=True)
class FleetProbe:
    replicas: int
    attainment: float
    gpu_hours: float


@dataclass(frozen=True)
class PeakFleet:
    """The chosen fixed fleet (`basis` says which rule chose it) and every probe run."""

    replicas: int
    attainment: float
    gpu_hours: float
    basis: str
    probes: tuple[FleetProbe, ...]

    def to_dict(self) -> dict:
        return {"replicas": self.replicas, "slo_attainment": self.attainment,
                "gpu_hours": self.gpu_hours, "basis": self.basis,
                "probes": [[p.replicas, p.attainment, p.gpu_hours] for p in self.probes]}


def fixed_fleet_gpu_hours(result: ClusterResult) -> float:
    """Module doc: every GPU of the layout held from the first arrival to the last token."""
    return result.config.layout.n_gpus * result.makespan_s / SECONDS_PER_HOUR


def peak_fleet(config: ClusterConfig, requests, slo: SLO, attainment: float,
               max_replicas: int, lo: int = 1, progress=None) -> PeakFleet:
    """The fixed fleet of the module doc; `config.layout` gives the replicas' t."""
    if config.layout.kind != REPLICAS:
        raise ValueError(f"a fixed fleet of replicas, not a {config.layout.kind} layout")
    lo = max(1, lo)
    if max_replicas < lo:
        raise ValueError(f"max_replicas must be >= {lo}, got {max_replicas}")
    probes: dict[int, FleetProbe] = {}

    def probe(n: int) -> FleetProbe:
        result = run_cluster(replace(config, layout=replace(config.layout, replicas=n)),
                             requests)
        probes[n] = FleetProbe(n, slo_attainment(result.timings(), slo),
                               fixed_fleet_gpu_hours(result))
        if progress is not None:
            progress(None, f"fixed fleet of {n}: {100 * probes[n].attainment:.1f} % "
                           "within the SLOs")
        return probes[n]

    failing, n = lo - 1, lo  # failing: the largest fleet known (or taken) to miss
    while probe(n).attainment < attainment:
        if n == max_replicas:
            break
        failing, n = n, min(2 * n, max_replicas)
    if probes[n].attainment < attainment:
        best, basis = probes[n], AT_MAX
    else:
        passing = n
        while passing - failing > 1:
            mid = (failing + passing) // 2
            if probe(mid).attainment >= attainment:
                passing = mid
            else:
                failing = mid
        best, basis = probes[passing], SMALLEST
    return PeakFleet(best.replicas, best.attainment, best.gpu_hours, basis,
                     tuple(probes[n] for n in sorted(probes)))
