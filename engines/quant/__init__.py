"""Quantization: INT8 affine/symmetric, group-wise INT8/INT4, llama.cpp blocks, FP8; errors;
pruning (2:4 by magnitude or Wanda, unstructured).

Headless and torch-only. Every quantizer returns a frozen record with `dequantize()` and
`nbytes`; `schemes.SCHEMES` names them for the CLI and the lab. Bad input raises
`QuantError` (a ValueError) naming the parameter.
"""

from __future__ import annotations

from inferlab.engines.quant.affine import (
    AffineQuantized,
    affine_params,
    int_limits,
    quantize_affine,
    quantize_uniform,
    symmetric_params,
)
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import (
    E4M3,
    E5M2,
    Fp8Format,
    Fp8Quantized,
    decode_fp8,
    encode_fp8,
    quantize_fp8,
)
from inferlab.engines.quant.gguf_blocks import (
    quantize_gguf,
    quantize_q4_0,
    quantize_q4_1,
    quantize_q8_0,
    to_gguf_bytes,
)
from inferlab.engines.quant.group import GroupQuantized, quantize_groups
from inferlab.engines.quant.metrics import TensorError, max_abs_error, mse, sqnr_db, tensor_error
from inferlab.engines.quant.packing import pack_int4, unpack_int4
from inferlab.engines.quant.pruning import (
    PrunedDense,
    Sparse24,
    input_feature_norms,
    magnitude_2_4,
    prune_2_4,
    prune_unstructured,
    wanda_2_4,
)
from inferlab.engines.quant.ranges import abs_max, value_range
from inferlab.engines.quant.schemes import SCHEMES, Scheme, scheme

__all__ = [
    "E4M3", "E5M2", "SCHEMES", "AffineQuantized", "Fp8Format", "Fp8Quantized",
    "GroupQuantized", "PrunedDense", "QuantError", "Scheme", "Sparse24", "TensorError",
    "abs_max", "affine_params", "decode_fp8", "encode_fp8", "input_feature_norms",
    "int_limits", "magnitude_2_4", "max_abs_error", "mse", "pack_int4", "prune_2_4",
    "prune_unstructured", "quantize_affine", "quantize_fp8", "quantize_gguf",
    "quantize_groups", "quantize_q4_0", "quantize_q4_1", "quantize_q8_0", "quantize_uniform",
    "scheme", "sqnr_db", "symmetric_params", "tensor_error", "to_gguf_bytes", "unpack_int4",
    "value_range", "wanda_2_4",
]
