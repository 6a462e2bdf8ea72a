"""The cluster lab's settings: the layout (replicas, tp, pd or ep on `gpus` GPUs), the router,
the link, the hardware and model presets and the dtype, the workload (the batching lab's
seeded stream or one of its prefix-sharing scenarios, a JSONL trace, or a published trace:
`trace`, the batching lab's field, read by `cluster_trace` as `run cluster --trace` reads
it), the SLOs goodput is judged by.

Expert parallelism (layout ep, or pd with ep > 1): `ep` GPUs per instance, `eplb_slots`
redundant expert slots per GPU, `dual_batch_overlap`, and the experts' load (`expert_load`
uniform or zipf of `zipf_skew`, seeded by `seed`). A replicas or tp layout ignores them.

Autoscaling (`autoscale`, a replicas layout): replicas of `tp` GPUs between `min_replicas`
and `max_replicas`, scaled by Knative's KPA to `target_concurrency` requests in flight per
replica (engines/cluster/autoscale.py), each new one cold-starting for its weights per GPU
over `load_gb_per_s` plus `startup_s` (or for `cold_start_s` when that is given)."""

from __future__ import annotations

from inferlab.engines.cluster.autoscale import AutoscalePolicy, cold_start_s
from inferlab.engines.cluster.cluster import CLUSTER_POLICIES, ClusterConfig
from inferlab.engines.cluster.ep_executor import check_ep
from inferlab.engines.cluster.expert_load import COUNTS, UNIFORM, ZIPF, ExpertLoad
from inferlab.engines.cluster.goodput import DEFAULT_ATTAINMENT
from inferlab.engines.cluster.layout import EP, LAYOUTS, PD, REPLICAS, Layout, layout_for
from inferlab.engines.cluster.links import list_link_presets, load_link_preset
from inferlab.engines.cluster.router import ROUTERS
from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.labs.batching.settings import BATCHING_SETTINGS
from inferlab.engines.model.config import list_model_presets, load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scenarios import SIMULATED_SCENARIO_SCALE, workload_items
from inferlab.engines.serve.traces.replay import trace_workload

EXPERT_LOAD_CHOICES = (UNIFORM, ZIPF, COUNTS)
"""The loads a setting names; counts: a MoE lab run's measured router (expert_counts.py),
given beside the settings (`--expert-counts F`)."""
CLUSTER_DTYPES = ("fp16", "bf16", "fp8")

CLUSTER_DEFAULTS = {
    "layout": PD,
    "gpus": 8,
    "tp": 1,
    "prefill": 0,  # pd: prefill instances; 0 = half of them (and decode the rest)
    "decode": 0,
    "router": "least-tokens",
    "link": "nvlink4",
    "overlap_transfer": True,  # pd: the KV moves layer by layer during the prefill
    "ep": 1,  # ep (and pd): GPUs of an expert-parallel instance
    "eplb_slots": 0,
    "dual_batch_overlap": False,
    "expert_load": UNIFORM,
    "zipf_skew": 1.0,
    "model_config": "llama-3-8b",
    "hardware": "h100-sxm",
    "dtype": "fp16",  # weights, KV and activations
    "policy": "continuous",
    "prefix_cache": "hash",
    "scenario": "lognormal",
    "requests": 400,
    "rate_per_s": 40.0,
    "prompt_mean": 6.0,  # lognormal: median e^6 ≈ 403 tokens
    "prompt_sigma": 0.5,
    "output_mean": 5.0,  # median e^5 ≈ 148 tokens
    "output_sigma": 0.5,
    "seed": 0,
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 128,
    "slo_ttft_s": 1.0,
    "slo_tpot_s": 0.05,
    "attainment": DEFAULT_ATTAINMENT,
    # autoscaling (a replicas layout of t-GPU replicas; `gpus` then unused): Knative's KPA
    "autoscale": False,
    "target_concurrency": 16.0,  # requests in flight per replica
    "min_replicas": 1,
    "max_replicas": 8,
    "stable_window_s": 60.0,
    "panic_window_s": 6.0,
    "scale_down_delay_s": 0.0,
    "load_gb_per_s": 2.0,  # a new replica's weights load at this rate per GPU
    "startup_s": 30.0,  # then its server starts (CUDA graphs, warm-up)
    "cold_start_s": None,  # a given cold start instead of the two above
    "trace": None,  # a published trace's options instead of the workload (batching's field)
}

