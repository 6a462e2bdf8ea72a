"""The closed forms: what each execution moves to and from main memory, and its FLOPs.

One function per execution, in the notation of the FlashAttention papers (N rows of Q, K and
V per head, head width d, Q tiles of Br rows, K/V tiles of Bc rows, H heads, e bytes per
element). The engines count the same quantities step by step; tests hold the two equal.

    naive    reads  H·(3Nd + 2N²)·e     Q, K, V once; S read back by softmax, P by P·V
             writes H·(2N² + Nd)·e      S = QKᵀ/√d and P = softmax(S) materialised, then O
    tiled    reads  H·(Nd + 2d·Σᵢ colsᵢ)·e   Q once; K and V once per Q tile
             writes H·Nd·e                 O once; S, P, m, ℓ never leave the chip
             colsᵢ = N (⌈N/Br⌉ · 2Nd for K and V), or with causal tiles skipped
             colsᵢ = min(N, Bc·⌈r1ᵢ/Bc⌉), r1ᵢ = min(N, (i+1)·Br) the tile's last row + 1
    split-K  reads  H·(S·d + 2Nd + S·(d + 2))·e   each of the S = ⌈N/Bc⌉ chunks reads q and
             writes H·(S·(d + 2) + d)·e           its K/V rows and writes its partial o, m,
                                                  ℓ; the combine reads them and writes o

FLOPs are the two matrix products' multiply-adds (2 per pair; softmax's exponentials are not
counted): 4·N²·d·H for naive (the masked half is computed too), 4·d·Σᵢ rowsᵢ·colsᵢ·H for the
visible tiles, 4·N·d·H for one decode row. With an on-chip memory of M elements the tiled
K/V traffic is 2N²d/Br and Br ≈ M/4d, so Θ(N²d²/M): the paper's bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Traffic:
    """Bytes to and from main memory (HBM on a GPU) and the products' FLOPs."""

    bytes_read: int
    bytes_written: int
    flops: int

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """FLOP per byte moved: where the execution sits on the roofline."""
        return self.flops / self.bytes_moved if self.bytes_moved else 0.0


def visible_columns(r1: int, n: int, bc: int, causal: bool) -> int:
    """Keys a Q tile ending at row r1 (exclusive) reads: all N, or with causal masking every
    K tile that starts at or before its last row (a tile wholly above the diagonal is
    skipped, never loaded)."""
    return min(n, bc * math.ceil(r1 / bc)) if causal else n


def naive_traffic(n: int, d: int, element_bytes: int, n_heads: int = 1) -> Traffic:
    """S = QKᵀ/√d and P = softmax(S) written to main memory and read back (causal or not:
    the mask is applied to the whole N×N matrix)."""
    read = n_heads * (3 * n * d + 2 * n * n)
    written = n_heads * (2 * n * n + n * d)
    return Traffic(read * element_bytes, written * element_bytes, 4 * n * n * d * n_heads)


def tiled_traffic(n: int, d: int, br: int, bc: int, causal: bool, element_bytes: int,
                  n_heads: int = 1) -> Traffic:
    """FlashAttention-2's order: Q tiles outer, K/V tiles inner; O written once per tile."""
    cols = rows_cols = 0
    for r0 in range(0, n, br):
        r1 = min(n, r0 + br)
        c = visible_columns(r1, n, bc, causal)
        cols += c
        rows_cols += (r1 - r0) * c
    read = n_heads * (n * d + 2 * d * cols)
    return Traffic(read * element_bytes, n_heads * n * d * element_bytes,
                   4 * d * rows_cols * n_heads)


def split_k_traffic(n: int, d: int, bc: int, element_bytes: int, n_heads: int = 1) -> Traffic:
    """Flash-Decoding: one query row against N keys split into chunks of Bc, combined by
    their (m, ℓ)."""
    splits = math.ceil(n / bc)
    read = n_heads * (splits * d + 2 * n * d + splits * (d + 2))
    written = n_heads * (splits * (d + 2) + d)
    return Traffic(read * element_bytes, written * element_bytes, 4 * n * d * n_heads)


def tiled_on_chip_bytes(br: int, bc: int, d: int, element_bytes: int) -> int:
    """A tiled step's working set: Q tile and O accumulator (Br·d each), K and V tiles (Bc·d
    each), the score tile (Br·Bc), and m, ℓ (Br each)."""
    return (2 * br * d + 2 * bc * d + br * bc + 2 * br) * element_bytes


def tiles_for_on_chip(on_chip_bytes: int, d: int, element_bytes: int) -> tuple[int, int]:
    """(Br, Bc) for an on-chip memory of M bytes as FlashAttention's Algorithm 1 picks them:
    Bc = ⌈M/4d⌉, Br = min(Bc, d), in elements (at least 1 each)."""
    m_elements = on_chip_bytes // element_bytes
    bc = max(1, math.ceil(m_elements / (4 * d)))
    return max(1, min(bc, d)), bc
