"""Pruning: weights set to zero, 2:4 structured (by magnitude or Wanda) or unstructured.

A weight W is [out, in]. 2:4 ("semi-structured") sparsity zeroes 2 of every 4 consecutive
weights along a row's input axis, so `in` must be divisible by 4. NVIDIA's sparse tensor
cores (Ampere on) multiply such a matrix at up to twice the dense rate because they read
only the kept half and, per kept value, its 2-bit position in its group. Which 2 are kept:

    magnitude:  the 2 largest  |W_ij|                    (data-free)
    Wanda:      the 2 largest  S_ij = |W_ij| · ‖X_j‖₂    (Sun et al., 2023)

‖X_j‖₂ = sqrt(Σ_t x_tj²) is the L2 norm of input feature j over every calibration token.
Wanda's argument is AWQ's: a few input features carry much larger activations than the rest,
so a small weight that meets one can matter more to the output x Wᵀ than a large weight that
meets a quiet one. Neither method updates the kept weights (SparseGPT does). Where scores
tie, the lower index is kept, so every result is deterministic.

Unstructured pruning at sparsity s zeroes the round(s · in) smallest |W_ij| of EACH output
row (Python's round: halves to even). Per row, not per tensor, as Wanda compares: every
output then keeps the same share of its inputs, the way 2:4 does, where a per-tensor
threshold can strip a row of small weights of nearly all of them.

Storage (`nbytes`), counted at fp32 values:
- 2:4: the kept half of the values plus a 2-bit position per kept value (4 bits per group
  of 4), the layout of NVIDIA's compressed 2:4 format for 16-bit values (cuSPARSELt, torch's
  `to_sparse_semi_structured`): 8.5 bytes per 4 weights against 16 dense, 53%. (Sparse fp32
  runs on the tensor cores as 1:2 over tf32; the count here is the 2:4 layout at fp32.)
- unstructured: the dense fp32 bytes. Stored sparse it would not be smaller: at 50% a CSR
  matrix of fp32 values and int32 column indices is as large as the dense one, and kernels
  for unstructured sparsity win only well above that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_tensor
from inferlab.engines.quant.errors import QuantError

GROUP = 4
"""M of N:M: weights per group along the input axis."""
KEPT = 2
"""N of N:M: weights kept per group."""
INDEX_BITS = 2
"""Bits of a kept value's position in its group of 4."""


