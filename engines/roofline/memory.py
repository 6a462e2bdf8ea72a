"""KV-cache and VRAM calculator: what fits on a device, and how fast decode can go.

Everything is in bytes. Weights are counted once (n_params × bytes per element, no
quantization scales); activations and the allocator's fragmentation are not counted:
the `utilization` share of device memory left for weights + KV stands for them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.model.config import FIELD_LIMITS, ModelConfig

# The largest request a user may ask to plan (kv-calc's --context and --batch): a model's
# longest context, a million requests. `plan_memory` itself takes any 64-bit count, so that
# the max_batch / max_context it answers can be planned in turn.
MAX_CONTEXT = FIELD_LIMITS["max_position"][2]
MAX_BATCH = 2**20
MAX_COUNT = 2**63 - 1
MAX_BYTES = 2**64  # device memory
MAX_BW_BYTES_PER_S = 1e18


def check_count(name: str, value: object, high: int) -> int:
    """`value` if it is an integer in [1, high], else ValueError naming `name` and the range."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise ValueError(f"{name} must be an integer in [1, {high:,}], got {value!r}")
    return value


def check_positive(name: str, value: object, high: float = math.inf,
                   zero_ok: bool = False) -> float:
    """`value` if it is a finite number in (0, high] ([0, high] when `zero_ok`), else
    ValueError naming `name` and the range."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    finite = number and (isinstance(value, int) or math.isfinite(value))
    if not (finite and (0 <= value if zero_ok else 0 < value) and value <= high):
        raise ValueError(f"{name} must be a finite number in {'[' if zero_ok else '('}0, "
                         f"{high:g}], got {value!r}")
    return value


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str = "fp16") -> int:
    """K and V of one token in every layer.

    kv_bytes_per_token = 2 × n_layers × n_kv_heads × d_head × bytes(kv_dtype)
    (llama-3-8b in fp16: 2 × 32 × 8 × 128 × 2 = 131072).
    """
    return math.ceil(2 * cfg.n_layers * cfg.n_kv_heads * cfg.d_head * bytes_per_element(kv_dtype))


def weight_bytes(cfg: ModelConfig, weight_dtype: str = "fp16") -> int:
    """weight_bytes = n_params × bytes(weight_dtype), rounded up to a whole byte."""
    return math.ceil(cfg.n_params * bytes_per_element(weight_dtype))


def max_batch_that_fits(budget_bytes: int, weight_bytes: int, kv_bytes_per_request: int) -> int:
    """Largest batch whose KV fits next to the weights.

    max_batch = ⌊(budget − weights) / kv_bytes_per_request⌋, 0 when the weights alone
    do not fit.
    """
    free = budget_bytes - weight_bytes
    return 0 if free < 0 else free // kv_bytes_per_request


def max_context_that_fits(budget_bytes: int, weight_bytes: int, kv_bytes_per_token: int,
                          batch: int) -> int:
    """Longest context for `batch` sequences, memory only (the model's max_position aside).

    max_context = ⌊(budget − weights) / (kv_bytes_per_token × batch)⌋, 0 when the
    weights alone do not fit.
    """
    free = budget_bytes - weight_bytes
    return 0 if free < 0 else free // (kv_bytes_per_token * batch)


def decode_tokens_per_s_bound(weight_bytes: int, kv_bytes_total: int, batch: int,
                              bw_bytes_per_s: float) -> float:
    """Bandwidth ceiling on decode throughput.

    Each step reads all weights and the batch's KV once and yields one token per sequence:
    tokens/s = batch / ((weight_bytes + kv_bytes_total) / bw).
    """
    return batch * bw_bytes_per_s / (weight_bytes + kv_bytes_total)


@dataclass(frozen=True)
class MemoryPlan:
    """Where the bytes go for one model, context, batch and device, and what would fit."""

    model_id: str
    context: int
    batch: int
    weight_dtype: str
    kv_dtype: str
    kv_bytes_per_token: int
    kv_bytes_per_request: int
    kv_bytes_total: int
    weight_bytes: int
    total_bytes: int
    device_memory_bytes: int
    utilization: float
    budget_bytes: int
    fits: bool
    headroom_bytes: int
    max_batch: int
    max_context: int
    bw_bytes_per_s: float | None = None
    decode_tokens_per_s_bound: float | None = None
    tp: int = 1  # the plan is one GPU's of a group of tp × pp (roofline.parallel)
    pp: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)


def plan_memory(cfg: ModelConfig, context: int, batch: int, weight_dtype: str = "fp16",
                kv_dtype: str = "fp16", device_memory_bytes: int = 80_000_000_000,
                utilization: float = 0.9, bw_bytes_per_s: float | None = None) -> MemoryPlan:
    """Plan weights + KV for `batch` sequences of `context` tokens on one device.

    budget = ⌊device_memory_bytes × utilization⌋ (default: an 80 GB card at 90 %);
    total = weights + batch × context × kv_bytes_per_token; fits when total ≤ budget.
    Every input is checked (type, finiteness, range) before use, so every number of the plan
    is finite. One GPU of a tensor/pipeline-parallel group: roofline.parallel.plan_gpu_share.
    """
    return plan_from_bytes(cfg.id, weight_bytes(cfg, weight_dtype),
                           kv_bytes_per_token(cfg, kv_dtype), context, batch, weight_dtype,
                           kv_dtype, device_memory_bytes, utilization, bw_bytes_per_s)


def plan_from_bytes(model_id: str, weights: int, per_token: int, context: int, batch: int,
                    weight_dtype: str, kv_dtype: str, device_memory_bytes: int,
                    utilization: float, bw_bytes_per_s: float | None = None, tp: int = 1,
                    pp: int = 1) -> MemoryPlan:
    """`plan_memory`'s arithmetic on one device's weights and KV bytes per token."""
    check_count("context", context, MAX_COUNT)
    check_count("batch", batch, MAX_COUNT)
    check_positive("utilization", utilization, 1.0)
    check_positive("device_memory_bytes", device_memory_bytes, MAX_BYTES, zero_ok=True)
    if bw_bytes_per_s is not None:
        check_positive("bw_bytes_per_s", bw_bytes_per_s, MAX_BW_BYTES_PER_S, zero_ok=True)
    per_request = per_token * context
    kv_total = per_request * batch
    total = weights + kv_total
    budget = math.floor(device_memory_bytes * utilization)
    bound = (None if bw_bytes_per_s is None
             else decode_tokens_per_s_bound(weights, kv_total, batch, bw_bytes_per_s))
    return MemoryPlan(
        model_id=model_id, context=context, batch=batch, weight_dtype=weight_dtype,
        kv_dtype=kv_dtype, kv_bytes_per_token=per_token, kv_bytes_per_request=per_request,
        kv_bytes_total=kv_total, weight_bytes=weights, total_bytes=total,
        device_memory_bytes=device_memory_bytes, utilization=utilization,
        budget_bytes=budget, fits=total <= budget, headroom_bytes=budget - total,
        max_batch=max_batch_that_fits(budget, weights, per_request),
        max_context=max_context_that_fits(budget, weights, per_token, batch),
        bw_bytes_per_s=bw_bytes_per_s, decode_tokens_per_s_bound=bound, tp=tp, pp=pp,
    )


def attention_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The same model as MHA, GQA and MQA, for a side-by-side KV comparison.

    "MHA": n_kv_heads = n_heads; "MQA": n_kv_heads = 1; "GQA": the model's own KV heads
    when it is GQA, else the divisor of n_heads nearest n_heads / 8 (8 query heads per KV
    head; for a prime head count that is 1, the same as MQA).
    """
    if cfg.attention_kind == "GQA":
        gqa_heads = cfg.n_kv_heads
    else:
        divisors = [h for h in range(1, cfg.n_heads + 1) if cfg.n_heads % h == 0]
        gqa_heads = min(divisors, key=lambda h: (abs(h - cfg.n_heads / 8), h))
    heads = {"MHA": cfg.n_heads, "GQA": gqa_heads, "MQA": 1}
    return {kind: dataclasses.replace(cfg, id=f"{cfg.id}-{kind.lower()}",
                                      name=f"{cfg.name} ({kind})", n_kv_heads=n)
            for kind, n in heads.items()}
