"""The cluster lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_cluster_section`'s ClusterSnapshot: the TTFT, TPOT and E2E CDFs of every request
that made all its tokens (its token times on the simulated clock: the run's own metrics
summarize the same timings), drawn as the batching lab draws its own; each instance's
utilisation (busy ÷ makespan) along the instances (named by role and index: two layouts' on
the union of both); and each instance's KV pool use per iteration against time since the
run's first arrival, the first MAX_KV_INSTANCES instances in one plot (prefill instances
dashed: two layouts' pools seen together, as the lab's own KV strip has them).
"""

from __future__ import annotations

from inferlab.engines.cluster.cluster import request_timings
from inferlab.engines.labs.batching.compare_plots import latency_cdf_plots
from inferlab.engines.labs.cluster.records import ClusterSnapshot
from inferlab.engines.trace.overlay import Curve, Plot

MAX_KV_INSTANCES = 8
"""Instances whose KV pool is drawn, at most (their utilisation is drawn for all)."""


def instance_name(index: int, role: str) -> str:
    """"replica 0", "prefill 1", "decode 2": what the lab's lanes call an instance."""
    return f"{'replica' if role == 'colocated' else role} {index}"


def cluster_plots(record: ClusterSnapshot) -> list[Plot]:
    """`record`: read_cluster_section's. No plot without a run."""
    state = record.state
    if state is None or not state.requests:
        return []
    plots = latency_cdf_plots(request_timings(state.requests))
    instances = state.instances
    names = tuple(instance_name(i.index, i.role) for i in instances)
    plots.append(Plot("Utilisation per instance", "instance", "busy ÷ makespan (%)",
                      (Curve("utilisation", range(len(instances)),
                             [100 * i.utilization(state.makespan_s) for i in instances],
                             "points"),), x_ticks=names))
    t0_s = min(r.arrival_s for r in state.requests)
    kv = tuple(Curve(name, [r.end_s - t0_s for r in inst.iterations],
                     [100 * r.kv_usage for r in inst.iterations], steps=True,
                     dashed=inst.role == "prefill")
               for inst, name in zip(instances[:MAX_KV_INSTANCES], names, strict=False))
    plots.append(Plot("KV pool use per instance", "time since the run's first arrival (s)",
                      "KV blocks in use (%)", kv))
    return plots
