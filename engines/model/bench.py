"""Single-stream greedy decode speed: ours (fp32, bf16) against transformers' `generate`.

Both run in this process on the same GGUF, the same prompt (chat template applied), greedy,
exactly `new_tokens` tokens (end-of-sequence ignored), on the same torch thread count. Decode
speed excludes the prefill for both the same way:

    decode_tokens_per_s = (new_tokens - 1) / (t(new_tokens) - t(1))

where t(n) is the wall time of a whole generate call producing n tokens. Engines are
measured in turn within each repeat and the median is reported (the best too), so a machine
that gets busier mid-run slows all of them alike. The default is ONE torch thread: on a
shared CPU, multi-threaded matrix-vector products collapse when another process takes a core
(measured 28 vs 4.7 tokens/s, bf16, 1 vs 2 threads, load average 7 on 2 cores).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path

DEFAULT_PROMPT = "Write a short story about a lighthouse keeper."


def decode_rate(run: Callable[[int], None], new_tokens: int) -> float:
    """(new_tokens - 1) / (t(new_tokens) - t(1)) for `run(n)` generating n tokens."""
    t0 = time.perf_counter()
    run(1)
    t1 = time.perf_counter()
    run(new_tokens)
    t2 = time.perf_counter()
    decode_s = (t2 - t1) - (t1 - t0)
    return (new_tokens - 1) / decode_s if decode_s > 0 else float("nan")


def interleaved_rates(runs: dict[str, Callable[[int], object]], new_tokens: int, repeats: int
                      ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(median, samples) of `decode_rate` per run: each run warmed up, then measured in turn
    within each repeat, so a machine that gets busier mid-run slows all of them alike."""
    for run in runs.values():  # warm up allocators and kernels
        run(4)
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            rates[name].append(decode_rate(run, new_tokens))
    return {name: statistics.median(r) for name, r in rates.items()}, rates


def generate_runner(model, ids: list[int]) -> Callable[[int], None]:
    """`run(n)`: greedy `generate` of exactly n tokens after `ids` with our `model`."""
    def run(n: int) -> None:
        generate(model, [ids], max_new_tokens=n)

    return run


def load_transformers_gguf(path, dtype: torch.dtype = torch.float32):
    """transformers' own model of a local GGUF file (its loader dequantizes it), eval mode:
    the peer every bench measures beside ours. ImportError without transformers."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the GGUF is local; never reach a hub
    # here, not at the top: the test extra's (optional), and it reads HF_HUB_OFFLINE on import
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"  # renamed in 4.56
    return transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, **{dtype_kw: dtype}).eval()


def transformers_runner(path, ids: list[int], dtype: torch.dtype = torch.float32
                        ) -> Callable[[int], None]:
    """`run(n)`: transformers' greedy `generate` of exactly n tokens after `ids`, its own
    model of the GGUF at `path` in `dtype`: the peer beside `generate_runner`."""
    model = load_transformers_gguf(path, dtype)
    x = torch.tensor([ids])

    def run(n: int) -> None:
        with torch.inference_mode():
            model.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    return run


def llama_cpp_runner(path, ids: list[int], threads: int) -> Callable[[int], list[int]]:
    """`run(n)`: llama.cpp's (llama-cpp-python) greedy decode of exactly n tokens after the
    token `ids` (the GGUF's own vocabulary, as our tokenizer reads it) on the GGUF at `path`
    as it is stored (its own quantized kernels), `threads`
    threads: the peer an INT4 CPU decode is measured against. ImportError without it.

    Prompts are evaluated one token at a time (`n_batch=1`): llama-cpp-python 0.3.36 crashes
    evaluating a multi-token batch on AVX-512 + AMX Xeons; decode (one token a step) is the
    same either way and prefill is excluded from the rate."""
    # here, not at the top: llama-cpp-python is the test extra's (optional)
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=512, n_threads=threads, n_threads_batch=threads,
                          n_batch=1, verbose=False)

    def run(n: int) -> list[int]:
        # greedy; the prompt's cache is reset each call (reset=True) and EOS never ends it
        out = []
        for tok in llm.generate(ids, top_k=1, temp=0.0, reset=True):
            out.append(int(tok))
            if len(out) >= n:
                break
        return out

    return run


def run_model_bench(prompt: str = DEFAULT_PROMPT, new_tokens: int = 64,
                    model: str = "smollm2-135m",
                    dtypes: Sequence[str] = ("fp32", "bf16"), repeats: int = 3,
                    threads: int | None = 1, transformers: bool = True) -> dict:
    """Decode tokens/s of SmolLM2-135M: ours per dtype and transformers fp32, and their ratios.

    `model` may name another spec of `load_model` (transformers then needs a .gguf path).
    `threads` sets torch's thread count for the run (None: leave torch's; restored after).
    Without the `transformers` package (or with transformers=False) its figures are None.
    """
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        runs: dict[str, Callable[[int], None]] = {}
        ids: list[int] = []
        for dtype in dtypes:
            ours, tok = load_model(model, dtype=dtype)
            ids = tok.encode_prompt(prompt)
            runs[dtype] = generate_runner(ours, ids)
        tf_error = None
        if transformers:
            gguf = smollm2_gguf_path() if model == SMOLLM2_ID else Path(model)
            try:
                runs["transformers"] = transformers_runner(gguf, ids)
            except ImportError as e:
                tf_error = f"transformers not installed: {e}"
        med, rates = interleaved_rates(runs, new_tokens, repeats)
        tf = med.get("transformers")
        out: dict = {
            "model": model, "prompt_tokens": len(ids), "new_tokens": new_tokens,
            "threads": torch.get_num_threads(), "repeats": repeats,
            "decode_tokens_per_s": med.get("fp32", next(iter(med.values()))),
            "transformers_tokens_per_s": tf,
        }
        for dtype in dtypes:
            out[f"decode_tokens_per_s_{dtype}"] = med[dtype]
            out[f"ratio_vs_transformers_{dtype}"] = med[dtype] / tf if tf else None
        out["best_tokens_per_s"] = {name: max(r) for name, r in rates.items()}
        out["samples_tokens_per_s"] = rates
        if tf_error:
            out["transformers_error"] = tf_error
        return out
    finally:
        torch.set_num_threads(before)
