"""The tensors a family's Hugging Face checkpoint holds: their names and shapes.

Every loader turns its file into these names (a GGUF's `blk.N.attn_q.weight` becomes
`model.layers.N.self_attn.q_proj.weight`), and the decoder is built from them, so the family's
naming lives here once: Llama's q/k/v/o and gate/up/down, Qwen 2's q/k/v biases, the q/k-norms
of Qwen 3, Gemma 3 and OLMoE (per head, or over the whole projection), Gemma's norms before and
after each block, Phi-3's fused qkv_proj and gate_up_proj, and the experts of Mixtral
(`block_sparse_moe.experts.E.w1/w2/w3`), Qwen-MoE and OLMoE (`mlp.experts.E.gate_proj`, ...,
`mlp.shared_expert`).
"""

from __future__ import annotations

from inferlab.engines.model.config import ModelConfig

MIXTRAL_EXPERT = {"gate": "w1", "down": "w2", "up": "w3"}


def layer_prefix(layer: int) -> str:
    return f"model.layers.{layer}."


def norm_names(cfg: ModelConfig, layer: int) -> dict[str, str]:
    """Role -> name of the layer's norms: attn_norm and mlp_norm (the norms before attention
    and the MLP), and with post-norms (Gemma) post_attn_norm and post_mlp_norm."""
    p = layer_prefix(layer)
    if cfg.post_norms:  # Gemma names the norm after attention "post_attention_layernorm"
        return {"attn_norm": p + "input_layernorm.weight",
                "post_attn_norm": p + "post_attention_layernorm.weight",
                "mlp_norm": p + "pre_feedforward_layernorm.weight",
                "post_mlp_norm": p + "post_feedforward_layernorm.weight"}
    return {"attn_norm": p + "input_layernorm.weight",
            "mlp_norm": p + "post_attention_layernorm.weight"}


def attention_names(cfg: ModelConfig, layer: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Role -> (name, shape) of the layer's attention tensors."""
    p = layer_prefix(layer) + "self_attn."
    d, q_dim, kv_dim = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    if cfg.family == "phi3":
        out = {"qkv": (p + "qkv_proj.weight", (q_dim + 2 * kv_dim, d))}
    else:
        out = {"q": (p + "q_proj.weight", (q_dim, d)), "k": (p + "k_proj.weight", (kv_dim, d)),
               "v": (p + "v_proj.weight", (kv_dim, d))}
    out["o"] = (p + "o_proj.weight", (d, q_dim))
    if cfg.qkv_bias:
        out |= {"q_bias": (p + "q_proj.bias", (q_dim,)), "k_bias": (p + "k_proj.bias", (kv_dim,)),
                "v_bias": (p + "v_proj.bias", (kv_dim,))}
    if cfg.qk_norm == "head":
        out |= {"q_norm": (p + "q_norm.weight", (cfg.d_head,)),
                "k_norm": (p + "k_norm.weight", (cfg.d_head,))}
    elif cfg.qk_norm == "full":
        out |= {"q_norm": (p + "q_norm.weight", (q_dim,)),
                "k_norm": (p + "k_norm.weight", (kv_dim,))}
    return out


def mlp_names(cfg: ModelConfig, layer: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Role -> (name, shape) of the layer's dense MLP, or of its router ("router"), routed
    experts ("expert.E.gate" / "up" / "down") and shared expert ("shared.gate", ...,
    "shared_gate")."""
    p, d = layer_prefix(layer), cfg.d_model
    if not cfg.is_moe_layer(layer):
        f = cfg.d_ff
        if cfg.family == "phi3":
            return {"gate_up": (p + "mlp.gate_up_proj.weight", (2 * f, d)),
                    "down": (p + "mlp.down_proj.weight", (d, f))}
        return {"gate": (p + "mlp.gate_proj.weight", (f, d)),
                "up": (p + "mlp.up_proj.weight", (f, d)),
                "down": (p + "mlp.down_proj.weight", (d, f))}
    f, out = cfg.expert_d_ff, {}
    shapes = {"gate": (f, d), "up": (f, d), "down": (d, f)}
    if cfg.family == "mixtral":
        out["router"] = (p + "block_sparse_moe.gate.weight", (cfg.n_experts, d))
        for e in range(cfg.n_experts):
            for role, w in MIXTRAL_EXPERT.items():
                out[f"expert.{e}.{role}"] = (p + f"block_sparse_moe.experts.{e}.{w}.weight",
                                             shapes[role])
        return out
    out["router"] = (p + "mlp.gate.weight", (cfg.n_experts, d))
    for e in range(cfg.n_experts):
        for role, shape in shapes.items():
            out[f"expert.{e}.{role}"] = (p + f"mlp.experts.{e}.{role}_proj.weight", shape)
    if cfg.n_shared_experts:
        s = cfg.n_shared_experts * cfg.shared_d_ff
        for role, shape in {"gate": (s, d), "up": (s, d), "down": (d, s)}.items():
            out[f"shared.{role}"] = (p + f"mlp.shared_expert.{role}_proj.weight", shape)
        if cfg.shared_expert_gate:
            out["shared_gate"] = (p + "mlp.shared_expert_gate.weight", (1, d))
    return out


def hf_weight_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the family's checkpoint holds, by its Hugging Face name, with its shape."""
    d = cfg.d_model
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg.vocab_size, d),
                                          "model.norm.weight": (d,)}
    for i in range(cfg.n_layers):  # in the order a layer runs (the tiny model draws in it)
        norms = norm_names(cfg, i)
        shapes[norms.pop("attn_norm")] = (d,)
        shapes |= dict(attention_names(cfg, i).values())
        shapes |= {name: (d,) for name in norms.values()}
        shapes |= dict(mlp_names(cfg, i).values())
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, d)
    return shapes


def strip_wrapper_prefix(names) -> dict[str, str]:
    """HF name -> the file's name, for checkpoints of a multimodal wrapper whose text model
    lies under `model.language_model.` (Gemma 3): its tensors answer to the plain names."""
    out = {}
    for name in names:
        if name.startswith("model.language_model."):
            out["model." + name[len("model.language_model."):]] = name
        elif name.startswith("language_model.model."):
            out["model." + name[len("language_model.model."):]] = name
        elif name == "language_model.lm_head.weight":
            out["lm_head.weight"] = name
        else:
            out.setdefault(name, name)
    return out
