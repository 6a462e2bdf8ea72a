"""GPTQ: group INT-b weights whose rounding errors are compensated column by column.

Round-to-nearest (RTN) quantizes every weight on its own. GPTQ (Frantar et al., 2022) quantizes
the columns of W [out, in] one at a time and moves each column's error onto the columns not yet
quantized, so the layer's OUTPUT on calibration inputs X changes as little as possible:

    minimise ||X Wᵀ - X Ŵᵀ||²,   H = 2/n XᵀX  (the Hessian of that error in each row of Ŵ)
    H += λ I,   λ = damp · mean(diag H)          (damp 0.01: H is often near-singular)
    U = cholesky(H⁻¹), upper                      (U[j, j:] holds column j's update rule)
    for column j:  ŵ_j = quant(w_j),   e_j = (w_j - ŵ_j) / U[j, j],
                   w_k -= e_j U[j, k]   for every later column k

Updates run lazily in blocks of 128 columns: inside a block the later columns of the block
are updated at once per column, the rest of W once per block (one matmul). Groups: a group's
scale and minimum are fixed when its first column comes up, from the columns as they are
then (already carrying the earlier columns' errors), with the ragged last group of
`group.py`. Act-order quantizes columns in decreasing diag(H) (the most-used inputs first,
while there is the most freedom left); with groups it then uses "static" groups: every
group's scale and minimum are taken from the original W before any column is quantized, so
the codes stay a plain `GroupQuantized` in the natural column order.

A column whose input was never active (diag H = 0) gets H[j, j] = 1: it is rounded to
nearest and moves no error.

The defaults (`ACT_ORDER`, `DAMP`: "gptq-int4-g128") are the measured best on SmolLM2,
calibrated on the shipped 35,220-token set, scored on the three held-out texts (`inferlab
bench quant --gptq-damp 0.1`, AMD EPYC, 1 thread, true-sequential), as the fraction of
RTN-INT4-g128's perplexity loss recovered, mean (prose / dialogue / technical), and the
quantize time, which act-order and damping barely change:

    act-order, damp 0.01      0.714 (0.760 / 0.653 / 0.730)   326 s
    act-order, damp 0.1       0.695 (0.742 / 0.616 / 0.726)   341 s
    natural order, damp 0.01  0.540 (0.634 / 0.446 / 0.541)   (another run)
    natural order, damp 0.1   0.502 (0.598 / 0.461 / 0.448)   312 s
"""

from __future__ import annotations

import torch

from inferlab.engines.quant.checks import check_bits, check_tensor
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.group import (
    GroupQuantized,
    finite_or_zero,
    n_groups,
    quantize_groups,
    reciprocal_or_zero,
)
from inferlab.engines.quant.layerwise import LinearInputs, quantize_layerwise
from inferlab.engines.quant.model_quant import QuantizedModel

BLOCK = 128
DAMP = 0.01
"""λ / mean(diag H) of the default GPTQ (measured on the held-out texts: engines/labs/quant/bench.py)."""
ACT_ORDER = True
"""Whether the default GPTQ ("gptq-int4-g128") quantizes columns in act-order."""


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise QuantError(f"{name} must be a positive integer, got {value!r}")
    return value


def inverse_hessian_factor(hessian: torch.Tensor, damp: float = DAMP) -> torch.Tensor:
    """U, upper triangular with Uᵀ U = (H + λI)⁻¹, λ = damp · mean(diag H), after dead inputs'
    diagonal entries are set to 1. Computed in fp64, returned in fp32."""
    if not 0.0 <= damp < 1e6 or damp != damp:
        raise QuantError(f"damp must be a non-negative number, got {damp!r}")
    h = hessian.double().clone()
    diag = h.diagonal()
    diag[diag == 0] = 1.0
    diag += damp * float(diag.mean())
    factor, info = torch.linalg.cholesky_ex(h)
    if int(info):
        raise QuantError("the calibration Hessian is not positive definite even after "
                         f"damping {damp}: raise damp or calibrate on more tokens")
    inverse = torch.cholesky_inverse(factor)
    return torch.linalg.cholesky(inverse, upper=True).float()