CLUSTER_SETTINGS = {
    "layout": Setting("str", choices=LAYOUTS),
    "gpus": Setting("int", 1, 1024),
    "tp": Setting("int", 1, 1024),
    "prefill": Setting("int", 0, 1024),
    "decode": Setting("int", 0, 1024),
    "router": Setting("str", choices=ROUTERS),
    "link": Setting("str", choices=list_link_presets),
    "overlap_transfer": Setting("bool"),
    "ep": Setting("int", 1, 1024),
    "eplb_slots": Setting("int", 0, 64),
    "dual_batch_overlap": Setting("bool"),
    "expert_load": Setting("str", choices=EXPERT_LOAD_CHOICES),
    "zipf_skew": Setting("float", 0.0, 4.0),
    "model_config": Setting("str", choices=list_model_presets),
    "hardware": Setting("str", choices=list_hardware_presets),
    "dtype": Setting("str", choices=CLUSTER_DTYPES),
    "policy": Setting("str", choices=CLUSTER_POLICIES),
    "prefix_cache": Setting("str", choices=PREFIX_CACHES),
    # the workload, the per-instance scheduler budget and the SLOs: the batching lab's own
    **{key: BATCHING_SETTINGS[key] for key in (
        "scenario", "requests", "rate_per_s", "prompt_mean", "prompt_sigma", "output_mean",
        "output_sigma", "seed", "max_num_batched_tokens", "max_num_seqs", "slo_ttft_s",
        "slo_tpot_s", "trace")},
    "attainment": Setting("float", 0.01, 1.0),
    "autoscale": Setting("bool"),
    "target_concurrency": Setting("float", 0.1, 10_000.0),
    "min_replicas": Setting("int", 0, 1024),
    "max_replicas": Setting("int", 1, 1024),
    "stable_window_s": Setting("float", 1.0, 3600.0),
    "panic_window_s": Setting("float", 0.1, 3600.0),
    "scale_down_delay_s": Setting("float", 0.0, 3600.0),
    "load_gb_per_s": Setting("float", 0.01, 10_000.0),
    "startup_s": Setting("float", 0.0, 3600.0),
    "cold_start_s": Setting("float", 0.0, 3600.0, none=True),
}


