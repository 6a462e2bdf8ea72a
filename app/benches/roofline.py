"""Are the measured roofs right? InferLab's figures against plain torch loops, side by side."""

from __future__ import annotations

import statistics
import time


def plain_matmul_flops(device: str, dtype: str, sizes=(1024, 2048, 3072), repeats: int = 5) -> float:
    """Best FLOP/s of a bare `a @ b` over a few sizes, timed with perf_counter (reference)."""
    import torch

    from engines.dtypes import torch_dtype

    dev = torch.device(device)
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
    import torch

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
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_roofline_bench(device: str = "cpu") -> dict:
    """InferLab's roofs and the plain figures measured in one run; ratios near 1 are right."""
    from engines.hardware.microbench import measure_roofs

    roofs = measure_roofs(device)
    out = {"device": device, "bandwidth_bytes_per_s": roofs.bw_bytes_per_s}
    plain_bw = plain_copy_bandwidth(device)
    out["plain_bandwidth_bytes_per_s"] = plain_bw
    out["bandwidth_ratio"] = roofs.bw_bytes_per_s / plain_bw
    for dtype, flops in roofs.peak_flops.items():
        plain = plain_matmul_flops(device, dtype)
        out[f"peak_flops_{dtype}"] = flops
        out[f"plain_peak_flops_{dtype}"] = plain
        out[f"flops_ratio_{dtype}"] = flops / plain
    return out