def _quant(w: torch.Tensor, d: torch.Tensor, m: torch.Tensor | None, bits: int
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes, x̂) of one column with its group's d (and m): `quantize_groups`' formulas."""
    if m is None:
        q_max = (1 << (bits - 1)) - 1
        q = torch.round(finite_or_zero(w * reciprocal_or_zero(d))).clamp(-q_max, q_max)
        return q, d * q
    q = torch.round(finite_or_zero((w - m) * reciprocal_or_zero(d))).clamp(0, (1 << bits) - 1)
    return q, d * q + m


def gptq_quantize(weight: torch.Tensor, hessian: torch.Tensor, bits: int = 4,
                  group_size: int | None = 128, symmetric: bool = False,
                  act_order: bool = False, damp: float = DAMP, block_size: int = BLOCK
                  ) -> GroupQuantized:
    """`weight` [out, in] quantized by GPTQ against `hessian` [in, in] (see the module
    docstring). `group_size` None is one group per row. fp32 scales and minima."""
    w_orig = check_tensor(weight, "weight")
    if w_orig.dim() != 2:
        raise QuantError(f"weight must be 2-d [out, in], got shape {tuple(w_orig.shape)}")
    rows, cols = w_orig.shape
    hessian = check_tensor(hessian, "hessian")
    if tuple(hessian.shape) != (cols, cols):
        raise QuantError(f"hessian must have shape ({cols}, {cols}), got {tuple(hessian.shape)}")
    check_bits(bits, 2, 8)
    g = cols if group_size is None else _check_positive_int(group_size, "group_size")
    block_size = _check_positive_int(block_size, "block_size")

    perm = torch.argsort(hessian.diagonal(), descending=True, stable=True) if act_order else None
    if perm is not None:
        w = w_orig[:, perm].clone()
        u = inverse_hessian_factor(hessian[perm][:, perm], damp)
    else:
        w = w_orig.clone()
        u = inverse_hessian_factor(hessian, damp)

    k = n_groups(cols, g)
    scales = torch.zeros(rows, k)
    mins = None if symmetric else torch.zeros(rows, k)
    if perm is not None:  # static groups from the original W
        static = quantize_groups(w_orig, bits, g, symmetric, ragged=True)
        scales.copy_(static.scales)
        if mins is not None:
            mins.copy_(static.mins)
        group_of = perm // g
    # Work on Wᵀ [in, out]: a column of W is then a contiguous row, and the per-column
    # update of the block's later columns one rank-1 update of contiguous memory.
    wt = w.t().contiguous()
    codes_t = torch.zeros(cols, rows)
    for b0 in range(0, cols, block_size):
        b1 = min(b0 + block_size, cols)
        w1 = wt[b0:b1].clone()
        err1 = torch.zeros_like(w1)
        u1 = u[b0:b1, b0:b1]
        for j in range(b1 - b0):
            c = b0 + j
            if perm is None:
                grp = c // g
                if c % g == 0:  # the group starts here: fix its d and m from W as it is now
                    span = torch.cat([w1[j:], wt[b1:]])[: min(g, cols - c)].t()
                    gq = quantize_groups(span, bits, span.shape[1], symmetric)
                    scales[:, grp] = gq.scales[:, 0]
                    if mins is not None:
                        mins[:, grp] = gq.mins[:, 0]
            else:
                grp = int(group_of[c])
            col = w1[j]
            q, col_hat = _quant(col, scales[:, grp], None if mins is None else mins[:, grp],
                                bits)
            codes_t[c] = q
            e = (col - col_hat) / u1[j, j]
            w1[j:].sub_(torch.outer(u1[j, j:], e))
            err1[j] = e
        wt[b1:] -= u[b0:b1, b1:].t() @ err1
    codes = codes_t.t()

    if perm is not None:
        codes = codes[:, torch.argsort(perm)]
    dtype = torch.int8 if symmetric else torch.uint8
    return GroupQuantized(q=codes.to(dtype), scales=scales, mins=mins, bits=bits, group_size=g)


def gptq_model(model, chunks, bits: int = 4, group_size: int | None = 128,
               symmetric: bool = False, act_order: bool = False, damp: float = DAMP,
               block_size: int = BLOCK, sequential: bool = True, progress=None,
               true_sequential: bool = True) -> QuantizedModel:
    """Every decoder linear of `model` quantized by GPTQ on the calibration token sequences
    `chunks` (`calibration.calibration_chunks`), layer by layer (`layerwise.py`; by default
    true-sequential: each linear on the inputs the layer's already-quantized linears give
    it, which also runs each linear once per calibration token rather than twice)."""
    check_bits(bits, 2, 8)
    if group_size is not None:
        _check_positive_int(group_size, "group_size")

    def one(name: str, weight: torch.Tensor, inputs: LinearInputs) -> GroupQuantized:
        return gptq_quantize(weight, inputs.hessian(), bits, group_size, symmetric, act_order,
                             damp, block_size)

    g = "" if group_size is None else f"-g{group_size}"
    name = f"gptq-int{bits}{g}{'-sym' if symmetric else ''}{'-act' if act_order else ''}"
    return quantize_layerwise(model, chunks, one, name, sequential=sequential,
                              progress=progress, true_sequential=true_sequential)
