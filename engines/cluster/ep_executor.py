"""The simulated executor of an expert-parallel group: e GPUs stepping in lockstep, attention
and dense weights at tensor degree t in e / t data-parallel groups, routed experts spread
over all e (layout.py's module docstring), and every MoE layer's dispatch and combine on the
link.

One step over T tokens (the group's batch, split evenly over its attention groups). The
one-GPU roofline cost of the whole batch, C = serve.executors' mixed-step cost, splits into
the routed experts' part X(T) (each MoE layer: 2·T·k·expert_params FLOPs; the experts the T
tokens touch, E·(1 − (1 − k/E)^T), × expert bytes, plus T·k expert inputs and outputs) and
the rest D = C − X, of which W_d bytes are the dense weights (all but the routed experts).
One GPU of the group does

    flops_gpu = D.flops / e + Σ_MoE layers hot_l.flops
    bytes_gpu = W_d / t + (D.bytes − W_d) / e + Σ_MoE layers hot_l.bytes
    compute_s = flops_gpu / min(P, I·W)                       (one GPU's roofs, I = F / B)

where hot_l is layer l's routed-expert work on the GPU whose roofline time max(F/P, B/W) is
the largest there: its n_g = T·load_g token copies (expert_load.gpu_loads, after EPLB)
and the copies it holds that some token touches, Σ_slots 1 − (1 − q/r)^T. Every layer waits
for its hottest GPU, so the step is the critical path through the hottest GPU of each layer;
the one roofline over the whole step is how the one-GPU simulator times a step too.

Communication, per MoE layer l: a dispatch and a combine all-to-all
(all_to_all.dispatch_bytes / combine_bytes) of the T / e tokens a GPU holds, scaled by the
layer's imbalance (the hottest GPU receives and sends imbalance × the mean), each timed
all_to_all_s on the link; with t > 1 the attention groups' ring all-reduces, one per layer
after attention and one after each dense MLP, of the T·t/e tokens each group holds.

    step_s = compute_s + comm_s                 (or, with dual-batch overlap and T ≥ 2:)
    step_s = max(compute_s, comm_s)             comm sent as two micro-batches' all-to-alls
                                                (bytes / W + 2·α each), each hidden behind
                                                the other micro-batch's compute

The overlap leaves out the pipeline's fill and drain and counts the weights once (the two
micro-batches each read them in a real deployment): an optimistic bound.

KV pool: each GPU's budget ⌊memory × utilization⌋ minus its weights (ep_weight_bytes_per_gpu)
over gpu_share(t)'s KV bytes per token (MLA: its latent, whole), in blocks, times the e / t
attention groups (one pool for the group's scheduler: a request's KV lives in one group).

At e = 1 (one GPU, uniform load) all of this is the one-GPU SimulatedExecutor's step and
simulated pool: no communication, the same roofline.
"""

from __future__ import annotations

import math

import numpy as np

from inferlab.engines.cluster.all_to_all import (
    all_to_all_s,
    combine_bytes,
    dispatch_bytes,
    micro_batches_s,
)
from inferlab.engines.cluster.eplb import LayerBalance, balance_layers
from inferlab.engines.cluster.executor import InstanceExecutor
from inferlab.engines.cluster.expert_load import (
    UNIFORM_LOAD,
    ExpertLoad,
    expert_shares,
    slot_shares,
)
from inferlab.engines.cluster.links import LinkPreset
from inferlab.engines.cluster.records import MoELayerComm
from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.hardware.presets import HardwarePreset
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline import formulas
from inferlab.engines.roofline.interconnect import ring_all_reduce_s
from inferlab.engines.roofline.memory import experts_touched
from inferlab.engines.roofline.op_cost import OpCost
from inferlab.engines.roofline.parallel import gpu_share
from inferlab.engines.serve.executors import step_cost_from_counts

DBO_MICRO_BATCHES = 2


def moe_layer_indices(cfg: ModelConfig) -> list[int]:
    return [i for i in range(cfg.n_layers) if cfg.is_moe_layer(i)]


def check_ep(cfg: ModelConfig, tp: int, ep: int) -> None:
    """ValueError unless e GPUs can hold the model's experts with attention at degree t."""
    if ep > 1 and not cfg.is_moe:
        raise ValueError(f"{cfg.id} has no experts to spread: expert parallelism needs a MoE")
    if cfg.is_moe and cfg.n_experts % ep:
        raise ValueError(f"ep = {ep} does not divide {cfg.id}'s {cfg.n_experts} experts")
    if ep % tp:
        raise ValueError(f"t = {tp} does not divide e = {ep}")
    gpu_share(cfg, tp)  # the heads split t ways


def expert_io_values(cfg: ModelConfig) -> int:
    """Values one token copy reads and writes through one routed expert: Σ (d_in + d_out)
    over its matrices."""
    return sum(d_in + d_out for _, d_in, d_out in cfg.mlp_shapes(cfg.expert_d_ff))


