"""The panel matrix-product kernel (fp32 weights packed k-major) against float64, on every
instruction set this CPU runs: ragged panels, tile tails, row blocks, threads."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kernels import panel
from tests.engines.kernels.tolerance import dot_err


def _product(build, x: torch.Tensor, w: torch.Tensor, threads: int = 1) -> torch.Tensor:
    panels = panel.pack(w, build)
    y = torch.full((x.shape[0], w.shape[0]), float("nan"))
    panel.functions(build).il_panel_f32(x.data_ptr(), panels.data_ptr(), y.data_ptr(),
                                        x.shape[0], w.shape[1], w.shape[0], threads)
    return y


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 160), n=st.integers(1, 80),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_matches_float64_on_any_shape(build, m, k, n, threads, seed):
    gen = torch.Generator().manual_seed(seed)
    x, w = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    y = _product(build, x, w, threads)
    assert not y.isnan().any()  # every output written, none past N
    assert dot_err(y, x, w) < 5e-5


def test_more_rows_than_a_block_and_smollm2_shapes(build):
    gen = torch.Generator().manual_seed(0)
    for m, n, k in ((97, 960, 576), (200, 33, 1536), (6, 576, 1536), (1, 3072, 576)):
        x, w = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
        assert dot_err(_product(build, x, w, 2), x, w) < 5e-5


def test_pack_round_trips_and_pads_with_zeros(build):
    w = torch.arange(5 * 7, dtype=torch.float32).view(5, 7)
    panels = panel.pack(w, build)
    width = panel.width(build)
    assert width == 2 * build.vlen and panels.shape == (1, 7, width)
    assert torch.equal(panels[0, :, :5], w.t()) and not panels[0, :, 5:].any()
    assert torch.equal(panel.unpack(panels, 5), w)


def test_the_output_rows_do_not_depend_on_the_batch(build):
    """A row's product is the same alone or among 37 others (one tile order per row)."""
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(37, 64, generator=gen), torch.randn(50, 64, generator=gen)
    together = _product(build, x, w, 2)
    for i in (0, 6, 36):
        assert torch.equal(_product(build, x[i:i + 1].contiguous(), w), together[i:i + 1])