def check_cluster_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked, with the layout's GPU arithmetic (ValueError naming
    the field)."""
    settings = check_settings(settings, CLUSTER_SETTINGS, CLUSTER_DEFAULTS, where)
    try:
        layout = cluster_layout(settings)
    except ValueError as e:
        raise ValueError(f"{where}.layout: {e}") from None
    if layout.expert_parallel:
        try:
            check_ep(load_model_preset(settings["model_config"]), layout.tp, layout.ep)
        except ValueError as e:
            raise ValueError(f"{where}.ep: {e}") from None
    if settings["autoscale"]:
        if settings["layout"] != REPLICAS:
            raise ValueError(f"{where}.autoscale: autoscaling scales a replicas layout, not "
                             f"{settings['layout']}")
        try:
            autoscale_policy(settings)
        except ValueError as e:
            field = str(e).split(" ", 1)[0]
            raise ValueError(f"{where}.{field}: {e}") from None
    return settings


def autoscale_policy(settings: dict) -> AutoscalePolicy:
    """The settings' KPA policy (Knative's defaults for the knobs the settings lack)."""
    s = settings
    return AutoscalePolicy(float(s["target_concurrency"]), s["min_replicas"],
                           s["max_replicas"], stable_window_s=float(s["stable_window_s"]),
                           panic_window_s=float(s["panic_window_s"]),
                           scale_down_delay_s=float(s["scale_down_delay_s"]))


def autoscale_cold_start_s(settings: dict) -> float:
    """A new replica's cold start: `cold_start_s` when given, else its weights per GPU over
    the load bandwidth + start-up."""
    s = settings
    if s.get("cold_start_s") is not None:
        return float(s["cold_start_s"])
    return cold_start_s(load_model_preset(s["model_config"]), s["tp"],
                        float(s["load_gb_per_s"]), float(s["startup_s"]), s["dtype"])


def cluster_layout(settings: dict):
    """The settings' Layout; the expert-parallel fields count for ep layouts and for pd
    layouts of ep > 1 only. Autoscaled: replicas of t GPUs, as many as max_replicas (the
    fleet at its largest; the run starts with min_replicas)."""
    s = settings
    if s.get("autoscale") and s["layout"] == REPLICAS:
        return Layout(REPLICAS, tp=s["tp"], replicas=s["max_replicas"])
    pd_counts = (s["prefill"] or None, s["decode"] or None) if s["layout"] == PD else (None,
                                                                                       None)
    tp = s["tp"] if s["layout"] != "tp" else None
    expert = {}
    if s["layout"] == EP or (s["layout"] == PD and s["ep"] > 1):
        expert = {"ep": s["ep"], "eplb_slots": s["eplb_slots"],
                  "dual_batch_overlap": s["dual_batch_overlap"]}
    return layout_for(s["layout"], s["gpus"], tp, *pd_counts, **expert)


def cluster_expert_load(settings: dict, counts=None) -> ExpertLoad:
    """The settings' load; `counts` (expert_counts.MeasuredCounts) for expert_load counts."""
    if settings["expert_load"] == COUNTS:
        if counts is None:
            raise ValueError("settings.expert_load: counts needs a MoE lab run's measured "
                             "counts (--expert-counts F)")
        return counts.load(settings["seed"])
    return ExpertLoad(settings["expert_load"], float(settings["zipf_skew"]), settings["seed"])


def cluster_config(settings: dict, counts=None) -> ClusterConfig:
    """The run's ClusterConfig; `counts`: see cluster_expert_load."""
    s = settings
    return ClusterConfig(load_model_preset(s["model_config"]),
                         load_hardware_preset(s["hardware"]), load_link_preset(s["link"]),
                         cluster_layout(s), router=s["router"], policy=s["policy"],
                         prefix_cache=s["prefix_cache"],
                         max_num_batched_tokens=s["max_num_batched_tokens"],
                         max_num_seqs=s["max_num_seqs"],
                         overlap_transfer=s["overlap_transfer"], dtype=s["dtype"],
                         expert_load=cluster_expert_load(s, counts))


def cluster_slo(settings: dict) -> SLO:
    return SLO(ttft_s=float(settings["slo_ttft_s"]), tpot_s=float(settings["slo_tpot_s"]))


def cluster_requests(settings: dict, vocab_size: int, items=None) -> list[Request]:
    """The run's requests: `items` (WorkloadRequests, a trace) or the settings' workload."""
    if items is None:  # the batching lab's seeded stream or scenario, at its GPU scale
        items = workload_items(settings, vocab_size, SIMULATED_SCENARIO_SCALE)
    return requests_from_workload(items, vocab_size)


def cluster_trace(settings: dict, progress=None) -> tuple[list | None, dict, dict]:
    """(items, figures, settings) of the settings' published `trace`: its requests as the
    run's WorkloadRequests and the figures beside them (replay.trace_workload, with the
    model's vocabulary and the settings' seed for the sample, as `run cluster --trace`
    reads them), and the settings with the requests counted and the format that was read;
    (None, {}, settings) when there is no trace. `progress(fraction, message)` while reading."""
    t = settings.get("trace")
    if t is None:
        return None, {}, settings
    items, figures = trace_workload(
        t["path"], t["format"], t["window"], t["time_scale"], t["sample"], settings["seed"],
        load_model_preset(settings["model_config"]).vocab_size, progress=progress)
    used = dict(settings, requests=max(1, min(len(items), 100_000)),
                trace=dict(t, format=figures["trace_format"]))
    return items, figures, used
