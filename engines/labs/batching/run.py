"""`inferlab run batching`: a seeded workload (or a JSONL trace) through the serving engine to
its end, headless: each iteration a trace span on the run's clock, the serving metrics and
every request's token times as the summary.

`--trace F` reads a published trace (engines/serve/traces) instead; the summary then adds
trace_format, trace_requests (those with ≥ 1 input and output token: the engine runs no
other), trace_requests_empty (left out) and trace_hit_rate_unbounded (the ids' own hit rate
under an unbounded cache) beside the run's prefix_hit_rate.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from inferlab.engines.fields import option_error
from inferlab.engines.gc_pause import gc_paused
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.labs.batching.section import batching_section
from inferlab.engines.labs.batching.session import batching_metrics, batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS, check_batching_settings
from inferlab.engines.labs.batching.trace import batching_trace_iteration, batching_trace_requests
from inferlab.engines.labs.batching.trace_workload import trace_workload
from inferlab.engines.model.registry import MODEL_NAMES
from inferlab.engines.serve.scenarios import WORKLOADS
from inferlab.engines.serve.scheduler import POLICIES, SCHEDULES
from inferlab.engines.serve.traces.options import add_trace_arguments, trace_setting
from inferlab.engines.serve.workload import read_trace_requests

OPTIONS = {"scenario": "--scenario", "policy": "--policy", "prefix_cache": "--prefix-cache",
           "schedule": "--schedule", "eviction_policy": "--eviction-policy", "clock": "--clock", "requests": "--requests",
           "rate_per_s": "--rate", "seed": "--seed", "model_config": "--model-config",
           "hardware": "--hardware", "model": "--model"}


def add_arguments(p) -> None:
    d = BATCHING_DEFAULTS
    p.add_argument("--policy", default=d["policy"], choices=POLICIES,
                   help=f"the batching policy (default {d['policy']})")
    p.add_argument("--scenario", default=d["scenario"], choices=WORKLOADS,
                   help="lognormal: the seeded stream of distinct prompts (--requests, --rate); "
                        "or requests that share prefixes: multi-turn, few-shot, doc-qa, "
                        "parallel, agent (default lognormal)")
    p.add_argument("--prefix-cache", default=d["prefix_cache"], choices=PREFIX_CACHES,
                   help="how cached prefixes are found: vLLM's block hashes, SGLang's radix "
                        f"tree over token ids, or none (default {d['prefix_cache']})")
    p.add_argument("--schedule", default=d["schedule"], choices=SCHEDULES,
                   help="which waiting request goes next: fcfs, or lpm (longest cached "
                        f"prefix first, SGLang's) (default {d['schedule']})")
    p.add_argument("--eviction-policy", default=d["eviction_policy"],
                   choices=EVICTION_POLICIES,
                   help="which unlocked radix-tree leaf goes first when the pool is full: "
                        "lru, lfu (least hit) or fifo (oldest), SGLang's three (default "
                        f"{d['eviction_policy']}; the block hashes always free LRU)")
    p.add_argument("--clock", default=d["clock"], choices=("simulated", "wall"),
                   help="simulated: the roofline time of each batch of --model-config on "
                        "--hardware; wall: the real --model, small runs (default simulated)")
    p.add_argument("--requests", type=int, default=d["requests"],
                   help=f"requests in the seeded workload (default {d['requests']})")
    p.add_argument("--rate", type=float, default=d["rate_per_s"],
                   help=f"Poisson arrival rate, requests/s (default {d['rate_per_s']:g})")
    p.add_argument("--seed", type=int, default=d["seed"], help="workload seed (default 0)")
    p.add_argument("--model-config", default=d["model_config"],
                   help=f"the simulated clock's model preset (default {d['model_config']})")
    p.add_argument("--hardware", default=d["hardware"],
                   help=f"the simulated clock's hardware preset (default {d['hardware']})")
    p.add_argument("--model", default=d["model"],
                   help=f"the wall clock's model: {', '.join(MODEL_NAMES)}, auto or a path "
                        f"(default {d['model']})")
    p.add_argument("--device", default="cpu", help="the wall clock's device (default cpu)")
    p.add_argument("--workload", default=None, metavar="FILE.jsonl",
                   help="a JSONL trace (arrival_s, prompt_tokens, output_tokens per line) "
                        "instead of the seeded workload")
    add_trace_arguments(p)


def settings_of(args) -> dict:
    """The run's settings from its arguments, checked; ValueError names the option."""
    settings = dict(BATCHING_DEFAULTS, scenario=args.scenario, policy=args.policy,
                    prefix_cache=args.prefix_cache, eviction_policy=args.eviction_policy,
                    schedule=args.schedule, clock=args.clock,
                    requests=args.requests, rate_per_s=args.rate, seed=args.seed,
                    model_config=args.model_config, hardware=args.hardware, model=args.model)
    try:
        return check_batching_settings(settings, "settings")
    except ValueError as e:
        raise option_error(e, OPTIONS) from None


def trace_items(args, settings: dict) -> tuple[list, dict]:
    """The --trace file's requests as the engine's, and the figures the run prints."""
    return trace_workload(args.trace, settings, args.device, args.trace_format,
                          window=args.window, time_scale=args.time_scale,
                          sample=args.sample, seed=args.seed,
                          progress=getattr(args, "progress", None))


def run(args, recorder):
    """Run the workload to its end; (section, summary: metrics + per-request timings)."""
    items, figures = None, {}
    if args.workload:
        items = read_trace_requests(args.workload, f"--workload {args.workload}")
        args.requests = min(len(items), 100_000)
    settings = settings_of(args)
    if getattr(args, "trace", None):
        items, figures = trace_items(args, settings)
        args.requests = min(len(items), 100_000)
        settings = settings_of(args)
        settings["trace"] = trace_setting(args, figures["trace_format"])
    progress = getattr(args, "progress", None)  # progress(fraction, message), when given one
    if progress is not None:
        progress(None, "preparing the workload and engine")
    with recorder.span("prepare the workload and engine", cat="batching",
                       args={"policy": settings["policy"], "clock": settings["clock"]}):
        session = batching_session(settings, args.device, items)
    offset = recorder.now_s()
    total, finished = len(session.request_infos()), 0
    with gc_paused():  # a run keeps every request, sequence and record it makes
        while not session.done:
            record = session.step()
            batching_trace_iteration(recorder, record, offset)
            if progress is not None:
                finished += len(record.finished)
                progress(finished / max(total, 1), f"{finished:,} of {total:,} requests")
    batching_trace_requests(recorder, session.request_infos(), session.records, offset)
    metrics = batching_metrics(session.serving_metrics(), session.records,
                               session.prefix_hit_rate())
    section = batching_section(settings, session.request_infos(), session.records, metrics)
    summary = dict(section["metrics"], **figures, requests=session.outputs())
    if session.linears_note:
        summary["model_linears"] = session.linears_note
    return section, summary
