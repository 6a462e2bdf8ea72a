"""Versions of the runtime pieces that decide what InferLab measures (Help ▸ About, snapshots)."""

from __future__ import annotations

import platform
from importlib import metadata

import numpy
import torch

from inferlab.engines.hardware import nvml


def runtime_versions() -> dict[str, str | None]:
    """python, torch, cuda, cudnn, nvidia_driver, numpy, psutil, nvidia_ml_py; None = absent.

    `cuda` is the CUDA version torch was built with (None for a CPU build); `nvidia_driver`
    comes from NVML. Qt's version is added by the app, which is the only layer that has Qt.
    """
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": _cudnn_version(torch),
        "nvidia_driver": nvml.driver_version(),
        "numpy": numpy.__version__,
        "psutil": _package_version("psutil"),
        "nvidia_ml_py": _package_version("nvidia-ml-py"),
    }


def _cudnn_version(torch) -> str | None:
    try:
        number = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # a broken cuDNN install is reported as absent, not raised
        return None
    if not number:
        return None
    # cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older major*1000 + ...
    major_unit = 10000 if number >= 90000 else 1000
    major, rest = divmod(number, major_unit)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
