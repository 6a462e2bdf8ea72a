"""Tiled attention in FlashAttention-2's order: Q tiles of Br rows outer, K/V tiles of Bc
rows inner, S and P never leaving the chip.

For the rows of Q tile i, after K/V tile j (scores s = Q_i K_jᵀ/√d):

    m' = max(m, rowmax s)           the running max
    ℓ' = e^(m - m')·ℓ + rowsum e^(s - m')
    O' = e^(m - m')·O + e^(s - m')·V_j   (unnormalised, as FA-2 keeps it)

and O_i = O / ℓ is written once, after its last tile. Q_i is read when its row tile starts,
K_j and V_j at every step: ⌈N/Br⌉·2Nd elements of K and V (`traffic.tiled_traffic`). With
causal masking a K tile wholly after the Q tile's last row is skipped (no step, no bytes).

`flash_attention` is the one-shot loop (no counters): the stepped engine's final O, m, ℓ
must equal its.
"""

from __future__ import annotations

import math

import torch

from inferlab.engines.attention.step import (
    TILED,
    SteppedAttention,
    as_array,
    as_heads,
    causal_mask,
    tile_ranges,
)


def visible_tiles(r1: int, n: int, bc: int, causal: bool) -> list[tuple[int, int]]:
    """The K/V tiles a Q tile ending at row r1 (exclusive) loads."""
    return [c for c in tile_ranges(n, bc) if not causal or c[0] < r1]


class TiledAttention(SteppedAttention):
    execution = TILED

    def __init__(self, q, k, v, br: int, bc: int, causal: bool = False,
                 scale: float | None = None) -> None:
        super().__init__(q, k, v, br, bc, causal, scale)
        h, n, d = self.n_heads, self.n, self.d
        self.m = torch.full((h, n), float("-inf"))
        self.ell = torch.zeros(h, n)
        self.acc = torch.zeros(h, n, d)  # the on-chip accumulators of the current Q tile
        self.output = torch.zeros(h, n, d)

    def plan(self):
        for h in range(self.n_heads):
            for r0, r1 in tile_ranges(self.n, self.br):
                tiles = visible_tiles(r1, self.n, self.bc, self.causal)
                for j, c in enumerate(tiles):
                    yield h, (r0, r1), c, j == 0, j == len(tiles) - 1

    def count_steps(self) -> int:
        per_head = sum(math.ceil((r1 if self.causal else self.n) / self.bc)
                       for _r0, r1 in tile_ranges(self.n, self.br))  # as `visible_tiles`
        return self.n_heads * per_head

    def _run_step(self, item) -> dict:
        h, (r0, r1), (c0, c1), first, last = item
        rows, cols, d = r1 - r0, c1 - c0, self.d
        if first:
            self._read(rows * d)
        self._read(2 * cols * d)
        s = self.q[h, r0:r1] @ self.k[h, c0:c1].T * self.scale
        if self.causal and c1 - 1 > r0:  # the tile crosses the diagonal
            s = causal_mask(s, r0, c0)
        m, ell, acc = online_update(self.m[h, r0:r1], self.ell[h, r0:r1], self.acc[h, r0:r1], s,
                                  self.v[h, c0:c1])
        self.m[h, r0:r1], self.ell[h, r0:r1], self.acc[h, r0:r1] = m, ell, acc
        if last:
            self.output[h, r0:r1] = acc / ell.unsqueeze(-1)
            self._write(rows * d)
        return {"head": h, "phase": "tile", "q_rows": (r0, r1), "k_rows": (c0, c1),
                "flops": 4 * rows * cols * d,
                "on_chip_elements": 2 * rows * d + 2 * cols * d + rows * cols + 2 * rows,
                "score_tile": as_array(s), "m_rows": as_array(m), "l_rows": as_array(ell)}


def online_update(m: torch.Tensor, ell: torch.Tensor, acc: torch.Tensor, s: torch.Tensor,
                  v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(m', ℓ', O') after one tile of scores `s` [r, c] and its values `v` [c, d]."""
    m_new = torch.maximum(m, s.amax(dim=-1))
    p = torch.exp(s - m_new.unsqueeze(-1))
    alpha = torch.exp(m - m_new)  # 0 on the first tile (m = -inf)
    return m_new, alpha * ell + p.sum(dim=-1), alpha.unsqueeze(-1) * acc + p @ v


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, br: int, bc: int,
                    causal: bool = False, scale: float | None = None):
    """One shot, every head at once: (O [H, N, d], m [H, N], ℓ [H, N])."""
    q, k, v = as_heads(q, "q"), as_heads(k, "k"), as_heads(v, "v")
    h, n, d = q.shape
    scale = d ** -0.5 if scale is None else scale
    out, m_all, l_all = torch.empty(h, n, d), torch.empty(h, n), torch.empty(h, n)
    for r0, r1 in tile_ranges(n, br):
        m = torch.full((h, r1 - r0), float("-inf"))
        ell, acc = torch.zeros(h, r1 - r0), torch.zeros(h, r1 - r0, d)
        for c0, c1 in visible_tiles(r1, n, bc, causal):
            s = q[:, r0:r1] @ k[:, c0:c1].transpose(-1, -2) * scale
            if causal and c1 - 1 > r0:
                s = causal_mask(s, r0, c0)
            m_new = torch.maximum(m, s.amax(dim=-1))
            p = torch.exp(s - m_new.unsqueeze(-1))
            alpha = torch.exp(m - m_new)
            ell = alpha * ell + p.sum(dim=-1)
            acc = alpha.unsqueeze(-1) * acc + p @ v[:, c0:c1]
            m = m_new
        out[:, r0:r1], m_all[:, r0:r1], l_all[:, r0:r1] = acc / ell.unsqueeze(-1), m, ell
    return out, m_all, l_all
