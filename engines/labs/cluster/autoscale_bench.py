"""The autoscaling bench: the shipped window of Azure's 2023 conversation trace (assets/traces,
5,985 requests over 20 minutes) through a concurrency-autoscaled fleet and through the fixed
smallest fixed fleet that meets the SLO attainment over it (the fleet sized for its peak), on
the simulated clock. Every key starts autoscale_ or peak_fleet_ (bench traces merges parts).

    setup  Llama-3-70B (fp16) replicas of t = 4 H100s (NVLink 4), the lab's scheduler and
           least-tokens router; the trace at time scale 0.25 (its 20 minutes in 5, ~20
           requests/s: one replica misses the SLOs, two meet them); SLOs TTFT ≤ 1 s,
           TPOT ≤ 50 ms, goal 90 %; KPA target 64 requests in flight per replica, 2 to 8
           replicas (2 warm at the start: the fleet the traffic before the window needed),
           Knative's windows (60 s stable, 6 s panic), cold start = 35.3 GB per GPU at
           2 GB/s + 30 s start-up = 47.6 s
    measured (2 vCPUs, shared): 24 s wall; autoscaled 0.775 GPU-h at 99.7 % against the
           2-replica fixed fleet's 0.681 GPU-h at 99.7 %: 1.14× — this window's traffic is
           flat, so the cold starts and burst replicas cost more than they save

    autoscale_gpu_hours_vs_peak_fleet  autoscaled GPU-hours / the peak fleet's
    autoscale_slo_attainment           share of requests within both SLOs, autoscaled
    peak_fleet_slo_attainment          the same, the peak fleet
    peak_fleet_replicas                its replicas (peak_fleet_basis: how it was chosen)
"""

from __future__ import annotations

import importlib.resources
import time

from inferlab.engines.labs.cluster.session import ClusterSession, cluster_metrics
from inferlab.engines.labs.cluster.settings import CLUSTER_DEFAULTS, check_cluster_settings
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.traces.replay import trace_workload

AZURE_CONV_WINDOW = "azure_conv_2023_first20min.csv"
TIME_SCALE = 0.25
BENCH_SETTINGS = {"layout": "replicas", "model_config": "llama-3-70b", "tp": 4,
                  "hardware": "h100-sxm", "link": "nvlink4", "router": "least-tokens",
                  "prefix_cache": "none",  # Azure's trace has no prompt content to share
                  "slo_ttft_s": 1.0, "slo_tpot_s": 0.05, "attainment": 0.9,
                  "autoscale": True, "target_concurrency": 64.0, "min_replicas": 2,
                  "max_replicas": 8, "load_gb_per_s": 2.0, "startup_s": 30.0}


def autoscale_figures(window: str | None = None) -> dict:
    """The module doc's figures (`window`: a START:END part of the shipped trace, for a
    quicker run), with the run's setup and its wall time."""
    settings = check_cluster_settings(dict(CLUSTER_DEFAULTS, **BENCH_SETTINGS))
    vocab = load_model_preset(settings["model_config"]).vocab_size
    t0 = time.perf_counter()
    trace = importlib.resources.files("inferlab.assets") / "traces" / AZURE_CONV_WINDOW
    with importlib.resources.as_file(trace) as path:
        items, figures = trace_workload(path, "azure", window, TIME_SCALE, None, 0, vocab)
    session = ClusterSession(settings, items)
    result = session.run()
    peak = session.peak_fleet()
    scaled = cluster_metrics(result, settings, peak)["autoscale"]
    return {"autoscale_gpu_hours_vs_peak_fleet": scaled["gpu_hours_vs_peak_fleet"],
            "autoscale_slo_attainment": scaled["slo_attainment"],
            "peak_fleet_slo_attainment": peak.attainment,
            "peak_fleet_replicas": peak.replicas, "peak_fleet_basis": peak.basis,
            "autoscale_gpu_hours": scaled["gpu_hours"], "peak_fleet_gpu_hours": peak.gpu_hours,
            "autoscale_peak_replicas": scaled["peak_replicas"],
            "autoscale_replicas_started": scaled["replicas_started"],
            "autoscale_cold_start_s": scaled["cold_start_s"],
            "autoscale_trace_requests": figures["trace_requests"],
            "autoscale_trace_window": window or "all (20 min)",
            "autoscale_time_scale": TIME_SCALE,
            "autoscale_setup": f"{settings['model_config']} on {settings['tp']} × "
                               f"{settings['hardware']} per replica",
            "autoscale_wall_s": time.perf_counter() - t0}
