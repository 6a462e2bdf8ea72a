"""Cost models of single operations: a matmul, and attention in prefill and in decode.

Counting rules, shared by every model here: a multiply-add is 2 FLOPs; every operand is
read from memory once and every result written once (perfect on-chip reuse, as a fused
kernel such as FlashAttention achieves); softmax, scaling and masking FLOPs are not
counted (they are O(S²·H), small next to the O(S²·H·d_head) matmuls).
"""

from __future__ import annotations

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.aten_costs import Tensor, matmul_flops_bytes
from inferlab.engines.roofline.memory import kv_bytes_per_token, kv_layers, per_model
from inferlab.engines.roofline.op_cost import OpCost


def matmul_cost(m: int, n: int, k: int, dtype: str = "fp32") -> OpCost:
    """C[m×n] = A[m×k] · B[k×n].

    flops = 2·m·n·k; bytes = (m·k + k·n + m·n) × bytes(dtype) (A and B read, C written):
    `aten_costs.matmul_flops_bytes`, the one count a profiled aten matmul gets too.
    """
    _check_positive(m=m, n=n, k=k)
    bpe = bytes_per_element(dtype)
    flops, moved = matmul_flops_bytes(Tensor((m, k), bpe), Tensor((k, n), bpe))
    return OpCost(f"matmul {m}x{n}x{k} {dtype}", flops, moved)


def head_dims(cfg: ModelConfig, absorbed: bool = False) -> tuple[int, int]:
    """(score dim, value dim) of one query head: the length of q·k and of the values it mixes.

    d_head and d_head; MLA unabsorbed (prefill: K and V expanded from the latent) qk_nope +
    qk_rope and v_head_dim; MLA absorbed (decode over the cached latent, W_UK folded into q,
    W_UV into the output) kv_lora_rank + qk_rope and kv_lora_rank.
    """
    if not cfg.is_mla:
        return cfg.d_head, cfg.d_head
    if absorbed:
        return cfg.kv_lora_rank + cfg.qk_rope_head_dim, cfg.kv_lora_rank
    return cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.v_head_dim


@per_model
def _attention_profile(cfg: ModelConfig, kv_dtype: str):
    """What both attention costs read of a model, once per (model, KV dtype): its KV layers,
    kv_bytes_per_token, and d_qk + d_v unabsorbed and absorbed (head_dims)."""
    return (kv_layers(cfg, kv_dtype), kv_bytes_per_token(cfg, kv_dtype), sum(head_dims(cfg)),
            sum(head_dims(cfg, absorbed=True)))


def causal_pairs(seq_len: float, window: int = 0) -> float:
    """Query-key pairs of causal attention over `seq_len` tokens, each query seeing at most
    `window` keys (0: all before it): S·(S+1)/2, or with S > W: W·(W+1)/2 + (S − W)·W."""
    if not window or seq_len <= window:
        return seq_len * (seq_len + 1) / 2
    return window * (window + 1) / 2 + (seq_len - window) * window


def attention_prefill_cost(cfg: ModelConfig, seq_len: int, batch: int = 1,
                           kv_dtype: str = "fp16", act_dtype: str = "fp16",
                           causal: bool = True) -> OpCost:
    """Attention of `batch` prompts of `seq_len` tokens, all layers, fused kernel.

    pairs per layer = causal_pairs(S, W) (S·(S+1)/2 for a full layer; a sliding or chunked
    layer's queries see at most W keys), S² when not causal;
    flops = Σ_layers 2 · batch · n_heads · (d_qk + d_v) · pairs (Q·Kᵀ and P·V, 2 FLOPs per
    MAC; d_qk = d_v = d_head: 4 · L · batch · n_heads · d_head · pairs; MLA: head_dims);
    bytes = batch·S·kv_bytes_per_token (K and V read once, shared by the query heads of
    a group) + L · batch · S · n_heads · (d_qk + d_v) × bytes(act) (Q read, O written).
    Writing K and V into the cache is counted by the step models, not here.
    """
    _check_positive(seq_len=seq_len, batch=batch)
    groups, kv_token, dims, _ = _attention_profile(cfg, kv_dtype)
    per_pair = 2.0 * batch * cfg.n_heads * dims
    flops = sum(g.n_layers * per_pair * (causal_pairs(seq_len, g.window) if causal
                                         else float(seq_len) ** 2)
                for g in groups)
    q_and_o = cfg.n_layers * batch * seq_len * cfg.n_heads * dims
    bytes_moved = batch * seq_len * kv_token + q_and_o * bytes_per_element(act_dtype)
    return OpCost(f"attention prefill S={seq_len} B={batch}", flops, bytes_moved)


def attention_decode_cost(cfg: ModelConfig, batch: int, context: float,
                          kv_dtype: str = "fp16", act_dtype: str = "fp16") -> OpCost:
    """Attention of one new token per sequence over `context` cached tokens, all layers.

    flops = Σ_layers 2 · batch · n_heads · (d_qk + d_v) · min(context, W)
    (4 · L · batch · n_heads · d_head · context without windows; MLA absorbed: head_dims);
    bytes = batch · kv_bytes_per_request(context) (every sequence reads its whole KV cache:
    a windowed layer its last W tokens) + L · batch · n_heads · (d_qk + d_v) × bytes(act)
    (Q read, O written).
    Intensity ≈ 4·n_heads·d_head / (2·n_kv_heads·d_head·bytes(kv)) = group_size FLOP/byte
    in fp16, whatever the batch: each sequence brings its own cache, so decode attention
    stays memory-bound (MLA's shared latent raises it to about 2·n_heads FLOP/byte).
    """
    _check_positive(batch=batch, context=context)
    groups, _, _, dims = _attention_profile(cfg, kv_dtype)
    per_token = 2.0 * batch * cfg.n_heads * dims
    flops = kv_bytes = 0.0
    for g in groups:
        held = min(context, g.window) if g.window else context
        flops += g.n_layers * per_token * held
        kv_bytes += g.n_layers * g.bytes_per_token * held
    q_and_o = cfg.n_layers * batch * cfg.n_heads * dims
    bytes_moved = batch * kv_bytes + q_and_o * bytes_per_element(act_dtype)
    return OpCost(f"attention decode B={batch} ctx={context}", flops, bytes_moved)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
