"""`inferlab bench models`: the model families, side by side in one run (1 thread by default).

    gemma3_decode_tokens_per_s        our greedy decode of Gemma 3 270M from its Q4_K_M codes
    gemma3_decode_vs_llama_cpp        that / llama.cpp's on the same GGUF, same prompt, threads
    gemma3_decode_q8_vs_llama_cpp     the same with decode rows rounded to int8 per 32 values and
                                      integer dot products, as llama.cpp computes (opt-in:
                                      load_model(..., activations="q8"))
    gemma3_decode_vs_transformers     that / transformers' fp32 model of the same GGUF
    gemma3_linears                    which linears ran on which kernel, and their bytes
    gemma3_open_s, gemma3_tokenizer_build_s  opening the GGUF (metadata read by the bounded
                                      header walk) and building its 262,144-token tokenizer
    gemma3_greedy_agreement           leading greedy tokens (of new_tokens) that the codes path
                                      and llama.cpp share with our fp32 model of the file (which
                                      equals transformers': tests/engines/model/test_gemma3.py)
    gemma3_kv_bytes_8k_vs_full        KV held at 8k tokens with the sliding-window layers
                                      capped at their window / every layer global, and the
                                      closed form (n_global·C + n_local·min(C, W)) / (L·C)
    moe_tiny_grouped_vs_per_token     one tiny-moe MoE layer on a decode batch of 32: tokens
                                      grouped by expert (each expert's weights read once) /
                                      each token's experts one row at a time

Engines are measured in turn within each repeat, medians reported (`engines.model.bench`).
"""

from __future__ import annotations

import statistics
import time

import torch

from inferlab.engines import kernels
from inferlab.engines.model import moe
from inferlab.engines.model.bench import (
    generate_runner,
    interleaved_rates,
    llama_cpp_runner,
    transformers_runner,
)
from inferlab.engines.model.gemma_file import GEMMA3_ID, gemma3_gguf_path
from inferlab.engines.model.generate import generate
from inferlab.engines.model.gguf_file import GGUFFile
from inferlab.engines.model.gguf_tokenizer import tokenizer_from_gguf
from inferlab.engines.model.linear import linear_kinds
from inferlab.engines.model.registry import load_model
from inferlab.engines.model.tiny import tiny_moe_model
from inferlab.engines.roofline.kv_held import kv_held
from inferlab.engines.sequences import common_prefix_len

PROMPT = "The history of the lighthouse begins"
KV_CONTEXT = 8192


def kv_window_ratio(cfg, context: int = KV_CONTEXT) -> dict:
    """KV held at `context` tokens against every layer global, measured by the calculator
    and in the closed form."""
    windows = [cfg.layer_window(i) for i in range(cfg.n_layers)]
    closed = sum(min(context, w) if w else context for w in windows) / (cfg.n_layers * context)
    return {"ratio": kv_held(cfg, context, "fp32").ratio, "closed_form": closed,
            "n_global": windows.count(0), "n_local": cfg.n_layers - windows.count(0),
            "window": cfg.sliding_window}


