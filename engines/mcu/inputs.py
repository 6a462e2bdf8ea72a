"""Inputs for running a model: seeded random arrays of each graph input's shape and dtype.

The host interpreter, the virtual board, a real board and the firmware tests all feed the
same arrays for the same seed, so their outputs can be compared byte for byte.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.mcu.graph import Model


def random_input(model: Model, seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays for each graph input (full range of integer dtypes)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in model.inputs:
        tensor = model.tensors[t]
        dt = np.dtype(tensor.dtype)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            arr = rng.integers(info.min, int(info.max) + 1, size=tensor.shape, dtype=dt)
        else:
            arr = rng.standard_normal(tensor.shape).astype(dt)
        out.append(arr)
    return out
