"""`bench quant` on the tiny model: every figure the issue names, per scheme and in one run."""

from __future__ import annotations

import pytest

from inferlab.engines.quantlab.bench import run_quant_bench


def test_bench_figures_on_the_tiny_model():
    out = run_quant_bench("tiny", ["int4-g128", "awq-int4-g128", "kv-fp8"], decode_tokens=6,
                          rounds=1, rss=False, eval_text="Clocks count swings. " * 20)
    assert out["model"] == "tiny" and out["fp32_decode_tokens_per_s"] > 0
    table = out["schemes"]
    assert list(table) == ["fp32", "int4-g128", "awq-int4-g128", "kv-fp8"]
    for d in table.values():
        for key in ("perplexity", "weight_bytes", "kv_bytes_per_token", "decode_tokens_per_s",
                    "quantize_seconds", "speedup_vs_fp32"):
            assert d[key] > 0 or key == "quantize_seconds", key
    assert table["fp32"]["speedup_vs_fp32"] == 1.0
    rtn, awq, fp32 = (table[n]["perplexity"] for n in ("int4-g128", "awq-int4-g128", "fp32"))
    assert table["awq-int4-g128"]["recovered"] == pytest.approx((rtn - awq) / (rtn - fp32))
    assert table["kv-fp8"]["kv_bytes_per_token"] < table["fp32"]["kv_bytes_per_token"] / 3
    assert set(out["int8_lm_head_decode"]) == {"int8-sym+int8-lm_head",
                                               "int4-g128+int8-lm_head"}
