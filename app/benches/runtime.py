"""`inferlab bench runtime`: the native path against the torch path, side by side in one run.

Both paths' SmolLM2 models are loaded in this process (`load_model(..., kernels=path)`: each
model keeps the path its layers were built for) and measured in turn within each repeat, the
median reported:

    verify_cost_ratio_k4      t(forward of 5 tokens) / t(forward of 1 token), same context
                              (64 cached tokens), through ModelRunner.step
    decode_tokens_per_s       single-stream greedy decode, as `bench model` measures it
    decode_vs_transformers    that / transformers' `generate` on the same GGUF and prompt
    decode_bandwidth_fraction (weight bytes + KV bytes read per token) / time per token,
                              over `dst.copy_(src)`'s bandwidth (read + write) at the same
                              thread count: 1.0 is the memory's own rate
    decode_read_bandwidth_fraction  the same over a read-only stream's rate (`src.sum()`),
                              which some machines run below the copy rate
    linears                   each SmolLM2 linear shape, 1/5/9/16 rows: µs per call and the
                              ratio to one row, torch's best layout against the kernel
    int4_decode_vs_fp32       INT4-g128 (lm_head INT8) decode / fp32 decode, both native
    int4_decode_vs_llama_cpp  that INT4 decode / llama.cpp's (llama-cpp-python) on the
                              shipped GGUF as stored (Q4_1, Q8_0 embedding), same threads
    one_call_per_step_speedup, int4_one_call_per_step_speedup  decode with every layer of a
                              step in one native call / the same model calling each kernel
                              from Python (engines/kernels/decoder.py), fp32 and INT4
    kv_int8_decode_vs_fp32_kv decode on an INT8 KV cache / on the fp32 one, native, after a
                              prompt of KV_CONTEXT_TOKENS (the default one repeated)
    kv_fp8_decode_vs_fp32_kv  the same on an FP8 E4M3 KV cache
    input_batch_speedup,      a 32-sequence step's host side: the persistent input batch
    batched_sampling_speedup  against rebuilt metadata, batched sampling against one call
                              per request (app/benches/host.py)

The JSON names the CPU's SIMD flags and the build that ran (`kernels.describe()`).
"""

from __future__ import annotations

import copy
import statistics
import time

import torch

from inferlab.app.benches.host import host_step_figures
from inferlab.engines import kernels
from inferlab.engines.hardware.microbench import measure_copy_bandwidth, measure_read_bandwidth
from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.model.bench import (
    DEFAULT_PROMPT,
    decode_rate,
    generate_runner,
    llama_cpp_runner,
    transformers_runner,
)
from inferlab.engines.model.llama import resolve_dtype
from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.quant.kv_quant import kv_quantized
from inferlab.engines.quant.lowbit_linear import lowbit_model
from inferlab.engines.speculative.verify_cost import step_seconds

KV_CONTEXT_TOKENS = 2048
"""The KV-dtype pair decodes after the default prompt repeated to this many tokens (or the
model's context less the new tokens): at ~250 tokens SmolLM2's K/V is 2 % of the bytes a
token reads and any KV dtype decodes alike; at 2,048 it is 15 %."""
ROW_COUNTS = (1, 5, 9, 16)


CPU = torch.device("cpu")


def _linear_table(models: dict, repeats: int) -> list[dict]:
    """Per linear shape and row count: µs per call summed over the model's 30 layers / 30."""
    rows = []
    names = ("qkv", "o", "gate_up", "down")
    for name in names:
        layers = {path: [getattr(lw, name) for lw in m.layers] for path, m in models.items()}
        first = layers["native"][0]
        for m_rows in ROW_COUNTS:
            x = torch.randn(m_rows, first.in_features).to(models["native"].dtype)
            row = {"linear": name, "out": first.out_features, "in": first.in_features,
                   "rows": m_rows}
            for path, ls in layers.items():
                s = median_call_s(lambda ls=ls, x=x: [lin(x) for lin in ls], CPU,
                                  repeats=repeats, warmup=1)
                row[f"{path}_us"] = s / len(ls) * 1e6
            rows.append(row)
    for row in rows:
        one = next(r for r in rows if r["linear"] == row["linear"] and r["rows"] == 1)
        for path in models:
            row[f"{path}_vs_1_row"] = row[f"{path}_us"] / one[f"{path}_us"]
        row["native_speedup"] = row["torch_us"] / row["native_us"]
    return rows


