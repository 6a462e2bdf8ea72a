"""KV-cache and VRAM calculator: what fits on a device, and how fast decode can go.

Everything is in bytes, and every formula reads the model's description (ModelConfig): a
layer's cache per token (K and V of its KV heads, or MLA's latent), the tokens each layer
holds (all of them, or at most a sliding / chunked window), the weights in total and those a
token or a batch reads (a MoE's experts). Each formula lives here once; the cost models, the
memory lab, kv-calc and the cluster simulator call them. Weights are counted once
(n_params × bytes per element, no quantization scales); activations and the allocator's
fragmentation are not counted: the `utilization` share of device memory left for weights +
KV stands for them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Sequence
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


@dataclass(frozen=True)
class KVLayers:
    """Layers that cache alike: `n_layers` layers, each storing `bytes_per_token` bytes per token
    it holds and holding at most `window` tokens (0: every token of the context)."""

    window: int
    n_layers: int
    bytes_per_token: int

    def bytes_held(self, context: float) -> float:
        """n_layers × bytes_per_token × min(context, window or context)."""
        held = min(context, self.window) if self.window else context
        return self.n_layers * self.bytes_per_token * held


def kv_bytes_per_token_per_layer(cfg: ModelConfig, kv_dtype: str = "fp16",
                                 kv_heads: int | None = None) -> int:
    """One token's cache in one layer, in whole bytes:

        ⌈kv_values_per_token_per_layer × bytes(kv_dtype)⌉
        = ⌈2 × n_kv_heads × d_head × bytes⌉, or with MLA ⌈(kv_lora_rank + qk_rope_head_dim) × bytes⌉

    `kv_heads`: the KV heads one GPU keeps under tensor parallelism (default: all). MLA's
    latent is shared by every head, so each GPU keeps it whole whatever the split.
    """
    values = (cfg.kv_values_per_token_per_layer if cfg.is_mla or kv_heads is None
              else 2 * kv_heads * cfg.d_head)
    return math.ceil(values * bytes_per_element(kv_dtype))


def per_model(fn):
    """Cache `fn(cfg, *args)` by the identity of `cfg` (and the args): the simulators ask for
    the same model's figures on every iteration, and hashing a whole ModelConfig costs more
    than the figures. The cache keeps each cfg it holds alive, so an id is never reused while
    cached; an equal config built anew is computed again. At most 256 entries."""
    cache: dict = {}

    @functools.wraps(fn)
    def cached(cfg, *args):
        key = (id(cfg), *args)
        hit = cache.get(key)
        if hit is not None and hit[0] is cfg:
            return hit[1]
        if len(cache) >= 256:
            cache.clear()
        value = fn(cfg, *args)
        cache[key] = (cfg, value)
        return value

    return cached


@per_model
def kv_layers(cfg: ModelConfig, kv_dtype: str = "fp16", layers: range | None = None,
              kv_heads: int | None = None) -> tuple[KVLayers, ...]:
    """The model's layers (or `layers`, one pipeline stage's) grouped by window: full-attention
    layers first (window 0), then each window from the smallest. Sliding and chunked layers
    (cfg.layer_window) hold at most their window of tokens."""
    per_layer = kv_bytes_per_token_per_layer(cfg, kv_dtype, kv_heads)
    counts = Counter(cfg.layer_window(i) for i in (layers if layers is not None
                                                    else range(cfg.n_layers)))
    return tuple(KVLayers(w, n, per_layer) for w, n in sorted(counts.items()))


def kv_bytes_for_context(groups: tuple[KVLayers, ...], context: float) -> float:
    """Σ over layers of min(context, that layer's window or context) × its bytes per token."""
    return sum(g.bytes_held(context) for g in groups)


def kv_bytes_per_token(cfg: ModelConfig, kv_dtype: str = "fp16") -> int:
    """One token's cache in every layer: Σ_layers kv_bytes_per_token_per_layer.

    kv_bytes_per_token = n_layers × ⌈kv_values_per_token_per_layer × bytes(kv_dtype)⌉
    (llama-3-8b in fp16: 32 × 2 × 8 × 128 × 2 = 131,072; DeepSeek-V3's MLA in bf16:
    61 × (512 + 64) × 2 = 70,272). What a token costs while every layer still holds it; a
    request's cache under sliding windows is kv_bytes_per_request.
    """
    return sum(g.n_layers * g.bytes_per_token for g in kv_layers(cfg, kv_dtype))


def kv_bytes_per_request(cfg: ModelConfig, context: int, kv_dtype: str = "fp16") -> int:
    """The cache of one request of `context` tokens:

        kv_bytes_per_request = Σ_layers min(context, W_layer or context) × kv_bytes_per_token_per_layer

    A sliding-window (or chunked) layer holds at most its window W; a full layer every token.
    Without windowed layers this is context × kv_bytes_per_token; it is never more.
    """
    return int(kv_bytes_for_context(kv_layers(cfg, kv_dtype), context))


def kv_bytes_by_layer_kind(cfg: ModelConfig, context: int, kv_dtype: str = "fp16"
                           ) -> dict[str, tuple[int, int, int]]:
    """Layer kind ("full", "sliding", "chunked") → (layers, bytes per token, bytes per request
    of `context` tokens) over the layers of that kind; kinds the model does not use are left
    out. The sums over kinds are kv_bytes_per_token and kv_bytes_per_request."""
    per_layer = kv_bytes_per_token_per_layer(cfg, kv_dtype)
    out: dict[str, tuple[int, int, int]] = {}
    for kind, n in Counter(cfg.layer_kind(i) for i in range(cfg.n_layers)).items():
        window = 0 if kind == "full" else cfg.sliding_window
        held = min(context, window) if window else context
        out[kind] = (n, n * per_layer, n * per_layer * held)
    return out


def context_that_fits(groups: tuple[KVLayers, ...], kv_budget_bytes: int) -> int:
    """The longest context whose cache (kv_bytes_for_context) fits `kv_budget_bytes`.

    The cache grows by every layer's bytes per token up to the smallest window, then only by
    the layers with a larger window (or none), so each stretch between two windows is a line
    solved in closed form: ⌊(budget − bytes fixed below it) / bytes per token above it⌋.
    Without windows: ⌊budget / kv_bytes_per_token⌋. MAX_COUNT when every layer is windowed and
    every window fits: memory never bounds the context then.
    """
    if kv_budget_bytes < 0:
        return 0
    full = sum(g.n_layers * g.bytes_per_token for g in groups if not g.window)
    windowed = [g for g in groups if g.window]  # kv_layers sorts them by window
    growing = sum(g.n_layers * g.bytes_per_token for g in windowed)
    fixed = 0
    for g in windowed:
        slope = full + growing
        if g.window * slope + fixed > kv_budget_bytes:
            return (kv_budget_bytes - fixed) // slope
        fixed += g.window * g.n_layers * g.bytes_per_token
        growing -= g.n_layers * g.bytes_per_token
    return MAX_COUNT if not full else (kv_budget_bytes - fixed) // full


def weight_bytes(cfg: ModelConfig, weight_dtype: str = "fp16") -> int:
    """Every weight: weight_bytes = n_params × bytes(weight_dtype), rounded up to a whole byte
    (a MoE's every expert included)."""
    return math.ceil(cfg.n_params * bytes_per_element(weight_dtype))


def weight_bytes_active_per_token(cfg: ModelConfig, weight_dtype: str = "fp16") -> int:
    """The weights one token reads: n_params_active × bytes(weight_dtype), rounded up (a MoE
    reads its dense part and top-k of each MoE layer's experts; a dense model: weight_bytes)."""
    return math.ceil(cfg.n_params_active * bytes_per_element(weight_dtype))


def experts_touched(n_experts: int, top_k: int, n_tokens: float) -> float:
    """Distinct experts a MoE layer reads for `n_tokens` tokens routed uniformly at random, each
    to top_k of n_experts:

        E_touched = E · (1 − (1 − k/E)^B)

    (an expert is missed by one token with probability 1 − k/E, by all B with its B-th
    power). Exactly k at B = 1; approaches E as B grows.
    """
    if n_tokens == 1:
        return float(top_k)
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** n_tokens)