def moe_grouped_vs_per_token(batch: int = 32, repeats: int = 5) -> dict:
    """Time of one tiny-moe MoE layer on `batch` decode rows, grouped / per token."""
    model, _ = tiny_moe_model()
    cfg, block = model.config, model.layers[0].moe
    h = torch.randn(batch, cfg.d_model, generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {"grouped": [], "per_token": []}
    with torch.inference_mode():
        for _ in range(repeats):
            for name, fn in (("grouped", moe.forward_grouped),
                             ("per_token", moe.forward_per_token)):
                t = time.perf_counter()
                fn(cfg, block, h)
                times[name].append(time.perf_counter() - t)
    grouped, per_token = (statistics.median(times[k]) for k in ("grouped", "per_token"))
    touched = moe.experts_touched(block.last_routing)
    return {"speedup": per_token / grouped, "grouped_ms": grouped * 1e3,
            "per_token_ms": per_token * 1e3, "experts_touched": touched,
            "expert_reads_per_token_loop": batch * cfg.n_experts_active}


def greedy_agreement(codes_model, ids: list[int], new_tokens: int, llama_cpp=None) -> dict:
    """Leading tokens the codes path and llama.cpp share with our fp32 model's greedy."""
    fp32, _ = load_model(GEMMA3_ID, weights="fp32")
    ref = list(generate(fp32, [ids], max_new_tokens=new_tokens).generations[0].token_ids)
    codes = list(generate(codes_model, [ids], max_new_tokens=new_tokens).generations[0].token_ids)
    out = {"new_tokens": new_tokens, "codes_vs_fp32": common_prefix_len(codes, ref)}
    if llama_cpp is not None:
        out["llama_cpp_vs_fp32"] = common_prefix_len(llama_cpp(new_tokens), ref)
    return out


def run_models_bench(new_tokens: int = 32, repeats: int = 3, threads: int | None = 1,
                     peers: bool = True) -> dict:
    """The figures of the module docstring; `peers` False skips llama.cpp and transformers."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        start = time.perf_counter()
        g = GGUFFile(gemma3_gguf_path())
        open_s = time.perf_counter() - start
        start = time.perf_counter()
        tokenizer_from_gguf(g, None)
        tokenizer_s = time.perf_counter() - start
        model, tok = load_model(GEMMA3_ID)
        ids = tok.encode(PROMPT)
        q8, _ = load_model(GEMMA3_ID, activations="q8")
        runs = {"ours": generate_runner(model, ids), "ours_q8": generate_runner(q8, ids)}
        errors = {}
        if peers:
            path = gemma3_gguf_path()
            for name, make in (("llama_cpp", lambda: llama_cpp_runner(path, ids,
                                                                       torch.get_num_threads())),
                               ("transformers", lambda: transformers_runner(path, ids))):
                try:
                    runs[name] = make()
                except ImportError as e:
                    errors[f"{name}_error"] = f"not installed: {e}"
        med, rates = interleaved_rates(runs, new_tokens, repeats)
        kv = kv_window_ratio(model.config)
        out = {
            "model": GEMMA3_ID, "prompt_tokens": len(ids), "new_tokens": new_tokens,
            "threads": torch.get_num_threads(), "repeats": repeats,
            "kernels": kernels.describe(),
            "gemma3_decode_tokens_per_s": med["ours"],
            "gemma3_llama_cpp_tokens_per_s": med.get("llama_cpp"),
            "gemma3_transformers_tokens_per_s": med.get("transformers"),
            "gemma3_decode_vs_llama_cpp": med["ours"] / med["llama_cpp"]
            if "llama_cpp" in med else None,
            "gemma3_decode_q8_tokens_per_s": med["ours_q8"],
            "gemma3_decode_q8_vs_llama_cpp": med["ours_q8"] / med["llama_cpp"]
            if "llama_cpp" in med else None,
            "gemma3_decode_vs_transformers": med["ours"] / med["transformers"]
            if "transformers" in med else None,
            "gemma3_weight_bytes": model.weight_bytes,
            "gemma3_open_s": open_s, "gemma3_tokenizer_build_s": tokenizer_s,
            "gemma3_linears": linear_kinds(model),
            "gemma3_kv_bytes_8k_vs_full": kv["ratio"],
            "gemma3_kv_bytes_8k_closed_form": kv["closed_form"],
            "gemma3_kv_layers": kv,
            "samples_tokens_per_s": rates,
        }
        out["gemma3_greedy_agreement"] = greedy_agreement(model, ids, new_tokens,
                                                          runs.get("llama_cpp"))
        moe_figures = moe_grouped_vs_per_token()
        out["moe_tiny_grouped_vs_per_token"] = moe_figures.pop("speedup")
        out["moe_tiny"] = moe_figures
        return out | errors
    finally:
        torch.set_num_threads(before)
