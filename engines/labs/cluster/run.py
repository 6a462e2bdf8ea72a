"""`inferlab run cluster`: the requests through a simulated cluster to their end, headless:
each instance's iterations as spans on its own track, each KV transfer on the link's track;
the summary holds kv_bytes_per_token, the link, the metrics, per request where it ran, its
KV transfer and its token times, per instance its utilisation.

`--search replicas|pd` instead runs every layout of that kind on `--gpus` GPUs (one full
run each) and prints the grid with the best layout by goodput per GPU. Its probes run as Ray
tasks where ray is installed (a local Ray of `--workers` CPUs on 127.0.0.1, or the cluster
at `--ray-address`), else serially; `executor` in the output says which.

`--trace F` (with `--trace-format`, `--window A:B`, `--time-scale`, `--sample`, meaning what
the batching lab's do) replays a published trace instead of the seeded workload, for a run
or a search; the summary adds trace_format, trace_requests, trace_requests_empty and
trace_hit_rate_unbounded.

`--autoscale` runs replicas of `--tp` GPUs scaled by concurrency (Knative's KPA:
`--target-concurrency`, `--min-replicas`, `--max-replicas`, windows, a cold start per new
replica) and then the fixed fleets that bracket the smallest one meeting the attainment; the
summary starts with replicas_over_time, gpu_hours, slo_attainment, peak_fleet and
autoscale_gpu_hours_vs_peak_fleet."""

from __future__ import annotations

from inferlab.engines.cluster.expert_load import COUNTS
from inferlab.engines.cluster.fanout import choose_fanout
from inferlab.engines.cluster.layout import LAYOUTS, REPLICAS
from inferlab.engines.cluster.links import list_link_presets
from inferlab.engines.cluster.router import ROUTERS
from inferlab.engines.cluster.search import SEARCH_KINDS
from inferlab.engines.fields import option_error
from inferlab.engines.labs.cluster.expert_counts import check_routes_alike, read_expert_counts
from inferlab.engines.labs.cluster.records import search_summary
from inferlab.engines.labs.cluster.section import cluster_section
from inferlab.engines.labs.cluster.session import ClusterSession
from inferlab.engines.labs.cluster.settings import (
    CLUSTER_DEFAULTS,
    CLUSTER_DTYPES,
    EXPERT_LOAD_CHOICES,
    check_cluster_settings,
    cluster_trace,
)
from inferlab.engines.labs.cluster.trace import trace_cluster
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.scenarios import WORKLOADS
from inferlab.engines.serve.traces.options import add_trace_arguments, trace_setting
from inferlab.engines.serve.workload import read_trace_requests

OPTIONS = {"layout": "--layout", "gpus": "--gpus", "tp": "--tp", "prefill": "--prefill",
           "decode": "--decode", "router": "--router", "link": "--link",
           "hardware": "--hardware", "model_config": "--model-config",
           "scenario": "--scenario", "requests": "--requests", "rate_per_s": "--rate",
           "seed": "--seed", "slo_ttft_s": "--slo-ttft", "slo_tpot_s": "--slo-tpot",
           "overlap_transfer": "--no-overlap", "ep": "--ep", "eplb_slots": "--eplb-slots",
           "dual_batch_overlap": "--dual-batch-overlap", "expert_load": "--expert-load",
           "zipf_skew": "--zipf-skew", "dtype": "--dtype", "autoscale": "--autoscale",
           "target_concurrency": "--target-concurrency", "min_replicas": "--min-replicas",
           "max_replicas": "--max-replicas", "stable_window_s": "--stable-window",
           "panic_window_s": "--panic-window", "scale_down_delay_s": "--scale-down-delay",
           "load_gb_per_s": "--load-gb-per-s", "startup_s": "--startup-s",
           "cold_start_s": "--cold-start-s"}


