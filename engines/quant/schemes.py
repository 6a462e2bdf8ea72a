"""The weight-quantization (and pruning) schemes by the names the CLI and the lab use.

Each is a name and a function from a weight tensor to a quantized record; every record has
`dequantize()` (the fp32 x̂) and `nbytes` (its storage); the pruning schemes' records
(`pruning.py`) also tell their `sparsity`. Weights are [out, in]: per-channel schemes take
one scale per output row (axis 0), group schemes group along the input axis (so do 2:4's
groups of 4).
"int4-g128" is ragged: a row of 576 (SmolLM2's d_model) is groups of 128, 128, 128, 128, 64;
the llama.cpp blocks are not (GGUF has no short block: 32 must divide the row).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import torch

from inferlab.engines.quant.affine import quantize_uniform
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import quantize_fp8
from inferlab.engines.quant.gguf_blocks import quantize_q4_0, quantize_q4_1, quantize_q8_0
from inferlab.engines.quant.group import quantize_groups
from inferlab.engines.quant.pruning import magnitude_2_4, prune_unstructured


class Quantized(Protocol):
    @property
    def nbytes(self) -> int: ...

    def dequantize(self) -> torch.Tensor: ...


@dataclass(frozen=True)
class Scheme:
    name: str
    description: str
    quantize: Callable[[torch.Tensor], Quantized]

    def round_trip(self, x: torch.Tensor) -> torch.Tensor:
        """x̂: `x` quantized and dequantized again."""
        return self.quantize(x).dequantize()


def _per_channel(x: torch.Tensor, symmetric: bool) -> Quantized:
    # A 1-d tensor (a norm's weight) has no channels to speak of: one scale for it.
    return quantize_uniform(x, bits=8, axis=0 if x.dim() >= 2 else None, symmetric=symmetric)


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("int8", "INT8 affine, per output channel, min/max range",
           partial(_per_channel, symmetric=False)),
    Scheme("int8-sym", "INT8 symmetric (Z = 0), per output channel, max|x| range",
           partial(_per_channel, symmetric=True)),
    Scheme("fp8-e4m3", "FP8 E4M3, one fp32 scale per tensor", partial(quantize_fp8, fmt="e4m3")),
    Scheme("fp8-e5m2", "FP8 E5M2, one fp32 scale per tensor", partial(quantize_fp8, fmt="e5m2")),
    Scheme("q8_0", "llama.cpp Q8_0: symmetric INT8, groups of 32, fp16 scale", quantize_q8_0),
    Scheme("q4_0", "llama.cpp Q4_0: symmetric INT4, groups of 32, fp16 signed scale",
           quantize_q4_0),
    Scheme("q4_1", "llama.cpp Q4_1: INT4, groups of 32, fp16 scale and minimum", quantize_q4_1),
    Scheme("int4-g128", "INT4 round-to-nearest, groups of 128 (a row's last group shorter "
           "where 128 does not divide it), fp32 scale and minimum",
           partial(quantize_groups, bits=4, group_size=128, symmetric=False, ragged=True)),
    Scheme("sparse-2:4", "2:4 sparsity by magnitude: the 2 largest |w| of every 4 along the "
           "input kept; fp32 values plus a 2-bit position each", magnitude_2_4),
    Scheme("unstructured-50%", "half of every row's weights, the smallest |w|, set to 0; "
           "stored dense fp32", partial(prune_unstructured, sparsity=0.5)),
)}


def scheme(name: str) -> Scheme:
    """The scheme called `name`; a QuantError lists the known names otherwise."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise QuantError(f"scheme must be one of {', '.join(SCHEMES)}, got {name!r}") from None
