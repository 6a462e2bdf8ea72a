"""The skinny matrix-product kernel against torch, on every instruction set this CPU runs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines import kernels
from inferlab.engines.kernels import library as native
from inferlab.engines.kernels.skinny import (
    MAX_SKINNY_ROWS,
    BoundSkinny,
    max_rows,
    skinny_linear,
)
from inferlab.engines.model.linear import Linear, onednn_available
from tests.engines.kernels.conftest import runnable_isas
from tests.engines.kernels.tolerance import dot_err


def _reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x · wᵀ in float64 from the very values the kernel reads (bf16 widens exactly)."""
    return (x.double() @ w.double().t()).float()


def _rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def test_the_host_builds_its_best_isa():
    lib = native.library()
    assert lib is not None, native.BUILD_ERROR
    assert lib.isa == native.isa_for_flags(native.host_flags())
    assert lib.vlen == {"avx512": 16, "avx2": 8, "portable": 4}[lib.isa]


def test_isa_choice_by_flags():
    assert native.isa_for_flags(frozenset()) == "portable"
    assert native.isa_for_flags(frozenset({"avx2", "fma", "f16c"})) == "avx2"
    assert native.isa_for_flags(frozenset({"avx2", "fma"})) == "portable"  # no f16c
    avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "f16c"}
    assert native.isa_for_flags(frozenset(avx512)) == "avx512"
    assert native.isa_for_flags(frozenset(avx512 - {"avx512vl"})) == "avx2"


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, MAX_SKINNY_ROWS), k=st.integers(1, 200), n=st.integers(1, 70),
       bf16=st.booleans(), seed=st.integers(0, 2**16))
def test_fp32_and_bf16_weights_match_torch(build, m, k, n, bf16, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen)
    if bf16:
        w = w.to(torch.bfloat16)
    y = skinny_linear(x, w, lib=build)
    if bf16 and m > max_rows(torch.bfloat16):
        assert y is None  # torch runs these
        return
    assert y is not None and y.shape == (m, n) and y.dtype == torch.float32
    assert dot_err(y, x, w) < 5e-5


def test_smollm2_shapes_every_row_count(build):
    gen = torch.Generator().manual_seed(0)
    for n, k in ((960, 576), (576, 1536), (3072, 576)):
        w = torch.randn(n, k, generator=gen)
        for m in (1, 2, 3, 4, 5, 8, 9, 16):
            x = torch.randn(m, k, generator=gen)
            assert _rel_err(skinny_linear(x, w, lib=build), _reference(x, w)) < 1e-5


def test_every_build_agrees():
    isas = runnable_isas()
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(5, 131, generator=gen), torch.randn(37, 131, generator=gen)
    outs = [skinny_linear(x, w, lib=native.build(isa)) for isa in isas]
    for y in outs[1:]:
        assert _rel_err(y, outs[0]) < 1e-6


def test_out_of_range_is_left_to_torch():
    w = torch.randn(8, 16)
    assert skinny_linear(torch.randn(MAX_SKINNY_ROWS + 1, 16), w) is None
    assert skinny_linear(torch.randn(0, 16), w) is None
    assert skinny_linear(torch.randn(2, 16), w.half()) is None
    assert skinny_linear(torch.randn(2, 8), w.t()) is None  # not contiguous


def test_batch_dims_and_bf16_activations_keep_their_shape_and_dtype():
    w = torch.randn(12, 32)
    x = torch.randn(2, 3, 32)
    y = skinny_linear(x, w)
    assert y.shape == (2, 3, 12)
    assert _rel_err(y, _reference(x.reshape(6, 32), w).view(2, 3, 12)) < 1e-5
    yb = skinny_linear(x[0, :1].to(torch.bfloat16), w.to(torch.bfloat16))
    assert yb.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_linear_equals_the_torch_layouts(dtype):
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(300, 96, generator=gen).to(dtype)
    fast = Linear(w, kernels="native")
    ref = Linear(w, kernels="torch")
    assert fast.layout == "native" and ref.layout != "native"
    assert torch.equal(fast.weight, w)
    for m in (1, 2, 5, 40, 300):
        x = torch.randn(m, 96, generator=gen).to(dtype)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        assert _rel_err(fast(x).float(), ref(x).float()) < tol


