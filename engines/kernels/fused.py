"""The small ops of a decoder layer on the native library (`fused.c`), fp32 on the CPU:
residual add + RMSNorm, RoPE in place, SwiGLU's silu(gate) * up, and the K/V write into a
paged cache. At decode each is a few kilobytes of work behind several torch calls (dispatch,
allocation, a copy for a transpose or a roll); here each is one call.

`glue()` gives the functions bound to the library, or None where it does not load;
`for_model(path, ...)` the same for a model on kernel path `path`, or None where the model's
torch ops run (another path, device or dtype). Each checks what it is given and raises
ValueError rather than read out of bounds. `Glue.kv_writer` writes a step's K/V into any store
a cache's `native_view()` describes (fp32, INT8 or FP8 E4M3 codes).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from inferlab.engines.kernels.kv_view import NativeKV
from inferlab.engines.kernels.library import F32, I64, NativeLibrary, P, library

_WRITE_CODES = [P, P, I64, P, P, P, P, P, I64, I64, I64, I64]
"""(k, v, row stride, slots, K codes, V codes, K scales, V scales, T, Hkv, D, n_slots)."""
SIGNATURES = {
    "il_add_rms_norm": ([P, P, P, P, I64, I64, F32], None),
    "il_rope": ([P, P, P, I64, I64, I64, I64], None),
    "il_silu_mul": ([P, P, I64, I64], None),
    "il_write_kv": ([P, P, I64, P, P, P, I64, I64, I64, I64], None),
    "il_write_kv_i8": (_WRITE_CODES, None),
    "il_write_kv_fp8": (_WRITE_CODES, None),
}

MAX_D_HEAD = 512
"""`il_rope` rotates a head through a stack buffer of this many floats."""


def _fp32_rows(*tensors: torch.Tensor) -> None:
    for t in tensors:
        if t.dtype != torch.float32 or t.device.type != "cpu" or t.stride(-1) != 1:
            raise ValueError(f"need fp32 CPU rows with unit stride, got {t.dtype} "
                             f"{t.device} stride {t.stride()}")


class Glue:
    """The fused ops of one library build."""

    def __init__(self, lib: NativeLibrary) -> None:
        self.native = lib
        self.lib = lib.functions("fused", SIGNATURES)

    def add_rms_norm(self, x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
                     eps: float, out: torch.Tensor) -> torch.Tensor:
        """x += residual (in place, when given); out = rms_norm(x) * weight. x, residual and
        out [T, D] contiguous, weight [D]."""
        _fp32_rows(x, weight, out, *(() if residual is None else (residual,)))
        t, d = x.shape
        if not (x.is_contiguous() and out.is_contiguous() and out.shape == x.shape
                and weight.shape == (d,) and (residual is None or (
                    residual.is_contiguous() and residual.shape == x.shape))):
            raise ValueError("add_rms_norm: x, residual and out must be contiguous [T, D]")
        self.lib.il_add_rms_norm(x.data_ptr(), 0 if residual is None else residual.data_ptr(),
                                 weight.data_ptr(), out.data_ptr(), t, d, eps)
        return out

    def rope(self, rows: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor,
             n_heads: int, d_head: int) -> None:
        """Rotate the first `n_heads` heads of each row of `rows` [T, width] in place by the
        tables at each row's position (`RopeTables.at`: [T, 1, d_head] each)."""
        _fp32_rows(rows, cos, sin_signed)
        t = rows.shape[0]
        if (d_head % 2 or d_head > MAX_D_HEAD or n_heads * d_head > rows.shape[1]
                or cos.numel() != t * d_head or sin_signed.numel() != t * d_head
                or not cos.is_contiguous() or not sin_signed.is_contiguous()):
            raise ValueError(f"rope: {n_heads} heads of {d_head} on rows {tuple(rows.shape)}")
        self.lib.il_rope(rows.data_ptr(), cos.data_ptr(), sin_signed.data_ptr(), t, n_heads,
                         d_head, rows.stride(0))

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """[T, 2F] (gate, then up) -> silu(gate) * up [T, F]."""
        _fp32_rows(gate_up)
        if not gate_up.is_contiguous() or gate_up.shape[1] % 2:
            raise ValueError(f"silu_mul: need contiguous [T, 2F], got {tuple(gate_up.shape)}")
        t, f = gate_up.shape[0], gate_up.shape[1] // 2
        out = torch.empty(t, f)
        self.lib.il_silu_mul(gate_up.data_ptr(), out.data_ptr(), t, f)
        return out

    @staticmethod
    def checked_slots(slots: torch.Tensor, n_slots: int) -> torch.Tensor:
        """`slots` as contiguous int64 on the CPU, each checked to lie in 0..n_slots-1 (once
        per step; `write_kv` then trusts them for every layer)."""
        slots = slots.to(device="cpu", dtype=torch.int64).contiguous()
        if slots.numel() and not (0 <= int(slots.min()) and int(slots.max()) < n_slots):
            raise ValueError(f"write_kv: a slot outside 0..{n_slots - 1}")
        return slots

    def write_kv(self, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor,
                 k_store: torch.Tensor, v_store: torch.Tensor) -> None:
        """k, v [T, Hkv, D] (rows of one stride, heads packed) into stores [Hkv, n_slots, D]
        at `slots` [T], from `checked_slots`."""
        _fp32_rows(k, v, k_store, v_store)
        t, hkv, d = k.shape
        n_slots = k_store.shape[1]
        if (v.shape != k.shape or k.stride() != v.stride() or k.stride(1) != d
                or k_store.shape != (hkv, n_slots, d) or v_store.shape != k_store.shape
                or not (k_store.is_contiguous() and v_store.is_contiguous())
                or slots.dtype != torch.int64 or slots.shape != (t,)
                or not slots.is_contiguous()):
            raise ValueError("write_kv: shapes, strides or slot dtype do not fit the store")
        self.lib.il_write_kv(k.data_ptr(), v.data_ptr(), k.stride(0), slots.data_ptr(),
                             k_store.data_ptr(), v_store.data_ptr(), t, hkv, d, n_slots)

    def write_kv_i8(self, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor,
                    codes: tuple[torch.Tensor, torch.Tensor],
                    scales: tuple[torch.Tensor, torch.Tensor]) -> None:
        """As `write_kv` into an INT8 cache: `codes` int8 [Hkv, n_slots, D] each (K, V),
        `scales` fp32 [Hkv, n_slots] each; quantized per token and head as the cache's own
        `quantize` does (max|x| / 127, round half to even)."""
        self._write_codes(self.lib.il_write_kv_i8, torch.int8, k, v, slots, codes, scales)

    def write_kv_fp8(self, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor,
                     codes: tuple[torch.Tensor, torch.Tensor],
                     scales: tuple[torch.Tensor, torch.Tensor]) -> None:
        """As `write_kv_i8` into an FP8 E4M3 cache (max|x| / 448, x / s rounded to E4M3 half
        to even: the codes torch's own conversion gives, bit for bit)."""
        self._write_codes(self.lib.il_write_kv_fp8, torch.float8_e4m3fn, k, v, slots, codes,
                          scales)

    @staticmethod
    def _write_codes(fn, code_dtype: torch.dtype, k, v, slots, codes, scales) -> None:
        _fp32_rows(k, v, *scales)
        t, hkv, d = k.shape
        n_slots = codes[0].shape[1]
        if (v.shape != k.shape or k.stride() != v.stride() or k.stride(1) != d
                or any(c.dtype != code_dtype or c.shape != (hkv, n_slots, d)
                       or not c.is_contiguous() for c in codes)
                or any(s.shape != (hkv, n_slots) or not s.is_contiguous() for s in scales)
                or slots.dtype != torch.int64 or slots.shape != (t,)):
            raise ValueError(f"write_kv ({code_dtype}): shapes, strides or dtypes do not fit "
                             "the store")
        fn(k.data_ptr(), v.data_ptr(), k.stride(0), slots.data_ptr(), codes[0].data_ptr(),
           codes[1].data_ptr(), scales[0].data_ptr(), scales[1].data_ptr(), t, hkv, d, n_slots)


    def kv_writer(self, view: NativeKV | None, slots: torch.Tensor
                  ) -> Callable[[int, torch.Tensor, torch.Tensor], None] | None:
        """`write(layer, k, v)` of a step's K/V at `slots` into the store `view` describes (the
        slots checked once for the whole step), or None where that store is not one these ops
        write (no view, or not on the CPU): the cache's own `write` runs."""
        if view is None or view.device.type != "cpu":
            return None
        slots64 = self.checked_slots(slots, view.n_slots)
        if view.kind == "f32":
            return lambda layer, k, v: self.write_kv(k, v, slots64, *view.slot_stores(layer))
        write = self.write_kv_i8 if view.kind == "int8" else self.write_kv_fp8
        return lambda layer, k, v: write(k, v, slots64, view.slot_stores(layer),
                                         view.scale_stores(layer))


def glue(lib: NativeLibrary | None = None) -> Glue | None:
    """The fused ops on `lib` (default: this CPU's build), or None where none loads."""
    lib = lib or library()
    return None if lib is None else Glue(lib)


def for_model(path: str, device: torch.device, dtype: torch.dtype, d_head: int) -> Glue | None:
    """The fused ops for a model built on kernel path `path`: where it is "native" and the
    model computes in fp32 on the CPU with heads RoPE takes (else None: torch's ops run)."""
    if path != "native" or device.type != "cpu" or dtype != torch.float32 or \
            d_head > MAX_D_HEAD:
        return None
    return glue()
