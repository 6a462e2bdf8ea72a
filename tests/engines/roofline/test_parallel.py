"""One GPU's share of a model under tensor and pipeline parallelism, hand-worked on
Llama-3-8B (32 layers, 32 heads, 8 KV heads, d_head 128), and the link formulas."""

from __future__ import annotations

import pytest

from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.interconnect import (
    kv_transfer_exposed_s,
    kv_transfer_s,
    ring_all_reduce_s,
)
from inferlab.engines.roofline.memory import kv_bytes_per_token, plan_memory, weight_bytes
from inferlab.engines.roofline.parallel import gpu_share, plan_gpu_share

CFG = load_model_preset("llama-3-8b")


def test_t_and_p_one_is_the_whole_model():
    share = gpu_share(CFG)
    assert share.weight_bytes == weight_bytes(CFG, "fp16")
    assert share.kv_bytes_per_token == kv_bytes_per_token(CFG, "fp16") == 2 * 32 * 8 * 128 * 2
    assert plan_gpu_share(CFG, 8192, 4) == plan_memory(CFG, 8192, 4)


def test_hand_worked_splits():
    t2 = gpu_share(CFG, tp=2)
    assert t2.kv_heads == 4 and t2.kv_bytes_per_token == 2 * 32 * 4 * 128 * 2
    assert t2.weight_bytes == -(-weight_bytes(CFG, "fp16") // 2)
    t16 = gpu_share(CFG, tp=16)  # past the 8 KV heads: one head per GPU, replicated
    assert t16.kv_heads == 1 and t16.kv_bytes_per_token == 2 * 32 * 1 * 128 * 2
    p3 = gpu_share(CFG, pp=3)  # ⌈32 / 3⌉ = 11 layers on the fullest stage
    assert p3.layers == 11 and p3.kv_bytes_per_token == 2 * 11 * 8 * 128 * 2
    for bad in (dict(tp=3), dict(tp=64), dict(pp=33), dict(tp=0)):
        with pytest.raises(ValueError):
            gpu_share(CFG, **bad)


def test_a_split_plan_fits_more_per_gpu():
    one = plan_gpu_share(CFG, 8192, 1, device_memory_bytes=80 * 10**9)
    four = plan_gpu_share(CFG, 8192, 1, tp=4, device_memory_bytes=80 * 10**9)
    assert four.tp == 4 and four.weight_bytes * 4 >= one.weight_bytes
    assert four.max_batch > 4 * one.max_batch  # the freed weight memory holds more KV


def test_link_formulas_by_hand():
    # 1 GB over 100 GB/s + 5 µs
    assert kv_transfer_s(1000, 10**6, 1e11, 5e-6) == pytest.approx(0.01 + 5e-6)
    # ring over 4 GPUs: 2·3/4 of 8 MB at 1 GB/s + 1 µs
    assert ring_all_reduce_s(8e6, 4, 1e9, 1e-6) == pytest.approx(1.5 * 8e-3 + 1e-6)
    assert ring_all_reduce_s(8e6, 1, 1e9, 1e-6) == 0.0
    # layer by layer, 4 layers: a transfer of 0.4 s (+α) under a 1 s prefill leaves one
    # layer's share exposed; under a 0.1 s prefill, all but 3/4 of the prefill
    assert kv_transfer_exposed_s(0.4 + 1e-3, 1e-3, 1.0, 4) == pytest.approx(1e-3 + 0.1)
    assert kv_transfer_exposed_s(0.4 + 1e-3, 1e-3, 0.1, 4) == pytest.approx(1e-3 + 0.4 - 0.075)