def weight_params_per_step(cfg: ModelConfig, n_tokens: float) -> float:
    """Weights one forward pass over `n_tokens` tokens reads (each weight once):

        n_params − n_moe_layers × (E − E_touched(B)) × expert_params

    the dense part and, in each MoE layer, the experts its tokens touch (experts_touched).
    At one token: n_params_active; a dense model: n_params.
    """
    if not cfg.is_moe:
        return float(cfg.n_params)
    touched = experts_touched(cfg.n_experts, cfg.n_experts_active, n_tokens)
    return weights_read_per_step(cfg.n_params, cfg.n_experts,
                                 ((cfg.n_moe_layers, cfg.expert_params, touched),))


def weights_read_per_step(total: float, n_experts: int,
                          layers: Sequence[tuple[int, float, float]]) -> float:
    """Weights (parameters or bytes) one forward pass reads from a MoE model, each once:

        total − Σ_MoE layers (E − touched_l) × expert_l

    every weight but the experts no token chose. `layers`: (MoE layers alike, one routed
    expert's size there, experts touched in each): the closed form's E_touched(B)
    (weight_params_per_step), or the distinct experts a real step's router chose, with a
    loaded file's own bytes per expert (the MoE lab).
    """
    return total - sum(n * (n_experts - touched) * size for n, size, touched in layers)


