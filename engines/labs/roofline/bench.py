"""`inferlab bench roofline`: are the measured roofs right? InferLab's figures against plain
torch loops, side by side."""

from __future__ import annotations

import statistics
import time

import torch

from inferlab.engines.dtypes import torch_dtype
from inferlab.engines.hardware.microbench import measure_roofs


def plain_matmul_flops(device: str, dtype: str, sizes=None, repeats: int = 5) -> float:
    """Best FLOP/s of a bare `a @ b` over a few sizes, timed with perf_counter (reference).

    GPUs get large sizes: at n ≤ 3072 launch and sync overheads hide an H100-class peak."""
    dev = torch.device(device)
    if sizes is None:
        sizes = (4096, 8192) if dev.type == "cuda" else (1024, 2048, 3072)
    best = 0.0
    for n in sizes:
        a = torch.randn(n, n, device=dev).to(torch_dtype(dtype))
        b = torch.randn(n, n, device=dev).to(torch_dtype(dtype))
        times = []
        for i in range(repeats + 2):
            _sync(dev)
            t0 = time.perf_counter()
            a @ b
            _sync(dev)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        best = max(best, 2 * n**3 / statistics.median(times))
    return best


def plain_copy_bandwidth(device: str, nbytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Best bytes/s of `y.copy_(x)` (read + write counted) into a preallocated buffer."""
    dev = torch.device(device)
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    times = []
    for i in range(repeats + 2):
        _sync(dev)
        t0 = time.perf_counter()
        y.copy_(x)
        _sync(dev)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return 2 * nbytes / min(times)


def _sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_roofline_bench(device: str = "cpu", rounds: int = 3) -> dict:
    """InferLab's roofs and the plain figures, interleaved over `rounds` (each side keeps its
    best round, so load from other processes hurts both alike); ratios near 1 are right."""
    ours: dict[str, float] = {}
    plain: dict[str, float] = {}
    for _ in range(rounds):
        roofs = measure_roofs(device)
        figures = {"bandwidth_bytes_per_s": roofs.bw_bytes_per_s} | {
            f"peak_flops_{k}": v for k, v in roofs.peak_flops.items()}
        references = {"bandwidth_bytes_per_s": plain_copy_bandwidth(device)} | {
            f"peak_flops_{k}": plain_matmul_flops(device, k) for k in roofs.peak_flops}
        for key in figures:
            ours[key] = max(ours.get(key, 0.0), figures[key])
            plain[key] = max(plain.get(key, 0.0), references[key])
    out = {"device": device, "rounds": rounds}
    for key in ours:
        out[f"inferlab_{key}"] = ours[key]
        out[f"plain_{key}"] = plain[key]
        out[f"ratio_{key}"] = ours[key] / plain[key]
    return out
