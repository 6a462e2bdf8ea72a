"""Q8_0, Q4_0 and Q4_1 bytes against the `gguf` package's reference quantizer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from inferlab.engines.quant import QuantError, quantize_gguf, to_gguf_bytes
from inferlab.engines.quant.gguf_blocks import BLOCK_BYTES, QUANTIZERS
from tests.engines.quant.nasty import nasty

KINDS = ("q8_0", "q4_0", "q4_1")


def reference(x: torch.Tensor, kind: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return quantize(x.numpy(), getattr(GGMLQuantizationType, kind.upper()))


def awkward_blocks(seed: int) -> torch.Tensor:
    """Rows of 32-weight blocks built to sit on the rounding rules' edges."""
    gen = torch.Generator().manual_seed(seed)
    grid = torch.arange(32).float()
    rows = [
        torch.zeros(32),                                   # d = 0
        torch.full((32,), 0.75),                           # constant: Q4_1's d = 0
        torch.tensor([1.0, -1.0] * 16),                    # |max| tied with opposite signs
        torch.tensor([-1.0, 1.0] * 16),
        (grid - 16) / 15 * 0.25,                           # codes on exact grid points
        (grid % 16 + 0.5) / 15 * 0.3 - 0.15,               # halfway between Q4 levels
        (grid - 16 + 0.5) / 127 * 2.0,                     # halfway between Q8 levels
        torch.where(grid < 30, torch.tensor(1e-40), torch.tensor(1.0)),  # subnormals + max
        torch.tensor([-0.0, 0.0] * 15 + [2.0, -3.0]),
        torch.randn(32, generator=gen) * 1e-3,
        torch.randn(32, generator=gen) * 1e4,
    ]
    return torch.stack(rows)


@pytest.mark.parametrize("kind", KINDS)
def test_awkward_blocks_equal_gguf(kind):
    x = awkward_blocks(0)
    assert np.array_equal(quantize_gguf(x, kind).numpy(), reference(x, kind))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", [(64, 256), (3, 5, 96), (32,)])
def test_random_tensors_equal_gguf(kind, seed, shape):
    x = nasty(shape, seed, scale=10.0 ** (seed - 2))
    ours = quantize_gguf(x, kind).numpy()
    ref = reference(x, kind)
    assert ours.shape == ref.shape
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize("kind", KINDS)
def test_dequantize_equals_gguf(kind):
    x = nasty((16, 128), 9)
    ref = dequantize(reference(x, kind), getattr(GGMLQuantizationType, kind.upper()))
    assert np.array_equal(QUANTIZERS[kind](x).dequantize().numpy(), ref)


@pytest.mark.parametrize("kind", KINDS)
def test_storage_is_the_block_size(kind):
    gq = QUANTIZERS[kind](torch.randn(4, 64))
    assert gq.nbytes == 4 * 2 * BLOCK_BYTES[kind]
    assert to_gguf_bytes(gq, kind).numel() == gq.nbytes


def test_codes_of_another_kind_are_refused():
    gq = QUANTIZERS["q4_1"](torch.randn(2, 32))
    with pytest.raises(QuantError, match="not q8_0"):
        to_gguf_bytes(gq, "q8_0")
    with pytest.raises(QuantError, match="kind"):
        quantize_gguf(torch.randn(2, 32), "q5_k")