def routed_expert_cost(cfg: ModelConfig, token_copies: float, experts_read: float,
                       dtype: str = "fp16") -> OpCost:
    """One GPU's routed-expert work in one MoE layer: `token_copies` (token, expert) pairs
    through experts whose weights it reads `experts_read` of:

        flops = 2 · copies · expert_params
        bytes = experts_read · expert_params · bytes(w) + copies · io · bytes(act)
    """
    w = a = bytes_per_element(dtype)  # weights and activations alike, as the step costs
    return OpCost("routed experts", 2.0 * token_copies * cfg.expert_params,
                  experts_read * cfg.expert_params * w
                  + token_copies * expert_io_values(cfg) * a)


def dense_weight_params(cfg: ModelConfig) -> int:
    """Every weight but the routed experts': n_params − n_moe_layers · E · expert_params."""
    return cfg.n_params - cfg.n_moe_layers * cfg.n_experts * cfg.expert_params


def ep_weight_bytes_per_gpu(cfg: ModelConfig, tp: int = 1, ep: int = 1, eplb_slots: int = 0,
                            dtype: str = "fp16") -> int:
    """One GPU's weights: ⌈dense_params · w / t + n_moe_layers · (E / e + s) · expert_params · w⌉
    (the dense part split t ways, 1/e of the routed experts and s redundant copies per
    layer). At t = e = 1, s = 0: memory.weight_bytes."""
    check_ep(cfg, tp, ep)
    w = bytes_per_element(dtype)
    experts = (cfg.n_experts // ep + eplb_slots) if cfg.is_moe else 0
    return math.ceil(dense_weight_params(cfg) * w / tp
                     + cfg.n_moe_layers * experts * cfg.expert_params * w)


def ep_pool_blocks(cfg: ModelConfig, preset: HardwarePreset, tp: int = 1, ep: int = 1,
                   eplb_slots: int = 0, block_size: int = 16, utilization: float = 0.9,
                   dtype: str = "fp16") -> int:
    """KV blocks of an expert-parallel group (module docstring); at t = e = 1, s = 0 the
    one-GPU pool (serve.executors.simulated_pool_blocks)."""
    free = (math.floor(preset.memory_bytes * utilization)
            - ep_weight_bytes_per_gpu(cfg, tp, ep, eplb_slots, dtype))
    per_group = max(0, free) // gpu_share(cfg, tp, 1, dtype, dtype).kv_bytes_per_token
    n_blocks = per_group // block_size * (ep // tp)
    if n_blocks < 1:
        raise ValueError(f"{cfg.id} at t = {tp}, e = {ep}: the weights leave no KV block of "
                         f"{block_size} tokens on a {preset.id}")
    return n_blocks


class ExpertParallelExecutor(InstanceExecutor):
    """An expert-parallel group's executor (module docstring). `comm_s` sums the
    communication so far; `moe_layers()` the per-layer all-to-alls."""

    def __init__(self, model_config: ModelConfig, hardware: HardwarePreset, tp: int = 1,
                 ep: int = 1, link: LinkPreset | None = None, dtype: str = "fp16",
                 kv_arrivals: bool = False, load: ExpertLoad = UNIFORM_LOAD,
                 eplb_slots: int = 0, dual_batch_overlap: bool = False) -> None:
        check_ep(model_config, tp, ep)
        if ep > 1 and link is None:
            raise ValueError("an expert-parallel group needs a link for its all-to-alls")
        super().__init__(model_config, hardware, 1, link, dtype, kv_arrivals)
        self.tp, self.ep, self.dual_batch_overlap = tp, ep, dual_batch_overlap
        cfg = model_config
        self.moe_layer_ids = moe_layer_indices(cfg)
        self.balance: list[LayerBalance] = []
        self._slots = np.zeros((0, ep, 0))
        if cfg.is_moe:
            shares = expert_shares(load, len(self.moe_layer_ids), cfg.n_experts,
                                   cfg.n_experts_active)
            self.balance = balance_layers(shares, ep, eplb_slots)
            self._slots = np.array([slot_shares(row, b.placement)
                                    for row, b in zip(shares, self.balance, strict=True)])
        self._imbalance = np.array([b.imbalance_after for b in self.balance])
        self._dense_bytes = dense_weight_params(cfg) * bytes_per_element(dtype)
        self._hot: dict[int, tuple[float, float]] = {}
        n = len(self.moe_layer_ids)
        self.dispatch_s = np.zeros(n)
        self.combine_s = np.zeros(n)
        self.dispatch_bytes = np.zeros(n)
        self.combine_bytes = np.zeros(n)

    # ---- compute ----------------------------------------------------------------------
    def uniform_experts_cost(self, n_tokens: int) -> OpCost:
        """X(T): the routed experts inside the one-GPU step cost (uniform routing)."""
        cfg = self.config
        if not cfg.is_moe:
            return OpCost("routed experts", 0.0, 0.0)
        k = cfg.n_experts_active
        one = routed_expert_cost(cfg, n_tokens * k, experts_touched(cfg.n_experts, k, n_tokens),
                                 self.dtype)
        n = cfg.n_moe_layers
        return OpCost("routed experts", n * one.flops, n * one.bytes_moved)

    def hot_experts_cost(self, n_tokens: int) -> tuple[float, float]:
        """(FLOPs, bytes) summed over the MoE layers of each layer's hottest GPU's routed
        experts, for T tokens in the group; cached by T."""
        hit = self._hot.get(n_tokens)
        if hit is not None:
            return hit
        s = self._slots  # [layers, e, slots]
        if not s.size:
            return self._hot.setdefault(n_tokens, (0.0, 0.0))
        copies = n_tokens * s.sum(axis=2)  # [layers, e]
        read = (1.0 - (1.0 - s) ** n_tokens).sum(axis=2)
        cost = routed_expert_cost(self.config, copies, read, self.dtype)
        time_s = formulas.predicted_time_s(cost.flops, cost.bytes_moved, self.peak_flops,
                                           self.bw_bytes_per_s)
        hot = np.argmax(time_s, axis=1)
        rows = np.arange(len(hot))
        out = (float(cost.flops[rows, hot].sum()), float(cost.bytes_moved[rows, hot].sum()))
        self._hot[n_tokens] = out
        return out

    def gpu_cost(self, prefills: list[tuple[int, int]], n_decodes: int,
                 decode_context_tokens: int) -> OpCost:
        """What the critical-path GPU does in one step (module docstring)."""
        whole = step_cost_from_counts(self.config, prefills, n_decodes, decode_context_tokens,
                            self.dtype)
        n_tokens = sum(n for _, n in prefills) + n_decodes
        routed = self.uniform_experts_cost(n_tokens)
        hot_flops, hot_bytes = self.hot_experts_cost(n_tokens)
        rest_bytes = whole.bytes_moved - routed.bytes_moved - self._dense_bytes
        return OpCost(f"EP{self.ep} GPU T={n_tokens}",
                      (whole.flops - routed.flops) / self.ep + hot_flops,
                      self._dense_bytes / self.tp + rest_bytes / self.ep + hot_bytes)

    def batch_time_s(self, prefills: list[tuple[int, int]], n_decodes: int,
                     decode_context_tokens: int) -> float:
        cost = self.gpu_cost(prefills, n_decodes, decode_context_tokens)
        intensity = formulas.arithmetic_intensity(cost.flops, cost.bytes_moved)
        attainable = formulas.attainable_flops(self.peak_flops, self.bw_bytes_per_s, intensity)
        return float(cost.flops / attainable)

    # ---- communication ----------------------------------------------------------------
    def micro_batches(self, n_tokens: int) -> int:
        return DBO_MICRO_BATCHES if self.dual_batch_overlap and n_tokens >= 2 else 1

    def comm_time_s(self, n_tokens: int) -> float:
        """The attention groups' all-reduces and every MoE layer's dispatch and combine;
        accumulated per layer."""
        cfg, link = self.config, self.link
        total = 0.0
        if self.tp > 1:
            per_group = n_tokens * self.tp / self.ep
            n_reduces = cfg.n_layers + (cfg.n_layers - cfg.n_moe_layers)
            total += n_reduces * ring_all_reduce_s(per_group * self._activation_bytes, self.tp,
                                                   link.bandwidth_bytes_per_s, link.latency_s)
        if self.ep == 1 or not self.moe_layer_ids:
            return total
        k, h = cfg.n_experts_active, cfg.d_model
        tokens = n_tokens / self.ep * self._imbalance  # per MoE layer: the hottest GPU's
        d_bytes = dispatch_bytes(tokens, k, h, self.ep)
        c_bytes = combine_bytes(tokens, k, h, self.ep)
        n_micro = self.micro_batches(n_tokens)
        w, alpha = link.bandwidth_bytes_per_s, link.latency_s
        if n_micro == 1:
            d_s = np.array([all_to_all_s(b, w, alpha) for b in d_bytes])
            c_s = np.array([all_to_all_s(b, w, alpha) for b in c_bytes])
        else:
            d_s = np.array([micro_batches_s(b, n_micro, w, alpha) for b in d_bytes])
            c_s = np.array([micro_batches_s(b, n_micro, w, alpha) for b in c_bytes])
        self.dispatch_s += d_s
        self.combine_s += c_s
        self.dispatch_bytes += d_bytes
        self.combine_bytes += c_bytes
        return total + float(d_s.sum() + c_s.sum())

    def step_s(self, compute_s: float, comm_s: float, n_tokens: int) -> float:
        """compute + comm; with dual-batch overlap (T ≥ 2) max(compute, comm)."""
        if self.micro_batches(n_tokens) > 1:
            return max(compute_s, comm_s)
        return compute_s + comm_s if comm_s else compute_s

    def moe_layers(self) -> list[MoELayerComm]:
        """Per MoE layer, the run's all-to-alls so far and the load imbalance."""
        return [MoELayerComm(layer, float(self.dispatch_s[i]), float(self.combine_s[i]),
                             float(self.dispatch_bytes[i]), float(self.combine_bytes[i]),
                             b.imbalance_before, b.imbalance_after)
                for i, (layer, b) in enumerate(zip(self.moe_layer_ids, self.balance,
                                                   strict=True))]
