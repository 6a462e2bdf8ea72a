"""The native tiled kernel (engines/kernels/flash_attention.c) on every build this CPU runs:
its output equals torch SDPA (fp32, 1e-5) and its final m, ℓ equal the stepped engine's."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.attention.executions import make_engine
from inferlab.engines.attention.native import native_flash_attention, native_supported
from inferlab.engines.attention.step import TILED
from inferlab.engines.kernels import library as native

pytestmark = pytest.mark.skipif(not native_supported(), reason="no native library here")

SHAPES = [(1, 1, 8, 4, 4), (2, 37, 16, 8, 5), (1, 100, 24, 7, 9), (3, 65, 64, 64, 256),
          (2, 300, 40, 13, 33), (1, 130, 64, 64, 64), (1, 17, 3, 32, 2), (2, 70, 88, 24, 40)]


@pytest.fixture(scope="module", params=[isa for isa, needs in native.ISA_NEEDS.items()
                                        if needs <= native.host_flags()])
def build(request):
    return native.build(request.param)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_native_equals_sdpa_and_the_stepped_engine(build, shape, causal):
    h, n, d, br, bc = shape
    g = torch.Generator().manual_seed(n + d)
    q, k, v = (torch.randn(h, n, d, generator=g) for _ in range(3))
    out, m, ell = native_flash_attention(q, k, v, causal, br, bc, with_stats=True, lib=build)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
    engine = make_engine(TILED, q, k, v, br, bc, causal)
    engine.run()
    torch.testing.assert_close(out, engine.output, rtol=0, atol=1e-5)
    torch.testing.assert_close(m, engine.m, rtol=0, atol=1e-5)
    torch.testing.assert_close(ell, engine.ell, rtol=1e-5, atol=1e-5)


def test_native_refuses_what_it_cannot_run():
    q = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="tile sizes"):
        native_flash_attention(q, q, q, br=0)
    with pytest.raises(ValueError, match="one shape"):
        native_flash_attention(q, q[:2], q)
