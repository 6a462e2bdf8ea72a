"""The expert-parallel load balancer (DeepSeek's EPLB, its global policy): give each GPU
`redundant` extra slots, fill them with copies of the hottest experts, then pack all the
copies onto the GPUs so that their loads come out even.

    replicate  E + e·s copies: each extra copy goes to the expert whose load per copy,
               q_i / r_i, is the largest now (ties: the lowest id)
    pack       the copies, heaviest first (q_i / r_i), each onto the GPU with the smallest
               load among those with a free slot (ties: the lowest GPU): longest-processing-
               time-first with E/e + s slots per GPU

Greedy packing is not optimal (LPT is within 4/3 of the best), so on a rare load the
default contiguous placement is already better; the balancer then keeps it, with each GPU's
extra slots holding copies of its own hottest experts (a copy on the same GPU changes no
GPU's load). So the hottest GPU's load after balancing is never above the contiguous
placement's, whatever the load.

DeepSeek's hierarchical policy (expert groups packed onto nodes first) is not modelled: one
link joins every GPU here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab.engines.cluster.expert_load import (
    check_split,
    contiguous_placement,
    gpu_loads,
    imbalance,
)


def replicate(shares: np.ndarray, n_copies: int) -> np.ndarray:
    """r_i, copies of each expert, Σ r_i = n_copies ≥ E: every extra copy to the expert of
    the largest q_i / r_i."""
    counts = np.ones(len(shares), dtype=np.int64)
    for _ in range(n_copies - len(shares)):
        counts[int(np.argmax(shares / counts))] += 1
    return counts


def pack(weights: np.ndarray, n_gpus: int, per_gpu: int) -> np.ndarray:
    """[n_gpus, per_gpu] item indices: heaviest first, each onto the least loaded GPU that has
    a free slot. len(weights) must be n_gpus × per_gpu."""
    if len(weights) != n_gpus * per_gpu:
        raise ValueError(f"{len(weights)} items do not fill {n_gpus} × {per_gpu} slots")
    order = np.argsort(-weights, kind="stable")
    total = np.zeros(n_gpus)
    slots: list[list[int]] = [[] for _ in range(n_gpus)]
    for item in order:
        free = [g for g in range(n_gpus) if len(slots[g]) < per_gpu]
        g = min(free, key=lambda j: (total[j], j))
        slots[g].append(int(item))
        total[g] += weights[item]
    return np.array(slots, dtype=np.int64)


def eplb_placement(shares: np.ndarray, ep: int, redundant: int) -> np.ndarray:
    """[e, E/e + s] logical expert ids: the balanced placement (module docstring) of one
    layer's shares q over e GPUs with s = `redundant` extra slots per GPU."""
    n = len(shares)
    check_split(n, ep)
    if not isinstance(redundant, int) or isinstance(redundant, bool) or redundant < 0:
        raise ValueError(f"redundant slots must be an integer >= 0, got {redundant!r}")
    per_gpu = n // ep + redundant
    counts = replicate(shares, n + ep * redundant)
    copies = np.repeat(np.arange(n), counts)  # a copy's expert id
    packed = copies[pack((shares / counts)[copies], ep, per_gpu)]
    base = contiguous_placement(n, ep)
    if gpu_loads(shares, packed).max() <= gpu_loads(shares, base).max():
        return packed
    if not redundant:
        return base
    # keep the contiguous placement; the extra slots copy each GPU's own hottest experts
    own = np.argsort(-shares[base], axis=1, kind="stable")[:, :redundant]
    extra = np.take_along_axis(base, own, axis=1) if redundant <= base.shape[1] else (
        base[:, np.arange(redundant) % base.shape[1]])
    return np.concatenate([base, extra], axis=1)


@dataclass(frozen=True)
class LayerBalance:
    """One MoE layer: its placement and the GPUs' loads (picks per token) before balancing
    (contiguous) and after."""

    placement: np.ndarray  # [e, slots]
    loads_before: np.ndarray  # [e]
    loads_after: np.ndarray  # [e]

    @property
    def imbalance_before(self) -> float:
        return imbalance(self.loads_before)

    @property
    def imbalance_after(self) -> float:
        return imbalance(self.loads_after)


def balance_layers(shares: np.ndarray, ep: int, redundant: int) -> list[LayerBalance]:
    """Per layer (rows of `shares`), the contiguous loads and, with `redundant` > 0 slots per
    GPU, EPLB's placement and loads (without: the contiguous placement kept)."""
    out = []
    base = None
    for row in shares:
        if base is None:
            base = contiguous_placement(len(row), ep)
        before = gpu_loads(row, base)
        placement = eplb_placement(row, ep, redundant) if redundant else base
        out.append(LayerBalance(placement, before, gpu_loads(row, placement)))
    return out
