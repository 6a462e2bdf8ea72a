"""AWQ: activation-aware scales, then a clipping search, then group INT-b (Lin et al., 2023).

A few input channels carry much larger activations than the rest, and the weights that meet
them matter most to the output. AWQ scales those weight columns UP before round-to-nearest
(so they lose less, relatively) and the inputs down by the same factor:

    y = x Wᵀ = (x / s) (W diag(s))ᵀ,   Ŵ = Q(W diag(s)) diag(1/s)

exact in real arithmetic, and equal within fp32 rounding here; on a deployed model 1/s folds
into the operation before the linear (the RMSNorm weight before qkv and gate_up, the up
projection before down), so it costs nothing at run time. This module's record keeps s and
its `dequantize()` returns the effective weight Q(W diag(s)) diag(1/s), which the
fake-quantized model multiplies by the unscaled x.

1. Scale search: s = mean|x|^α per input channel (mean over every calibration token),
   normalised by sqrt(max s · min s); α over the grid {0, 1/20, ..., 19/20} (α = 0 is plain
   RTN, so the search never does worse than RTN on the rows it scores); the α whose Ŵ gives
   the least output error ||X Wᵀ - X Ŵᵀ||² on the calibration rows wins.
2. Clipping search: for each row and group of W diag(s), the range is clipped to
   ±r · max|w| for r in {1, 0.95, ..., 0.55} and the r with the least error of that group's
   share of the output, e_g H_g e_gᵀ (H_g: the group's block of the scaled inputs' Gram
   matrix), is kept.
3. The clipped, scaled weight is group-quantized (`quantize_groups`, ragged last group).

The loss is each linear's own output (the paper scores q/k/v together by the attention
block's output, and skips clipping q and k); the scale search scores `search_rows` rows
evenly spread over the calibration tokens, the clipping search all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_bits, check_tensor
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.group import GroupQuantized, quantize_groups
from inferlab.engines.quant.layerwise import LinearInputs, quantize_layerwise
from inferlab.engines.quant.model_quant import QuantizedModel

GRID = 20
CLIP_GRID = 20
MAX_SHRINK = 0.5
SEARCH_ROWS = 256


@dataclass(frozen=True)
class AwqQuantized:
    """Group codes of W diag(s), and s."""

    codes: GroupQuantized
    input_scales: torch.Tensor
    """s per input channel, [in] fp32."""
    alpha: float
    """The exponent the search chose."""
    clip_ratios: torch.Tensor
    """r per row and group, [out, n_groups]."""

    def dequantize(self) -> torch.Tensor:
        """The effective weight Q(W diag(s)) diag(1/s)."""
        return self.codes.dequantize() / self.input_scales

    @property
    def nbytes(self) -> int:
        """The codes' bytes plus s (fp32; free where 1/s folds into a norm's weight)."""
        return self.codes.nbytes + self.input_scales.numel() * 4


def awq_scales(abs_mean: torch.Tensor, alpha: float) -> torch.Tensor:
    """s = mean|x|^α, normalised so that max s · min s = 1 (inputs never seen: s from 1e-4)."""
    s = abs_mean.float().clamp(min=1e-4) ** alpha
    return s / torch.sqrt(s.max() * s.min())


def _spread_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    if x.shape[0] <= n:
        return x
    return x[torch.linspace(0, x.shape[0] - 1, n).round().long()]


def _group_bounds(length: int, g: int) -> list[tuple[int, int]]:
    return [(a, min(a + g, length)) for a in range(0, length, g)]


def clip_search(w: torch.Tensor, gram: torch.Tensor, bits: int, group_size: int,
                symmetric: bool, clip_grid: int = CLIP_GRID, max_shrink: float = MAX_SHRINK
                ) -> torch.Tensor:
    """r per row and group (see the module docstring): [out, n_groups]."""
    bounds = _group_bounds(w.shape[1], group_size)
    ratios = [1.0 - i / clip_grid for i in range(int(max_shrink * clip_grid))]
    best = torch.ones(w.shape[0], len(bounds))
    for k, (a, b) in enumerate(bounds):
        wg, hg = w[:, a:b], gram[a:b, a:b]
        peak = wg.abs().amax(dim=1, keepdim=True)
        best_loss = None
        for r in ratios:
            clipped = torch.maximum(torch.minimum(wg, peak * r), -peak * r)
            e = wg - quantize_groups(clipped, bits, b - a, symmetric).dequantize()
            loss = ((e @ hg) * e).sum(dim=1)
            if best_loss is None:
                best_loss = loss
                continue
            better = loss < best_loss
            best_loss = torch.where(better, loss, best_loss)
            best[:, k] = torch.where(better, torch.tensor(r), best[:, k])
    return best


def _clip(w: torch.Tensor, ratios: torch.Tensor, group_size: int) -> torch.Tensor:
    out = w.clone()
    for k, (a, b) in enumerate(_group_bounds(w.shape[1], group_size)):
        bound = w[:, a:b].abs().amax(dim=1, keepdim=True) * ratios[:, k: k + 1]
        out[:, a:b] = torch.maximum(torch.minimum(w[:, a:b], bound), -bound)
    return out


def awq_quantize(weight: torch.Tensor, inputs: LinearInputs, bits: int = 4,
                 group_size: int = 128, symmetric: bool = False, grid: int = GRID,
                 clip: bool = True, search_rows: int = SEARCH_ROWS) -> AwqQuantized:
    """`weight` [out, in] quantized by AWQ on what its linear saw (`inputs`, rows kept)."""
    w = check_tensor(weight, "weight")
    if w.dim() != 2:
        raise QuantError(f"weight must be 2-d [out, in], got shape {tuple(w.shape)}")
    check_bits(bits, 2, 8)
    for value, name in ((group_size, "group_size"), (grid, "grid"), (search_rows, "search_rows")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise QuantError(f"{name} must be a positive integer, got {value!r}")
    if inputs.n_rows == 0:
        raise QuantError("calibration is empty: the linear saw no inputs")
    if inputs.gram.shape[0] != w.shape[1]:
        raise QuantError(f"inputs have {inputs.gram.shape[0]} channels, the weight "
                         f"{w.shape[1]}")
    x = check_tensor(_spread_rows(inputs.stacked_rows(), search_rows), "calibration rows")
    abs_mean = inputs.abs_mean()
    y = x @ w.t()

    best = None
    for i in range(grid):
        alpha = i / grid
        s = awq_scales(abs_mean, alpha)
        w_hat = quantize_groups(w * s, bits, group_size, symmetric, ragged=True).dequantize() / s
        loss = float(((y - x @ w_hat.t()) ** 2).mean())
        if best is None or loss < best[0]:
            best = (loss, alpha, s)
    _, alpha, s = best

    scaled = w * s
    if clip:
        gram = inputs.gram / (s.unsqueeze(0) * s.unsqueeze(1)) / inputs.n_rows
        ratios = clip_search(scaled, gram, bits, group_size, symmetric)
        scaled = _clip(scaled, ratios, group_size)
    else:
        ratios = torch.ones(w.shape[0], -(-w.shape[1] // group_size))
    codes = quantize_groups(scaled, bits, group_size, symmetric, ragged=True)
    return AwqQuantized(codes, s, alpha, ratios)


def awq_model(model, chunks, bits: int = 4, group_size: int = 128, symmetric: bool = False,
              grid: int = GRID, clip: bool = True, search_rows: int = SEARCH_ROWS,
              sequential: bool = False, progress=None) -> QuantizedModel:
    """Every decoder linear of `model` quantized by AWQ on the calibration token sequences
    `chunks`, layer by layer (`layerwise.py`). By default each layer is calibrated on the fp
    model's activations, as the paper does (its scaling alone changes no output)."""
    check_bits(bits, 2, 8)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise QuantError(f"group_size must be a positive integer, got {group_size!r}")

    def one(name: str, weight: torch.Tensor, inputs: LinearInputs) -> AwqQuantized:
        return awq_quantize(weight, inputs, bits, group_size, symmetric, grid, clip, search_rows)

    name = f"awq-int{bits}-g{group_size}{'-sym' if symmetric else ''}"
    return quantize_layerwise(model, chunks, one, name, sequential=sequential, keep_rows=True,
                              progress=progress)
