"""Real operations timed on a device, for the dots under the roofline.

Two families, both plain `torch.matmul(a, b, out=c)` with FLOPs and bytes from
`engines.roofline.costs.matmul_cost` (flops = 2·m·n·k, bytes = (m·k + k·n + m·n)·bytes(dtype)):

- square n×n×n matmuls: intensity 2n / (3·bpe) grows with n, from memory- to compute-bound;
- skinny M×K by K×N matmuls against one weight: a decode step of a batch of M tokens
  through a K×N layer (M=1 is a GEMV), memory-bound until M nears the ridge point. On the
  CPU each is timed twice where the native kernels run (engines/kernels): torch's matmul and
  the native skinny product on the same weight ("... native kernels"), so both paths of a
  decode step's matrix products sit on the one measured roofline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from inferlab.engines import kernels
from inferlab.engines.dtypes import torch_dtype
from inferlab.engines.fields import shown
from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.hardware.discovery import get_device, torch_device
from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.kernels.skinny import max_rows, skinny_linear
from inferlab.engines.roofline.costs import matmul_cost

POINT_RANGES = {"flops": (1.0, 1e30), "bytes_moved": (1.0, 1e30), "seconds": (1e-12, 1e6)}
"""What a snapshot's measured point may hold: its intensity and FLOP/s stay finite and
positive on the roofline plot's log axes."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One timed operation: its FLOPs and bytes (from the cost model) and seconds per call."""

    name: str
    flops: float
    bytes_moved: float
    seconds: float

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte moved."""
        return self.flops / self.bytes_moved

    def to_dict(self) -> dict:
        """name, flops, bytes_moved, seconds and the two derived figures."""
        return {
            "name": self.name,
            "flops": self.flops,
            "bytes_moved": self.bytes_moved,
            "seconds": self.seconds,
            "achieved_flops_per_s": self.achieved_flops_per_s,
            "intensity": self.intensity,
        }

    @classmethod
    def from_dict(cls, data: dict) -> MeasuredPoint:
        """Inverse of to_dict (derived figures ignored); ValueError naming a bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"measured point must be an object, got {type(data).__name__}")
        if not isinstance(data.get("name"), str):
            raise ValueError("measured point: field 'name' must be a string")
        values = {}
        for name, (low, high) in POINT_RANGES.items():
            value = data.get(name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not low <= value <= high:  # NaN compares False
                raise ValueError(f"measured point: field {name!r} must be a positive number "
                                 f"({low:g} to {high:g}), got {shown(value)}")
            values[name] = float(value)
        return cls(name=data["name"], **values)


@dataclass(frozen=True)
class PointSizes:
    """The operations one `measure_op_points` run times."""

    square_n: tuple[int, ...]
    skinny_m: tuple[int, ...]
    weight_kn: int  # K = N of the skinny matmuls' weight
    repeats: int
    warmup: int


POINT_SIZES = {
    ("cpu", False): PointSizes((256, 512, 1024, 2048), (1, 4, 16, 64), 4096, 5, 2),
    ("cpu", True): PointSizes((64, 128, 256), (1, 4, 16, 64), 1024, 3, 1),
    ("cuda", False): PointSizes((512, 1024, 2048, 4096, 8192), (1, 4, 16, 64, 256), 8192, 5, 2),
    ("cuda", True): PointSizes((256, 512, 1024, 2048), (1, 4, 16, 64), 4096, 3, 1),
}


def point_sizes(kind: str, quick: bool = False) -> PointSizes:
    """The sizes `measure_op_points` uses on a device kind ("cpu" or "cuda")."""
    return POINT_SIZES[(kind if kind == "cuda" else "cpu", bool(quick))]


def measure_op_points(
    device: str = "cpu",
    dtype: str = "fp32",
    quick: bool = False,
    progress: Callable[[float, str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[MeasuredPoint]:
    """Square then skinny matmuls in `dtype` on `device`, each timed (median per call).

    `dtype` must be one of the device's compute dtypes (others run through slow fallbacks).
    `progress(fraction, message)` is called before each operation and with 1.0 at the end;
    `should_stop()` is polled between operations and raises Cancelled.
    """
    info = get_device(device)
    if dtype not in info.compute_dtypes:
        raise ValueError(
            f"{dtype!r} is not a compute dtype of {info.id}; "
            f"available: {', '.join(info.compute_dtypes)}"
        )
    sizes = point_sizes(info.kind, quick)
    kn = sizes.weight_kn
    shapes = [(n, n, n, f"matmul {n}x{n}x{n} {dtype}") for n in sizes.square_n]
    shapes += [(m, kn, kn, f"skinny M={m} K={kn} N={kn} {dtype}") for m in sizes.skinny_m]
    native = info.kind == "cpu" and _native_runs(dtype)
    if native:
        shapes += [(m, kn, kn, f"skinny M={m} K={kn} N={kn} {dtype} {NATIVE_SUFFIX}")
                   for m in sizes.skinny_m if m <= max_rows(torch_dtype(dtype))]
    report = progress or (lambda fraction, message: None)
    points = []
    for done, (m, n, k, name) in enumerate(shapes):
        check_stop(should_stop)
        report(done / len(shapes), f"{name} on {info.id}")
        timer = _time_native if name.endswith(NATIVE_SUFFIX) else _time_matmul
        seconds = timer(info.id, dtype, m, n, k, sizes.repeats, sizes.warmup)
        cost = matmul_cost(m, n, k, dtype)
        points.append(MeasuredPoint(name, cost.flops, cost.bytes_moved, seconds))
    report(1.0, f"{len(points)} operations measured on {info.id}")
    return points


NATIVE_SUFFIX = "native kernels"
"""The end of a point's name timed on the native skinny kernel (the rest: torch.matmul)."""


def _native_runs(dtype: str) -> bool:
    return dtype in ("fp32", "bf16") and kernels.native_available()


def _time_native(device: str, dtype: str, m: int, n: int, k: int, repeats: int, warmup: int):
    """Median seconds of the native skinny product x[m×k] · W[n×k]ᵀ (the layout it reads)."""
    kind = torch_dtype(dtype)
    x = torch.randn(m, k, dtype=torch.float32)
    w = torch.randn(n, k, dtype=kind)
    return median_call_s(lambda: skinny_linear(x, w), torch.device("cpu"), repeats, warmup)


def _time_matmul(device: str, dtype: str, m: int, n: int, k: int, repeats: int, warmup: int):
    """Median seconds of C[m×n] = A[m×k] · B[k×n] with C preallocated."""
    dev = torch_device(device)
    kind = torch_dtype(dtype)
    a = torch.randn(m, k, device=dev, dtype=kind)
    b = torch.randn(k, n, device=dev, dtype=kind)
    c = torch.empty(m, n, device=dev, dtype=kind)
    return median_call_s(lambda: torch.matmul(a, b, out=c), dev, repeats, warmup)