def add_arguments(p) -> None:
    d = CLUSTER_DEFAULTS
    p.add_argument("--layout", default=None, choices=LAYOUTS,
                   help="replicas: data-parallel instances behind the router; tp: one "
                        "instance over every GPU; pd: prefill and decode instances, the KV "
                        "moved between them; ep: expert-parallel groups of --ep GPUs "
                        f"(attention data-parallel, experts spread) (default {d['layout']}; "
                        "replicas with --autoscale)")
    p.add_argument("--gpus", type=int, default=d["gpus"],
                   help=f"GPUs in the cluster (default {d['gpus']})")
    p.add_argument("--tp", type=int, default=d["tp"],
                   help="tensor-parallel degree of each instance (default 1)")
    p.add_argument("--prefill", type=int, default=d["prefill"],
                   help="pd: prefill instances (default: half)")
    p.add_argument("--decode", type=int, default=d["decode"],
                   help="pd: decode instances (default: the rest)")
    p.add_argument("--router", default=d["router"], choices=ROUTERS,
                   help=f"how requests are spread over instances (default {d['router']})")
    p.add_argument("--link", default=d["link"], choices=list_link_presets(),
                   help=f"the interconnect between GPUs (default {d['link']})")
    p.add_argument("--no-overlap", action="store_true",
                   help="pd: send the KV whole after the prefill instead of layer by layer")
    p.add_argument("--ep", type=int, default=d["ep"],
                   help="ep (and pd): GPUs per expert-parallel instance; --tp is the "
                        "attention's tensor degree inside it (default 1)")
    p.add_argument("--eplb-slots", type=int, default=d["eplb_slots"],
                   help="redundant expert slots per GPU for EPLB's copies of hot experts "
                        "(default 0: no balancer)")
    p.add_argument("--dual-batch-overlap", action="store_true",
                   help="two micro-batches: the all-to-alls hidden behind compute")
    p.add_argument("--expert-load", default=d["expert_load"], choices=EXPERT_LOAD_CHOICES,
                   help="how tokens spread over the experts (default uniform)")
    p.add_argument("--expert-counts", default=None, metavar="MOE_SNAPSHOT.json",
                   help="the load a MoE lab run measured (`inferlab run moe --snapshot F`): "
                        "tokens per expert per layer, for a preset of the same experts and "
                        "top-k (sets --expert-load counts)")
    p.add_argument("--zipf-skew", type=float, default=d["zipf_skew"],
                   help=f"zipf: the skew s, load ∝ 1/rank^s (default {d['zipf_skew']:g})")
    p.add_argument("--dtype", default=d["dtype"], choices=CLUSTER_DTYPES,
                   help="weights, KV and activations (default fp16)")
    p.add_argument("--hardware", default=d["hardware"],
                   help=f"each GPU's hardware preset (default {d['hardware']})")
    p.add_argument("--model-config", default=d["model_config"],
                   help=f"the served model's preset (default {d['model_config']})")
    p.add_argument("--scenario", default=d["scenario"], choices=WORKLOADS,
                   help="lognormal: the seeded stream (--requests, --rate); or requests "
                        "that share prefixes (multi-turn, few-shot, doc-qa, parallel, agent)")
    p.add_argument("--requests", type=int, default=d["requests"],
                   help=f"requests in the seeded stream (default {d['requests']})")
    p.add_argument("--rate", type=float, default=d["rate_per_s"],
                   help=f"Poisson arrival rate, requests/s (default {d['rate_per_s']:g})")
    p.add_argument("--seed", type=int, default=d["seed"], help="workload seed (default 0)")
    p.add_argument("--slo-ttft", type=float, default=d["slo_ttft_s"],
                   help=f"goodput's TTFT objective, s (default {d['slo_ttft_s']:g})")
    p.add_argument("--slo-tpot", type=float, default=d["slo_tpot_s"],
                   help=f"goodput's TPOT objective, s (default {d['slo_tpot_s']:g})")
    p.add_argument("--workload", default=None, metavar="FILE.jsonl",
                   help="a JSONL trace (arrival_s, prompt_tokens, output_tokens per line) "
                        "instead of the seeded workload")
    p.add_argument("--search", default=None, choices=SEARCH_KINDS,
                   help="run every layout of this kind on --gpus GPUs and report the grid")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="--search: run the probes on your Ray cluster at ADDR (default: a "
                        "local Ray on 127.0.0.1 where ray is installed, else serially)")
    p.add_argument("--workers", type=int, default=None,
                   help="--search: CPUs of the local Ray, one probe each at a time "
                        "(default: this machine's cores)")
    p.add_argument("--serial", action="store_true",
                   help="--search: run the probes one after another here, without Ray")
    add_trace_arguments(p)
    p.add_argument("--autoscale", action="store_true",
                   help="replicas of --tp GPUs scaled by concurrency as Knative's KPA does "
                        "(stable and panic windows); prints replicas over time and GPU-hours "
                        "beside the fixed fleet sized for the peak")
    p.add_argument("--target-concurrency", type=float, default=d["target_concurrency"],
                   help="--autoscale: requests in flight per replica (default "
                        f"{d['target_concurrency']:g})")
    p.add_argument("--min-replicas", type=int, default=d["min_replicas"],
                   help=f"--autoscale: the fewest replicas (default {d['min_replicas']})")
    p.add_argument("--max-replicas", type=int, default=d["max_replicas"],
                   help=f"--autoscale: the most replicas (default {d['max_replicas']})")
    p.add_argument("--stable-window", type=float, default=d["stable_window_s"],
                   help=f"--autoscale: the stable window, s (default {d['stable_window_s']:g})")
    p.add_argument("--panic-window", type=float, default=d["panic_window_s"],
                   help=f"--autoscale: the panic window, s (default {d['panic_window_s']:g})")
    p.add_argument("--scale-down-delay", type=float, default=d["scale_down_delay_s"],
                   help="--autoscale: how long a lower count must hold before replicas go, "
                        "s (default 0)")
    p.add_argument("--load-gb-per-s", type=float, default=d["load_gb_per_s"],
                   help="--autoscale: a new replica's weight loading rate per GPU, GB/s "
                        f"(default {d['load_gb_per_s']:g})")
    p.add_argument("--startup-s", type=float, default=d["startup_s"],
                   help="--autoscale: a new replica's server start-up after its weights, s "
                        f"(default {d['startup_s']:g})")
    p.add_argument("--cold-start-s", type=float, default=None,
                   help="--autoscale: a new replica's whole cold start, s (default: weights "
                        "per GPU / --load-gb-per-s + --startup-s)")


