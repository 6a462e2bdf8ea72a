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


def _drafter(spec: str, model, tok):
    """The lab's own drafter for `spec` (greedy, seed 0), its cache sized for the model."""
    from inferlab.engines.speculative.sampling import GREEDY
    from inferlab.engines.speculative.section import make_drafter

    return make_drafter(spec, model, tok, GREEDY, 0, model.config.max_position)


def _alpha(runs) -> float:
    accepted = tested = 0
    for run in runs:
        for s in run.steps:
            n = s.n_accepted
            accepted += n
            tested += n + (1 if n < len(s.drafted) else 0)
    return accepted / tested if tested else 0.0


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
                          transformers: bool = True) -> dict:
    """Per drafter and K: acceptance_rate, mean_acceptance_length, tokens_per_target_forward,
    alpha, theory_tokens_per_forward, speedup_wall (against plain decoding of the same
    prompts, this run); and hf_prompt_lookup_speedup. Chat template applied to the prompts."""
    from inferlab.engines.model.generate import generate
    from inferlab.engines.model.registry import SMOLLM2_ID, load_model, smollm2_gguf_path
    from inferlab.engines.speculative.decoder import SpeculativeDecoder
    from inferlab.engines.speculative.statistics import (
        acceptance_stats,
        expected_tokens_per_forward,
    )

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, tok = load_model(SMOLLM2_ID, dtype=dtype)
        ids = [tok.encode_prompt(p) for p in prompts]

        def plain() -> tuple[float, list[tuple[int, ...]]]:
            t0 = time.perf_counter()
            outs = [generate(model, [p], max_new_tokens=new_tokens).generations[0].token_ids
                    for p in ids]
            return time.perf_counter() - t0, outs

        plain()  # warm up
        rows = []
        for spec in drafters:
            for k in ks:
                decoder = SpeculativeDecoder(model, _drafter(spec, model, tok), k=k,
                                             tokenizer=tok)
                plain_s, spec_s, runs, equal = [], [], [], True
                for _ in range(repeats):
                    s, refs = plain()
                    plain_s.append(s)
                    t0 = time.perf_counter()
                    runs = [decoder.generate(p, new_tokens) for p in ids]
                    spec_s.append(time.perf_counter() - t0)
                    equal &= all(r.token_ids == ref for r, ref in zip(runs, refs, strict=True))
                st = acceptance_stats([s.accepted for r in runs for s in r.steps])
                alpha = _alpha(runs)
                forwards = sum(r.target_forwards for r in runs)
                emitted = sum(len(r.token_ids) for r in runs)
                target_s = sum(r.target_forward_s for r in runs)
                draft_s = sum(r.draft_s for r in runs)
                rows.append({
                    "drafter": spec, "k": k,
                    "acceptance_rate": st.acceptance_rate,
                    "mean_acceptance_length": st.mean_acceptance_length,
                    "tokens_per_target_forward": emitted / forwards,
                    "alpha": alpha,
                    "theory_tokens_per_forward": expected_tokens_per_forward(alpha, k),
                    "target_forwards": forwards,
                    "speedup_wall": statistics.median(plain_s) / statistics.median(spec_s),
                    "plain_s": statistics.median(plain_s),
                    "speculative_s": statistics.median(spec_s),
                    "draft_s": draft_s, "target_forward_s": target_s,
                    "outputs_equal": equal,
                })
        out: dict = {"model": SMOLLM2_ID, "dtype": dtype, "new_tokens": new_tokens,
                     "prompts": len(ids), "threads": torch.get_num_threads(),
                     "repeats": repeats, "results": rows,
                     "best": max(rows, key=lambda r: r["speedup_wall"]) if rows else None,
                     "hf_prompt_lookup_speedup": None}
        if transformers:
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
