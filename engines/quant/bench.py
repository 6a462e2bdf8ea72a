"""The whole-model measurement: perplexity, bytes and quantize time per scheme on SmolLM2.

    python -m inferlab.engines.quant.bench [--model smollm2-135m] [--schemes a,b,...]

prints one JSON object: `fp32_perplexity` (SmolLM2's "fp32" is its Q4_1 file dequantized),
and per scheme `perplexity`, `weight_bytes`, `quantize_seconds`; for GPTQ and AWQ also
`recovered`, the fraction of plain RTN-INT4-g128's perplexity increase they win back:

    recovered = (ppl_rtn - ppl_scheme) / (ppl_rtn - ppl_fp32)

Quantization runs on `quant_threads` torch threads (GPTQ's column loop is many small ops,
which extra threads on a busy machine slow down); perplexity on the default number.

Measured once on the 2-core development machine (shared, AVX2), held-out clocks.txt
(2,166 tokens), calibration bread.txt (3,059 tokens); quantize seconds include calibration:

    scheme               perplexity  weight MB  quantize s  recovered
    fp32 (Q4_1 dequant.)     26.25      538.1        -
    int8 (per channel)       26.26      220.8       4.7
    int4-g128 (RTN)          51.41      173.7       2.3
    gptq-int4-g128           36.37      173.7     137        0.60
    gptq-int4-g128-act       32.59      173.7     175        0.75
    awq-int4-g128            30.56      174.1     208        0.83

Weight bytes keep the tied 49152 x 576 embedding / lm_head in fp32 (113 MB of them).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from inferlab.engines.quant.evaluate import CALIBRATED, evaluate_scheme, held_out_perplexity

DEFAULT_SCHEMES = ("int8", "int4-g128", "gptq-int4-g128", "awq-int4-g128")
RTN = "int4-g128"


def run_bench(model_spec: str = "smollm2-135m", schemes=DEFAULT_SCHEMES,
              quant_threads: int = 1, log=print) -> dict:
    from inferlab.engines.model.registry import load_model

    t0 = time.perf_counter()
    model, tokenizer = load_model(model_spec)
    out: dict = {"model": model_spec, "load_seconds": time.perf_counter() - t0,
                 "fp32_weight_bytes": model.weight_bytes}
    t0 = time.perf_counter()
    out["fp32_perplexity"] = held_out_perplexity(model, tokenizer).perplexity
    out["fp32_eval_seconds"] = time.perf_counter() - t0
    log(f"fp32 perplexity {out['fp32_perplexity']:.3f} ({out['fp32_eval_seconds']:.0f} s)")
    results = {}
    for name in schemes:
        before = torch.get_num_threads()
        torch.set_num_threads(quant_threads)
        try:
            r = evaluate_scheme(model, tokenizer, name)
        finally:
            torch.set_num_threads(before)
        d = r.to_dict()
        sqnr = list(d.pop("sqnr_db").values())
        d["sqnr_db_mean"] = sum(sqnr) / len(sqnr)
        d["sqnr_db_min"] = min(sqnr)
        results[name] = d
        log(f"{name}: perplexity {r.perplexity:.3f}, {r.weight_bytes / 1e6:.1f} MB, "
            f"quantize {r.quantize_s:.1f} s, eval {r.eval_s:.0f} s")
    if RTN in results:
        rtn, fp32 = results[RTN]["perplexity"], out["fp32_perplexity"]
        for name in CALIBRATED:
            if name in results:
                results[name]["recovered"] = (rtn - results[name]["perplexity"]) / (rtn - fp32)
    out["schemes"] = results
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--schemes", default=",".join(DEFAULT_SCHEMES))
    parser.add_argument("--quant-threads", type=int, default=1)
    args = parser.parse_args(argv)
    result = run_bench(args.model, tuple(args.schemes.split(",")), args.quant_threads)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
