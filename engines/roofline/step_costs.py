"""Cost of one whole transformer step (prefill or decode), and sweeps of it for the plot.

A step is split into parts, each an OpCost, that together read every weight once
(n_params × bytes(weight_dtype), the embedding table included: an upper bound when the
embeddings are untied, as only one row per token is gathered):

- "linears": q, k, v, o and the MLP matrices of every layer. flops = 2 · T · L · Σ d_in·d_out
  for T tokens; bytes = their weights + T · L · Σ (d_in + d_out) × bytes(act) (each linear
  reads its input and writes its output once, no fusion).
- "attention": layer_costs.attention_prefill_cost / attention_decode_cost.
- "kv write": T · kv_bytes_per_token (the new tokens' K and V stored in the cache).
- "lm_head": logits for the last token of each sequence only. flops = 2 · batch · V · d;
  bytes = V · d weights + batch · (d + V) × bytes(act).
- "embeddings and norms": the rest of the weights (untied embedding table, RMSNorm
  weights), read once; their FLOPs (norms, residual adds, activations, RoPE) are not
  counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.layer_costs import attention_decode_cost, attention_prefill_cost
from inferlab.engines.roofline.memory import kv_bytes_per_token
from inferlab.engines.roofline.op_cost import OpCost, sum_costs

DEFAULT_BATCHES: tuple[int, ...] = tuple(2**i for i in range(9))  # 1 … 256
DEFAULT_PREFILL_LENGTHS: tuple[int, ...] = tuple(2**i for i in range(4, 16))  # 16 … 32768


def _weight_parts(cfg: ModelConfig, n_tokens: int, n_logit_rows: int, weight_dtype: str,
                  act_dtype: str) -> list[OpCost]:
    """The linears, lm_head, and the remaining weights for `n_tokens` tokens."""
    w, a = bytes_per_element(weight_dtype), bytes_per_element(act_dtype)
    linear_params = cfg.n_layers * cfg.linear_params_per_layer
    io_elements = cfg.n_layers * sum(d_in + d_out for _, d_in, d_out in cfg.linear_shapes)
    head_params = cfg.vocab_size * cfg.d_model
    rest_params = cfg.n_params - linear_params - head_params
    return [
        OpCost("linears", 2.0 * n_tokens * linear_params,
               linear_params * w + n_tokens * io_elements * a),
        OpCost("lm_head", 2.0 * n_logit_rows * head_params,
               head_params * w + n_logit_rows * (cfg.d_model + cfg.vocab_size) * a),
        OpCost("embeddings and norms", 0.0, rest_params * w),
    ]


def prefill_step_parts(cfg: ModelConfig, seq_len: int, batch: int = 1,
                       weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                       act_dtype: str = "fp16") -> list[OpCost]:
    """The parts of a prefill step over `batch` prompts of `seq_len` tokens (T = batch·S)."""
    n_tokens = batch * seq_len
    return [
        *_weight_parts(cfg, n_tokens, batch, weight_dtype, act_dtype),
        attention_prefill_cost(cfg, seq_len, batch, kv_dtype, act_dtype),
        OpCost("kv write", 0.0, float(n_tokens * kv_bytes_per_token(cfg, kv_dtype))),
    ]


def decode_step_parts(cfg: ModelConfig, batch: int, context: int,
                      weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                      act_dtype: str = "fp16") -> list[OpCost]:
    """The parts of a decode step: one new token per sequence (T = batch), each attending
    over `context` cached tokens."""
    return [
        *_weight_parts(cfg, batch, batch, weight_dtype, act_dtype),
        attention_decode_cost(cfg, batch, context, kv_dtype, act_dtype),
        OpCost("kv write", 0.0, float(batch * kv_bytes_per_token(cfg, kv_dtype))),
    ]


def prefill_step_cost(cfg: ModelConfig, seq_len: int, batch: int = 1,
                      weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                      act_dtype: str = "fp16") -> OpCost:
    """One prefill step of the whole model: the sum of prefill_step_parts."""
    parts = prefill_step_parts(cfg, seq_len, batch, weight_dtype, kv_dtype, act_dtype)
    return sum_costs(f"prefill S={seq_len} B={batch}", parts)


def decode_step_cost(cfg: ModelConfig, batch: int, context: int,
                     weight_dtype: str = "fp16", kv_dtype: str = "fp16",
                     act_dtype: str = "fp16") -> OpCost:
    """One decode step of the whole model: the sum of decode_step_parts."""
    parts = decode_step_parts(cfg, batch, context, weight_dtype, kv_dtype, act_dtype)
    return sum_costs(f"decode B={batch} ctx={context}", parts)


def decode_batch_sweep(cfg: ModelConfig, context: int,
                       batches: Sequence[int] = DEFAULT_BATCHES, weight_dtype: str = "fp16",
                       kv_dtype: str = "fp16") -> list[OpCost]:
    """decode_step_cost at each batch size, same context: intensity climbs with batch."""
    return [decode_step_cost(cfg, b, context, weight_dtype, kv_dtype) for b in batches]


def prefill_length_sweep(cfg: ModelConfig, lengths: Sequence[int] = DEFAULT_PREFILL_LENGTHS,
                         batch: int = 1, weight_dtype: str = "fp16",
                         kv_dtype: str = "fp16") -> list[OpCost]:
    """prefill_step_cost at each prompt length, same batch."""
    return [prefill_step_cost(cfg, s, batch, weight_dtype, kv_dtype) for s in lengths]
