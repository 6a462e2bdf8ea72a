"""Bad input raises QuantError (a ValueError) naming the parameter at fault."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.quant import (
    QuantError,
    quantize_affine,
    quantize_fp8,
    quantize_gguf,
    quantize_groups,
    quantize_uniform,
    scheme,
    value_range,
)


def test_quant_error_is_a_value_error():
    assert issubclass(QuantError, ValueError)


@pytest.mark.parametrize("call,message", [
    (lambda: quantize_groups(torch.randn(4, 100), group_size=32), "group_size 32 does not divide"),
    (lambda: quantize_gguf(torch.randn(4, 48), "q4_1"), "group_size 32 does not divide"),
    (lambda: quantize_groups(torch.randn(4, 64), group_size=0), "group_size must be a positive"),
    (lambda: quantize_uniform(torch.randn(4, 8), axis=2), "axis must be an integer in"),
    (lambda: quantize_uniform(torch.randn(4, 8), axis=-3), "axis must be an integer in"),
    (lambda: quantize_uniform(torch.tensor([1.0, math.nan])), "x holds 1 non-finite"),
    (lambda: quantize_fp8(torch.tensor([1.0, math.inf])), "x holds 1 non-finite"),
    (lambda: quantize_groups(torch.tensor([[-math.inf] * 32])), "non-finite"),
    (lambda: quantize_uniform(torch.zeros(0)), "x is empty"),
    (lambda: quantize_fp8(torch.zeros(3, 0)), "x is empty"),
    (lambda: quantize_uniform(torch.randn(8), bits=9), "bits must be an integer in"),
    (lambda: quantize_groups(torch.randn(1, 32), bits=1), "bits must be an integer in"),
    (lambda: quantize_uniform(torch.randn(8), bits=True), "bits must be an integer in"),
    (lambda: quantize_uniform(torch.arange(8)), "floating-point"),
    (lambda: quantize_uniform([1.0, 2.0]), "torch.Tensor"),
    (lambda: value_range(torch.randn(8), method="percentile", percentile=101), "percentile must"),
    (lambda: value_range(torch.randn(8), method="mse"), "method must be one of"),
    (lambda: quantize_groups(torch.randn(1, 32), rounding="up"), "rounding must be one of"),
    (lambda: quantize_fp8(torch.randn(8), "e3m4"), "fp8 format must be one of"),
    (lambda: quantize_affine(torch.randn(8), torch.tensor(0.0), torch.tensor(0)), "scale must"),
    (lambda: quantize_affine(torch.randn(2, 3), torch.ones(3), torch.zeros(3), axis=0),
     "must have shape \\(2,\\)"),
    (lambda: scheme("int3"), "scheme must be one of"),
])
def test_bad_input_names_the_parameter(call, message):
    with pytest.raises(QuantError, match=message):
        call()
