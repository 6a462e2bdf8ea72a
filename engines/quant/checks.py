"""Input checks shared by the quantizers: each failure names the parameter at fault."""

from __future__ import annotations

import torch

from inferlab.engines.quant.errors import QuantError


def check_tensor(x: torch.Tensor, name: str = "x") -> torch.Tensor:
    """`x` as a float32 tensor, refused if it is not a tensor, empty, or holds NaN/inf.

    Quantization works in fp32 (what torch's and llama.cpp's quantizers compute in); a bf16
    or fp16 input converts exactly.
    """
    if not isinstance(x, torch.Tensor):
        raise QuantError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not (x.is_floating_point()):
        raise QuantError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if x.numel() == 0:
        raise QuantError(f"{name} is empty (shape {tuple(x.shape)}): nothing to quantize")
    x = x.detach().to(torch.float32)
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise QuantError(f"{name} holds {bad} non-finite value(s) (NaN or inf)")
    return x


def check_bits(bits: int, low: int, high: int, name: str = "bits") -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or not low <= bits <= high:
        raise QuantError(f"{name} must be an integer in [{low}, {high}], got {bits!r}")
    return bits


def check_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """`axis` made non-negative; Python's negative indexing is allowed."""
    if isinstance(axis, bool) or not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise QuantError(f"{name} must be an integer in [{-ndim}, {ndim - 1}] for a "
                         f"{ndim}-d tensor, got {axis!r}")
    return axis % ndim


def check_group_size(group_size: int, length: int, name: str = "group_size") -> int:
    """A positive group size that divides `length` (the last axis) evenly."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise QuantError(f"{name} must be a positive integer, got {group_size!r}")
    if length % group_size:
        raise QuantError(f"{name} {group_size} does not divide the last axis "
                         f"(length {length})")
    return group_size
