"""What the roofline lab computes: this device's roofs and its operations measured on them,
the model it places (a preset, or a model the app loads by name — Gemma 3 270M, tiny-moe —
by its own description, `model.config`), and that model's decode and prefill steps as
operation costs. The lab and `inferlab run roofline` both measure here."""

from __future__ import annotations

from collections.abc import Callable

from inferlab.engines.hardware.discovery import torch_device
from inferlab.engines.hardware.microbench import (
    MeasuredPoint,
    MeasuredRoofs,
    measure_op_points,
    measure_roofs,
)
from inferlab.engines.labs.roofline.settings import MEASURED_DTYPES
from inferlab.engines.model.cache import described
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.costs import decode_batch_sweep, prefill_length_sweep

DECODE_BATCHES = (1, 4, 16, 64, 256)
PREFILL_LENGTHS = (16, 128, 1024)
ROOFS_SHARE = 0.7  # of the progress bar: the roofs; the operations take the rest


def measure_roofline(device: str, dtype: str, quick: bool = False,
                     progress: Callable | None = None,
                     should_stop: Callable[[], bool] | None = None
                     ) -> tuple[MeasuredRoofs, list[MeasuredPoint]]:
    """`device`'s roofs, then its operations in `dtype` (fp32 where `dtype` is not one the
    operations are measured in, or the device has no peak for it)."""
    torch_device(device)  # an unknown device: one clear error before any work

    def part(start: float, share: float):
        if progress is None:
            return None
        return lambda f, m: progress(start + share * f, m)

    roofs = measure_roofs(device, quick=quick, progress=part(0.0, ROOFS_SHARE),
                          should_stop=should_stop)
    dtype = dtype if dtype in MEASURED_DTYPES else "fp32"
    used = dtype if dtype in roofs.peak_flops else "fp32"
    points = measure_op_points(device, dtype=used, quick=quick,
                               progress=part(ROOFS_SHARE, 1.0 - ROOFS_SHARE),
                               should_stop=should_stop)
    return roofs, points


def roofline_model(model_id: str, load: bool = True) -> ModelConfig | None:
    """The model placed on the roofline: a preset, or a registry model's description as
    loaded (`cache.described`: loaded now unless `load` is False). None: no such model, not
    loaded yet, or not installed."""
    try:
        return described(model_id, load)
    except ValueError:
        return None


def preset_peak(preset, dtype: str) -> float | None:
    """A preset's peak for `dtype`, falling back to its 16-bit figure (fp32 never borrows)."""
    peaks = preset.peak_flops
    if dtype in peaks:
        return peaks[dtype]
    for alt in ("bf16", "fp16") if dtype != "fp32" else ():
        if alt in peaks:
            return peaks[alt]
    return None


def model_steps(cfg: ModelConfig, settings: dict) -> list[tuple[str, str, object]]:
    """(label, series, OpCost) of the model's decode steps at DECODE_BATCHES and its prefills
    of PREFILL_LENGTHS, at the settings' context and weight and KV dtypes."""
    context = int(settings["context"])
    wd, kd = settings["weight_dtype"], settings["kv_dtype"]
    steps = [(f"decode B={batch}, L={context}", f"{cfg.name} decode", cost)
             for batch, cost in zip(DECODE_BATCHES,
                                    decode_batch_sweep(cfg, context, DECODE_BATCHES, wd, kd),
                                    strict=True)]
    steps += [(f"prefill L={length}", f"{cfg.name} prefill", cost)
              for length, cost in zip(PREFILL_LENGTHS,
                                      prefill_length_sweep(cfg, PREFILL_LENGTHS, 1, wd, kd),
                                      strict=True)]
    return steps
