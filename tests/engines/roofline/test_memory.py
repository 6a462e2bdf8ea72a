"""KV-cache and VRAM calculator against hand-computed values."""

from dataclasses import replace

import pytest

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.memory import (
    attention_variants,
    kv_bytes_per_token,
    plan_memory,
    weight_bytes,
)

LLAMA3_8B = load_model_preset("llama-3-8b")
H100 = load_hardware_preset("h100-sxm")


def test_kv_bytes_per_token_gqa_mqa_and_small():
    # llama-3-8b (GQA 32/8): 2 · 32 layers · 8 · 128 · 2 B = 131,072
    assert kv_bytes_per_token(LLAMA3_8B, "fp16") == 131_072
    assert kv_bytes_per_token(LLAMA3_8B, "fp8") == 65_536
    assert kv_bytes_per_token(LLAMA3_8B, "fp32") == 262_144
    # llama-3-70b: 2 · 80 · 8 · 128 · 2 = 327,680
    assert kv_bytes_per_token(load_model_preset("llama-3-70b")) == 327_680
    # falcon-7b (MQA): 2 · 32 · 1 · 64 · 2 = 8,192
    assert kv_bytes_per_token(load_model_preset("falcon-7b")) == 8_192
    # smollm2-135m: 2 · 30 · 3 · 64 · 2 = 23,040
    assert kv_bytes_per_token(load_model_preset("smollm2-135m")) == 23_040


def test_llama_3_8b_at_8192_tokens_is_one_gib_of_kv():
    plan = plan_memory(LLAMA3_8B, context=8192, batch=1)
    assert plan.kv_bytes_per_request == plan.kv_bytes_total == 1_073_741_824 == 2**30


def test_weight_bytes_smollm2():
    smollm2 = load_model_preset("smollm2-135m")
    assert weight_bytes(smollm2, "fp16") == 2 * 134_515_008 == 269_030_016
    assert weight_bytes(smollm2, "int4") == 134_515_008 // 2 == 67_257_504
    assert weight_bytes(smollm2, "fp32") == 538_060_032


def test_worked_example_llama_3_8b_on_h100():
    # budget  = ⌊80e9 · 0.9⌋                     = 72,000,000,000
    # weights = 8,030,261,248 params · 2 B        = 16,060,522,496
    # free    = 72,000,000,000 − 16,060,522,496   = 55,939,477,504
    # max_batch at 8192 tokens: ⌊55,939,477,504 / 1,073,741,824⌋ = ⌊52.098⌋ = 52
    #   (52 · 2^30 = 55,834,574,848 fits; 53 · 2^30 = 56,908,316,672 does not)
    # max_context at batch 1: ⌊55,939,477,504 / 131,072⌋ = 426,784
    #   (426,784 · 131,072 = 55,939,432,448; 45,056 B left over)
    plan = plan_memory(LLAMA3_8B, context=8192, batch=1,
                       device_memory_bytes=H100.memory_bytes, utilization=0.9,
                       bw_bytes_per_s=H100.bandwidth_bytes_per_s)
    assert plan.budget_bytes == 72_000_000_000
    assert plan.weight_bytes == 16_060_522_496
    assert plan.total_bytes == 16_060_522_496 + 1_073_741_824
    assert plan.headroom_bytes == 72_000_000_000 - plan.total_bytes
    assert plan.fits
    assert plan.max_batch == 52
    assert plan.max_context == 426_784
    # each step reads 17,134,264,320 B: 3.35e12 / 17,134,264,320 = 195.51 tokens/s
    assert plan.decode_tokens_per_s_bound == pytest.approx(195.5147, abs=1e-3)
    assert plan_memory(LLAMA3_8B, 8192, 52, device_memory_bytes=H100.memory_bytes).fits
    assert not plan_memory(LLAMA3_8B, 8192, 53, device_memory_bytes=H100.memory_bytes).fits


def test_weights_that_do_not_fit():
    # llama-3-70b in fp16: 141 GB of weights on an 80 GB card
    plan = plan_memory(load_model_preset("llama-3-70b"), 4096, 1, device_memory_bytes=80 * 10**9)
    assert not plan.fits and plan.headroom_bytes < 0
    assert plan.max_batch == 0 and plan.max_context == 0
    assert plan.decode_tokens_per_s_bound is None


def test_to_dict_is_plain():
    d = plan_memory(LLAMA3_8B, 1024, 4).to_dict()
    assert d["model_id"] == "llama-3-8b" and d["kv_dtype"] == "fp16" and d["batch"] == 4
    assert d["kv_bytes_total"] == 4 * 1024 * 131_072


def test_plan_rejects_bad_inputs():
    with pytest.raises(ValueError, match="context"):
        plan_memory(LLAMA3_8B, 0, 1)
    with pytest.raises(ValueError, match="utilization"):
        plan_memory(LLAMA3_8B, 1, 1, utilization=1.5)


def test_attention_variants_of_a_gqa_model():
    variants = attention_variants(LLAMA3_8B)
    assert list(variants) == ["MHA", "GQA", "MQA"]
    assert [v.n_kv_heads for v in variants.values()] == [32, 8, 1]
    assert [kv_bytes_per_token(v) for v in variants.values()] == [524_288, 131_072, 16_384]
    assert variants["GQA"].n_params == LLAMA3_8B.n_params
    assert variants["MHA"].attention_kind == "MHA" and variants["MHA"].id == "llama-3-8b-mha"


def test_attention_variants_of_mha_and_mqa_models():
    mha = replace(LLAMA3_8B, n_kv_heads=32)
    assert attention_variants(mha)["GQA"].n_kv_heads == 4  # 32 / 8
    falcon = load_model_preset("falcon-7b")  # 71 heads, prime: only 1 or 71 divide it
    assert attention_variants(falcon)["GQA"].n_kv_heads == 1
