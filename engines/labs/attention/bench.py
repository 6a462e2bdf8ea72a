"""`inferlab bench attention --json`: the three executions' counted bytes against their closed
forms, and real timings on this device at growing N.

    counted_vs_closed_form_bytes   Σ counted bytes / Σ closed-form bytes over the three
                                   stepped executions on several shapes (1 exactly)
    tiled_vs_naive_time_4096       the tiled kernel's time / naive torch's at N = 4096 (and
    tiled_vs_naive_time_8192       8192), d = 64, one head, one thread (BENCH_THREADS),
                                   measured in the same run (`*_threads_N`: on all N of
                                   torch's threads); the tiled kernel is the native C loop
                                   where the library has it, else the one-shot torch loop
                                   (`tiled_kernel` says)
    sdpa_vs_naive_time_*           torch SDPA's time / naive torch's at the same N
    timings                        per N (256 … 16384): naive_s, sdpa_s, tiled_torch_s,
                                   tiled_native_s, naive's S + P bytes; naive is skipped
                                   ("out of memory") where S and P would not fit in the RAM
                                   free now
    timings_cuda, cuda_flash_*     where torch sees a GPU: the same on cuda:0 with torch
                                   SDPA's flash backend (bf16) for the tiled kernel, naive
                                   "out of memory" where its allocation fails
    cuda_triton_*                  there, where triton is installed: the Triton kernel
                                   (engines/attention/triton_flash.py) on the same bf16
                                   copies, its time / naive torch's
"""

from __future__ import annotations

import psutil
import torch

from inferlab.engines import kernels as native_kernels
from inferlab.engines.attention.executions import closed_form, make_engine
from inferlab.engines.attention.naive import naive_attention
from inferlab.engines.attention.native import native_flash_attention, native_supported
from inferlab.engines.attention.step import EXECUTIONS
from inferlab.engines.attention.tiled import flash_attention
from inferlab.engines.attention.triton_flash import triton_available, triton_flash_attention
from inferlab.engines.hardware.timing import median_call_s

BENCH_NS = (256, 512, 1024, 2048, 4096, 8192, 16384)
BENCH_D = 64
TORCH_TILE = 512
"""Br = Bc of the one-shot torch loop: its tiles' products are large enough for torch's
matmul to run near peak, and the 512×512 score tile (1 MiB) sits in a core's L2."""
BENCH_THREADS = 1
"""The headline figures run on one thread: this project's machines have 2 cores shared with
other work, and with 2 threads while a neighbour held a core every call below N = 4096
measured a ~48 ms floor (the second OpenMP thread waiting for a core), whatever the
implementation. The ratios at all of torch's threads are measured too (`*_threads_N`)."""
COUNT_SHAPES = ((512, 64, 64, 64, False), (500, 48, 37, 29, True), (257, 16, 128, 8, True))


def counted_vs_closed_form() -> float:
    counted = closed = 0
    for n, d, br, bc, causal in COUNT_SHAPES:
        q, k, v = (torch.randn(2, n, d) for _ in range(3))
        for execution in EXECUTIONS:
            engine = make_engine(execution, q, k, v, br, bc, causal)
            engine.run()
            form = closed_form(execution, n, d, br, bc, causal, 4, 2)
            counted += engine.bytes_read + engine.bytes_written
            closed += form.bytes_moved
    return counted / closed


def tiled_kernels(device: str = "cpu") -> dict:
    """name -> fn(q, k, v, causal) of every tiled implementation that runs on `device`: the
    one-shot torch loop everywhere, the native C loop on the CPU, torch SDPA's flash backend
    (bf16: it takes no fp32) on CUDA, and there the Triton kernel on the same bf16 copies
    where triton is installed."""
    found = {"tiled_torch": lambda q, k, v, c: flash_attention(q, k, v, TORCH_TILE, TORCH_TILE,
                                                               c)[0]}
    if device.startswith("cuda"):
        found["sdpa_flash_bf16"] = sdpa_flash_bf16
        if triton_available():
            found["triton_flash_bf16"] = triton_flash_bf16
        return found
    if native_supported():
        found["tiled_native"] = lambda q, k, v, c: native_flash_attention(q, k, v, c)
    return found


