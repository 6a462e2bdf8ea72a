"""BF16 as a "scheme": every weight rounded to bfloat16 (torch's cast: round to nearest even
on the 16 dropped mantissa bits), two bytes each, no scale. The baseline every low-bit scheme
is usually compared with on a GPU."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_tensor


@dataclass(frozen=True)
class CastQuantized:
    """A tensor stored at a narrower float dtype."""

    values: torch.Tensor

    def dequantize(self) -> torch.Tensor:
        return self.values.to(torch.float32)

    @property
    def nbytes(self) -> int:
        return self.values.numel() * self.values.element_size()


def quantize_bf16(x: torch.Tensor) -> CastQuantized:
    return CastQuantized(check_tensor(x).to(torch.bfloat16))
