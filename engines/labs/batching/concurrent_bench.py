"""32 concurrent requests on the real model: the continuous engine against transformers'
static-batch `generate`, same prompts, same dtype, same run.

    continuous_32_tokens_per_s        our ServingEngine (continuous policy, chunked prefill,
                                      the paged cache) on the wall clock: every request
                                      arrives at t=0, `output_tokens` each (EOS ignored)
    transformers_static_tokens_per_s  `generate` on one left-padded batch of the same prompts,
                                      greedy, min_new_tokens = max_new_tokens = output_tokens
    continuous_over_transformers      the ratio (the issue's goal: >= 1.5x)
    continuous_32_tokens_per_s_torch_kernels  the same engine on a model built for the torch
                                      kernel path (engines/kernels), beside the native one
    kernels                           what the native path ran (`kernels.describe()`)
    outputs_equal_requests            requests whose greedy tokens are identical in both
    vllm_cpu_tokens_per_s             the same requests through vLLM's CPU build (offline
                                      `LLM.generate`, token-id prompts, fp32), when
                                      INFERLAB_VLLM_PYTHON names a Python with vllm installed
                                      (engines.labs.batching.vllm_peer); otherwise None and
                                      `vllm_cpu_error` says why
    continuous_32_vs_vllm_cpu         ours / vLLM's (the issue's goal: >= 1.0)
    vllm_outputs_equal_requests       requests whose greedy tokens equal vLLM's

Output tokens/s = requests x output_tokens / wall seconds of the whole run (prefills
included, the same way for both). The two run in turn `repeats` times and each reports its
median, so a machine that gets busier mid-run slows both alike.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import torch

from inferlab.engines import kernels
from inferlab.engines.labs.batching.vllm_peer import (
    VLLM_PYTHON_ENV,
    VllmPeer,
    dtype_name,
    hf_folder,
    vllm_python,
)
from inferlab.engines.model.bench import load_transformers_gguf
from inferlab.engines.model.llama import resolve_dtype
from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.serve.engine import ServingEngine
from inferlab.engines.serve.executors import ModelExecutor
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import Scheduler
from inferlab.engines.serve.workload import prompt_texts

PROMPTS_PER_REQUEST = 4
"""Short prompts joined per request: with SmolLM2's chat template about 100 prompt tokens,
the size the issue's reference figures were measured at."""


def bench_prompts(n_requests: int) -> list[str]:
    """`n_requests` distinct prompt texts, each PROMPTS_PER_REQUEST shipped prompts in a row."""
    texts = prompt_texts()
    return [" ".join(texts[(i + j) % len(texts)] for j in range(PROMPTS_PER_REQUEST))
            for i in range(n_requests)]


