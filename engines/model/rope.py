"""Rotary position embedding (RoPE) in the Hugging Face "rotate half" layout.

For a head vector x of width d (halves x1 = x[:d/2], x2 = x[d/2:]) at position p, with
inv_freq_i = theta^(-2i/d):

    rope(x, p) = x * cos(p * inv_freq) + cat(-x2, x1) * sin(p * inv_freq)

(each of the d/2 frequencies is used twice, once per half). The tables are computed once per
model; a forward step only indexes them by position.
"""

from __future__ import annotations

import torch


class RopeTables:
    """cos / sin of p * inv_freq for positions 0..max_position-1, shaped [rows, d_head].

    `sin_signed` is sin with its first half negated, so that rotate-half becomes a roll:
    cat(-x2, x1) * sin == roll(x, d/2) * sin_signed.

    The tables start with at most INITIAL_VALUES // d_head rows (a model file may claim a
    context of 2^28 tokens; that many rows would be terabytes) and grow, by doubling, when
    `at` is asked for a later position. Each row is computed from its position alone, so the
    values do not depend on when the table grew.
    """

    INITIAL_VALUES = 2**22

    def __init__(self, d_head: int, max_position: int, theta: float,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> None:
        if d_head % 2:
            raise ValueError(f"RoPE needs an even head width, got {d_head}")
        self.d_head = d_head
        self.max_position = max_position
        self.dtype, self.device = dtype, device
        self.inv_freq = 1.0 / theta ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
        self._build(min(max_position, max(1, self.INITIAL_VALUES // d_head)))

    def _build(self, rows: int) -> None:
        angles = torch.outer(torch.arange(rows, dtype=torch.float64), self.inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos(), angles.sin()
        half = self.d_head // 2
        sin_signed = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1)
        self.cos = cos.to(dtype=self.dtype, device=self.device)
        self.sin = sin.to(dtype=self.dtype, device=self.device)
        self.sin_signed = sin_signed.to(dtype=self.dtype, device=self.device)

    def at(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin_signed) at `positions` [T], each [T, 1, d_head] (broadcast over heads)."""
        if positions.numel():
            last = int(positions.max())
            if last >= self.max_position:
                raise ValueError(
                    f"position {last} is past the model's context of "
                    f"{self.max_position} tokens"
                )
            if last >= self.cos.shape[0]:
                self._build(min(self.max_position, max(last + 1, 2 * self.cos.shape[0])))
        return self.cos[positions].unsqueeze(1), self.sin_signed[positions].unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """Rotate heads x [T, n_heads, d_head] by the tables of `RopeTables.at`."""
    return torch.addcmul(x * cos, torch.roll(x, x.shape[-1] // 2, dims=-1), sin_signed)
