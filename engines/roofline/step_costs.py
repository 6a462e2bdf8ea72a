"""Cost of one whole transformer step (prefill or decode), and sweeps of it for the plot.

A step is split into parts, each an OpCost, that together read the weights the step needs
once (memory.weight_params_per_step × bytes(weight_dtype): every weight of a dense model, the
embedding table included: an upper bound when the embeddings are untied, as only one row per
token is gathered; a MoE's dense part and, per MoE layer, the experts its T tokens touch under
uniform routing, E·(1 − (1 − k/E)^T), k of them at one token):

- "linears": q, k, v, o (MLA: its low-rank projections) and the MLP matrices of every layer
  (a MoE layer: router, top-k routed experts and the shared ones per token).
  flops = 2 · T · Σ_layers Σ d_in·d_out over what a token multiplies by, for T tokens;
  bytes = the weights read + T · Σ (d_in + d_out) × bytes(act) (each linear reads its input
  and writes its output once, no fusion).
- "attention": layer_costs.attention_prefill_cost / attention_decode_cost.
- "kv write": T · kv_bytes_per_token (the new tokens' K and V stored in the cache).
- "lm_head": logits for the last token of each sequence only. flops = 2 · batch · V · d;
  bytes = V · d weights + batch · (d + V) × bytes(act).
- "embeddings and norms": the rest of the weights (untied embedding table, RMSNorm
  weights, biases), read once; their FLOPs (norms, residual adds, activations, RoPE) are not
  counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.layer_costs import attention_decode_cost, attention_prefill_cost
from inferlab.engines.roofline.memory import kv_bytes_per_token, weight_params_per_step
from inferlab.engines.roofline.op_cost import OpCost, sum_costs

DEFAULT_BATCHES: tuple[int, ...] = tuple(2**i for i in range(9))  # 1 … 256
DEFAULT_PREFILL_LENGTHS: tuple[int, ...] = tuple(2**i for i in range(4, 16))  # 16 … 32768


def _io(shapes) -> int:
    return sum(d_in + d_out for _, d_in, d_out in shapes)


def _linear_params_and_io(cfg: ModelConfig) -> tuple[int, int, int]:
    """(weights of every linear, those one token multiplies by, elements one token's linears
    read and write), over all layers: the attention's linears, each dense MLP, and in a MoE
    layer the router, every routed expert (top-k for one token) and the shared ones."""
    attention = sum(d_in * d_out for _, d_in, d_out in cfg.attention_shapes)
    total = cfg.n_layers * attention + sum(cfg.mlp_params(i) for i in range(cfg.n_layers))
    active = cfg.n_layers * attention + sum(cfg.mlp_params(i, active=True)
                                            for i in range(cfg.n_layers))
    dense_io = _io(cfg.mlp_shapes(cfg.d_ff))
    moe_io = 0
    if cfg.is_moe:
        moe_io = (cfg.d_model + cfg.n_experts  # router
                  + cfg.n_experts_active * _io(cfg.mlp_shapes(cfg.expert_d_ff))
                  + (cfg.n_shared_experts * _io(cfg.mlp_shapes(cfg.shared_d_ff))
                     if cfg.shared_d_ff else 0)
                  + (cfg.d_model + 1 if cfg.shared_expert_gate else 0))
    n_moe = cfg.n_moe_layers
    io = (cfg.n_layers * _io(cfg.attention_shapes) + (cfg.n_layers - n_moe) * dense_io
          + n_moe * moe_io)
    return total, active, io


def _weight_parts(cfg: ModelConfig, n_tokens: int, n_logit_rows: int, weight_dtype: str,
                  act_dtype: str) -> list[OpCost]:
    """The linears, lm_head, and the remaining weights for `n_tokens` tokens. The three read
    weight_params_per_step(n_tokens) weights together: all of them for a dense model; a MoE
    layer's experts as far as the tokens touch them (memory.experts_touched)."""
    w, a = bytes_per_element(weight_dtype), bytes_per_element(act_dtype)
    linear_params, active_params, io_elements = _linear_params_and_io(cfg)
    head_params = cfg.vocab_size * cfg.d_model
    rest_params = cfg.n_params - linear_params - head_params
    read_linear = weight_params_per_step(cfg, n_tokens) - head_params - rest_params
    return [
        OpCost("linears", 2.0 * n_tokens * active_params,
               read_linear * w + n_tokens * io_elements * a),
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
