"""Split-K decode (Flash-Decoding): one query row (the newest token, row N-1, which sees
every key whatever the mask) against the N keys split into chunks of Bc, each chunk worked
independently — on a GPU by its own thread block, so a single row still fills the chip —
then combined by the chunks' (m, ℓ):

    chunk c:  s = K_c q/√d,  m_c = max s,  ℓ_c = Σ e^(s - m_c),  o_c = Σ e^(s - m_c) v
    combine:  m = max m_c,  w_c = e^(m_c - m),  o = Σ w_c o_c / Σ w_c ℓ_c

Each chunk reads q and its K/V rows and writes o_c, m_c, ℓ_c; the combine reads the S
partials and writes o (`traffic.split_k_traffic`).
"""

from __future__ import annotations

import math

import torch

from inferlab.engines.attention.step import SPLIT_K, SteppedAttention, as_array, tile_ranges


class SplitKDecode(SteppedAttention):
    execution = SPLIT_K

    def __init__(self, q, k, v, br: int, bc: int, causal: bool = False,
                 scale: float | None = None) -> None:
        super().__init__(q, k, v, br, bc, causal, scale)
        h, d, splits = self.n_heads, self.d, len(tile_ranges(self.n, self.bc))
        self.partial_o = torch.zeros(h, splits, d)  # what the chunks leave in main memory
        self.partial_m = torch.full((h, splits), float("nan"))
        self.partial_l = torch.full((h, splits), float("nan"))
        self.output = torch.zeros(h, d)

    def plan(self):
        chunks = tile_ranges(self.n, self.bc)
        for h in range(self.n_heads):
            for c, chunk in enumerate(chunks):
                yield "chunk", h, c, chunk
            yield "combine", h, None, None

    def count_steps(self) -> int:
        return self.n_heads * (math.ceil(self.n / self.bc) + 1)

    def _run_step(self, item) -> dict:
        phase, h, c, chunk = item
        d, n = self.d, self.n
        fields = {"head": h, "phase": phase, "q_rows": (n - 1, n)}
        if phase == "chunk":
            c0, c1 = chunk
            cols = c1 - c0
            self._read(d + 2 * cols * d)
            s = self.k[h, c0:c1] @ self.q[h, n - 1] * self.scale
            m = s.max()
            p = torch.exp(s - m)
            self.partial_m[h, c], self.partial_l[h, c] = m, p.sum()
            self.partial_o[h, c] = p @ self.v[h, c0:c1]
            self._write(d + 2)
            fields |= {"k_rows": (c0, c1), "flops": 4 * cols * d,
                       "on_chip_elements": 2 * d + 2 * cols * d + cols + 2,
                       "score_tile": as_array(s.unsqueeze(0))}
        else:
            splits = self.partial_m.shape[1]
            self._read(splits * (d + 2))
            self.output[h] = combine(self.partial_o[h], self.partial_m[h], self.partial_l[h])
            self._write(d)
            fields |= {"k_rows": (0, n), "flops": 0, "on_chip_elements": splits * (d + 2) + d}
        return fields | {"m_rows": as_array(self.partial_m[h]),
                         "l_rows": as_array(self.partial_l[h])}


def combine(o: torch.Tensor, m: torch.Tensor, ell: torch.Tensor) -> torch.Tensor:
    """One row from S partials: o [S, d] (unnormalised), m [S], ℓ [S]."""
    w = torch.exp(m - m.max())
    return (w.unsqueeze(-1) * o).sum(dim=0) / (w * ell).sum()


def split_k_decode(q_row: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bc: int,
                   scale: float | None = None) -> torch.Tensor:
    """One shot: q_row [H, d] against k, v [H, N, d] in chunks of Bc -> [H, d]."""
    scale = q_row.shape[-1] ** -0.5 if scale is None else scale
    os, ms, ls = [], [], []
    for c0, c1 in tile_ranges(k.shape[-2], bc):
        s = (k[:, c0:c1] @ q_row.unsqueeze(-1)).squeeze(-1) * scale
        m = s.amax(dim=-1)
        p = torch.exp(s - m.unsqueeze(-1))
        os.append((p.unsqueeze(-1) * v[:, c0:c1]).sum(dim=-2))
        ms.append(m)
        ls.append(p.sum(dim=-1))
    o, m, ell = torch.stack(os, 1), torch.stack(ms, 1), torch.stack(ls, 1)
    w = torch.exp(m - m.amax(dim=1, keepdim=True))
    return (w.unsqueeze(-1) * o).sum(dim=1) / (w * ell).sum(dim=1, keepdim=True)
