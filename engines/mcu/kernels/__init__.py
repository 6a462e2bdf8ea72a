"""Integer kernels of the arena interpreter, one module per op family, bit-exact with
TensorFlow Lite Micro's reference kernels.

`KERNELS` maps a builtin op name to its `prepare(ctx) -> run` function (see `common`).
`fixed_point` holds TFLM's integer arithmetic that all of them share.
"""

from __future__ import annotations

from collections.abc import Callable

from engines.mcu.kernels import (
    conv,
    depthwise,
    elementwise,
    fully_connected,
    pooling,
    quantize,
    reshape,
    softmax,
)
from engines.mcu.kernels.common import OpContext, Run, UnsupportedOpError

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

__all__ = ["KERNELS", "OpContext", "Run", "UnsupportedOpError"]
