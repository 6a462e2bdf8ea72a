"""Seeded tiny models of every family the decoder runs, built by transformers from a small
config (random weights at a scale that makes greedy decoding peaked), as logits references."""

from __future__ import annotations

import torch

SLIDING_WINDOW = 8
"""Tokens a sliding-window layer sees in the tiny configs: the test prompts run past it."""

_BASE = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)
_MOE = dict(num_experts=6, num_experts_per_tok=2, moe_intermediate_size=32)

FAMILY_CONFIGS: dict[str, dict] = {
    "llama": dict(rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 32}),
    "mistral": dict(sliding_window=SLIDING_WINDOW),
    "qwen2": dict(),
    "qwen3": dict(),
    "gemma2": dict(sliding_window=SLIDING_WINDOW, query_pre_attn_scalar=24,
                   attn_logit_softcapping=5.0, final_logit_softcapping=3.0),
    "gemma3_text": dict(sliding_window=SLIDING_WINDOW, query_pre_attn_scalar=16,
                        rope_parameters={"full_attention": {"rope_type": "default",
                                                            "rope_theta": 100000.0},
                                         "sliding_attention": {"rope_type": "default",
                                                               "rope_theta": 1000.0}},
                        layer_types=["sliding_attention", "sliding_attention",
                                     "full_attention"], tie_word_embeddings=True),
    "phi3": dict(sliding_window=SLIDING_WINDOW, partial_rotary_factor=0.5),
    "qwen2_moe": dict(_MOE, shared_expert_intermediate_size=48, decoder_sparse_step=1,
                      mlp_only_layers=[0]),
    "qwen3_moe": dict(_MOE, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
    "mixtral": dict(num_local_experts=6, num_experts_per_tok=2, sliding_window=SLIDING_WINDOW),
    "olmoe": dict(_MOE),
}


def hf_model(family: str, seed: int = 0):
    """(transformers model in fp32 eval mode, its config.json dict)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = _BASE | FAMILY_CONFIGS[family]
    if family == "mixtral":
        kwargs = kwargs | {"intermediate_size": 32}
    config = AutoConfig.for_model(family, **kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 0.0 if family.startswith("gemma") else 1.0  # Gemma holds w of (1 + w)
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "lm_head.weight":
                p.copy_(torch.randn(p.shape, generator=gen) * 4.0 * p.shape[1] ** -0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * p.shape[-1] ** -0.5)
    return model, config.to_dict()


def hf_state_dict(model) -> dict[str, torch.Tensor]:
    """The checkpoint names and tensors `save_pretrained` writes (per-expert MoE names)."""
    import tempfile

    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        return load_file(f"{folder}/model.safetensors")
