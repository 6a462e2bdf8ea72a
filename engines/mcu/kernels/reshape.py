"""RESHAPE: the same bytes under a new shape.

TFLM copies the input's bytes into the output buffer unless both are the same memory.
Here too: when the plan aliases the output onto the input (an in-place RESHAPE), the two
arena views share their first byte and nothing is copied.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.kernels.common import OpContext, Run


def reshape_into(x: np.ndarray, out: np.ndarray) -> None:
    """Copy x's elements into out in row-major order, skipping the copy when aliased."""
    if x.__array_interface__["data"][0] == out.__array_interface__["data"][0]:
        return
    out.reshape(-1)[...] = x.reshape(-1)


def prepare(ctx: OpContext) -> Run:
    xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
    if xt.dtype != yt.dtype or xt.elements != yt.elements:
        raise ctx.fail(
            f"{xt.dtype} {list(xt.shape)} cannot be reshaped to {yt.dtype} {list(yt.shape)}"
        )
    x, out = ctx.array_in(0), ctx.array_out(0)
    if x is None:
        raise ctx.fail("the input has no array")

    def run() -> None:
        reshape_into(x, out)

    return run
