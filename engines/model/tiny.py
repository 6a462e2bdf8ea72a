"""Seeded, randomly initialised tiny models for fast runs and tests: same code paths, no file.

"tiny": a Llama of 2 layers, d_model 64, 4 query heads sharing 2 K/V heads (GQA) of width 16,
SwiGLU d_ff 128. "tiny-moe": a Qwen3-MoE of 2 layers, d_model 256, q/k-norm, 8 experts of
width 512 with 2 routed per token (renormalised), as Mixtral routes: 1.5 MB an expert in fp32,
so reading one costs what it does in a real MoE, and a decode batch of 32 touches every expert
while the per-token loop reads 64. Both read a 256-token byte-level vocabulary
(token id = byte). Weights are drawn with a fixed seed at a scale large enough that logits are
peaked, so greedy decoding has no near-ties and the paged and recomputed paths pick the same
tokens.
"""

from __future__ import annotations

import torch

from inferlab.engines.model.checkpoint_names import hf_weight_shapes
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer

TINY_SEED = 0


def tiny_config(**overrides) -> ModelConfig:
    """The tiny model's shape; keyword overrides change it (e.g. n_kv_heads=1 for MQA)."""
    fields = dict(id="tiny", name="tiny (random, seeded)", n_layers=2, d_model=64, n_heads=4,
                  n_kv_heads=2, d_head=16, d_ff=128, vocab_size=256, rope_theta=10000.0,
                  tie_embeddings=False, max_position=2048,
                  source="engines/model/tiny.py (random weights, seed 0)")
    return ModelConfig(**(fields | overrides))


def tiny_state_dict(config: ModelConfig, seed: int = TINY_SEED) -> dict[str, torch.Tensor]:
    """Hugging Face-named fp32 tensors: matrices ~ N(0, 1/d_in), norms ~ 1 + N(0, 0.1²),
    the embedding ~ N(0, 1), the lm_head ~ N(0, 16/d) (logits of std ~4: peaked)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in hf_weight_shapes(config).items():
        if len(shape) == 1:
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif "embed_tokens" in name:
            t = torch.randn(shape, generator=gen)
        elif name == "lm_head.weight":
            t = torch.randn(shape, generator=gen) * 4.0 * shape[1] ** -0.5
        else:
            t = torch.randn(shape, generator=gen) * shape[1] ** -0.5
        out[name] = t
    return out


def tiny_moe_config(**overrides) -> ModelConfig:
    """The tiny MoE model's shape (a Qwen3-MoE layout); keyword overrides change it."""
    fields = dict(id="tiny-moe", name="tiny MoE (random, seeded)", n_layers=2, d_model=256,
                  n_heads=4, n_kv_heads=2, d_head=64, d_ff=512, vocab_size=256,
                  rope_theta=10000.0, tie_embeddings=False, max_position=2048,
                  source="engines/model/tiny.py (random weights, seed 0)", family="qwen3_moe",
                  qk_norm="head", n_experts=8, n_experts_active=2, expert_d_ff=512,
                  norm_topk=True)
    return ModelConfig(**(fields | overrides))


def tiny_moe_model(dtype: str = "fp32", device: str = "cpu", seed: int = TINY_SEED,
                   kernels: str | None = None, **overrides) -> tuple[Llama, Tokenizer]:
    """(MoE model, byte tokenizer) with weights drawn from `seed`."""
    config = tiny_moe_config(**overrides)
    model = Llama.from_state_dict(config, tiny_state_dict(config, seed), dtype, device,
                                  kernels=kernels)
    return model, Tokenizer.byte_level(name="tiny-moe")


def tiny_model(dtype: str = "fp32", device: str = "cpu", seed: int = TINY_SEED,
               kernels: str | None = None, **overrides) -> tuple[Llama, Tokenizer]:
    """(model, byte tokenizer) with weights drawn from `seed`, on the kernel path `kernels`
    ("native", "torch"; None or "auto": the process default)."""
    config = tiny_config(**overrides)
    model = Llama.from_state_dict(config, tiny_state_dict(config, seed), dtype, device,
                                  kernels=kernels)
    return model, Tokenizer.byte_level(name="tiny")
