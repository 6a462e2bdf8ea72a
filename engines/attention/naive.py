"""Naive attention, the FlashAttention paper's Algorithm 0: S = QKᵀ/√d written to main
memory, read back for P = softmax(S), P written and read back for O = P·V.

Three passes per head, one step a tile: `scores` (a Br×Bc tile of S), `softmax` (Br whole
rows of S into P: a row's max and sum need every key), `output` (O_i += P_ij·V_j). The two
products are counted as ideal matrix products that read each input once (Q_i when its row
tile starts, K_j and V_j on the first row tile): the traffic that scales is S and P, 2N²
elements written and 2N² read back, as in `traffic.naive_traffic`. A causal mask is applied
to the whole of S (the masked tiles are computed and stored too).
"""

from __future__ import annotations

import math

import torch

from inferlab.engines.attention.step import (
    NAIVE,
    SteppedAttention,
    as_array,
    causal_mask,
    tile_ranges,
)


class NaiveAttention(SteppedAttention):
    execution = NAIVE

    def __init__(self, q, k, v, br: int, bc: int, causal: bool = False,
                 scale: float | None = None) -> None:
        super().__init__(q, k, v, br, bc, causal, scale)
        h, n, d = self.n_heads, self.n, self.d
        self.scores = torch.empty(h, n, n)  # S and P: what "main memory" holds
        self.probs = torch.empty(h, n, n)
        self.output = torch.zeros(h, n, d)

    def plan(self):
        rows, cols = tile_ranges(self.n, self.br), tile_ranges(self.n, self.bc)
        for h in range(self.n_heads):
            for i, r in enumerate(rows):
                for j, c in enumerate(cols):
                    yield "scores", h, r, c, j == 0, i == 0
            for r in rows:
                yield "softmax", h, r, None, False, False
            for i, r in enumerate(rows):
                for j, c in enumerate(cols):
                    yield "output", h, r, c, i == 0, j == len(cols) - 1

    def count_steps(self) -> int:
        rows, cols = math.ceil(self.n / self.br), math.ceil(self.n / self.bc)
        return self.n_heads * (2 * rows * cols + rows)

    def _run_step(self, item) -> dict:
        phase, h, (r0, r1), c, first, last = item
        rows, d, n = r1 - r0, self.d, self.n
        fields = {"head": h, "phase": phase, "q_rows": (r0, r1), "flops": 0}
        if phase == "softmax":
            self._read(rows * n)
            s = self.scores[h, r0:r1]
            m = s.amax(dim=-1, keepdim=True)
            e = torch.exp(s - m)
            total = e.sum(dim=-1, keepdim=True)
            self.probs[h, r0:r1] = e / total
            self._write(rows * n)
            return fields | {"k_rows": (0, n), "on_chip_elements": rows * n,
                             "m_rows": as_array(m[:, 0]), "l_rows": as_array(total[:, 0])}
        c0, c1 = c
        cols = c1 - c0
        fields |= {"k_rows": (c0, c1), "flops": 2 * rows * cols * d,
                   "on_chip_elements": rows * d + cols * d + rows * cols}
        if phase == "scores":
            if first:  # j == 0: this row tile's Q enters
                self._read(rows * d)
            if last:  # i == 0: each K tile is read on the first row tile only
                self._read(cols * d)
            s = self.q[h, r0:r1] @ self.k[h, c0:c1].T * self.scale
            if self.causal:
                s = causal_mask(s, r0, c0)
            self.scores[h, r0:r1, c0:c1] = s
            self._write(rows * cols)
            return fields | {"score_tile": as_array(s)}
        if first:  # i == 0: each V tile is read on the first row tile only
            self._read(cols * d)
        self._read(rows * cols)
        self.output[h, r0:r1] += self.probs[h, r0:r1, c0:c1] @ self.v[h, c0:c1]
        if last:
            self._write(rows * d)
        return fields


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    causal: bool = False) -> torch.Tensor:
    """The one-shot naive attention in torch ([..., N, d]): what `bench attention` times."""
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v
