"""`inferlab bench quant --json`: every scheme on SmolLM2 in one run, side by side.

Per scheme: `perplexity` (the mean over the held-out texts, `perplexity_by_text` each:
prose, dialogue, technical; GPTQ/AWQ/Wanda calibrate on the shipped calibration set,
`calibration_tokens`), `weight_bytes`, `kv_bytes_per_token`, `decode_tokens_per_s` (greedy, one stream, prefill
excluded, of the model running the stored codes: `engines.quant.runtime`), `runs_as`,
`quantize_seconds`, `sqnr_db_mean`/`_min` over the linears, `speedup_vs_fp32`; and
`fp32_perplexity`, `fp32_decode_tokens_per_s`; `int8_lm_head_decode`: INT8 and INT4 with the
lm_head at INT8 too (decode speed; the schemes keep it fp32, as GPTQ and AWQ do); `rss` — the process's resident memory with the
model at fp32, INT8 and INT4 (INT8 lm_head) on the low-bit kernels, each in a fresh process
(`engines/quant/rss.py`). GPTQ and AWQ also get `recovered_by_text`, on each held-out text
the fraction of plain RTN-INT4-g128's perplexity increase they win back, and `recovered`,
its mean over the texts:

    recovered_t = (ppl_rtn,t - ppl_scheme,t) / (ppl_rtn,t - ppl_fp32,t)

Top level: `eval_texts` (name -> tokens), how perplexity was computed (`ppl_convention`,
`ppl_window_tokens`, `ppl_stride_tokens`), `calibration_tokens` of the default set, and
with `gptq_damp` (`--gptq-damp 0.01,0.1`) `gptq_variants`: GPTQ with and without act-order
at each damping, each one's `recovered`, `recovered_by_text` and `quantize_seconds` (what
chose `gptq.ACT_ORDER` and `gptq.DAMP`, the defaults of "gptq-int4-g128").

Decode speed is timed after every scheme is built, in `rounds` interleaved rounds (fp32,
int8, ..., fp32, int8, ..., each round starting at another scheme), the median per scheme: a
machine that gets busier mid-run slows every scheme alike instead of whichever ran last.
Decode and scoring run on `threads` torch threads (1: the per-token figures llama.cpp's are
compared with); quantization runs on `quantize_threads` (default: every core torch would use,
as `run quant` and the lab quantize: GPTQ/AWQ calibration is mostly Gram matrices and the
layers' forwards, large products that scale with cores).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import torch

from inferlab.engines.labs.quant import evaluation
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.labs.quant.settings import FP32, lab_schemes
from inferlab.engines.model.perplexity import perplexity
from inferlab.engines.quant.calibration import calibration_chunks
from inferlab.engines.quant.gptq import gptq_model
from inferlab.engines.quant.lowbit_linear import lowbit_model
from inferlab.engines.quant.rss import model_rss_bytes
from inferlab.engines.quant.runtime import decode_tokens_per_s

RTN = "int4-g128"
RECOVERING = ("gptq-int4-g128", "gptq-int4-g128-act", "gptq-int4-g128-noact", "awq-int4-g128")


def recovered(by_text: dict[str, float], rtn: dict[str, float], fp32: dict[str, float]
              ) -> dict[str, float]:
    """Per held-out text, (ppl_rtn - ppl) / (ppl_rtn - ppl_fp32) (texts where RTN loses
    nothing are left out)."""
    return {k: (rtn[k] - v) / (rtn[k] - fp32[k]) for k, v in by_text.items()
            if k in rtn and k in fp32 and rtn[k] != fp32[k]}


def add_bench_arguments(p) -> None:
    p.add_argument("--schemes", default=None, metavar="A,B,...",
                   help="bench quant: only these schemes (fp32 always; default every one)")
    p.add_argument("--gptq-damp", default=None, metavar="D,D,...",
                   help="bench quant: also GPTQ with and without act-order at each damping "
                        "(gptq_variants)")


def bench(args) -> dict:
    """`inferlab bench quant` with its options."""
    schemes = None if not args.schemes else [n.strip() for n in args.schemes.split(",")]
    damp = None if not args.gptq_damp else [float(d) for d in args.gptq_damp.split(",")]
    return run_quant_bench(schemes=schemes, gptq_damp=damp)


def _gptq_variants(session, damps: Sequence[float], rtn: dict, fp32: dict, log=None) -> dict:
    chunks = calibration_chunks(session.tokenizer, session.calibration_texts)
    out = {}
    for damp in damps:
        for act in (True, False):
            qm = gptq_model(session.model, chunks, act_order=act, damp=damp)
            by_text = {k: perplexity(qm.model, ids, **session.ppl()).perplexity
                       for k, ids in session.eval_sets.items()}
            rec = recovered(by_text, rtn, fp32)
            key = f"{'act-order' if act else 'natural order'}, damp {damp:g}"
            out[key] = {"act_order": act, "damp": damp, "quantize_seconds": qm.quantize_s,
                        "calibration_tokens": qm.calibration_tokens,
                        "perplexity_by_text": by_text, "recovered_by_text": rec,
                        "recovered": sum(rec.values()) / max(len(rec), 1)}
            if log is not None:
                log(f"gptq {key}: recovered {out[key]['recovered']:.3f}, "
                    f"{qm.quantize_s:.0f} s")
            del qm
    return out


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch on `n` threads inside the block, the caller's count back after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_quant_bench(model: str = "smollm2-135m", schemes: Sequence[str] | None = None,
                    decode_tokens: int = 32, rounds: int = 3, threads: int = 1,
                    quantize_threads: int | None = None, log=None, rss: bool = True, eval_text=None,
                    gptq_damp: Sequence[float] | None = None) -> dict:
    names = list(lab_schemes() if schemes is None else schemes)
    if FP32 not in names:
        names.insert(0, FP32)
    before = torch.get_num_threads()
    quantize_threads = before if quantize_threads is None else quantize_threads
    torch.set_num_threads(threads)
    try:
        t0 = time.perf_counter()
        session = QuantSession.open(model, eval_text=eval_text)
        out: dict = {"model": session.model_name, "eval_tokens": session.eval_tokens,
                     "eval_texts": {k: len(v) for k, v in session.eval_sets.items()},
                     **session.ppl_method(),
                     "calibration_tokens": sum(map(len, calibration_chunks(
                         session.tokenizer, session.calibration_texts))),
                     "load_seconds": time.perf_counter() - t0, "threads": threads,
                     "quantize_threads": quantize_threads,
                     "decode_tokens": decode_tokens, "rounds": rounds}
        reference = session.reference()
        results, running = {}, {}
        for name in names:
            with torch_threads(quantize_threads):
                p = evaluation.prepare(session.model, session.tokenizer, name,
                                       calibration_text=session.calibration_texts)
            results[name] = evaluation.score(p, session.tokenizer, name, session.eval_sets,
                                             session.prompt_ids, reference, decode_tokens=None,
                                             ppl=session.ppl())
            running[name] = p.running
            del p
            if log is not None:
                log(f"{name}: perplexity {results[name].perplexity:.3f}, "
                    f"{results[name].quantize_s:.1f} s")
        # The same codes with the tied 49152 x 576 lm_head (113 MB at fp32, read every
        # token) at INT8 too: decode speed only, the whole model on the kernels.
        head8 = {f"{w}+int8-lm_head": lowbit_model(session.model, bits=b, group_size=128,
                                                   lm_head_bits=8)
                 for w, b in (("int8-sym", 8), ("int4-g128", 4))}
        running.update(head8)
        speeds: dict[str, list[float]] = {n: [] for n in running}
        order = list(running)
        for r in range(max(1, rounds)):
            # each round starts one scheme later: no scheme always runs first (or last)
            k = (r * max(1, len(order) // max(1, rounds))) % len(order)
            for name in order[k:] + order[:k]:
                speeds[name].append(decode_tokens_per_s(running[name], session.prompt_ids,
                                                        decode_tokens))
    finally:
        torch.set_num_threads(before)
    fp32_speed = statistics.median(speeds[FP32])
    table = {}
    for name in names:
        r = replace(results[name], decode_tokens_per_s=statistics.median(speeds[name]))
        d = r.to_dict()
        sqnr = list(d.pop("sqnr_db").values())
        if sqnr:
            d["sqnr_db_mean"], d["sqnr_db_min"] = sum(sqnr) / len(sqnr), min(sqnr)
        d["speedup_vs_fp32"] = r.decode_tokens_per_s / fp32_speed
        table[name] = d
    out["int8_lm_head_decode"] = {
        name: {"decode_tokens_per_s": statistics.median(speeds[name]),
               "speedup_vs_fp32": statistics.median(speeds[name]) / fp32_speed,
               "weight_bytes": m.weight_bytes} for name, m in head8.items()}
    out["fp32_perplexity"] = table[FP32]["perplexity"]
    out["fp32_decode_tokens_per_s"] = fp32_speed
    if RTN in table:
        rtn, fp32 = table[RTN]["perplexity_by_text"], table[FP32]["perplexity_by_text"]
        for name in RECOVERING:
            if name in table:
                rec = recovered(table[name]["perplexity_by_text"], rtn, fp32)
                table[name]["recovered_by_text"] = rec
                table[name]["recovered"] = sum(rec.values()) / max(len(rec), 1)
        if gptq_damp:
            with torch_threads(threads):
                out["gptq_variants"] = _gptq_variants(session, gptq_damp, rtn, fp32, log)
    out["schemes"] = table
    if rss:
        out["rss"] = {f"{'fp32' if bits == 0 else f'int{bits}'}": model_rss_bytes(model, bits)
                      for bits in (0, 8, 4)}
    return out