def run_continuous(model, prompts_ids: list[list[int]], output_tokens: int
                   ) -> tuple[float, list[list[int]]]:
    """(wall seconds, each request's output ids) of the continuous engine on `model`."""
    block_size = 16
    n_blocks = sum(-(-(len(p) + output_tokens) // block_size) for p in prompts_ids)
    runner = ModelRunner(model, n_blocks=n_blocks, block_size=block_size,
                         enable_prefix_caching=False)
    scheduler = Scheduler("continuous", runner.blocks, max_num_batched_tokens=2048,
                          max_num_seqs=128)
    requests = [Request(f"r{i}", ids, output_tokens) for i, ids in enumerate(prompts_ids)]
    engine = ServingEngine(scheduler, ModelExecutor(runner), requests)
    t0 = time.perf_counter()
    engine.run()
    wall_s = time.perf_counter() - t0
    return wall_s, [list(scheduler.seqs[r.request_id].output_ids) for r in requests]


def run_transformers(hf_model, prompts_ids: list[list[int]], output_tokens: int,
                     pad_id: int) -> tuple[float, list[list[int]]]:
    """(wall seconds, outputs) of one static batch: left padding, greedy, fixed length."""
    width = max(len(p) for p in prompts_ids)
    ids = torch.full((len(prompts_ids), width), pad_id, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts_ids):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = hf_model.generate(ids, attention_mask=mask, max_new_tokens=output_tokens,
                                min_new_tokens=output_tokens, do_sample=False,
                                pad_token_id=pad_id)
    wall_s = time.perf_counter() - t0
    return wall_s, [row[width:].tolist() for row in out]


def _vllm_peer(stack: contextlib.ExitStack, prompts_ids: list[list[int]], output_tokens: int,
               dtype: str, out: dict):
    """The vLLM peer (entered on `stack`), or None with `out["vllm_cpu_error"]` saying why."""
    python = vllm_python()
    if python is None:
        out["vllm_cpu_error"] = f"not run: {VLLM_PYTHON_ENV} names no Python with vllm"
        return None
    try:
        torch_dtype = resolve_dtype(dtype)
        folder = hf_folder(smollm2_gguf_path(), torch_dtype)
        peer = stack.enter_context(VllmPeer(
            python, folder, dtype_name(torch_dtype), torch.get_num_threads(),
            max_model_len=max(map(len, prompts_ids)) + output_tokens,
            max_num_seqs=len(prompts_ids)))
    except (OSError, RuntimeError, ImportError) as e:
        out["vllm_cpu_error"] = f"vLLM peer did not start: {e}"
        return None
    out["vllm_version"] = peer.version
    return peer


def _peer_generate(peer, prompts_ids: list[list[int]], output_tokens: int, out: dict):
    """`peer.generate`, or None with `out["vllm_cpu_error"]` when the peer died or stalled
    (the rest of the bench stands)."""
    try:
        return peer.generate(prompts_ids, output_tokens)
    except RuntimeError as e:
        out["vllm_cpu_error"] = f"vLLM peer failed mid-run: {e}"
        return None


def run_concurrent_bench(n_requests: int = 32, output_tokens: int = 64, dtype: str = "fp32",
                         repeats: int = 2, transformers: bool = True,
                         torch_kernels: bool = True, vllm: bool = True) -> dict:
    model, tok = load_model(SMOLLM2_ID, dtype=dtype)
    torch_model = None
    if torch_kernels and model.kernel_path == "native":
        torch_model, _ = load_model(SMOLLM2_ID, dtype=dtype, kernels="torch")
    prompts_ids = [tok.encode_prompt(text) for text in bench_prompts(n_requests)]
    total_tokens = n_requests * output_tokens
    hf_model = None
    out: dict = {"model": SMOLLM2_ID, "dtype": dtype, "requests": n_requests,
                 "output_tokens": output_tokens, "threads": torch.get_num_threads(),
                 "prompt_tokens_mean": statistics.fmean(len(p) for p in prompts_ids),
                 "kernels": kernels.describe()}
    if transformers:
        try:
            hf_model = load_transformers_gguf(smollm2_gguf_path(), resolve_dtype(dtype))
        except ImportError as e:
            out["transformers_error"] = f"transformers not installed: {e}"
    with contextlib.ExitStack() as stack:
        peer = _vllm_peer(stack, prompts_ids, output_tokens, dtype, out) if vllm else None
        # its first batch pays one-off warm-up costs
        if peer is not None and _peer_generate(peer, prompts_ids[:2], 4, out) is None:
            peer = None
        ours_s, theirs_s, torch_s, vllm_s = [], [], [], []
        ours_out = theirs_out = vllm_out = None
        for _ in range(repeats):
            wall_s, ours_out = run_continuous(model, prompts_ids, output_tokens)
            ours_s.append(wall_s)
            if torch_model is not None:
                torch_s.append(run_continuous(torch_model, prompts_ids, output_tokens)[0])
            if hf_model is not None:
                wall_s, theirs_out = run_transformers(hf_model, prompts_ids, output_tokens,
                                                      tok.eos_token_ids[0])
                theirs_s.append(wall_s)
            if peer is not None:
                got = _peer_generate(peer, prompts_ids, output_tokens, out)
                if got is None:
                    peer, vllm_s = None, []
                else:
                    vllm_s.append(got[0])
                    vllm_out = got[1]
    out["continuous_32_tokens_per_s"] = total_tokens / statistics.median(ours_s)
    out["continuous_32_tokens_per_s_torch_kernels"] = (
        total_tokens / statistics.median(torch_s) if torch_s else None)
    out.update(_peer_figures(out["continuous_32_tokens_per_s"], total_tokens, ours_out,
                             theirs_s, theirs_out, "transformers_static_tokens_per_s",
                             "continuous_over_transformers", "outputs_equal_requests"))
    out.update(_peer_figures(out["continuous_32_tokens_per_s"], total_tokens, ours_out,
                             vllm_s, vllm_out, "vllm_cpu_tokens_per_s",
                             "continuous_32_vs_vllm_cpu", "vllm_outputs_equal_requests"))
    return out


def _peer_figures(ours_rate: float, total_tokens: int, ours_out, peer_s: list[float],
                  peer_out, rate_key: str, ratio_key: str, equal_key: str) -> dict:
    """A peer's median rate, ours over it and the requests whose outputs equal ours (None
    and no count when the peer did not run)."""
    if not peer_s:
        return {rate_key: None, ratio_key: None}
    rate = total_tokens / statistics.median(peer_s)
    return {rate_key: rate, ratio_key: ours_rate / rate,
            equal_key: sum(a == b for a, b in zip(ours_out, peer_out, strict=True))}
