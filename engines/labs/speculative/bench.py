"""Speculative decoding against plain decoding, on SmolLM2 greedy, measured in one run.

For each drafter and K of a small sweep, the same prompts are decoded plainly
(`engines/model/generate`) and speculatively, alternately within each repeat (a machine that
gets busier mid-run slows both alike), and transformers' prompt-lookup assisted generation
(`prompt_lookup_num_tokens=10`) is timed against its own plain `generate` on the same
prompts. Every figure is a median over repeats of the whole prompt set:

    speedup_wall               = plain wall s / speculative wall s      (same prompts, tokens)
    tokens_per_target_forward  = emitted tokens / target forwards
    alpha                      = accepted / drafts tested (a step stops testing at its first
                                 rejection: the geometric model's estimate)
    theory_tokens_per_forward  = (1 - alpha^(K+1)) / (1 - alpha)
    hf_prompt_lookup_speedup   = transformers plain s / transformers prompt-lookup s

Greedy speculative output equals plain greedy output (tests check it); the bench reports
whether it did here too (`outputs_equal`). End-of-sequence is ignored: every run emits exactly
`new_tokens` tokens.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

DEFAULT_PROMPTS = (
    "Summarise in two sentences: The lighthouse keeper climbed the stairs every evening, lit "
    "the lamp, and wrote the weather in his log. Ships passed; storms came and went.",
    "Rewrite this Python function with a docstring and type hints:\n"
    "def area(width, height):\n    return width * height\n",
    "Hi! Can you tell me what a lighthouse does, in a few sentences?",
)
DEFAULT_DRAFTERS = ("ngram", "layerskip:8", "quant:int8")


def _hf(path, prompts: list[list[int]], new_tokens: int, dtype: torch.dtype, repeats: int):
    from inferlab.engines.model.bench import load_transformers_gguf

    model = load_transformers_gguf(path, dtype)

    def run(**kw) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for ids in prompts:
                model.generate(torch.tensor([ids]), max_new_tokens=new_tokens,
                               min_new_tokens=new_tokens, do_sample=False, **kw)
        return time.perf_counter() - t0

    run(prompt_lookup_num_tokens=10)  # warm up
    plain, lookup = [], []
    for _ in range(repeats):
        plain.append(run())
        lookup.append(run(prompt_lookup_num_tokens=10))
    return statistics.median(plain), statistics.median(lookup)


def run_speculative_bench(prompts: Sequence[str] = DEFAULT_PROMPTS, new_tokens: int = 64,
                          drafters: Sequence[str] = DEFAULT_DRAFTERS,
                          ks: Sequence[int] = (2, 4, 8), dtype: str = "bf16",
                          repeats: int = 1, threads: int | None = 1,
                          transformers: bool = True, model_name: str | None = None,
                          tree_widths: Sequence[int] = (1,)) -> dict:
    """Per drafter, K and tree width (`tree_widths` > 1: ngram only): acceptance_rate, mean_acceptance_length, tokens_per_target_forward,
    alpha, theory_tokens_per_forward, speedup_wall (against plain decoding of the same
    prompts, this run); and hf_prompt_lookup_speedup. Chat template applied to the prompts.
    `model_name`: another `load_model` name (default SmolLM2; transformers only runs that)."""
    from inferlab.engines.labs.speculative.sweep import measure_k, plain_decode
    from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model_name = model_name or SMOLLM2_ID
        model, tok = load_model(model_name, dtype=dtype)
        ids = [tok.encode_prompt(p) for p in prompts]
        plain_decode(model, ids, new_tokens)  # warm up
        rows = []
        for spec in drafters:
            for k in ks:
                for width in tree_widths if spec == "ngram" else (1,):
                    # plain decoding timed right beside each row: a busier machine slows both
                    plain = [plain_decode(model, ids, new_tokens)
                             for _ in range(max(1, repeats))]
                    point = measure_k(model, tok, spec, k, ids, new_tokens,
                                      [t for t, _ in plain], plain[-1][1], repeats,
                                      tree_width=width)
                    rows.append(point.to_dict())
        out: dict = {"model": model_name, "dtype": dtype, "new_tokens": new_tokens,
                     "prompts": len(ids), "threads": torch.get_num_threads(),
                     "repeats": repeats, "results": rows,
                     "best": max(rows, key=lambda r: r["speedup_wall"]) if rows else None,
                     "hf_prompt_lookup_speedup": None}
        if transformers and model_name == SMOLLM2_ID:
            try:
                hf_plain, hf_lookup = _hf(smollm2_gguf_path(), ids, new_tokens,
                                          torch.bfloat16 if dtype == "bf16" else torch.float32,
                                          repeats)
                out["hf_plain_s"], out["hf_prompt_lookup_s"] = hf_plain, hf_lookup
                out["hf_prompt_lookup_speedup"] = hf_plain / hf_lookup
            except ImportError as e:
                out["transformers_error"] = f"transformers not installed: {e}"
        return out
    finally:
        torch.set_num_threads(before)
