"""Numeric formats by name: the one table of bytes per element every engine uses.

Names are the ones users type and snapshots store: fp32, bf16, fp16, fp8, int8, int4.
"""

from __future__ import annotations

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

DTYPE_NAMES: tuple[str, ...] = tuple(BYTES_PER_ELEMENT)


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of `dtype` occupies (int4 packs two per byte: 0.5)."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_NAMES)}"
        ) from None


def torch_dtype(dtype: str):
    """The torch dtype that computes in `dtype` (only the float formats torch runs)."""
    # here, not at the top: the byte table serves torch-free modules (roofline, memory, the
    # views' dtype choices); only this function needs torch
    import torch

    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if dtype not in table:
        raise ValueError(f"{dtype!r} is not a compute dtype; expected fp32, bf16 or fp16")
    return table[dtype]