def weight_bytes_per_step(cfg: ModelConfig, weight_dtype: str = "fp16",
                          n_tokens: float = 1) -> int:
    """weight_params_per_step × bytes(weight_dtype), rounded up: a decode step of batch B reads
    weight_bytes_per_step(cfg, dtype, B); B = 1 is weight_bytes_active_per_token."""
    return math.ceil(weight_params_per_step(cfg, n_tokens) * bytes_per_element(weight_dtype))


def max_batch_that_fits(budget_bytes: int, weight_bytes: int, kv_bytes_per_request: int) -> int:
    """Largest batch whose KV fits next to the weights.

    max_batch = ⌊(budget − weights) / kv_bytes_per_request⌋, 0 when the weights alone
    do not fit.
    """
    free = budget_bytes - weight_bytes
    return 0 if free < 0 else free // kv_bytes_per_request


def max_context_that_fits(budget_bytes: int, weight_bytes: int,
                          groups: tuple[KVLayers, ...], batch: int) -> int:
    """Longest context for `batch` sequences, memory only (the model's max_position aside).

    max_context = the longest C with batch × kv_bytes_per_request(C) ≤ budget − weights
    (context_that_fits on ⌊(budget − weights) / batch⌋; without windowed layers
    ⌊(budget − weights) / (kv_bytes_per_token × batch)⌋), 0 when the weights alone do not fit.
    """
    free = budget_bytes - weight_bytes
    return 0 if free < 0 else context_that_fits(groups, free // batch)


def decode_tokens_per_s_bound(weight_bytes_per_step: int, kv_bytes_total: int, batch: int,
                              bw_bytes_per_s: float) -> float:
    """Bandwidth ceiling on decode throughput.

    Each step reads the weights it needs once (all of a dense model's; a MoE's dense part and
    the experts the batch touches: weight_bytes_per_step) and the batch's KV once, and yields
    one token per sequence: tokens/s = batch / ((weight_bytes_per_step + kv_bytes_total) / bw).
    """
    return batch * bw_bytes_per_s / (weight_bytes_per_step + kv_bytes_total)


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
    weight_bytes_per_step: int | None = None
    """Weights one decode step of the batch reads (weight_bytes_per_step): weight_bytes for a
    dense model, less for a MoE. None in plans written before it was planned."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)


def plan_memory(cfg: ModelConfig, context: int, batch: int, weight_dtype: str = "fp16",
                kv_dtype: str = "fp16", device_memory_bytes: int = 80_000_000_000,
                utilization: float = 0.9, bw_bytes_per_s: float | None = None) -> MemoryPlan:
    """Plan weights + KV for `batch` sequences of `context` tokens on one device.

    budget = ⌊device_memory_bytes × utilization⌋ (default: an 80 GB card at 90 %);
    total = weight_bytes + batch × kv_bytes_per_request(context); fits when total ≤ budget.
    Every input is checked (type, finiteness, range) before use, so every number of the plan
    is finite. One GPU of a tensor/pipeline-parallel group: roofline.parallel.plan_gpu_share.
    """
    check_count("batch", batch, MAX_COUNT)
    return plan_from_bytes(cfg.id, weight_bytes(cfg, weight_dtype), kv_layers(cfg, kv_dtype),
                           context, batch, weight_dtype, kv_dtype, device_memory_bytes,
                           utilization, bw_bytes_per_s,
                           weights_per_step=weight_bytes_per_step(cfg, weight_dtype, batch))


def plan_from_bytes(model_id: str, weights: int, groups: tuple[KVLayers, ...], context: int,
                    batch: int, weight_dtype: str, kv_dtype: str, device_memory_bytes: int,
                    utilization: float, bw_bytes_per_s: float | None = None, tp: int = 1,
                    pp: int = 1, weights_per_step: int | None = None) -> MemoryPlan:
    """`plan_memory`'s arithmetic on one device's weights and KV layers (kv_layers);
    `weights_per_step`: the weights a decode step reads (default: all of them)."""
    check_count("context", context, MAX_COUNT)
    check_count("batch", batch, MAX_COUNT)
    check_positive("utilization", utilization, 1.0)
    check_positive("device_memory_bytes", device_memory_bytes, MAX_BYTES, zero_ok=True)
    if bw_bytes_per_s is not None:
        check_positive("bw_bytes_per_s", bw_bytes_per_s, MAX_BW_BYTES_PER_S, zero_ok=True)
    per_step = weights if weights_per_step is None else weights_per_step
    per_token = int(kv_bytes_for_context(groups, 1))
    per_request = int(kv_bytes_for_context(groups, context))
    kv_total = per_request * batch
    total = weights + kv_total
    budget = math.floor(device_memory_bytes * utilization)
    bound = (None if bw_bytes_per_s is None
             else decode_tokens_per_s_bound(per_step, kv_total, batch, bw_bytes_per_s))
    return MemoryPlan(
        model_id=model_id, context=context, batch=batch, weight_dtype=weight_dtype,
        kv_dtype=kv_dtype, kv_bytes_per_token=per_token, kv_bytes_per_request=per_request,
        kv_bytes_total=kv_total, weight_bytes=weights, total_bytes=total,
        device_memory_bytes=device_memory_bytes, utilization=utilization,
        budget_bytes=budget, fits=total <= budget, headroom_bytes=budget - total,
        max_batch=max_batch_that_fits(budget, weights, per_request),
        max_context=max_context_that_fits(budget, weights, groups, batch),
        bw_bytes_per_s=bw_bytes_per_s, decode_tokens_per_s_bound=bound, tp=tp, pp=pp,
        weight_bytes_per_step=per_step,
    )


def attention_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The same model as MHA, GQA and MQA (and first as itself, "MLA", when it uses MLA), for
    a side-by-side KV comparison.

    "MHA": n_kv_heads = n_heads; "MQA": n_kv_heads = 1; "GQA": the model's own KV heads
    when it is GQA, else the divisor of n_heads nearest n_heads / 8 (8 query heads per KV
    head; for a prime head count that is 1, the same as MQA). An MLA model's variants cache K
    and V per head instead of the latent: MLA off, d_head = (qk_nope + qk_rope + v_head_dim)
    / 2, so that 2 × d_head is one head's K (qk_nope + qk_rope) and V (v_head_dim) values.
    """
    base = cfg
    if cfg.is_mla:
        base = dataclasses.replace(
            cfg, kv_lora_rank=0, q_lora_rank=0, qk_rope_head_dim=0, qk_nope_head_dim=0,
            v_head_dim=0, n_kv_heads=cfg.n_heads,
            d_head=(cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim) // 2)
    if base.attention_kind == "GQA":
        gqa_heads = base.n_kv_heads
    else:
        divisors = [h for h in range(1, base.n_heads + 1) if base.n_heads % h == 0]
        gqa_heads = min(divisors, key=lambda h: (abs(h - base.n_heads / 8), h))
    heads = {"MHA": base.n_heads, "GQA": gqa_heads, "MQA": 1}
    out = {"MLA": cfg} if cfg.is_mla else {}
    return out | {kind: dataclasses.replace(base, id=f"{cfg.id}-{kind.lower()}",
                                            name=f"{cfg.name} ({kind})", n_kv_heads=n)
                  for kind, n in heads.items()}
