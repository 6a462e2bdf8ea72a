"""Random test tensors with the values quantizers get wrong: ±0, subnormals, outliers,
repeated extremes and values sitting on or next to rounding ties."""

from __future__ import annotations

import torch

SUBNORMALS = (1e-40, -1e-40, 1.4e-45, -3e-39)


def nasty(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    """randn · scale with ±0, fp32 subnormals and a few 30× outliers sprinkled in."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen) * scale
    flat = x.view(-1)
    n = flat.numel()
    pick = torch.randperm(n, generator=gen)
    specials = torch.tensor([0.0, -0.0, *SUBNORMALS], dtype=torch.float32)
    k = min(n // 4, 2 * len(specials))
    flat[pick[:k]] = specials.repeat(2)[:k]
    outliers = pick[k: k + max(1, n // 500)]
    flat[outliers] *= 30.0
    return x


def near(values: torch.Tensor) -> torch.Tensor:
    """Each fp32 value with its two neighbours (one ulp below and above)."""
    up = torch.nextafter(values, torch.full_like(values, torch.inf))
    down = torch.nextafter(values, torch.full_like(values, -torch.inf))
    return torch.cat([down, values, up])
