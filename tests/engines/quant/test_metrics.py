"""MSE, SQNR and max abs error, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from inferlab.engines.quant import QuantError, max_abs_error, mse, sqnr_db, tensor_error


def test_by_hand():
    x = torch.tensor([1.0, -2.0, 3.0, 0.0])
    x_hat = torch.tensor([1.5, -2.0, 2.0, 0.0])
    # errors 0.5, 0, 1, 0: MSE = 1.25 / 4; SQNR = 10 log10(14 / 1.25)
    assert mse(x, x_hat) == 0.3125
    assert sqnr_db(x, x_hat) == pytest.approx(10 * math.log10(14 / 1.25))
    assert max_abs_error(x, x_hat) == 1.0
    assert tensor_error(x, x_hat).to_dict() == {"mse": 0.3125, "sqnr_db": sqnr_db(x, x_hat),
                                                "max_abs_error": 1.0}


def test_edges():
    x = torch.tensor([1.0, 2.0])
    assert sqnr_db(x, x) == math.inf
    assert sqnr_db(torch.zeros(2), x) == -math.inf
    with pytest.raises(QuantError, match="shape"):
        mse(x, torch.zeros(3))
    with pytest.raises(QuantError, match="x_hat"):
        mse(x, torch.tensor([1.0, math.nan]))


def test_one_bit_more_is_about_six_db():
    from inferlab.engines.quant import quantize_uniform

    x = torch.randn(100000, generator=torch.Generator().manual_seed(0))
    gain = (sqnr_db(x, quantize_uniform(x, bits=8).dequantize())
            - sqnr_db(x, quantize_uniform(x, bits=7).dequantize()))
    assert gain == pytest.approx(6.02, abs=0.3)
