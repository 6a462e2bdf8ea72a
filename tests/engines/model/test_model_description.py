"""The model description read from families' config.json: layer kinds, experts, MLA, and the
parameter counts worked by hand from each architecture's shapes."""

import math

import pytest

from inferlab.engines.model.config import ConfigError, ModelConfig
from inferlab.engines.model.hf_config import model_config_from_hf

from .published_configs import DEEPSEEK_V3

GEMMA3_270M = {
    "model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048,
    "num_hidden_layers": 18, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 256, "vocab_size": 262144, "sliding_window": 512,
    "query_pre_attn_scalar": 256, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"]
    + ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 5
    + ["full_attention"],
}


def test_deepseek_v3_is_mla_and_moe_with_dense_first_layers():
    cfg = model_config_from_hf(DEEPSEEK_V3, id="deepseek-v3")
    assert cfg.is_mla and cfg.is_moe and cfg.router == "sigmoid" and cfg.norm_topk
    assert cfg.dense_layers == (0, 1, 2) and cfg.n_moe_layers == 58
    assert cfg.kv_values_per_token_per_layer == 512 + 64
    # per layer: 128 heads × (128 + 128) K and V would be 32,768 values; MLA keeps 576
    assert 61 * cfg.kv_values_per_token_per_layer * 2 == 70_272


def test_deepseek_v3_parameter_counts_by_hand():
    cfg = model_config_from_hf(DEEPSEEK_V3)
    d, h = 7168, 128
    attention = (d * 1536 + 1536 * h * 192 + d * 576 + 512 * h * 256 + h * 128 * d
                 + 512 + 1536)  # q_a, q_b, kv_a, kv_b, o, and the two latent norms
    dense_mlp, expert = 3 * d * 18432, 3 * d * 2048
    moe_mlp = d * 256 + 256 * expert + expert  # router, 256 routed, 1 shared
    total = (2 * 129280 * d + 61 * (attention + 2 * d) + 3 * dense_mlp + 58 * moe_mlp + d)
    assert cfg.n_params == total
    assert 670e9 < cfg.n_params < 672e9  # DeepSeek's own figure: 671B (without the MTP layer)
    active = total - 58 * (256 - 8) * expert
    assert cfg.n_params_active == active
    assert 37e9 < active < 38e9  # "37B activated"


def test_gemma3_layer_kinds_and_scalars():
    cfg = model_config_from_hf(GEMMA3_270M, id="gemma3-270m")
    assert [cfg.layer_kind(i) for i in range(6)] == ["sliding"] * 5 + ["full"]
    assert cfg.layer_window(0) == 512 and cfg.layer_window(5) == 0
    assert (cfg.norm_offset, cfg.post_norms, cfg.qk_norm, cfg.mlp_kind) == (
        1.0, True, "head", "geglu")
    assert cfg.embed_scale == math.sqrt(640) and cfg.attn_scale == 256 ** -0.5
    assert (cfg.rope_theta, cfg.rope_local_theta) == (1e6, 1e4)
    assert cfg.tie_embeddings  # Gemma ties by default
    # embedding 262144·640; per layer q 640·1024, k and v 640·256, o 1024·640, q/k-norms 2·256,
    # four norms 4·640, gate/up/down 3·640·2048; final norm 640
    per_layer = 640 * 1024 + 2 * 640 * 256 + 1024 * 640 + 512 + 4 * 640 + 3 * 640 * 2048
    assert cfg.n_params == 262144 * 640 + 18 * per_layer + 640
    assert cfg.n_params_active == cfg.n_params


def test_qwen3_moe_counts_and_top_k():
    d = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
         "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
         "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
         "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
         "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": False}
    cfg = model_config_from_hf(d)
    assert (cfg.n_experts, cfg.n_experts_active, cfg.expert_d_ff) == (128, 8, 768)
    assert cfg.dense_layers == () and cfg.norm_topk and cfg.qk_norm == "head"
    assert 30.0e9 < cfg.n_params < 30.6e9 and 3.2e9 < cfg.n_params_active < 3.4e9  # 30B-A3B


def test_qwen2_moe_shared_expert_and_sparse_step():
    d = {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128,
         "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 2,
         "mlp_only_layers": [3], "vocab_size": 256}
    cfg = model_config_from_hf(d)
    assert cfg.dense_layers == (0, 2, 3) and cfg.qkv_bias and cfg.shared_expert_gate
    assert cfg.shared_params == 3 * 64 * 96 + 64 and not cfg.norm_topk


def test_an_unknown_model_type_is_refused_by_name():
    with pytest.raises(ConfigError, match="'mamba' is not supported"):
        model_config_from_hf({"model_type": "mamba", "hidden_size": 8})
    with pytest.raises(ConfigError, match="not supported"):
        model_config_from_hf({"hidden_size": 8, "num_hidden_layers": 1})


def test_rope_scalings_are_read_or_refused():
    base = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256}
    cfg = model_config_from_hf(base | {"rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}})
    assert (cfg.rope_scaling, cfg.rope_factor, cfg.rope_original_max_position) == (
        "llama3", 8.0, 8192)
    with pytest.raises(ConfigError, match="longrope"):
        model_config_from_hf(base | {"rope_scaling": {"rope_type": "longrope", "factor": 4}})


def test_description_fields_are_checked():
    base = dict(id="m", name="m", n_layers=2, d_model=8, n_heads=2, n_kv_heads=1, d_head=4,
                d_ff=16, vocab_size=10)
    with pytest.raises(ConfigError, match="layer_types"):
        ModelConfig(**base, layer_types=("full",))
    with pytest.raises(ConfigError, match="sliding_window"):
        ModelConfig(**base, layer_types=("full", "sliding"))
    with pytest.raises(ConfigError, match="n_experts_active"):
        ModelConfig(**base, n_experts=2, n_experts_active=3, expert_d_ff=4)
    with pytest.raises(ConfigError, match="dense_layers"):
        ModelConfig(**base, n_experts=2, n_experts_active=1, expert_d_ff=4, dense_layers=(5,))
    cfg = ModelConfig(**base, layer_types=("full", "sliding"), sliding_window=4)
    assert ModelConfig.from_dict(cfg.to_dict() | {"layer_types": ["full", "sliding"]}) == cfg
