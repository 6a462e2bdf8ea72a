"""fp32 matrix products on the native library with the weight packed into panels
(`panel.c`): y = x · Wᵀ for any number of rows of x, W [out, in] stored as panels of
`width()` output rows, k-major, zero-padded (`pack`, `unpack` gives W back).

The register tile is an outer product (two weight vectors × six broadcast x values per k),
so past a few rows the product runs near the FMA units' peak while each panel still streams
from memory once. Measured on SmolLM2's shapes, 2 threads, AVX2-only EPYC: 175-195 GFLOP/s
at 24-2,048 rows against oneDNN's packed GEMM at 100-170 and MKL's `F.linear` at 105-185
(lm_head 49152x576: 141-171 against 103-138); 5 rows cost 1.0-1.1x one (the skinny
kernel's 1.2-1.4x); one row about as fast as the skinny kernel (the down projection ~5-10%
slower). So the native layout of an fp32 `Linear` is these panels for every row count.
"""

from __future__ import annotations

import torch

from inferlab.engines.kernels.library import I32, I64, NativeLibrary, P, library

SIGNATURES = {
    "il_panel_width": ([], I32),
    "il_panel_pack_f32": ([P, P, I64, I64], None),
    "il_panel_f32": ([P, P, P, I64, I64, I64, I32], None),
}


def functions(lib: NativeLibrary):
    """This family's C functions on `lib`, declared."""
    return lib.functions("panel", SIGNATURES)


def width(lib: NativeLibrary | None = None) -> int:
    """Output rows per panel of this build (2 vectors: 16 on AVX2, 32 on AVX-512)."""
    return int(functions(lib or library()).il_panel_width())


def pack(weight: torch.Tensor, lib: NativeLibrary | None = None) -> torch.Tensor:
    """W [out, in] (any float dtype, on the CPU) -> its panels, fp32 [n_panels, in, width]."""
    lib = lib or library()
    w = weight.detach().to(device="cpu", dtype=torch.float32).contiguous()
    n, k = w.shape
    np_ = width(lib)
    panels = torch.empty(-(-n // np_), k, np_)
    functions(lib).il_panel_pack_f32(w.data_ptr(), panels.data_ptr(), k, n)
    return panels


def unpack(panels: torch.Tensor, out_features: int) -> torch.Tensor:
    """The [out, in] weight `pack` was given (a new tensor)."""
    n_panels, k, np_ = panels.shape
    return panels.permute(0, 2, 1).reshape(n_panels * np_, k)[:out_features].contiguous()


class BoundPanel:
    """Panels bound to the native kernel once: a call is one ctypes call for a contiguous
    fp32 [M, in] input (other inputs are made so first)."""

    __slots__ = ("panels", "fn", "out_features", "in_features")

    def __init__(self, panels: torch.Tensor, out_features: int, lib: NativeLibrary) -> None:
        self.panels = panels
        self.fn = functions(lib).il_panel_f32
        self.out_features, self.in_features = out_features, panels.shape[1]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> fp32 [..., out]."""
        shape = x.shape
        if shape[-1] != self.in_features:
            raise ValueError(f"input of width {shape[-1]} for a weight of {self.in_features}")
        if not (x.dtype is torch.float32 and x.dim() == 2 and x.is_contiguous()):
            x = x.reshape(-1, self.in_features).to(device="cpu", dtype=torch.float32)
            x = x.contiguous()
        m = x.shape[0]
        y = torch.empty(m, self.out_features)
        if m:
            self.fn(x.data_ptr(), self.panels.data_ptr(), y.data_ptr(), m, self.in_features,
                    self.out_features, torch.get_num_threads())
        return y if len(shape) == 2 else y.view(*shape[:-1], self.out_features)
