"""The tiled loop as a Triton kernel (FlashAttention-2's forward): what `bench attention` times
on CUDA beside torch SDPA's flash backend, where `triton` is installed (CUDA builds of torch
bring it; the app does not need it, the test extra installs it to check the kernel).

One program per (Q tile of `br` rows, head): it keeps the tile's running max m, sum ℓ and
unnormalised output in registers while K/V tiles of `bc` rows stream past (the order and the
update of `tiled.flash_attention`, the reference), skips the K tiles wholly after its last row
under causal masking, and writes O once. Scores and the P·V product accumulate in fp32 whatever
the inputs' dtype. With TRITON_INTERPRET=1 set before the first call, Triton runs the same
kernel on the CPU through numpy (how the tests check it without a GPU).
"""

from __future__ import annotations

import functools
import importlib.util

import torch

from inferlab.engines.attention.step import as_heads

TRITON_BR, TRITON_BC = 64, 64
"""Tiles of 64 query and 64 key rows: FlashAttention-2's forward tile for head dims up to 128
(its Q tile and accumulators, and a K/V tile, fit one SM's registers and shared memory)."""
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""What the kernel takes (scores and P·V accumulate in fp32 for all three)."""


def triton_available() -> bool:
    """Whether `triton` is importable here (without importing it)."""
    return importlib.util.find_spec("triton") is not None


@functools.cache
def _kernel():
    # here, not at the top: optional (CUDA torch brings it), and TRITON_INTERPRET is read when
    # the kernel is defined
    import triton
    import triton.language as tl

    @triton.jit
    def flash_forward(q_ptr, k_ptr, v_ptr, o_ptr, n, d, scale,
                      CAUSAL: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                      BD: tl.constexpr):
        tile, head = tl.program_id(0), tl.program_id(1)
        base = head * n * d
        rows = tile * BR + tl.arange(0, BR)
        cols_d = tl.arange(0, BD)
        row_ok = rows < n
        d_ok = cols_d < d
        q = tl.load(q_ptr + base + rows[:, None] * d + cols_d[None, :],
                    mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        m = tl.full((BR,), float("-inf"), tl.float32)
        ell = tl.zeros((BR,), tl.float32)
        acc = tl.zeros((BR, BD), tl.float32)
        end = tl.minimum(n, (tile + 1) * BR) if CAUSAL else n
        for start in range(0, end, BC):
            keys = start + tl.arange(0, BC)
            key_ok = keys < n
            kv_mask = key_ok[:, None] & d_ok[None, :]
            k = tl.load(k_ptr + base + keys[:, None] * d + cols_d[None, :], mask=kv_mask,
                        other=0.0)
            v = tl.load(v_ptr + base + keys[:, None] * d + cols_d[None, :], mask=kv_mask,
                        other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            visible = key_ok[None, :]
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None])
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m - m_new)  # 0 on the first tile (m = -inf)
            ell = alpha * ell + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / ell[:, None]
        tl.store(o_ptr + base + rows[:, None] * d + cols_d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])

    return triton, flash_forward


def triton_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           causal: bool = False, br: int = TRITON_BR, bc: int = TRITON_BC
                           ) -> torch.Tensor:
    """O [H, N, d] in q's dtype; q, k, v [N, d] or [H, N, d] of one shape, dtype and device.
    `br`, `bc`: powers of two of at least 16 (Triton's tile shapes and `tl.dot`'s minimum).
    ImportError without triton."""
    if not triton_available():
        raise ImportError("triton is not installed (CUDA builds of torch bring it)")
    q, k, v = (as_heads(x, name, DTYPES).contiguous()
               for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if not (q.shape == k.shape == v.shape) or len({x.dtype for x in (q, k, v)}) > 1:
        raise ValueError("q, k, v must be one shape and dtype, got "
                         + ", ".join(f"{tuple(x.shape)} {x.dtype}" for x in (q, k, v)))
    for name, size in (("Br", br), ("Bc", bc)):
        if size < 16 or size & (size - 1):
            raise ValueError(f"{name} must be a power of two of at least 16, got {size}")
    triton, kernel = _kernel()
    h, n, d = q.shape
    out = torch.empty_like(q)
    block_d = max(16, triton.next_power_of_2(d))
    kernel[(triton.cdiv(n, br), h)](q, k, v, out, n, d, d ** -0.5, CAUSAL=bool(causal), BR=br,
                                    BC=bc, BD=block_d)
    return out
