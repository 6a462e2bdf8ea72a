"""The cluster lab's formulas with a snapshot's numbers: a KV transfer on the link
(engines/roofline/interconnect.py), each instance's utilisation (InstanceRun.utilization),
and goodput per GPU as the run's score gave it (engines/cluster/goodput.py).
"""

from __future__ import annotations

from inferlab.engines.labs.cluster.compare_plots import instance_name
from inferlab.engines.labs.cluster.records import ClusterSnapshot
from inferlab.engines.roofline.interconnect import kv_transfer_s
from inferlab.engines.roofline.units import format_bandwidth

MAX_INSTANCES = 8
"""Instances whose utilisation is substituted, at most."""


def cluster_formulas(record: ClusterSnapshot) -> list[tuple[str, str]]:
    """`record`: read_cluster_section's. (formula, substituted) pairs; none without a
    run."""
    settings, state, metrics = record.settings, record.state, record.metrics
    if state is None:
        return []
    out = []
    if metrics.get("goodput_per_gpu") is not None:
        met = metrics["slo_attainment"] >= settings["attainment"]
        goodput = metrics.get("goodput_requests_per_s") or 0.0
        out.append(("goodput per GPU = requests/s within both SLOs ÷ GPUs, when at least the "
                    "attainment goal of requests meet them (else 0)",
                    f"attainment {metrics['slo_attainment']:.1%} "
                    f"{'≥' if met else '<'} {settings['attainment']:.0%}: "
                    + (f"{goodput:.4g} req/s ÷ {metrics['gpus']} GPUs = " if met else "")
                    + f"{metrics['goodput_per_gpu']:.4g} req/s per GPU"))
    moved = [r for r in state.requests if r.kv_transfer_s > 0]
    if moved:
        r = max(moved, key=lambda r: r.prompt_tokens)
        w, alpha = state.link_bandwidth_bytes_per_s, state.link_latency_s
        t = kv_transfer_s(state.kv_bytes_per_token, r.prompt_tokens, w, alpha)
        out.append(("KV transfer = KV bytes per token × prompt tokens ÷ W_link + α "
                    "(the longest prompt moved)",
                    f"{state.kv_bytes_per_token:,} B × {r.prompt_tokens:,} ÷ "
                    f"{format_bandwidth(w)} + {alpha * 1e6:.3g} µs = {t * 1e3:.4g} ms"))
    for inst in state.instances[:MAX_INSTANCES]:  # by index: two layouts' pair up
        out.append((f"utilisation = busy ÷ makespan (instance {inst.index})",
                    f"{instance_name(inst.index, inst.role)}: {inst.busy_s:.4g} s ÷ "
                    f"{state.makespan_s:.4g} s = {inst.utilization(state.makespan_s):.1%}"))
    return out
