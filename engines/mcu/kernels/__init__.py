"""Integer kernels of the arena interpreter, one module per op family, bit-exact with
TensorFlow Lite Micro's reference kernels.

`KERNELS` maps a builtin op name to its `prepare(ctx) -> run` function (see `common`);
`REGION_KERNELS` the sliding-window ops to `prepare_region(ctx) -> run_region`, which
computes one rectangle of output rows and columns from the input region it reads.
`fixed_point` holds TFLM's integer arithmetic that all of them share.
"""

from __future__ import annotations

from collections.abc import Callable

from inferlab.engines.mcu.kernels import (
    conv,
    depthwise,
    elementwise,
    fully_connected,
    pooling,
    quantize,
    reshape,
    softmax,
)
from inferlab.engines.mcu.kernels.common import (
    OpContext,
    RegionRun,
    Run,
    UnsupportedOpError,
    Window,
)

KERNELS: dict[str, Callable[[OpContext], Run]] = {
    "CONV_2D": conv.prepare,
    "DEPTHWISE_CONV_2D": depthwise.prepare,
    "FULLY_CONNECTED": fully_connected.prepare,
    "AVERAGE_POOL_2D": pooling.prepare,
    "MAX_POOL_2D": pooling.prepare,
    "RESHAPE": reshape.prepare,
    "SOFTMAX": softmax.prepare,
    "ADD": elementwise.prepare,
    "QUANTIZE": quantize.prepare_quantize,
    "DEQUANTIZE": quantize.prepare_dequantize,
}

# Sliding-window ops that can also compute one rectangle of their output from the input
# rows and columns it reads: op name -> `prepare_region(ctx) -> run_region` (see
# `common.RegionRun`). Patch-based execution (engines.mcu.patching) runs these.
REGION_KERNELS: dict[str, Callable[[OpContext], RegionRun]] = {
    "CONV_2D": conv.prepare_region,
    "DEPTHWISE_CONV_2D": depthwise.prepare_region,
    "AVERAGE_POOL_2D": pooling.prepare_region,
    "MAX_POOL_2D": pooling.prepare_region,
}

__all__ = [
    "KERNELS",
    "REGION_KERNELS",
    "OpContext",
    "RegionRun",
    "Run",
    "UnsupportedOpError",
    "Window",
]
