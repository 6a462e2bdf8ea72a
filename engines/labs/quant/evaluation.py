"""One scheme on the whole model, as the lab and `inferlab run/bench quant` measure it:
quality (perplexity on each held-out text and their mean, SQNR per linear), size (weight
bytes, KV bytes per token), speed (greedy decode tokens/s of the model that runs the stored
codes), the calibration tokens it saw, and a sample.

    run_scheme(model, tokenizer, "awq-int4-g128", {"prose": ids, ...}, sample_ids) -> SchemeRun

Names: "fp32" (the model as loaded: a GGUF file's codes dequantized, SmolLM2's Q4_1 or
Gemma 3's Q4_K_M), "bf16", every
weight scheme of `engines.quant.evaluate.NAMES`, and "kv-int8" / "kv-fp8" (the weights as
loaded, K/V stored as INT8 or FP8 E4M3 codes with a scale per token and head). A KV scheme's
perplexity runs through the paged cache so that attention reads the codes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from inferlab.engines.labs.quant.records import SchemeRun
from inferlab.engines.labs.quant.settings import BF16, FP32, KV_SCHEMES, lab_schemes
from inferlab.engines.model.generate import generate
from inferlab.engines.quant.cast import quantize_bf16
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.evaluate import NAMES, linear_sqnr_db, quantize_by_name, score_held_out
from inferlab.engines.quant.kv_quant import kv_quantized
from inferlab.engines.quant.model_quant import quantize_model
from inferlab.engines.quant.runtime import decode_tokens_per_s, runtime_model
from inferlab.engines.quant.schemes import SCHEMES
from inferlab.engines.sequences import common_prefix_len

SAMPLE_TOKENS = 24
"""Greedy tokens of each scheme's sample generation."""


def describe(name: str) -> str:
    """One line on what `name` stores."""
    if name in SCHEMES:
        return SCHEMES[name].description
    return {
        FP32: "the model as loaded, in fp32 (a GGUF's codes dequantized: SmolLM2's Q4_1, "
              "Gemma 3's Q4_K_M; the file's own quantization is the reference point)",
        BF16: "every linear's weight rounded to bfloat16",
        "gptq-int4-g128": "GPTQ INT4, groups of 128, Hessian error compensation (the "
                          "measured default: act-order, damping 0.01)",
        "gptq-int4-g128-act": "GPTQ INT4 g128, columns in descending Hessian order",
        "gptq-int4-g128-noact": "GPTQ INT4 g128, columns in their natural order",
        "awq-int4-g128": "AWQ: activation-aware channel scales, clip search, INT4 g128",
        "wanda-2:4": "2:4 pruning by |weight| × input norm (Wanda), layers pruned in order",
        "kv-int8": "fp32 weights; K/V cached as INT8, one fp32 scale per token and head",
        "kv-fp8": "fp32 weights; K/V cached as FP8 E4M3, one fp32 scale per token and head",
    }.get(name, name)


@dataclass(frozen=True)
class Prepared:
    """A scheme applied: the model to score, the model to time, and its sizes."""

    scored: object
    running: object
    weight_bytes: int
    runs_as: str
    quantize_s: float
    sqnr_db: dict[str, float]
    paged: bool
    calibration_tokens: int = 0


def kv_bytes_per_token(model) -> int:
    """Bytes one token's K/V take in `model`'s own paged cache (codes and scales)."""
    return int(model.new_cache(1, 1).bytes_per_slot)


def prepare(model, tokenizer, name: str, progress: Callable | None = None,
            calibration_text: str | Sequence[str] | None = None) -> Prepared:
    """`model` with the scheme `name` applied (QuantError naming it if unknown); the
    calibrated schemes see `calibration_text` (default the shipped set)."""
    if name == FP32:
        return Prepared(model, model, model.weight_bytes, "fp32", 0.0, {}, False)
    if name in KV_SCHEMES:
        t0 = time.perf_counter()
        kv = kv_quantized(model, KV_SCHEMES[name])
        return Prepared(kv, kv, model.weight_bytes, f"fp32 weights, {KV_SCHEMES[name]} KV",
                        time.perf_counter() - t0, {}, True)
    if name == BF16:
        qm = quantize_model(model, quantize_bf16)
    elif name in NAMES:
        def step(i, n):
            if progress is not None:
                progress(i / max(n, 1), f"{name}: layer {i} of {n}")

        qm = quantize_by_name(model, name, tokenizer, calibration_text, step)
    else:
        raise QuantError(f"scheme must be one of {', '.join(lab_schemes())}, got {name!r}")
    try:
        rt = runtime_model(qm)
        running, runs_as = rt.model, rt.runs_as
    except QuantError as e:  # a model on another device or dtype: time the fake-quant one
        running, runs_as = qm.model, f"fp32 (dequantized: {e})"
    return Prepared(qm.model, running, qm.weight_bytes, runs_as, qm.quantize_s,
                    linear_sqnr_db(qm), False, qm.calibration_tokens)


def sample_ids(model, prompt_ids: Sequence[int], n_tokens: int = SAMPLE_TOKENS) -> list[int]:
    """`n_tokens` greedy tokens after `prompt_ids` (end-of-sequence ignored)."""
    out = generate(model, [list(prompt_ids)], max_new_tokens=n_tokens)
    return list(out.generations[0].token_ids)




def score(p: Prepared, tokenizer, name: str, eval_sets: Mapping[str, Sequence[int]],
          prompt_ids: Sequence[int], reference_ids: Sequence[int] | None = None,
          decode_tokens: int | None = 32, progress: Callable | None = None,
          ppl: Mapping | None = None) -> SchemeRun:
    """A prepared scheme scored on each held-out text of `eval_sets` (name -> token ids;
    `ppl`: `perplexity`'s window, stride, convention, bos_id), its decode timed (None:
    skipped) and sampled after `prompt_ids`; `reference_ids` is the fp32 sample the
    agreement is counted against."""
    if progress is not None:
        n = sum(map(len, eval_sets.values()))
        progress(0.9, f"{name}: perplexity on {len(eval_sets)} held-out texts, {n:,} tokens")
    held = score_held_out(p.scored, eval_sets, p.paged, **(ppl or {}))
    speed = None
    if decode_tokens:
        speed = decode_tokens_per_s(p.running, list(prompt_ids), decode_tokens)
    ids = sample_ids(p.running, prompt_ids)
    agree = len(ids) if reference_ids is None else common_prefix_len(ids, reference_ids)
    return SchemeRun(name, held.mean, p.weight_bytes, kv_bytes_per_token(p.running), speed,
                     p.runs_as, p.quantize_s, held.eval_s, tokenizer.decode(ids), agree,
                     p.sqnr_db, held.by_text, p.calibration_tokens)


def run_scheme(model, tokenizer, name: str, eval_sets: Mapping[str, Sequence[int]],
               prompt_ids: Sequence[int], reference_ids: Sequence[int] | None = None,
               decode_tokens: int | None = 32, progress: Callable | None = None,
               calibration_text: str | Sequence[str] | None = None,
               ppl: Mapping | None = None) -> SchemeRun:
    """`prepare` then `score`."""
    p = prepare(model, tokenizer, name, progress, calibration_text)
    return score(p, tokenizer, name, eval_sets, prompt_ids, reference_ids, decode_tokens,
                 progress, ppl)
