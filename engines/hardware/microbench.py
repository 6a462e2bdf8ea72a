"""Measured roofs of a local device: matmul FLOP/s per compute dtype and copy bandwidth.

These are the two numbers a roofline is drawn from, measured with plain torch operations:

    peak_flops[dtype] = 2·n³ / t_median(torch.matmul(a, b, out=c))      (n×n operands)
    bw_bytes_per_s    = 2·nbytes / t_median(dst.copy_(src))             (read + write)

Outputs are preallocated so that only the operation is timed (a fresh tensor per call would
also time the allocator and page faults). One size per dtype: on the CPUs we measured, bf16
and fp32 matmuls are within a few per cent of their best from n=1024 up, so n=2048 is the peak;
GPUs get n=8192, where cuBLAS runs at full rate.

`measure_roofs` runs the pieces in `rounds` interleaved rounds (fp32, bf16, copy, fp32, ...)
and keeps each piece's best round: other processes only ever slow a measurement down, and a
burst of their load then costs one round, not the roof. Run `measure_op_points`
(op_points.py) for the operations plotted under the roofs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from inferlab.engines.dtypes import torch_dtype
from inferlab.engines.fields import shown
from inferlab.engines.hardware.cancel import Cancelled, check_stop
from inferlab.engines.hardware.discovery import get_device, torch_device
from inferlab.engines.hardware.op_points import MeasuredPoint, measure_op_points
from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.roofline.costs import matmul_cost

__all__ = [
    "Cancelled",
    "MeasuredPoint",
    "MeasuredRoofs",
    "RoofSizes",
    "measure_copy_bandwidth",
    "measure_matmul_flops",
    "measure_op_points",
    "measure_roofs",
    "roof_sizes",
]

Progress = Callable[[float, str], None]
MIB = 2**20


@dataclass(frozen=True)
class RoofSizes:
    """Sizes one roof measurement uses."""

    matmul_n: int
    copy_bytes: int
    repeats: int  # timed calls per round (their median is the round's figure)
    warmup: int  # untimed calls per round
    rounds: int  # interleaved rounds; the best round counts


# (device kind, quick) -> sizes. The full CPU set takes about 5 s on 2 idle cores.
ROOF_SIZES = {
    ("cpu", False): RoofSizes(2048, 256 * MIB, repeats=5, warmup=1, rounds=3),
    ("cpu", True): RoofSizes(512, 64 * MIB, repeats=3, warmup=1, rounds=2),
    ("cuda", False): RoofSizes(8192, 1024 * MIB, repeats=5, warmup=2, rounds=3),
    ("cuda", True): RoofSizes(2048, 256 * MIB, repeats=3, warmup=1, rounds=2),
}


def roof_sizes(kind: str, quick: bool = False) -> RoofSizes:
    """The sizes `measure_roofs` uses on a device kind ("cpu" or "cuda")."""
    return ROOF_SIZES[(kind if kind == "cuda" else "cpu", bool(quick))]


def measure_matmul_flops(
    device: str = "cpu", dtype: str = "fp32", n: int = 2048, repeats: int = 5, warmup: int = 2
) -> float:
    """FLOP/s of an n×n by n×n matmul in `dtype`: 2·n³ over the median time of one call."""
    dev = torch_device(device)
    _check_positive(n=n)
    kind = torch_dtype(dtype)
    a = torch.randn(n, n, device=dev, dtype=kind)
    b = torch.randn(n, n, device=dev, dtype=kind)
    c = torch.empty(n, n, device=dev, dtype=kind)
    seconds = median_call_s(lambda: torch.matmul(a, b, out=c), dev, repeats, warmup)
    return matmul_cost(n, n, n, dtype).flops / seconds


def measure_copy_bandwidth(
    device: str = "cpu", nbytes: int = 256 * MIB, repeats: int = 5, warmup: int = 2
) -> float:
    """Bytes/s of `dst.copy_(src)` into a preallocated buffer, read + write counted (2·nbytes).

    The buffers hold fp32 (nbytes rounded down to whole elements): torch's CPU copy of uint8
    runs about 25% below the memory's rate, fp32 and wider at it.
    """
    dev = torch_device(device)
    _check_positive(nbytes=nbytes)
    elements = max(1, int(nbytes) // 4)
    src = torch.ones(elements, dtype=torch.float32, device=dev)  # pages touched before timing
    dst = torch.zeros_like(src)
    seconds = median_call_s(lambda: dst.copy_(src), dev, repeats, warmup)
    return 2.0 * elements * 4 / seconds


def measure_read_bandwidth(
    device: str = "cpu", nbytes: int = 256 * MIB, repeats: int = 5, warmup: int = 2
) -> float:
    """Bytes/s of `src.sum()` over fp32 (nbytes rounded down to whole elements): a read-only
    stream, the access a decode step's weights make. On some machines it runs below the copy
    rate (which counts read + write); a decode is held to both."""
    dev = torch_device(device)
    _check_positive(nbytes=nbytes)
    elements = max(1, int(nbytes) // 4)
    src = torch.ones(elements, dtype=torch.float32, device=dev)
    seconds = median_call_s(lambda: src.sum(), dev, repeats, warmup)
    return elements * 4 / seconds


@dataclass(frozen=True)
class MeasuredRoofs:
    """A device's measured roofs: peak matmul FLOP/s per compute dtype and copy bandwidth."""

    device: str
    peak_flops: dict[str, float]
    bw_bytes_per_s: float
    matmul_n: int
    copy_bytes: int
    repeats: int
    rounds: int = 1

    def knee_flops_per_byte(self) -> dict[str, float]:
        """Ridge point per dtype: peak ÷ bandwidth (FLOP/byte)."""
        return {dtype: flops / self.bw_bytes_per_s for dtype, flops in self.peak_flops.items()}

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "peak_flops": dict(self.peak_flops),
            "bandwidth_bytes_per_s": self.bw_bytes_per_s,
            "knee_flops_per_byte": self.knee_flops_per_byte(),
            "matmul_n": self.matmul_n,
            "copy_bytes": self.copy_bytes,
            "repeats": self.repeats,
            "rounds": self.rounds,
        }

    @classmethod
    def from_dict(cls, data: dict) -> MeasuredRoofs:
        """Inverse of to_dict (the derived knees are ignored); ValueError naming a bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"measured roofs must be an object, got {type(data).__name__}")
        device = _field(data, "device")
        if not isinstance(device, str) or not device:
            raise ValueError("measured roofs: field 'device' must be a device id")
        peaks = _field(data, "peak_flops")
        if not isinstance(peaks, dict) or not peaks:
            raise ValueError("measured roofs: field 'peak_flops' must map dtypes to FLOP/s")
        return cls(
            device=device,
            peak_flops={
                str(dtype): _rate(f"peak_flops.{dtype}", flops) for dtype, flops in peaks.items()
            },
            bw_bytes_per_s=_rate("bandwidth_bytes_per_s", _field(data, "bandwidth_bytes_per_s")),
            matmul_n=_whole("matmul_n", _field(data, "matmul_n")),
            copy_bytes=_whole("copy_bytes", _field(data, "copy_bytes")),
            repeats=_whole("repeats", _field(data, "repeats")),
            rounds=_whole("rounds", data.get("rounds", 1)),
        )


def measure_roofs(
    device: str = "cpu",
    quick: bool = False,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> MeasuredRoofs:
    """Peak matmul FLOP/s for each compute dtype of `device`, then its copy bandwidth.

    Each piece is measured once per round (see the module docstring) and its best round is
    kept. `progress(fraction, message)` is called before each piece and with 1.0 at the end;
    `should_stop()` is polled between pieces and raises Cancelled when it returns True.
    """
    info = get_device(device)
    sizes = roof_sizes(info.kind, quick)
    report = progress or (lambda fraction, message: None)
    pieces = [*info.compute_dtypes, "copy"]
    total = sizes.rounds * len(pieces)
    best = dict.fromkeys(pieces, 0.0)
    for round_index in range(sizes.rounds):
        for piece_index, piece in enumerate(pieces):
            check_stop(should_stop)
            fraction = (round_index * len(pieces) + piece_index) / total
            round_text = f"round {round_index + 1}/{sizes.rounds}"
            if piece == "copy":
                report(fraction, f"copy {sizes.copy_bytes // MIB} MiB on {info.id}, {round_text}")
                rate = measure_copy_bandwidth(
                    info.id, sizes.copy_bytes, sizes.repeats, sizes.warmup
                )
            else:
                n = sizes.matmul_n
                report(fraction, f"matmul {piece} {n}x{n} on {info.id}, {round_text}")
                rate = measure_matmul_flops(info.id, piece, n, sizes.repeats, sizes.warmup)
            best[piece] = max(best[piece], rate)
    report(1.0, f"roofs of {info.id} measured")
    return MeasuredRoofs(
        device=info.id,
        peak_flops={dtype: best[dtype] for dtype in info.compute_dtypes},
        bw_bytes_per_s=best["copy"],
        matmul_n=sizes.matmul_n,
        copy_bytes=sizes.copy_bytes,
        repeats=sizes.repeats,
        rounds=sizes.rounds,
    )


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if int(value) < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")


def _field(data: dict, name: str):
    if name not in data:
        raise ValueError(f"measured roofs: missing field {name!r}")
    return data[name]


MAX_RATE = 1e30
"""FLOP/s and bytes/s a snapshot may hold: 1..1e30, past any device, so that the knee P / W
and the roofline plot's range stay finite and positive."""


def _rate(name: str, value) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 1 <= value <= MAX_RATE:  # NaN compares False
        raise ValueError(f"measured roofs: field {name!r} must be a positive number (1 to "
                         f"{MAX_RATE:g} per second), got {shown(value)}")
    return float(value)


def _whole(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise ValueError(f"measured roofs: field {name!r} must be a positive integer")
    return value