def settings_of(args) -> dict:
    autoscale = bool(getattr(args, "autoscale", False))
    layout = args.layout or (REPLICAS if autoscale else CLUSTER_DEFAULTS["layout"])
    settings = dict(CLUSTER_DEFAULTS, layout=layout, gpus=args.gpus, tp=args.tp,
                    prefill=args.prefill, decode=args.decode, router=args.router,
                    link=args.link, overlap_transfer=not args.no_overlap, ep=args.ep,
                    eplb_slots=args.eplb_slots, dual_batch_overlap=args.dual_batch_overlap,
                    expert_load=COUNTS if args.expert_counts else args.expert_load,
                    zipf_skew=args.zipf_skew, dtype=args.dtype,
                    hardware=args.hardware, model_config=args.model_config,
                    scenario=args.scenario, requests=args.requests, rate_per_s=args.rate,
                    seed=args.seed, slo_ttft_s=args.slo_ttft, slo_tpot_s=args.slo_tpot)
    if autoscale:
        settings.update(autoscale=True, target_concurrency=args.target_concurrency,
                        min_replicas=args.min_replicas, max_replicas=args.max_replicas,
                        stable_window_s=args.stable_window, panic_window_s=args.panic_window,
                        scale_down_delay_s=args.scale_down_delay,
                        load_gb_per_s=args.load_gb_per_s, startup_s=args.startup_s,
                        cold_start_s=args.cold_start_s)
    try:
        return check_cluster_settings(settings, "settings")
    except ValueError as e:
        raise option_error(e, OPTIONS) from None


