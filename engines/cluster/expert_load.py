"""How the router's picks spread over the experts, and over the GPUs that hold them.

A load is, per MoE layer, each expert's expected picks per token q_i: the probability that
one token routes to expert i, Σ_i q_i = k (top-k), 0 ≤ q_i ≤ 1 (a token picks an expert at
most once). Three kinds, all deterministic (a seed fixes Zipf's order):

    uniform   q_i = k / E
    zipf      q_i ∝ 1 / rank_i^s (skew s; s = 0 is uniform), the ranks a seeded permutation
              per layer (the hot experts differ from layer to layer); shares past 1 are
              capped at 1 and the excess spread over the others in proportion
    counts    measured tokens per expert per layer (the MoE lab's router): q_i = k·c_i / Σ c;
              the rows repeat in order over the model's MoE layers when there are fewer

A placement puts physical expert slots on the e GPUs of an expert-parallel group: an array
[e, slots per GPU] of logical expert ids. The default is contiguous, as DeepSeek's and
SGLang's: GPU g holds experts g·E/e … (g+1)·E/e − 1. An expert with r copies (EPLB's
redundant experts) has its picks split evenly over them: each copy carries q_i / r. GPU g's
load is the picks per token its slots carry:

    load_g = Σ_{slots j on g} q_{id(j)} / r_{id(j)}          (Σ_g load_g = k)
    imbalance = max_g load_g / mean_g load_g                  (1: balanced)

The hottest GPU decides an MoE layer's time (ep_executor); this module only counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

UNIFORM = "uniform"
ZIPF = "zipf"
COUNTS = "counts"
EXPERT_LOADS = (UNIFORM, ZIPF, COUNTS)


@dataclass(frozen=True)
class ExpertLoad:
    """Which load: `kind` (EXPERT_LOADS), Zipf's `zipf_skew` and `seed`, or `counts`: per MoE
    layer the tokens each expert received (rows repeat over the layers when fewer)."""

    kind: str = UNIFORM
    zipf_skew: float = 1.0
    seed: int = 0
    counts: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in EXPERT_LOADS:
            raise ValueError(f"expert load must be one of {', '.join(EXPERT_LOADS)}, "
                             f"got {self.kind!r}")
        if not (isinstance(self.zipf_skew, int | float) and math.isfinite(self.zipf_skew)
                and self.zipf_skew >= 0):
            raise ValueError(f"zipf_skew must be a finite number >= 0, got {self.zipf_skew!r}")
        if self.kind == COUNTS and not self.counts:
            raise ValueError("a counts load needs counts: tokens per expert per layer")
        object.__setattr__(self, "counts", tuple(tuple(float(c) for c in row)
                                                 for row in self.counts))
        for row in self.counts:
            if any(not math.isfinite(c) or c < 0 for c in row) or not sum(row) > 0:
                raise ValueError("counts must be finite numbers >= 0, each layer's sum > 0")


UNIFORM_LOAD = ExpertLoad()


def cap_at_one(shares: np.ndarray, total: float) -> np.ndarray:
    """`shares` scaled to sum to `total` with none above 1: the largest are set to 1 and the
    rest rescaled to the remainder, until none exceeds 1 (total ≤ len(shares))."""
    q = np.asarray(shares, dtype=np.float64) * (total / shares.sum())
    capped = np.zeros(q.shape, dtype=bool)
    while (q > 1.0 + 1e-12).any():
        capped |= q > 1.0
        rest = q[~capped].sum()
        if rest <= 0:
            raise ValueError(f"fewer experts carry load than a token picks ({total:g})")
        q = np.where(capped, 1.0, q * ((total - capped.sum()) / rest))
    return np.minimum(q, 1.0)


def expert_shares(load: ExpertLoad, n_layers: int, n_experts: int, top_k: int) -> np.ndarray:
    """q[layer, expert]: expected picks per token (module docstring), for `n_layers` MoE
    layers of `n_experts` experts, top-`top_k`."""
    if not 1 <= top_k <= n_experts:
        raise ValueError(f"top_k must be in [1, {n_experts}], got {top_k}")
    if load.kind == UNIFORM:
        return np.full((n_layers, n_experts), top_k / n_experts)
    if load.kind == ZIPF:
        rng = np.random.default_rng(load.seed)
        by_rank = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** load.zipf_skew
        rows = []
        for _ in range(n_layers):
            row = np.empty(n_experts)
            row[rng.permutation(n_experts)] = by_rank
            rows.append(cap_at_one(row, top_k))
        return np.array(rows)
    counts = load.counts
    if any(len(row) != n_experts for row in counts):
        raise ValueError(f"every counts row must hold {n_experts} experts' tokens")
    # a measured model may have fewer MoE layers than the simulated one: its rows repeat
    rows = [counts[layer % len(counts)] for layer in range(n_layers)]
    return np.array([cap_at_one(np.array(row), top_k) for row in rows])


def contiguous_placement(n_experts: int, ep: int) -> np.ndarray:
    """[e, E/e]: GPU g holds experts g·E/e … (g+1)·E/e − 1."""
    check_split(n_experts, ep)
    return np.arange(n_experts).reshape(ep, n_experts // ep)


def check_split(n_experts: int, ep: int) -> None:
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1:
        raise ValueError(f"ep must be an integer >= 1, got {ep!r}")
    if n_experts % ep:
        raise ValueError(f"ep = {ep} does not divide the {n_experts} experts")


def replica_counts(placement: np.ndarray, n_experts: int) -> np.ndarray:
    """Copies of each logical expert in `placement` (every expert at least one)."""
    counts = np.bincount(placement.ravel(), minlength=n_experts)
    if len(counts) != n_experts or (counts < 1).any():
        raise ValueError("a placement must hold every expert at least once, no other ids")
    return counts


def slot_shares(shares: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """[e, slots]: the picks per token each physical slot carries, q_id / r_id."""
    return (shares / replica_counts(placement, len(shares)))[placement]


def gpu_loads(shares: np.ndarray, placement: np.ndarray) -> np.ndarray:
    """[e]: load_g = Σ over GPU g's slots of q_id / r_id (picks per token)."""
    return slot_shares(shares, placement).sum(axis=1)


def imbalance(loads: np.ndarray) -> float:
    """max / mean of the GPUs' loads (1 when there is none)."""
    mean = float(np.mean(loads))
    return float(np.max(loads)) / mean if mean > 0 else 1.0
