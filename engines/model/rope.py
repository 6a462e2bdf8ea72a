"""Rotary position embedding (RoPE) in the Hugging Face "rotate half" layout.

For a head vector x of width d (halves x1 = x[:d/2], x2 = x[d/2:]) at position p, with
inv_freq_i = theta^(-2i/d):

    rope(x, p) = x * cos(p * inv_freq) + cat(-x2, x1) * sin(p * inv_freq)

(each of the d/2 frequencies is used twice, once per half). The tables are computed once per
model; a forward step only indexes them by position.

Long-context scalings change inv_freq (`scaled_inv_freq`, as transformers computes them):
"linear" divides every frequency by the factor; "llama3" divides the low frequencies (long
wavelengths) and blends the middle band; "yarn" blends interpolated and original frequencies
by a ramp between two wavelengths and scales cos and sin by 0.1·ln(factor) + 1.
"""

from __future__ import annotations

import math

import torch

from inferlab.engines.model.config import ModelConfig


def base_inv_freq(d_head: int, theta: float) -> torch.Tensor:
    """theta^(-2i/d) for i < d/2, float64."""
    return 1.0 / theta ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)


def scaled_inv_freq(cfg: ModelConfig, theta: float, scaled: bool = True
                    ) -> tuple[torch.Tensor, float]:
    """(inv_freq, attention factor) of a layer kind with RoPE base `theta`, the config's
    scaling applied where `scaled`."""
    d = cfg.rotary_dim or cfg.d_head
    inv = base_inv_freq(d, theta)
    kind, factor = (cfg.rope_scaling, cfg.rope_factor) if scaled else ("", 1.0)
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        old = cfg.rope_original_max_position
        low_wavelen = old / cfg.rope_low_freq_factor
        high_wavelen = old / cfg.rope_high_freq_factor
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - cfg.rope_low_freq_factor) / (
            cfg.rope_high_freq_factor - cfg.rope_low_freq_factor)
        blended = (1 - smooth) * out / factor + smooth * out
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, blended, out), 1.0
    if kind == "yarn":
        old = cfg.rope_original_max_position

        def dim_of(rotations: float) -> float:
            return d * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low = max(math.floor(dim_of(cfg.rope_beta_fast)), 0)
        high = min(math.ceil(dim_of(cfg.rope_beta_slow)), d - 1)
        high = high + 0.001 if low == high else high
        ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        keep = 1 - ramp  # 1: the original frequency, 0: interpolated
        inv = inv / factor * (1 - keep) + inv * keep
        return inv, 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv, 1.0


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
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                 inv_freq: torch.Tensor | None = None, attention_factor: float = 1.0) -> None:
        """`inv_freq` (float64 [d_head/2]) replaces theta's plain frequencies (a scaling);
        cos and sin are multiplied by `attention_factor` (YaRN)."""
        if d_head % 2:
            raise ValueError(f"RoPE needs an even head width, got {d_head}")
        self.d_head = d_head
        self.max_position = max_position
        self.dtype, self.device = dtype, device
        self.inv_freq = base_inv_freq(d_head, theta) if inv_freq is None else inv_freq
        self.attention_factor = attention_factor
        self._build(min(max_position, max(1, self.INITIAL_VALUES // d_head)))

    def _build(self, rows: int) -> None:
        angles = torch.outer(torch.arange(rows, dtype=torch.float64), self.inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos() * self.attention_factor, angles.sin() * self.attention_factor
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
