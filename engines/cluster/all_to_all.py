"""The two all-to-alls of an expert-parallel MoE layer: dispatch (each token's hidden state
sent to the GPUs holding its top-k experts) and combine (the experts' outputs sent back).
Every byte count and time of them is computed here, once.

Notation: T = tokens one GPU holds, k = routed experts per token (top-k), h = hidden size
(d_model), e = the expert-parallel degree, b = bytes per value on the wire, W_link = the
link's bandwidth in bytes/s (one direction), α = its latency in seconds.

Of a token's k copies, on average k/e land on its own GPU (experts spread evenly over the e
GPUs) and never touch the link; the other k·(1 − 1/e) do:

    all_to_all_bytes = T · k · h · (1 − 1/e) · b          (0 at e = 1)
    all_to_all_s     = all_to_all_bytes / W_link + α       (0 when nothing is sent)

One α per all-to-all: a GPU writes to all its peers at once, so the messages' latencies
overlap and the last one's shows (DeepEP's low-latency kernels send every token copy as its
own RDMA write, pipelined).

Bytes per value: dispatch in FP8 carries, beside each value's byte, one fp32 scale per 128
values (DeepSeek-V3's fine-grained quantisation: 1 + 4/128 = 1.03125 B per value); combine
in BF16, 2 B per value. DeepEP's own byte count also adds 16 bytes of metadata per token
copy; that is not counted here (0.2 % of a 7168-wide copy).
"""

from __future__ import annotations

import math

import numpy as np

from inferlab.engines.dtypes import bytes_per_element

FP8_SCALE_GROUP = 128
"""Values sharing one fp32 scale in an FP8 dispatch (DeepSeek-V3's 1 × 128 activation tiles)."""
FP8_SCALE_BYTES = 4
DISPATCH_DTYPE = "fp8"
COMBINE_DTYPE = "bf16"


def wire_bytes_per_value(dtype: str) -> float:
    """Bytes one hidden value takes on the wire: fp8 → 1 + 4/128 (its share of the per-128
    fp32 scale); any other dtype its element size (bf16: 2)."""
    if dtype == "fp8":
        return 1.0 + FP8_SCALE_BYTES / FP8_SCALE_GROUP
    return bytes_per_element(dtype)


def all_to_all_bytes(n_tokens: float, top_k: int, hidden: int, ep: int,
                     bytes_per_value: float) -> float:
    """Bytes one GPU sends (and, load balanced, receives) in one all-to-all of its
    `n_tokens` tokens: T · k · h · (1 − 1/e) · b. 0 at e = 1 (every expert is local).
    `n_tokens` may be an array (one all-to-all per element)."""
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1:
        raise ValueError(f"ep must be an integer >= 1, got {ep!r}")
    if np.any(np.asarray(n_tokens) < 0):
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens!r}")
    return n_tokens * top_k * hidden * (1.0 - 1.0 / ep) * bytes_per_value


def all_to_all_s(n_bytes: float, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """One all-to-all's time: n_bytes / W_link + α; 0 when nothing is sent."""
    if n_bytes <= 0:
        return 0.0
    return n_bytes / bandwidth_bytes_per_s + latency_s


def dispatch_bytes(n_tokens: float, top_k: int, hidden: int, ep: int,
                   dtype: str = DISPATCH_DTYPE) -> float:
    """all_to_all_bytes at the dispatch's bytes per value (FP8 with its scales)."""
    return all_to_all_bytes(n_tokens, top_k, hidden, ep, wire_bytes_per_value(dtype))


def combine_bytes(n_tokens: float, top_k: int, hidden: int, ep: int,
                  dtype: str = COMBINE_DTYPE) -> float:
    """all_to_all_bytes at the combine's bytes per value (BF16)."""
    return all_to_all_bytes(n_tokens, top_k, hidden, ep, wire_bytes_per_value(dtype))


def micro_batches_s(n_bytes: float, n_micro: int, bandwidth_bytes_per_s: float,
                    latency_s: float) -> float:
    """The same bytes sent as `n_micro` all-to-alls of equal parts (dual-batch overlap's two
    micro-batches): n_micro · all_to_all_s(n_bytes / n_micro) = n_bytes / W_link + n_micro·α."""
    if n_micro < 1 or not math.isfinite(n_micro):
        raise ValueError(f"n_micro must be >= 1, got {n_micro!r}")
    return n_micro * all_to_all_s(n_bytes / n_micro, bandwidth_bytes_per_s, latency_s)
