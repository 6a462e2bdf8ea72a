"""Published config.json files, trimmed to the fields that set their sizes: shared by the
description, calculator and kv-calc tests."""

# DeepSeek-V3's config.json, the fields that set its sizes.
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
    "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 129280, "tie_word_embeddings": False, "scoring_func": "sigmoid",
    "norm_topk_prob": True, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
    "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32,
                                          "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                                          "original_max_position_embeddings": 4096},
}
