"""The calculators on the model description: KV per layer kind (sliding windows), MLA's
latent, a MoE's total, active and per-step weights, each against a hand-worked figure."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.model.config import ModelConfig, load_model_preset
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.roofline.costs import attention_decode_cost, decode_step_parts
from inferlab.engines.roofline.layer_costs import causal_pairs
from inferlab.engines.roofline.memory import (
    MAX_COUNT,
    attention_variants,
    context_that_fits,
    experts_touched,
    kv_bytes_by_layer_kind,
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_layers,
    plan_memory,
    weight_bytes,
    weight_bytes_active_per_token,
    weight_bytes_per_step,
)
from inferlab.engines.roofline.parallel import gpu_share, plan_gpu_share
from tests.engines.model.published_configs import DEEPSEEK_V3

GEMMA3_27B = load_model_preset("gemma-3-27b")
MIXTRAL = load_model_preset("mixtral-8x7b")
LLAMA3_8B = load_model_preset("llama-3-8b")


# ---- KV: MLA, windows -------------------------------------------------------------------

def test_deepseek_v3_kv_is_the_latent_per_layer():
    cfg = model_config_from_hf(DEEPSEEK_V3, id="deepseek-v3")
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B (bf16) = 70,272 B, where
    # 2 × 128 heads × 56 (hidden / heads, the dense-Llama reading) × 2 × 61 gave 1,748,992
    assert kv_bytes_per_token(cfg, "bf16") == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token(cfg, "fp8") == 35_136
    assert kv_bytes_per_request(cfg, 8192, "bf16") == 8192 * 70_272
    assert kv_bytes_per_token(load_model_preset("deepseek-v3"), "bf16") == 70_272


def test_deepseek_v3_weights_in_bf16():
    cfg = model_config_from_hf(DEEPSEEK_V3)
    assert weight_bytes(cfg, "bf16") == 2 * cfg.n_params
    assert 1.340e12 < weight_bytes(cfg, "bf16") < 1.344e12  # ~1.34 TB, not 77 GB
    assert weight_bytes_active_per_token(cfg, "bf16") == 2 * cfg.n_params_active  # 75.1 GB


def test_gemma3_27b_sliding_window_ratio_at_8k():
    # 62 layers: every 6th global (10), the other 52 sliding over W = 1,024 tokens; one layer
    # holds 2 × 16 KV heads × 128 × 2 B = 8,192 B per token in bf16
    cfg, context, window = GEMMA3_27B, 8192, 1024
    n_global = sum(cfg.layer_kind(i) == "full" for i in range(cfg.n_layers))
    n_local = cfg.n_layers - n_global
    assert (n_global, n_local, cfg.sliding_window) == (10, 52, window)
    per_layer = 2 * 16 * 128 * 2
    assert kv_bytes_per_token(cfg, "bf16") == 62 * per_layer == 507_904
    request = kv_bytes_per_request(cfg, context, "bf16")
    assert request == per_layer * (10 * 8192 + 52 * 1024) == 1_107_296_256
    all_global = context * kv_bytes_per_token(cfg, "bf16")
    closed_form = (n_global * context + n_local * min(context, window)) / (cfg.n_layers * context)
    assert request / all_global == pytest.approx(closed_form, rel=1e-15)
    assert closed_form == pytest.approx(0.2661, abs=1e-4)
    # below the window every layer holds every token
    assert kv_bytes_per_request(cfg, 1000, "bf16") == 1000 * kv_bytes_per_token(cfg, "bf16")
    by_kind = kv_bytes_by_layer_kind(cfg, context, "bf16")
    assert by_kind == {"sliding": (52, 52 * per_layer, 52 * per_layer * 1024),
                       "full": (10, 10 * per_layer, 10 * per_layer * 8192)}


def test_plan_and_max_context_with_windows():
    # Gemma 3 27B in bf16 on an 80 GB card at 90 %: 72e9 − 54,018,692,608 B of weights leaves
    # 17,981,307,392 B. Past 1,024 tokens the KV grows by the 10 global layers only,
    # 81,920 B per token, above a fixed 52 × 8,192 × 1,024 = 436,207,616 B:
    # C = ⌊(17,981,307,392 − 436,207,616) / 81,920⌋ = 214,173
    plan = plan_memory(GEMMA3_27B, 8192, 1, "bf16", "bf16")
    assert plan.weight_bytes == 54_018_692_608
    assert plan.max_context == (17_981_307_392 - 436_207_616) // 81_920 == 214_173
    assert plan_memory(GEMMA3_27B, plan.max_context, 1, "bf16", "bf16").fits
    assert not plan_memory(GEMMA3_27B, plan.max_context + 1, 1, "bf16", "bf16").fits
    assert plan.max_batch == 17_981_307_392 // 1_107_296_256 == 16


def test_context_that_fits_by_hand():
    groups = kv_layers(GEMMA3_27B, "bf16")  # 10 global × 8,192 B, 52 × 8,192 B over W 1,024
    assert [(g.window, g.n_layers) for g in groups] == [(0, 10), (1024, 52)]
    # under the window: 62 × 8,192 = 507,904 B per token
    assert context_that_fits(groups, 507_904 * 100 + 5) == 100
    assert context_that_fits(groups, 507_904 * 1024) == 1024
    assert context_that_fits(groups, -1) == 0
    only_windowed = kv_layers(replace(GEMMA3_27B, layer_types=("sliding",) * 62), "bf16")
    assert context_that_fits(only_windowed, 62 * 8192 * 1024) == MAX_COUNT  # never binds


def small_model(draw_kinds, window: int, n_kv: int, mla: bool) -> ModelConfig:
    fields = dict(id="m", name="m", n_layers=len(draw_kinds), d_model=64, n_heads=4,
                  n_kv_heads=n_kv, d_head=16, d_ff=128, vocab_size=100,
                  layer_types=tuple(draw_kinds), sliding_window=window)
    if mla:
        fields |= dict(kv_lora_rank=24, qk_rope_head_dim=7, qk_nope_head_dim=8, v_head_dim=16)
    return ModelConfig(**fields)


@settings(max_examples=300, deadline=None)
@given(kinds=st.lists(st.sampled_from(["full", "sliding", "chunked"]), min_size=1, max_size=12),
       window=st.integers(1, 5000), context=st.integers(1, 20_000),
       n_kv=st.sampled_from([1, 2, 4]), mla=st.booleans(),
       dtype=st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4"]))
def test_a_request_never_holds_more_than_every_token_in_every_layer(kinds, window, context,
                                                                    n_kv, mla, dtype):
    cfg = small_model(kinds, window, n_kv, mla)
    request, per_token = kv_bytes_per_request(cfg, context, dtype), kv_bytes_per_token(cfg, dtype)
    assert request <= context * per_token
    windowed = any(k != "full" for k in kinds) and window < context
    assert (request == context * per_token) == (not windowed)
    # and the longest context that fits a request's own bytes is at least that context
    assert context_that_fits(kv_layers(cfg, dtype), request) >= context


@settings(max_examples=100, deadline=None)
@given(context=st.integers(1, 65_536), batch=st.integers(1, 64),
       memory_bytes=st.integers(10**8, 10**11), utilization=st.floats(0.5, 1.0),
       window=st.integers(1, 8192))
def test_max_batch_and_max_context_are_the_largest_that_fit_with_windows(
        context, batch, memory_bytes, utilization, window):
    cfg = replace(load_model_preset("smollm2-135m"),
                  layer_types=("sliding",) * 5 + ("full",) + ("sliding",) * 24,
                  sliding_window=window)
    kwargs = dict(device_memory_bytes=memory_bytes, utilization=utilization)
    plan = plan_memory(cfg, context, batch, **kwargs)
    assert not plan_memory(cfg, context, plan.max_batch + 1, **kwargs).fits
    if plan.max_context >= 1:
        assert plan_memory(cfg, plan.max_context, batch, **kwargs).fits
    assert not plan_memory(cfg, plan.max_context + 1, batch, **kwargs).fits
    assert plan.fits == (plan.max_batch >= batch) == (plan.max_context >= context)


def test_dense_figures_are_unchanged():
    # the dense-Llama formula, 2 × L × n_kv × d_head × bytes, for every dense unwindowed preset
    for preset in ("llama-3-8b", "llama-3-70b", "falcon-7b", "smollm2-135m", "qwen3-8b",
                   "llama-3.1-8b", "mixtral-8x7b", "qwen3-30b-a3b"):
        cfg = load_model_preset(preset)
        for dtype, b in (("fp16", 2), ("fp8", 1), ("int4", 0.5)):
            assert kv_bytes_per_token(cfg, dtype) == 2 * cfg.n_layers * cfg.n_kv_heads \
                * cfg.d_head * b
            assert kv_bytes_per_request(cfg, 777, dtype) == 777 * kv_bytes_per_token(cfg, dtype)
    assert weight_bytes_per_step(LLAMA3_8B, "fp16", 64) == weight_bytes(LLAMA3_8B)


# ---- weights: MoE -----------------------------------------------------------------------

def test_mixtral_weights_by_hand():
    # per layer: q, o 4096² each; k, v 4096 × 1024 each          =     41,943,040
    #            router 4096 × 8                                 =         32,768
    #            8 experts × 3 × 4096 × 14,336                   =  1,409,286,144
    #            two RMSNorms                                    =          8,192
    #                                                            =  1,451,270,144 × 32
    # embeddings and lm_head 2 × 32,000 × 4096 = 262,144,000; final norm 4096
    total = 32 * 1_451_270_144 + 262_144_000 + 4096
    assert MIXTRAL.n_params == total == 46_702_792_704  # "46.7B"
    assert weight_bytes(MIXTRAL, "fp16") == 2 * total == 93_405_585_408
    active = total - 32 * 6 * 3 * 4096 * 14_336  # top 2 of 8: six experts a token skips
    assert MIXTRAL.n_params_active == active == 12_879_925_248  # "12.9B"
    assert weight_bytes_active_per_token(MIXTRAL, "fp16") == 2 * active
    assert weight_bytes_active_per_token(MIXTRAL, "int4") == active // 2


def test_experts_touched_closed_form():
    assert experts_touched(8, 2, 1) == 2.0
    assert experts_touched(8, 2, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2))  # 3.5
    assert experts_touched(8, 2, 2) == pytest.approx(3.5)
    assert experts_touched(256, 8, 10_000) == pytest.approx(256)
    values = [experts_touched(256, 8, b) for b in (1, 2, 4, 16, 64, 256)]
    assert values == sorted(values) and values[-1] < 256


def test_a_decode_step_reads_the_experts_its_batch_touches():
    # Mixtral, batch 1: the dense part and 2 experts per layer; batch 4: 8·(1 − (3/4)^4) of 8
    assert weight_bytes_per_step(MIXTRAL, "fp16", 1) == weight_bytes_active_per_token(MIXTRAL)
    expert = 3 * 4096 * 14_336
    touched = 8 * (1 - 0.75**4)
    assert weight_bytes_per_step(MIXTRAL, "fp16", 4) == math.ceil(
        2 * (MIXTRAL.n_params - 32 * (8 - touched) * expert))
    assert weight_bytes_per_step(MIXTRAL, "fp16", 10**6) == pytest.approx(
        weight_bytes(MIXTRAL), rel=1e-12)
    # the step cost reads exactly those weights (plus the activations, a little at small batch)
    for batch in (1, 4):
        parts = {p.name: p for p in decode_step_parts(MIXTRAL, batch, 1)}
        read = sum(parts[n].bytes_moved for n in ("linears", "lm_head", "embeddings and norms"))
        assert weight_bytes_per_step(MIXTRAL, "fp16", batch) <= read + 1
        assert read < weight_bytes_per_step(MIXTRAL, "fp16", batch) * 1.001
    # FLOPs are the active parameters': 2 per weight per token
    parts = {p.name: p for p in decode_step_parts(MIXTRAL, 1, 1)}
    assert parts["linears"].flops == 2 * (MIXTRAL.n_params_active - 2 * 32000 * 4096
                                          - (32 * 2 + 1) * 4096)


def test_plan_decode_bound_reads_the_active_weights():
    plan = plan_memory(MIXTRAL, 4096, 1, bw_bytes_per_s=3.35e12)
    assert plan.weight_bytes == weight_bytes(MIXTRAL)
    assert plan.weight_bytes_per_step == weight_bytes_active_per_token(MIXTRAL)
    assert plan.decode_tokens_per_s_bound == pytest.approx(
        3.35e12 / (plan.weight_bytes_per_step + plan.kv_bytes_total))


# ---- attention cost, parallel share, variants -------------------------------------------

def test_sliding_attention_costs_by_hand():
    assert causal_pairs(4) == 10 and causal_pairs(4, window=2) == 3 + 2 * 2
    cfg = GEMMA3_27B
    # decode over 8,192 cached tokens: 10 layers read 8,192, 52 layers 1,024
    cost = attention_decode_cost(cfg, 1, 8192, "bf16", "bf16")
    assert cost.flops == 4 * 32 * 128 * (10 * 8192 + 52 * 1024)
    assert cost.bytes_moved == kv_bytes_per_request(cfg, 8192, "bf16") + 62 * 32 * 256 * 2


def test_mla_share_keeps_the_latent_whole_and_variants_compare_mha():
    cfg = model_config_from_hf(DEEPSEEK_V3, id="deepseek-v3")
    share = gpu_share(cfg, tp=8, weight_dtype="bf16", kv_dtype="bf16")
    assert share.kv_bytes_per_token == 70_272  # not 1/8: every head reads the latent
    assert share.weight_bytes == math.ceil(weight_bytes(cfg, "bf16") / 8)
    variants = attention_variants(cfg)
    assert list(variants) == ["MLA", "MHA", "GQA", "MQA"] and variants["MLA"] is cfg
    # MHA caches each head's K (128 + 64) and V (128): 2 × 160 per head
    assert kv_bytes_per_token(variants["MHA"], "bf16") == 61 * 128 * 320 * 2
    assert [v.n_kv_heads for v in variants.values()][1:] == [128, 16, 1]


def test_pipeline_stage_with_most_global_layers():
    # Gemma 3 27B over 4 stages of 16 layers: full layers at 5, 11, ..., 59: stage 0 holds
    # 5, 11 (2), stage 1 17, 23, 29 (3), stage 2 35, 41, 47 (3), stage 3 (14 layers) 53, 59
    share = gpu_share(GEMMA3_27B, pp=4, kv_dtype="bf16")
    assert share.layers == 16
    assert [(g.window, g.n_layers) for g in share.kv_layers] == [(0, 3), (1024, 13)]
    plan = plan_gpu_share(GEMMA3_27B, 8192, 1, pp=4, weight_dtype="bf16", kv_dtype="bf16")
    assert plan.kv_bytes_per_request == 8192 * (3 * 8192 + 13 * 1024)