@dataclass(frozen=True)
class Sparse24:
    """A 2:4-sparse weight in compressed form: the kept values and their positions."""

    values: torch.Tensor
    """The kept weights, [out, in / 2] fp32, two per group in increasing position."""
    indices: torch.Tensor
    """Each kept value's position in its group of 4, [out, in / 2] uint8 in 0..3."""

    def dequantize(self) -> torch.Tensor:
        """The pruned weight [out, in], fp32, zeros where weights were dropped."""
        out, half = self.values.shape
        w = torch.zeros(out, half // KEPT, GROUP)
        w.scatter_(2, self.indices.long().reshape(out, -1, KEPT),
                   self.values.reshape(out, -1, KEPT))
        return w.reshape(out, -1)

    @property
    def nbytes(self) -> int:
        """fp32 kept values plus 2 bits of position per kept value (see the module)."""
        return self.values.numel() * 4 + (self.indices.numel() * INDEX_BITS + 7) // 8

    @property
    def sparsity(self) -> float:
        """Fraction of the weight that is zero: 0.5, more where a kept value is itself 0."""
        return 1.0 - int(torch.count_nonzero(self.values)) / (2 * self.values.numel())


@dataclass(frozen=True)
class PrunedDense:
    """An unstructured-pruned weight, stored dense."""

    weight: torch.Tensor
    """[out, in] fp32 with the pruned weights set to 0."""
    target_sparsity: float
    """The s asked for; each row has round(s · in) weights pruned."""

    def dequantize(self) -> torch.Tensor:
        return self.weight

    @property
    def nbytes(self) -> int:
        """The dense fp32 bytes (see the module docstring for why not a sparse format)."""
        return self.weight.numel() * 4

    @property
    def sparsity(self) -> float:
        """Fraction of the weight that is zero (at least the pruned share)."""
        return 1.0 - int(torch.count_nonzero(self.weight)) / self.weight.numel()


def _check_weight(weight: torch.Tensor) -> torch.Tensor:
    w = check_tensor(weight, "weight")
    if w.dim() != 2:
        raise QuantError(f"weight must be 2-d [out, in], got shape {tuple(w.shape)}")
    return w


def keep_2_of_4(score: torch.Tensor) -> torch.Tensor:
    """Boolean mask [out, in]: True for the 2 of every 4 along the input axis with the
    largest `score`, the lower index first among equals.

    Each weight's rank counts the weights of its group that outrank it (a larger score, or
    an equal one at a lower index); ranks 0 and 1 are kept. The order is strict, so exactly
    2 are kept. Six pairwise comparisons per group: cheaper than sorting every group."""
    g = score.reshape(score.shape[0], -1, GROUP)
    outranked_by = torch.zeros(g.shape, dtype=torch.uint8)
    for j in range(GROUP):
        for k in range(j + 1, GROUP):
            j_first = g[..., j] >= g[..., k]  # an equal score: the lower index j goes first
            outranked_by[..., k] += j_first
            outranked_by[..., j] += ~j_first
    return (outranked_by < KEPT).reshape(score.shape)


def prune_2_4(weight: torch.Tensor, score: torch.Tensor | None = None) -> Sparse24:
    """`weight` [out, in] 2:4-pruned, keeping per group of 4 the 2 with the largest `score`
    ([out, in]; default |weight|: magnitude pruning)."""
    w = _check_weight(weight)
    if w.shape[1] % GROUP:
        raise QuantError(f"weight must have an input axis divisible by {GROUP} for 2:4 "
                         f"sparsity, got shape {tuple(w.shape)}")
    if score is None:
        score = w.abs()
    else:
        score = check_tensor(score, "score")
        if score.shape != w.shape:
            raise QuantError(f"score must have the weight's shape {tuple(w.shape)}, got "
                             f"{tuple(score.shape)}")
    keep = keep_2_of_4(score)
    out = w.shape[0]
    positions = (torch.arange(w.shape[1]) % GROUP).expand_as(w)
    return Sparse24(values=w[keep].reshape(out, -1),
                    indices=positions[keep].reshape(out, -1).to(torch.uint8))


def magnitude_2_4(weight: torch.Tensor) -> Sparse24:
    """2:4 by magnitude: the 2 largest |w| of every 4 along the input axis kept."""
    return prune_2_4(weight)


def input_feature_norms(inputs) -> torch.Tensor:
    """‖X_j‖₂ = sqrt(Σ_t x_tj²) per input feature j, [in] fp32, from what a linear saw (a
    `layerwise.LinearInputs`: Σ_t x_tj² is its Gram matrix's diagonal)."""
    if inputs.n_rows == 0:
        raise QuantError("inputs is empty: calibration is empty, the linear saw no rows")
    return check_tensor(inputs.gram.diagonal().clamp(min=0.0).sqrt(), "input norms")


def wanda_2_4(weight: torch.Tensor, input_norms: torch.Tensor) -> Sparse24:
    """2:4 by Wanda: the 2 of every 4 with the largest |W_ij| · ‖X_j‖₂ kept; `input_norms`
    is ‖X_j‖₂ per input feature, [in] (`input_feature_norms`)."""
    w = _check_weight(weight)
    norms = check_tensor(input_norms, "input_norms")
    if tuple(norms.shape) != (w.shape[1],):
        raise QuantError(f"input_norms must have shape ({w.shape[1]},) (one per input "
                         f"feature), got {tuple(norms.shape)}")
    if bool((norms < 0).any()):
        raise QuantError("input_norms must be non-negative (they are L2 norms)")
    return prune_2_4(w, w.abs() * norms)


def _check_sparsity(sparsity: float) -> float:
    if (isinstance(sparsity, bool) or not isinstance(sparsity, (int, float))
            or not math.isfinite(sparsity) or not 0.0 <= sparsity < 1.0):
        raise QuantError(f"sparsity must be a number in [0, 1), got {sparsity!r}")
    return float(sparsity)


def prune_unstructured(weight: torch.Tensor, sparsity: float) -> PrunedDense:
    """`weight` [out, in] with the round(sparsity · in) smallest |w| of each row set to 0
    (equal |w|: the lower index is kept)."""
    s = _check_sparsity(sparsity)
    w = _check_weight(weight)
    n_keep = w.shape[1] - round(s * w.shape[1])
    # A stable descending sort puts equal |w| in index order: the lower index is kept first.
    order = torch.sort(w.abs(), dim=1, descending=True, stable=True).indices
    keep = torch.zeros_like(w, dtype=torch.bool).scatter_(1, order[:, :n_keep], True)
    return PrunedDense(torch.where(keep, w, torch.zeros_like(w)), s)
