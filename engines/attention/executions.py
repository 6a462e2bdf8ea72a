"""The three executions by name: their engine, their closed form and their SDPA reference."""

from __future__ import annotations

import torch

from inferlab.engines.attention.naive import NaiveAttention
from inferlab.engines.attention.split_k import SplitKDecode
from inferlab.engines.attention.step import EXECUTIONS, NAIVE, SPLIT_K, TILED, as_heads
from inferlab.engines.attention.tiled import TiledAttention
from inferlab.engines.attention.traffic import (
    Traffic,
    naive_traffic,
    split_k_traffic,
    tiled_traffic,
)

ENGINES = {NAIVE: NaiveAttention, TILED: TiledAttention, SPLIT_K: SplitKDecode}


def make_engine(execution: str, q, k, v, br: int, bc: int, causal: bool = False):
    if execution not in ENGINES:
        raise ValueError(f"unknown execution {execution!r}; one of {', '.join(EXECUTIONS)}")
    return ENGINES[execution](q, k, v, br, bc, causal)


def closed_form(execution: str, n: int, d: int, br: int, bc: int, causal: bool,
                element_bytes: int, n_heads: int = 1) -> Traffic:
    """The execution's traffic from `traffic`'s formulas (split-K: one decode row)."""
    if execution == NAIVE:
        return naive_traffic(n, d, element_bytes, n_heads)
    if execution == TILED:
        return tiled_traffic(n, d, br, bc, causal, element_bytes, n_heads)
    if execution == SPLIT_K:
        return split_k_traffic(n, d, bc, element_bytes, n_heads)
    raise ValueError(f"unknown execution {execution!r}; one of {', '.join(EXECUTIONS)}")


def sdpa_reference(execution: str, q, k, v, causal: bool = False) -> torch.Tensor:
    """torch's scaled_dot_product_attention on the same inputs, shaped as the engine's
    `output`: [H, N, d], or [H, d] for split-K's decode row (the last query, which sees every
    key: the causal mask changes nothing for it)."""
    q, k, v = as_heads(q, "q"), as_heads(k, "k"), as_heads(v, "v")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if execution == SPLIT_K:
        return sdpa(q[:, -1:], k, v)[:, 0]
    return sdpa(q, k, v, is_causal=causal)
