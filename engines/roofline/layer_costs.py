"""Cost models of single operations: a matmul, and attention in prefill and in decode.

Counting rules, shared by every model here: a multiply-add is 2 FLOPs; every operand is
read from memory once and every result written once (perfect on-chip reuse, as a fused
kernel such as FlashAttention achieves); softmax, scaling and masking FLOPs are not
counted (they are O(S²·H), small next to the O(S²·H·d_head) matmuls).
"""

from __future__ import annotations

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import kv_bytes_per_token
from inferlab.engines.roofline.op_cost import OpCost


def matmul_cost(m: int, n: int, k: int, dtype: str = "fp32") -> OpCost:
    """C[m×n] = A[m×k] · B[k×n].

    flops = 2·m·n·k; bytes = (m·k + k·n + m·n) × bytes(dtype) (A and B read, C written).
    """
    _check_positive(m=m, n=n, k=k)
    bpe = bytes_per_element(dtype)
    return OpCost(f"matmul {m}x{n}x{k} {dtype}", 2.0 * m * n * k, (m * k + k * n + m * n) * bpe)


def attention_prefill_cost(cfg: ModelConfig, seq_len: int, batch: int = 1,
                           kv_dtype: str = "fp16", act_dtype: str = "fp16",
                           causal: bool = True) -> OpCost:
    """Attention of `batch` prompts of `seq_len` tokens, all layers (L), fused kernel.

    pairs = S·(S+1)/2 query-key pairs when causal, else S²;
    flops = 4 · L · batch · n_heads · d_head · pairs (Q·Kᵀ and P·V, 2 FLOPs per MAC each);
    bytes = batch·S·kv_bytes_per_token (K and V read once, shared by the query heads of
    a group) + 2 · L · batch · S · n_heads · d_head × bytes(act) (Q read, O written).
    Writing K and V into the cache is counted by the step models, not here.
    """
    _check_positive(seq_len=seq_len, batch=batch)
    pairs = seq_len * (seq_len + 1) / 2 if causal else float(seq_len) ** 2
    flops = 4.0 * cfg.n_layers * batch * cfg.n_heads * cfg.d_head * pairs
    q_and_o = 2.0 * cfg.n_layers * batch * seq_len * cfg.n_heads * cfg.d_head
    bytes_moved = (batch * seq_len * kv_bytes_per_token(cfg, kv_dtype)
                   + q_and_o * bytes_per_element(act_dtype))
    return OpCost(f"attention prefill S={seq_len} B={batch}", flops, bytes_moved)


def attention_decode_cost(cfg: ModelConfig, batch: int, context: int,
                          kv_dtype: str = "fp16", act_dtype: str = "fp16") -> OpCost:
    """Attention of one new token per sequence over `context` cached tokens, all layers.

    flops = 4 · L · batch · n_heads · d_head · context;
    bytes = batch · context · kv_bytes_per_token (every sequence reads its whole KV cache)
    + 2 · L · batch · n_heads · d_head × bytes(act) (Q read, O written).
    Intensity ≈ 4·n_heads·d_head / (2·n_kv_heads·d_head·bytes(kv)) = group_size FLOP/byte
    in fp16, whatever the batch: each sequence brings its own cache, so decode attention
    stays memory-bound.
    """
    _check_positive(batch=batch, context=context)
    flops = 4.0 * cfg.n_layers * batch * cfg.n_heads * cfg.d_head * context
    q_and_o = 2.0 * cfg.n_layers * batch * cfg.n_heads * cfg.d_head
    bytes_moved = (batch * context * kv_bytes_per_token(cfg, kv_dtype)
                   + q_and_o * bytes_per_element(act_dtype))
    return OpCost(f"attention decode B={batch} ctx={context}", flops, bytes_moved)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
