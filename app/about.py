"""Versions of everything InferLab runs on, for Help ▸ About and snapshots."""

from __future__ import annotations

import platform
import socket

from inferlab.app import __version__

LABELS = {"python": "Python", "torch": "torch", "cuda": "CUDA (torch build)", "cudnn": "cuDNN",
          "nvidia_driver": "NVIDIA driver", "numpy": "NumPy", "psutil": "psutil",
          "nvidia_ml_py": "nvidia-ml-py (NVML)"}


def versions() -> dict[str, str]:
    """App, Qt, PySide6, pyqtgraph, torch, CUDA, driver, numpy, Python versions."""
    import pyqtgraph
    import PySide6
    from PySide6.QtCore import qVersion

    from inferlab.engines.hardware.discovery import runtime_versions

    table = {"InferLab": __version__, "Qt": qVersion(), "PySide6": PySide6.__version__,
             "pyqtgraph": pyqtgraph.__version__}
    for key, value in runtime_versions().items():
        label = LABELS.get(key, key)
        table[label] = "— (not present)" if value is None else str(value)
    return table


def host_facts() -> dict:
    """Where a snapshot was taken: host name, OS, CPU architecture, Python."""
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
