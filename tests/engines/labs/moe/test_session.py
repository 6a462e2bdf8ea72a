"""The MoE session decodes the tiny MoE on the shipped prompts and its counts hold together:
per layer and step Σ tokens per expert = B × k, max / mean ≥ 1, distinct experts ≤ min(E, B·k)
and equal to the experts with a token; the bytes are the dense part plus the distinct experts'
bytes; the grouped product equals the per-token loop; a dense model is refused by name."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.moe.records import HIST_BINS
from inferlab.engines.labs.moe.session import moe_model, tapped
from inferlab.engines.roofline.memory import experts_touched


def test_every_step_counts_b_times_k_tokens_per_layer(run):
    _settings, _model, info, steps, _sweep = run
    assert [r.step for r in steps] == [0, 1, 2]
    for r in steps:
        assert len(r.expert_counts) == len(info.moe_layers) == 2
        for counts, distinct, imbalance, means in zip(
                r.expert_counts, r.distinct_experts, r.imbalance_max_over_mean,
                r.topk_weight_mean, strict=True):
            assert len(counts) == info.n_experts
            assert sum(counts) == r.batch * info.top_k
            assert distinct == sum(1 for c in counts if c) <= min(info.n_experts,
                                                                    r.batch * info.top_k)
            assert distinct >= info.top_k
            assert imbalance == pytest.approx(max(counts) / (sum(counts) / info.n_experts))
            assert imbalance >= 1.0
            assert sum(means) == pytest.approx(1.0)  # qwen3_moe renormalises its top-k
            assert list(means) == sorted(means, reverse=True)
        assert len(r.topk_weight_hist) == HIST_BINS
        assert sum(r.topk_weight_hist) == len(info.moe_layers) * r.batch * info.top_k
        assert r.distinct_experts_formula == experts_touched(info.n_experts, info.top_k,
                                                             r.batch)


def test_bytes_are_the_dense_part_plus_the_touched_experts(run):
    _settings, model, info, steps, sweep = run
    assert info.weight_bytes_total == model.weight_bytes
    assert info.dense_bytes + info.n_experts * sum(info.expert_bytes) == info.weight_bytes_total
    for r in steps:
        assert r.weight_bytes_per_step == info.dense_bytes + sum(
            d * size for d, size in zip(r.distinct_experts, info.expert_bytes, strict=True))
        assert r.weight_bytes_per_step <= info.weight_bytes_total
    one = next(p for p in sweep if p.batch == 1)  # one token: exactly its k experts per layer
    assert one.distinct_experts == one.distinct_experts_formula == info.top_k
    assert one.weight_bytes_per_step == one.weight_bytes_per_step_formula == \
        info.dense_bytes + info.top_k * sum(info.expert_bytes)
    # fp32 tiny MoE: its active parameters are the description's
    assert (info.params_total, info.params_active) == (model.config.n_params,
                                                        model.config.n_params_active)


def test_grouped_equals_per_token_and_times_are_there(run):
    *_, steps, sweep = run
    for r in steps:
        assert r.grouped_max_abs_diff <= 1e-5
        assert r.step_s > 0 and r.grouped_s > 0 and r.per_token_s > 0
    assert [p.batch for p in sweep] == [1, 8]
    eight = sweep[1]
    assert eight.steps == len(steps) and eight.tokens_per_s == pytest.approx(8 / eight.step_s)


def test_the_routers_are_put_back():
    model, _ = moe_model("tiny-moe")
    routers = [lw.moe.router for lw in model.layers]
    with pytest.raises(RuntimeError), tapped(model):
        raise RuntimeError
    assert [lw.moe.router for lw in model.layers] == routers


def test_a_dense_model_is_refused_by_name():
    with pytest.raises(ValueError, match="tiny is a dense model"):
        moe_model("tiny")