def test_native_fp32_linear_holds_only_panels_and_takes_every_row_count():
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(70, 48, generator=gen)
    layer = Linear(w, kernels="native")
    assert layer._weight is None and layer._packed.dim() == 3  # no second copy held
    assert torch.equal(layer.weight, w) and layer.nbytes == 70 * 48 * 4
    for shape in ((1, 48), (5, 48), (17, 48), (3, 40, 48), (257, 48), (0, 48)):
        x = torch.randn(*shape, generator=gen)
        y = layer(x)
        assert y.shape == (*shape[:-1], 70)
        if x.numel():
            assert _rel_err(y.reshape(-1, 70), _reference(x.reshape(-1, 48), w)) < 1e-5
    with pytest.raises(ValueError, match="width 47"):
        layer(torch.randn(2, 47))


def test_native_bf16_linear_packs_for_onednn_only_past_its_skinny_rows():
    gen = torch.Generator().manual_seed(6)
    w = torch.randn(70, 48, generator=gen).to(torch.bfloat16)
    layer = Linear(w, kernels="native")
    rows = max_rows(torch.bfloat16)
    for m in range(1, rows + 1):  # a decode step: the kernel, and no second copy held
        x = torch.randn(m, 48, generator=gen).to(torch.bfloat16)
        assert _rel_err(layer(x).float(), _reference(x, w)) < 2e-2
    assert layer._onednn is None
    x = torch.randn(rows + 1, 48, generator=gen).to(torch.bfloat16)
    assert _rel_err(layer(x).float(), _reference(x, w)) < 2e-2
    assert (layer._onednn is not None) == onednn_available(torch.bfloat16)


def test_the_choice_is_explicit_and_checked(monkeypatch):
    """A path named is that path; "auto" and None are the process default (the environment's,
    or the command line's once it set one); anything else is refused by name."""
    assert kernels.resolve("torch") == "torch" and kernels.resolve("native") == "native"
    monkeypatch.setattr(kernels, "_default", None)
    monkeypatch.setenv("INFERLAB_KERNELS", "torch")
    assert kernels.resolve("auto") == kernels.resolve(None) == "torch"
    monkeypatch.delenv("INFERLAB_KERNELS")
    assert kernels.default_path() == "native"
    kernels.set_default_path("torch")
    assert kernels.resolve("auto") == "torch" and kernels.resolve("native") == "native"
    with pytest.raises(ValueError, match="native, torch"):
        kernels.set_default_path("cuda")
    with pytest.raises(ValueError, match="native, torch"):
        Linear(torch.randn(4, 4), kernels="cuda")
    assert not hasattr(kernels, "use") and not hasattr(kernels, "chosen")  # no switch to flip


def test_described_for_benches():
    d = kernels.describe()
    assert d["kernels"] in kernels.KERNEL_PATHS
    assert d["native_isa"] in (*native.ISA_FLAGS, None)
    assert kernels.describe("torch")["native_isa"] is None
    assert kernels.describe("native")["native_isa"] == native.library().isa


def test_no_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(native, "cache_dir", lambda: tmp_path / "cache")
    with pytest.raises(OSError):
        native.build("portable")
    monkeypatch.setattr(native, "_TRIED", False)
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "BUILD_ERROR", None)
    assert native.library() is None and "no-such-cc" in native.BUILD_ERROR
    # and a layer built now takes torch's layout, which still computes
    monkeypatch.setattr("inferlab.engines.model.linear.native_available", lambda: False)
    layer = Linear(torch.randn(6, 4))
    assert layer.layout != "native"
    assert skinny_linear(torch.randn(1, 4), torch.randn(6, 4)) is None


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setattr(native, "_TRIED", False)
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "BUILD_ERROR", None)
    monkeypatch.setenv("INFERLAB_KERNELS", "torch")
    assert native.library() is None
    assert "INFERLAB_KERNELS=torch" in native.BUILD_ERROR


def test_a_bound_weight_takes_what_skinny_linear_takes():
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(37, 131, generator=gen)
    bound = BoundSkinny(w, native.library())
    for x in (torch.randn(3, 131, generator=gen),            # the fast path
              torch.randn(2, 3, 131, generator=gen),         # 3-d: through skinny_linear
              torch.randn(131, 5, generator=gen).t(),        # not contiguous
              torch.randn(4, 131, generator=gen).to(torch.bfloat16)):
        y = bound(x)
        assert y is not None and y.shape == (*x.shape[:-1], 37) and y.dtype == x.dtype
        ref = _reference(x.float().reshape(-1, 131), w).reshape(y.shape)
        assert _rel_err(y.float(), ref) < (1e-2 if x.dtype == torch.bfloat16 else 1e-5)
    assert bound(torch.randn(MAX_SKINNY_ROWS + 1, 131)) is None  # torch takes these
    assert bound(torch.randn(0, 131)) is None
