"""The Triton kernel (engines/attention/triton_flash.py). Without a GPU it runs under Triton's
interpreter (TRITON_INTERPRET=1, numpy on the CPU), in a subprocess of its own because the flag
is read when Triton defines its language: its output equals torch SDPA and the one-shot tiled
loop (fp32 within 1e-5, fp16 inputs within 5e-3) on ragged, causal and padded-head shapes.
bf16 runs on CUDA only: the interpreter's tl.dot gives garbage for bf16 (numpy has no bf16).
The test extra installs Triton on Linux x86-64 (CUDA builds of torch bring their own);
elsewhere the kernel's tests skip, saying so. The checks of its arguments and of the bench's
contenders run everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from inferlab.engines.attention import triton_flash
from inferlab.engines.attention.triton_flash import triton_available, triton_flash_attention
from inferlab.engines.labs.attention import bench

needs_triton = pytest.mark.skipif(not triton_available(),
                                  reason="triton is not installed (CUDA builds of torch bring it)")

# (heads, N, d, Br, Bc): ragged last tiles, d below and between powers of two, one row
SHAPES = [(2, 100, 40, 32, 16), (1, 77, 16, 16, 32), (3, 64, 64, 64, 64), (1, 5, 8, 16, 16),
          (2, 130, 24, 16, 64), (1, 1, 16, 16, 16)]

_CHECK = r"""
import json, sys
import torch
from inferlab.engines.attention.tiled import flash_attention
from inferlab.engines.attention.triton_flash import triton_flash_attention
errors = []
for h, n, d, br, bc in json.loads(sys.argv[1]):
    for causal, dtype in ((False, torch.float32), (True, torch.float32), (True, torch.float16)):
        g = torch.Generator().manual_seed(n * 7 + d)
        q, k, v = (torch.randn(h, n, d, generator=g) for _ in range(3))
        out = triton_flash_attention(q.to(dtype), k.to(dtype), v.to(dtype), causal, br, bc)
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        tiled = flash_attention(q, k, v, br, bc, causal)[0]
        errors.append([h, n, d, br, bc, causal, (out.float() - sdpa).abs().max().item(),
                       (out.float() - tiled).abs().max().item(), str(out.dtype),
                       list(out.shape)])
print(json.dumps(errors))
"""


@pytest.mark.slow  # a subprocess: torch and triton imported afresh
@needs_triton
def test_the_kernel_under_the_interpreter_equals_sdpa_and_the_tiled_loop():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(SHAPES)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(rows) == 3 * len(SHAPES)
    for h, n, d, br, bc, causal, vs_sdpa, vs_tiled, dtype, shape in rows:
        case = (h, n, d, br, bc, causal, dtype)
        assert shape == [h, n, d], case
        # fp16 inputs: rounded to 11 bits before the fp32 accumulation
        atol = 1e-5 if dtype == "torch.float32" else 5e-3
        assert vs_sdpa <= atol and vs_tiled <= atol, (case, vs_sdpa, vs_tiled)
    assert {row[8] for row in rows} == {"torch.float32", "torch.float16"}


@pytest.mark.parametrize("br, bc", [(8, 64), (64, 48), (0, 16), (16, 100)])
def test_tiles_that_are_not_powers_of_two_of_16_or_more_are_refused(monkeypatch, br, bc):
    monkeypatch.setattr(triton_flash, "triton_available", lambda: True)
    q = torch.zeros(1, 8, 16)
    with pytest.raises(ValueError, match="power of two of at least 16"):
        triton_flash_attention(q, q, q, False, br, bc)


def test_mismatched_inputs_are_refused(monkeypatch):
    monkeypatch.setattr(triton_flash, "triton_available", lambda: True)
    with pytest.raises(ValueError, match="one shape and dtype"):
        triton_flash_attention(torch.zeros(8, 16), torch.zeros(8, 16), torch.zeros(9, 16))
    with pytest.raises(ValueError, match="one shape and dtype"):
        triton_flash_attention(torch.zeros(8, 16), torch.zeros(8, 16),
                               torch.zeros(8, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="v: expected float32 or float16 or bfloat16"):
        triton_flash_attention(torch.zeros(8, 16), torch.zeros(8, 16),
                               torch.zeros(8, 16, dtype=torch.float64))


def test_without_triton_it_says_so(monkeypatch):
    monkeypatch.setattr(triton_flash, "triton_available", lambda: False)
    with pytest.raises(ImportError, match="triton is not installed"):
        triton_flash_attention(torch.zeros(8, 16), torch.zeros(8, 16), torch.zeros(8, 16))


@pytest.mark.parametrize("installed", [False, True])
def test_the_cuda_bench_times_the_triton_kernel_where_triton_is_installed(monkeypatch,
                                                                         installed):
    monkeypatch.setattr(bench, "triton_available", lambda: installed)
    assert ("triton_flash_bf16" in bench.tiled_kernels("cuda:0")) == installed
    assert "triton_flash_bf16" not in bench.tiled_kernels("cpu")


@pytest.mark.gpu
@needs_triton
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-2), (torch.bfloat16, 3e-2)])
def test_the_kernel_on_cuda_equals_sdpa(dtype, atol):
    """fp32 inputs go through tl.dot's tf32 on the tensor cores: 1e-2, not the CPU's 1e-5."""
    for h, n, d, br, bc in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.randn(h, n, d, device="cuda") for _ in range(3))
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out = triton_flash_attention(q.to(dtype), k.to(dtype), v.to(dtype), causal, br, bc)
            assert out.dtype == dtype
            torch.testing.assert_close(out.float(), ref, rtol=0, atol=atol)