def run_runtime_bench(model: str = "smollm2-135m", dtype: str = "fp32", threads: int = 1,
                      repeats: int = 3, new_tokens: int = 32, transformers: bool = True,
                      llama_cpp: bool = True) -> dict:
    """Every figure above for `model` in `dtype` on `threads` torch threads (restored after);
    `transformers` and `llama_cpp` run those peers (where installed)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        models, tok = {}, None
        for path in kernels.KERNEL_PATHS:
            models[path], tok = load_model(model, dtype=dtype, kernels=path)
        described = kernels.describe("native")
        if described["native_isa"] is None:
            return {"error": f"the native library does not run here: "
                             f"{described['native_error']}", **described}
        prompt_ids = tok.encode_prompt(DEFAULT_PROMPT)
        runs = {path: generate_runner(m, prompt_ids) for path, m in models.items()}
        runs.update(_variant_runners(models["native"], prompt_ids))
        tf_error = llama_error = None
        if transformers:
            try:
                runs["transformers"] = _transformers_runner(model, dtype, prompt_ids)
            except (ImportError, ValueError) as e:
                tf_error = str(e)
        if llama_cpp and "int4" in runs:
            try:
                runs["llama_cpp"] = _llama_cpp_runner(model, prompt_ids, threads)
            except (ImportError, ValueError, OSError) as e:
                llama_error = str(e) or type(e).__name__
        verify: dict[str, list[float]] = {p: [] for p in models}
        decode: dict[str, list[float]] = {p: [] for p in runs}
        for run in runs.values():
            run(2)
        for _ in range(repeats):
            for path, m in models.items():
                verify[path].append(step_seconds(m, 5) / step_seconds(m, 1))
            for path, run in runs.items():
                decode[path].append(decode_rate(run, new_tokens))
        med = {p: statistics.median(v) for p, v in decode.items()}
        copy_bw = measure_copy_bandwidth("cpu", nbytes=256 << 20)
        read_bw = measure_read_bandwidth("cpu", nbytes=256 << 20)
        m = models["native"]
        ctx = len(prompt_ids) + new_tokens // 2  # the mean context while decoding
        kv_read = ctx * m.new_cache(1, 16).bytes_per_slot
        bytes_per_token = m.weight_bytes + kv_read
        tf = med.get("transformers")
        out = {
            **described, "model": model, "dtype": dtype, "threads": threads,
            "repeats": repeats, "new_tokens": new_tokens,
            "verify_cost_ratio_k4": statistics.median(verify["native"]),
            "verify_cost_ratio_k4_torch": statistics.median(verify["torch"]),
            "decode_tokens_per_s": med["native"],
            "decode_tokens_per_s_torch": med["torch"],
            "native_vs_torch_decode": med["native"] / med["torch"],
            "transformers_tokens_per_s": tf,
            "decode_vs_transformers": med["native"] / tf if tf else None,
            "decode_vs_transformers_torch": med["torch"] / tf if tf else None,
            "bytes_per_token": bytes_per_token,
            "copy_bandwidth_bytes_per_s": copy_bw,
            "decode_bandwidth_fraction": bytes_per_token * med["native"] / copy_bw,
            "decode_bandwidth_fraction_torch": bytes_per_token * med["torch"] / copy_bw,
            "read_bandwidth_bytes_per_s": read_bw,
            "decode_read_bandwidth_fraction": bytes_per_token * med["native"] / read_bw,
            "linears": _linear_table(models, repeats=5),
            "samples": {"verify_cost_ratio_k4": verify, "decode_tokens_per_s": decode},
        }
        long_ids = long_prompt(prompt_ids, m.config.max_position, new_tokens)
        med.update(kv_dtype_rates(m, long_ids, new_tokens, repeats))
        out.update(_variant_figures(med, long_ids))
        out.update(host_step_figures(vocab=m.config.vocab_size))
        if tf_error:
            out["transformers_error"] = tf_error
        if llama_error:
            out["llama_cpp_error"] = llama_error
        return out
    finally:
        torch.set_num_threads(before)


def _transformers_runner(model: str, dtype: str, ids: list[int]):
    if model != SMOLLM2_ID:
        raise ValueError("the transformers peer runs the shipped SmolLM2 GGUF only")
    return transformers_runner(smollm2_gguf_path(), ids, resolve_dtype(dtype))


def long_prompt(prompt_ids: list[int], max_position: int, new_tokens: int) -> list[int]:
    """The default prompt repeated to KV_CONTEXT_TOKENS tokens, or to what leaves room for
    `new_tokens` (and the warm-up's) in a context of `max_position`."""
    n = min(KV_CONTEXT_TOKENS, max_position - 2 * new_tokens - 8)
    return (prompt_ids * (n // len(prompt_ids) + 1))[:n]


def _variant_runners(native, prompt_ids: list[int]) -> dict:
    """The native model's INT4 twin (fp32 models: its kernels' domain) on the same prompt, and
    both with every kernel called from Python (`one_call_per_step` off: shallow copies that
    share the weights)."""
    def per_op(model):
        twin = copy.copy(model)
        twin.one_call_per_step, twin._decoder = False, None
        return twin

    runs = {"per_op": generate_runner(per_op(native), prompt_ids)}
    if native.dtype == torch.float32:
        int4 = lowbit_model(native, bits=4, group_size=128, lm_head_bits=8)
        runs["int4"] = generate_runner(int4, prompt_ids)
        runs["int4_per_op"] = generate_runner(per_op(int4), prompt_ids)
    return runs


def kv_dtype_rates(native, long_ids: list[int], new_tokens: int, repeats: int
                   ) -> dict[str, float]:
    """Median decode tok/s after `long_ids` on the fp32-KV model and its INT8-KV and E4M3-KV
    twins, in turn each repeat. The prompt is prefilled once per sample, untimed: at 2,048 tokens its
    time would swamp a difference of two whole `generate` calls."""
    models = {"fp32_kv_long": native, "int8_kv_long": kv_quantized(native, "int8"),
              "fp8_kv_long": kv_quantized(native, "fp8-e4m3")}
    samples: dict[str, list[float]] = {name: [] for name in models}
    for i in range(repeats + 1):  # the first round warms up
        for name, model in models.items():
            rate = decode_after_prefill_rate(model, long_ids, new_tokens)
            if i:
                samples[name].append(rate)
    return {name: statistics.median(v) for name, v in samples.items()}


def decode_after_prefill_rate(model, ids: list[int], new_tokens: int) -> float:
    """Greedy decode tok/s of `new_tokens` steps after prefilling `ids` (not timed)."""
    runner = ModelRunner(model, max_tokens=len(ids) + new_tokens + 1,
                         enable_prefix_caching=False)
    runner.add(0, ids)
    token = int(runner.step([0])[0].argmax())
    t0 = time.perf_counter()
    for _ in range(new_tokens):
        runner.append(0, token)
        token = int(runner.step([0])[0].argmax())
    return new_tokens / (time.perf_counter() - t0)


def _variant_figures(med: dict, long_ids: list[int]) -> dict:
    out = {"kv_context_tokens": len(long_ids),
           "kv_int8_decode_tokens_per_s": med["int8_kv_long"],
           "kv_fp32_decode_tokens_per_s": med["fp32_kv_long"],
           "kv_int8_decode_vs_fp32_kv": med["int8_kv_long"] / med["fp32_kv_long"],
           "kv_fp8_decode_tokens_per_s": med["fp8_kv_long"],
           "kv_fp8_decode_vs_fp32_kv": med["fp8_kv_long"] / med["fp32_kv_long"]}
    out["one_call_per_step_speedup"] = med["native"] / med["per_op"]
    if "int4" in med:
        out["int4_decode_tokens_per_s"] = med["int4"]
        out["int4_decode_vs_fp32"] = med["int4"] / med["native"]
        out["int4_one_call_per_step_speedup"] = med["int4"] / med["int4_per_op"]
    llama = med.get("llama_cpp")
    out["llama_cpp_tokens_per_s"] = llama
    out["int4_decode_vs_llama_cpp"] = med["int4"] / llama if llama else None
    return out


def _llama_cpp_runner(model: str, ids: list[int], threads: int):
    if model != SMOLLM2_ID:
        raise ValueError("the llama.cpp peer runs the shipped SmolLM2 GGUF only")
    return llama_cpp_runner(smollm2_gguf_path(), ids, threads)
