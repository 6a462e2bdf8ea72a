"""`inferlab run kv`: a KV scenario run to its end, headless (real model, paged cache, contiguous
beside it).

`--trace F` (with `--trace-format`, `--window`, `--time-scale`, `--sample`: the batching lab's
meanings) runs a published trace's requests instead (trace_scenario.py): one step per `--step-s`
seconds of the trace, lengths shrunk by `--length-scale` for a small model; the summary adds
trace_format, trace_requests and trace_hit_rate_unbounded beside the run's own hit rate.

`add_arguments(parser)` adds the lab's options; `run(args, recorder)` returns (section,
summary). The registry entry (app/labs/registry.py) names both."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.labs.kv.scenarios import SCENARIO_NAMES, get_scenario
from inferlab.engines.labs.kv.section import kv_section
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS, KV_DTYPES
from inferlab.engines.labs.kv.trace import kv_trace_step
from inferlab.engines.labs.kv.trace_scenario import STEP_S, read_kv_trace, trace_scenario
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.serve.traces.options import add_trace_arguments, trace_setting


def add_arguments(p) -> None:
    p.add_argument("--model", default=KV_DEFAULTS["model"],
                   help="auto (SmolLM2-135M when installed, else tiny), smollm2-135m, tiny, or "
                        "a .gguf file / Hugging Face folder (default auto)")
    p.add_argument("--scenario", default=KV_DEFAULTS["scenario"],
                   help=f"{', '.join(SCENARIO_NAMES)} (default {KV_DEFAULTS['scenario']})")
    p.add_argument("--block-size", type=int, default=KV_DEFAULTS["block_size"],
                   help="tokens per KV block (default 16)")
    p.add_argument("--blocks", type=int, default=0,
                   help="blocks in the pool (default: sized from the scenario's requests)")
    p.add_argument("--kv-dtype", default="model", choices=KV_DTYPES,
                   help="what the pool stores: the model's dtype (default), or INT8 / FP8 "
                        "codes with a scale per token and head")
    p.add_argument("--prefix-cache", default=KV_DEFAULTS["prefix_cache"],
                   choices=("hash", "radix", "none"),
                   help="how cached prefixes are found: vLLM's block hashes (default), "
                        "SGLang's radix tree over token ids, or none")
    p.add_argument("--eviction-policy", default=KV_DEFAULTS["eviction_policy"],
                   choices=EVICTION_POLICIES,
                   help="which unlocked radix-tree leaf goes first when the pool is full: "
                        "least recently used (default), least hit, or oldest (SGLang's "
                        "three; the block hashes always free least recently used)")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (default cpu)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop after this many steps (default: run the scenario to its end)")
    add_trace_arguments(p)
    p.add_argument("--seed", type=int, default=0, help="--sample's seed (default 0)")
    p.add_argument("--length-scale", type=float, default=1.0, metavar="X",
                   help="--trace input and output lengths (and its block size) × X, so a "
                        "production trace fits a small model (Mooncake on SmolLM2: 1/64 = "
                        "0.015625); default 1")
    p.add_argument("--step-s", type=float, default=STEP_S, metavar="S",
                   help=f"--trace seconds one step stands for (default {STEP_S:g})")


def run(args, recorder):
    """Run a KV scenario to its end (real model, paged cache, contiguous beside it)."""
    get_scenario(args.scenario)  # unknown name: ValueError listing the scenarios
    if args.block_size < 1:
        raise ValueError(f"--block-size must be at least 1, got {args.block_size}")
    if args.blocks < 0:
        raise ValueError(f"--blocks must not be negative, got {args.blocks}")
    settings = dict(KV_DEFAULTS, model=args.model, scenario=args.scenario,
                    block_size=args.block_size, n_blocks=args.blocks, kv_dtype=args.kv_dtype,
                    prefix_cache=args.prefix_cache, eviction_policy=args.eviction_policy)
    progress = getattr(args, "progress", None)  # progress(fraction, message), when given one
    if progress is not None:
        progress(None, f"loading {args.model}")
    with recorder.span("load model and prepare", cat="kv", args={"model": args.model}):
        load_lab_model(args.model, args.device)

    scenario, figures = None, {}
    if getattr(args, "trace", None):
        settings["trace"], scenario, figures = _trace_scenario(args)

    def on_step(record):
        kv_trace_step(recorder, record)
        if progress is not None:
            progress(None, f"step {record.step}")

    session, records = kv_run(settings, args.device, args.max_steps, on_step=on_step,
                              scenario=scenario)
    section = kv_section(settings, session.info, session.seq_infos(), records)
    return section, {**figures, **section["metrics"]}


def _trace_scenario(args):
    """The --trace setting (with the format read), its window's requests as a scenario for
    the lab's model, and its figures."""
    if not 0 < args.length_scale <= 1:
        raise ValueError(f"--length-scale must be in (0, 1], got {args.length_scale}")
    model, _ = load_lab_model(args.model, args.device)
    trace = trace_setting(args, args.trace_format, length_scale=float(args.length_scale),
                          step_s=float(args.step_s), seed=args.seed)
    trace, kept, figures = read_kv_trace(trace)
    scenario = trace_scenario(kept, Path(args.trace).name, model.config.vocab_size,
                              args.block_size, args.blocks or None, args.step_s)
    return trace, scenario, figures