def run(args, recorder):
    """(section, summary): the run to its end, or with --search the layout grid."""
    items, figures = None, {}
    if args.workload:
        items = read_trace_requests(args.workload, f"--workload {args.workload}")
    settings = settings_of(args)
    if getattr(args, "trace", None):
        if args.workload:
            raise ValueError("--trace and --workload exclude each other: choose one")
        settings["trace"] = trace_setting(args, args.trace_format)
        items, figures, settings = cluster_trace(settings)  # as the lab's Trace… reads it
    if items is not None:  # the settings say how many requests ran
        settings["requests"] = max(1, min(len(items), 100_000))
    counts = None
    if args.expert_counts:
        counts = read_expert_counts(args.expert_counts)
        check_routes_alike(counts, load_model_preset(settings["model_config"]))
    progress = getattr(args, "progress", None)
    session = ClusterSession(settings, items, counts)
    config = session.config
    if args.search:
        if args.workers is not None and args.workers < 1:
            raise ValueError(f"--workers must be at least 1, got {args.workers}")
        if args.serial and args.ray_address:
            raise ValueError("--serial and --ray-address exclude each other: choose one")
        fanout = choose_fanout(args.serial, args.ray_address, args.workers)
        summary = search_summary(session.search(args.search, progress, fanout))
        return cluster_section(settings, None, summary), figures | summary
    with recorder.span("route and run the cluster", cat="cluster",
                       args={"layout": config.layout.label, "router": config.router}):
        result = session.run(progress)
    peak = None
    if settings["autoscale"]:
        with recorder.span("the fixed fleet sized for the peak", cat="cluster"):
            peak = session.peak_fleet(progress)
    trace_cluster(recorder, result, recorder.now_s())
    section = cluster_section(settings, result, peak=peak)
    link = config.link
    summary = {"kv_bytes_per_token": result.kv_bytes_per_token,
               "link": {"id": link.id, "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                        "latency_s": link.latency_s},
               "layout": config.layout.to_dict(), "metrics": section["metrics"],
               "requests": [{"request_id": r.request_id, "arrival_s": r.arrival_s,
                             "prompt_tokens": r.prompt_tokens, "instance": r.instance,
                             "decode_instance": r.decode_instance,
                             "kv_transfer_s": r.kv_transfer_s,
                             "token_times_s": list(r.token_times_s)}
                            for r in result.requests],
               "instances": [{"index": i.index, "role": i.role, "tp": i.tp,
                              "kv_total_blocks": i.kv_total_blocks,
                              "utilization": i.utilization(result.makespan_s),
                              "comm_s": i.comm_s} for i in result.instances]}
    if result.moe_layers:
        summary["moe_layers"] = [m.to_dict() for m in result.moe_layers]
    if counts is not None:
        summary["expert_counts"] = counts.to_dict()
    if result.autoscale is not None:
        summary = autoscale_summary(result.autoscale, section["metrics"]["autoscale"]) | summary
    return section, figures | summary


def autoscale_summary(run, figures: dict) -> dict:
    """The autoscaled run's figures first: replicas over time ([t_s, serving, held, in
    flight] per tick), GPU-hours and attainment, the peak fleet's, and their ratio."""
    return {"replicas_over_time": run.replicas_over_time(), "gpu_hours": figures["gpu_hours"],
            "slo_attainment": figures["slo_attainment"], "peak_fleet": figures["peak_fleet"],
            "autoscale_gpu_hours_vs_peak_fleet": figures["gpu_hours_vs_peak_fleet"],
            "autoscale": {"policy": run.policy, "cold_start_s": run.cold_start_s,
                          "peak_replicas": run.peak_replicas,
                          "replicas": [r.to_dict() for r in run.replicas]}}

