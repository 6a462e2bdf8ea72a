"""`inferlab bench runtime`: the native path against the torch path, side by side in one run.

Both paths' SmolLM2 models are loaded in this process (the kernel choice is taken when a
layer is built) and measured in turn within each repeat, the median reported:

    verify_cost_ratio_k4      t(forward of 5 tokens) / t(forward of 1 token), same context
                              (64 cached tokens), through ModelRunner.step
    decode_tokens_per_s       single-stream greedy decode, as `bench model` measures it
    decode_vs_transformers    that / transformers' `generate` on the same GGUF and prompt
    decode_bandwidth_fraction (weight bytes + KV bytes read per token) / time per token,
                              over `dst.copy_(src)`'s bandwidth (read + write) at the same
                              thread count: 1.0 is the memory's own rate
    linears                   each SmolLM2 linear shape, 1/5/9/16 rows: µs per call and the
                              ratio to one row, torch's best layout against the kernel
    int4_decode_vs_fp32       INT4-g128 (lm_head INT8) decode / fp32 decode, both native
    int4_decode_vs_llama_cpp  that INT4 decode / llama.cpp's (llama-cpp-python) on the
                              shipped GGUF as stored (Q4_1, Q8_0 embedding), same threads
    kv_int8_decode_vs_fp32_kv decode on an INT8 KV cache / on the fp32 one, native, after a
                              prompt of KV_CONTEXT_REPEATS times the default one

The JSON names the CPU's SIMD flags and the build that ran (`kernels.describe()`).
"""

from __future__ import annotations

import statistics

import torch

from inferlab.engines import kernels
from inferlab.engines.hardware.timing import median_call_s

VERIFY_CONTEXT_TOKENS = 64
KV_CONTEXT_REPEATS = 8
"""The KV-dtype pair decodes after the default prompt repeated this often (~250 tokens of
SmolLM2's chat template): long enough that attention reads a real cache."""
ROW_COUNTS = (1, 5, 9, 16)


CPU = torch.device("cpu")


def step_seconds(model, n_tokens: int, repeats: int = 7,
                 context_tokens: int = VERIFY_CONTEXT_TOKENS) -> float:
    """Median seconds of one `ModelRunner.step` scoring `n_tokens` new tokens (all their
    logits, as a K + 1 verification does) after `context_tokens` cached ones."""
    from inferlab.engines.model.runner import ModelRunner

    runner = ModelRunner(model, max_tokens=context_tokens + n_tokens + 16,
                         enable_prefix_caching=False)
    prompt = [(7 * i + 3) % model.config.vocab_size for i in range(context_tokens)]
    runner.add("s", prompt)
    runner.step(["s"])
    drafts = [(11 * i + 5) % model.config.vocab_size for i in range(n_tokens)]

    def once() -> None:
        runner.append_tokens("s", drafts)
        runner.step(["s"], logits=[n_tokens])
        runner.truncate("s", context_tokens)

    return median_call_s(once, CPU, repeats=repeats, warmup=1)


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
    from inferlab.engines.hardware.microbench import measure_copy_bandwidth
    from inferlab.engines.model.bench import DEFAULT_PROMPT, decode_rate, generate_runner
    from inferlab.engines.model.registry import load_model

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        models, tok = {}, None
        for path in ("native", "torch"):
            with kernels.use(path):
                models[path], tok = load_model(model, dtype=dtype)
        with kernels.use("native"):
            described = kernels.describe()
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
            "linears": _linear_table(models, repeats=5),
            "samples": {"verify_cost_ratio_k4": verify, "decode_tokens_per_s": decode},
        }
        out.update(_variant_figures(med, prompt_ids))
        if tf_error:
            out["transformers_error"] = tf_error
        if llama_error:
            out["llama_cpp_error"] = llama_error
        return out
    finally:
        torch.set_num_threads(before)


def _transformers_runner(model: str, dtype: str, ids: list[int]):
    from inferlab.engines.model.bench import transformers_runner
    from inferlab.engines.model.llama import resolve_dtype
    from inferlab.engines.model.registry import SMOLLM2_ID, smollm2_gguf_path

    if model != SMOLLM2_ID:
        raise ValueError("the transformers peer runs the shipped SmolLM2 GGUF only")
    return transformers_runner(smollm2_gguf_path(), ids, resolve_dtype(dtype))


def _variant_runners(native, prompt_ids: list[int]) -> dict:
    """The native model's INT4 twin (fp32 models: its kernels' domain) on the same prompt,
    and the fp32-KV / INT8-KV pair after a longer one."""
    from inferlab.engines.model.bench import generate_runner
    from inferlab.engines.quant.kv_quant import kv_quantized
    from inferlab.engines.quant.lowbit_linear import lowbit_model

    runs = {}
    if native.dtype == torch.float32:
        with kernels.use("native"):
            runs["int4"] = generate_runner(lowbit_model(native, bits=4, group_size=128,
                                                        lm_head_bits=8), prompt_ids)
    long_ids = prompt_ids * KV_CONTEXT_REPEATS
    runs["fp32_kv_long"] = generate_runner(native, long_ids)
    runs["int8_kv_long"] = generate_runner(kv_quantized(native, "int8"), long_ids)
    return runs


def _variant_figures(med: dict, prompt_ids: list[int]) -> dict:
    out = {"kv_context_tokens": len(prompt_ids) * KV_CONTEXT_REPEATS,
           "kv_int8_decode_tokens_per_s": med["int8_kv_long"],
           "kv_fp32_decode_tokens_per_s": med["fp32_kv_long"],
           "kv_int8_decode_vs_fp32_kv": med["int8_kv_long"] / med["fp32_kv_long"]}
    if "int4" in med:
        out["int4_decode_tokens_per_s"] = med["int4"]
        out["int4_decode_vs_fp32"] = med["int4"] / med["native"]
    llama = med.get("llama_cpp")
    out["llama_cpp_tokens_per_s"] = llama
    out["int4_decode_vs_llama_cpp"] = med["int4"] / llama if llama else None
    return out


def _llama_cpp_runner(model: str, ids: list[int], threads: int):
    from inferlab.engines.model.bench import llama_cpp_runner
    from inferlab.engines.model.registry import SMOLLM2_ID, smollm2_gguf_path

    if model != SMOLLM2_ID:
        raise ValueError("the llama.cpp peer runs the shipped SmolLM2 GGUF only")
    return llama_cpp_runner(smollm2_gguf_path(), ids, threads)