def sdpa_flash_bf16(q, k, v, causal: bool):
    """torch SDPA restricted to its FlashAttention backend, on bf16 copies of q, k, v."""
    # here, not at the top: torch.nn.attention came with torch 2.3 (we accept 2.2), and only
    # this CUDA contender needs it
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def triton_flash_bf16(q, k, v, causal: bool):
    """The Triton kernel (engines.attention.triton_flash) on bf16 copies of q, k, v."""
    return triton_flash_attention(*(x.to(torch.bfloat16) for x in (q, k, v)), causal)


def timings(ns=BENCH_NS, d: int = BENCH_D, causal: bool = False, repeats: int = 3,
            progress=None, threads: int = BENCH_THREADS, device: str = "cpu") -> list[dict]:
    """Seconds per call of each implementation at each N (one head, fp32 unless named, on
    `device`), on `threads` torch threads (the native kernel is given the same count). Naive
    attention is skipped ("out of memory") where S and P would not fit in the free RAM (CPU),
    or where allocating them fails (CUDA)."""
    kernels = tiled_kernels(device)
    rows = []
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for i, n in enumerate(ns):
            if progress is not None:  # the window's progress takes a fraction
                progress(i / len(ns), f"timing N = {n} on {device}")
            fits = device != "cpu" or 2 * n * n * 4 * 1.5 < psutil.virtual_memory().available
            rows.append(_time_row(n, d, causal, repeats, kernels, fits, torch.device(device)))
    finally:
        torch.set_num_threads(before)
    return rows


def _time_row(n: int, d: int, causal: bool, repeats: int, kernels: dict, naive_fits: bool,
              device: torch.device):
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (torch.randn(1, n, d, device=device) for _ in range(3))
    row = {"n": n, "naive_sp_bytes": 2 * n * n * 4}  # S and P, live together at the softmax
    row["naive_s"] = None
    if naive_fits:
        try:
            row["naive_s"] = median_call_s(lambda: naive_attention(q, k, v, causal), device,
                                           repeats, 1)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
    if row["naive_s"] is None:
        row["naive_error"] = "out of memory"
    row["sdpa_s"] = median_call_s(lambda: sdpa(q, k, v, is_causal=causal), device, repeats, 1)
    for name, fn in kernels.items():
        row[f"{name}_s"] = median_call_s(lambda fn=fn: fn(q, k, v, causal), device, repeats, 1)
    return row


def run_attention_bench(progress=None) -> dict:
    rows = timings(progress=progress)
    cuda = timings(progress=progress, device="cuda:0") if torch.cuda.is_available() else []
    all_threads = torch.get_num_threads()
    wide = timings((4096, 8192), progress=progress, threads=all_threads) \
        if all_threads != BENCH_THREADS else []
    names = list(tiled_kernels())
    tiled = "tiled_native" if "tiled_native" in names else "tiled_torch"
    out = {"counted_vs_closed_form_bytes": counted_vs_closed_form(), "tiled_kernel": tiled,
           "threads": BENCH_THREADS,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "native": native_kernels.describe()}
    for row in rows:
        if row["n"] in (4096, 8192) and row.get("naive_s"):
            n = row["n"]
            out[f"tiled_vs_naive_time_{n}"] = row[f"{tiled}_s"] / row["naive_s"]
            out[f"sdpa_vs_naive_time_{n}"] = row["sdpa_s"] / row["naive_s"]
            if tiled != "tiled_torch":
                out[f"tiled_torch_vs_naive_time_{n}"] = row["tiled_torch_s"] / row["naive_s"]
    for row in wide:
        if row.get("naive_s"):
            n = row["n"]
            out[f"tiled_vs_naive_time_{n}_threads_{all_threads}"] = row[f"{tiled}_s"] / row["naive_s"]
            out[f"sdpa_vs_naive_time_{n}_threads_{all_threads}"] = row["sdpa_s"] / row["naive_s"]
    out["timings"] = rows
    out["timings_all_threads"] = wide
    if cuda:  # torch's flash backend against naive torch on the GPU, same run
        out["timings_cuda"] = cuda
        out["cuda_device"] = torch.cuda.get_device_name(0)
        for row in cuda:
            if row["n"] in (4096, 8192) and row.get("naive_s"):
                out[f"cuda_flash_bf16_vs_naive_time_{row['n']}"] = \
                    row["sdpa_flash_bf16_s"] / row["naive_s"]
                if "triton_flash_bf16_s" in row:
                    out[f"cuda_triton_bf16_vs_naive_time_{row['n']}"] = \
                        row["triton_flash_bf16_s"] / row["naive_s"]
    return out
