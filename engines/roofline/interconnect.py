"""Time on a link between GPUs: a KV cache moved from one instance to another, and the ring
all-reduce of tensor parallelism. Every interconnect formula lives here, once.

Notation: W_link = link bandwidth in bytes/s (one direction), α = the link's latency in
seconds, t = the tensor-parallel degree, L = the model's layers.
"""

from __future__ import annotations


def link_transfer_s(n_bytes: float, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """`n_bytes` sent whole over a link: n_bytes / W_link + α."""
    return n_bytes / bandwidth_bytes_per_s + latency_s


def kv_transfer_s(kv_bytes_per_token: int, prompt_tokens: int, bandwidth_bytes_per_s: float,
                  latency_s: float) -> float:
    """One request's KV from its prefill instance to its decode instance, sent whole:

        kv_transfer_s = kv_bytes_per_token × prompt_tokens / W_link + α

    (a model with windowed layers sends less: link_transfer_s of memory.kv_bytes_per_request)
    """
    return link_transfer_s(kv_bytes_per_token * prompt_tokens, bandwidth_bytes_per_s, latency_s)


def kv_transfer_exposed_s(transfer_s: float, latency_s: float, prefill_s: float,
                          n_layers: int) -> float:
    """The part of a layer-by-layer transfer left after the prefill ends.

    Layer l's K/V is ready at (l + 1)·prefill_s / L and the link sends the layers one after
    the other, each taking x / L with x = transfer_s − α; the last layer lands at
    max(x / L after the prefill's end, x after the first layer was ready), so

        exposed = α + max(x / L, x − prefill_s·(L − 1) / L)
    """
    x = transfer_s - latency_s
    return latency_s + max(x / n_layers, x - prefill_s * (n_layers - 1) / n_layers)


def ring_all_reduce_s(n_bytes: float, tp: int, bandwidth_bytes_per_s: float,
                      latency_s: float) -> float:
    """A ring all-reduce of `n_bytes` over t GPUs (reduce-scatter then all-gather, each
    moving (t − 1)/t of the data through every GPU's link):

        all_reduce_s = 2·(t − 1)/t × n_bytes / W_link + α      (0 for t = 1: nothing to reduce)
    """
    if tp == 1:
        return 0.0
    return 2 * (tp - 1) / tp * n_bytes / bandwidth_bytes_per_s + latency_s
