"""Cost models: matmul, attention and whole steps against hand-computed counts."""

import pytest

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.costs import (
    DEFAULT_BATCHES,
    OpCost,
    attention_decode_cost,
    attention_prefill_cost,
    decode_batch_sweep,
    decode_step_cost,
    decode_step_parts,
    matmul_cost,
    prefill_length_sweep,
    prefill_step_cost,
    sum_costs,
)
from inferlab.engines.roofline.memory import weight_bytes

SMOLLM2 = load_model_preset("smollm2-135m")
LLAMA3_8B = load_model_preset("llama-3-8b")
H100 = load_hardware_preset("h100-sxm")
H100_BF16 = H100.peak_flops_for("bf16"), H100.bandwidth_bytes_per_s


def test_matmul_2048_cubed_fp32():
    cost = matmul_cost(2048, 2048, 2048, "fp32")
    assert cost.flops == 2 * 2048**3 == 17_179_869_184
    assert cost.bytes_moved == 3 * 2048**2 * 4 == 50_331_648
    assert cost.intensity == pytest.approx(2 * 2048**3 / (3 * 2048**2 * 4))  # 341.33
    assert cost.bound(*H100_BF16) == "compute"


def test_gemv_is_memory_bound():
    # one token through a 4096×4096 fp16 layer: 2·4096² FLOPs over (4096 + 4096² + 4096)·2 B
    cost = matmul_cost(1, 4096, 4096, "fp16")
    assert cost.flops == 33_554_432 and cost.bytes_moved == 33_570_816
    assert cost.bound(*H100_BF16) == "memory"
    # memory-bound: time = bytes / bandwidth
    assert cost.predicted_time_s(*H100_BF16) == pytest.approx(33_570_816 / 3.35e12)


def test_op_cost_to_dict_round_trip_and_sum():
    cost = OpCost("x", 10.0, 4.0)
    assert cost.to_dict() == {"name": "x", "flops": 10.0, "bytes_moved": 4.0, "intensity": 2.5}
    assert OpCost.from_dict(cost.to_dict()) == cost
    assert sum_costs("y", [cost, OpCost("z", 2.0, 4.0)]) == OpCost("y", 12.0, 8.0)
    assert cost.attainable_flops(100.0, 10.0) == 25.0  # 2.5 FLOP/B × 10 B/s, under 100


def test_attention_prefill_small_example():
    # smollm2, 4 tokens, causal: 4·5/2 = 10 query-key pairs
    # flops = 4 · 30 layers · 9 heads · 64 · 10 = 691,200
    # bytes = 4 tokens · 23,040 (K, V) + 2 · 30 · 4 · 9 · 64 · 2 (Q, O in fp16) = 368,640
    cost = attention_prefill_cost(SMOLLM2, seq_len=4)
    assert (cost.flops, cost.bytes_moved) == (691_200, 368_640)
    full = attention_prefill_cost(SMOLLM2, seq_len=4, causal=False)  # 16 pairs
    assert full.flops == 4 * 30 * 9 * 64 * 16


def test_attention_decode_intensity_is_the_group_size():
    # llama-3-8b, batch 1, 2048 cached tokens
    # flops = 4 · 32 · 32 · 128 · 2048 = 1,073,741,824
    # bytes = 2048 · 131,072 (KV) + 2 · 32 · 32 · 128 · 2 (Q, O) = 268,959,744
    cost = attention_decode_cost(LLAMA3_8B, batch=1, context=2048)
    assert (cost.flops, cost.bytes_moved) == (1_073_741_824, 268_959_744)
    assert cost.intensity == pytest.approx(LLAMA3_8B.group_size, rel=0.01)
    assert attention_decode_cost(LLAMA3_8B, 64, 2048).intensity == pytest.approx(cost.intensity)


def test_decode_step_smollm2_by_hand():
    # smollm2, batch 1, 100 cached tokens, fp16 everywhere
    # linears: 30 · 3,538,944 = 106,168,320 params → 212,336,640 FLOPs, 212,336,640 B weights
    #          + 30 · 10,176 in+out elements · 2 B = 610,560 B
    # lm_head: 2 · 49152 · 576 = 56,623,104 FLOPs; 56,623,104 B + (576 + 49152) · 2 B
    # norms:   (30 · 2 + 1) · 576 = 35,136 params · 2 B = 70,272 B
    # attention: 4 · 30 · 9 · 64 · 100 = 6,912,000 FLOPs; 100 · 23,040 + 2 · 30 · 9 · 64 · 2 B
    # kv write: 23,040 B
    cost = decode_step_cost(SMOLLM2, batch=1, context=100)
    assert cost.flops == 212_336_640 + 56_623_104 + 6_912_000
    assert cost.bytes_moved == (212_336_640 + 610_560 + 56_623_104 + 99_456 + 70_272
                                + 2_304_000 + 69_120 + 23_040)


def test_step_parts_read_every_weight_once():
    parts = decode_step_parts(LLAMA3_8B, batch=1, context=1, act_dtype="fp16")
    names = [p.name for p in parts]
    assert names[:3] == ["linears", "lm_head", "embeddings and norms"]
    # at batch 1 the parts' bytes are the weights plus a little activation and KV traffic
    total = sum(p.bytes_moved for p in parts)
    assert weight_bytes(LLAMA3_8B) < total < weight_bytes(LLAMA3_8B) * 1.001


def test_decode_is_memory_bound_at_batch_1_and_intensity_grows_with_batch():
    sweep = decode_batch_sweep(LLAMA3_8B, context=2048)
    assert [c.name for c in sweep][0] == "decode B=1 ctx=2048"
    assert len(sweep) == len(DEFAULT_BATCHES)
    assert sweep[0].intensity == pytest.approx(1.0, abs=0.05)  # ~2 FLOPs per fp16 weight
    assert sweep[0].bound(*H100_BF16) == "memory"
    intensities = [c.intensity for c in sweep]
    assert intensities == sorted(intensities) and intensities[-1] > 10 * intensities[0]


def test_prefill_becomes_compute_bound_with_length():
    sweep = prefill_length_sweep(LLAMA3_8B, lengths=(16, 4096))
    assert sweep[0].bound(*H100_BF16) == "memory"
    assert sweep[1].bound(*H100_BF16) == "compute"
    # 4096 tokens: ~2·n_params FLOPs per token dominate
    assert sweep[1].flops > 2 * 4096 * 7e9
    assert prefill_step_cost(LLAMA3_8B, 4096) == sweep[1]


def test_quantized_weights_raise_decode_intensity():
    fp16 = decode_step_cost(LLAMA3_8B, 1, 1024)
    int4 = decode_step_cost(LLAMA3_8B, 1, 1024, weight_dtype="int4")
    assert int4.flops == fp16.flops and int4.intensity > 3 * fp16.intensity


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="batch"):
        attention_decode_cost(LLAMA3_8B, batch=0, context=10)
    with pytest.raises(ValueError, match="m must be"):
        matmul_cost(0, 1, 1)
    with pytest.raises(ValueError, match="unknown dtype"):
        matmul_cost(1, 1, 1, "fp4")
