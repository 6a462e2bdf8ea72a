"""The simulated executor of one cluster instance: `engines/serve`'s SimulatedExecutor on a
tensor-parallel group, and on a decode instance whose prompts' K/V arrive over the link.

Tensor degree t: every GPU holds 1/t of the weights and of the KV heads and does 1/t of the
FLOPs, so the batch's roofline time is the one-GPU formula on t × the roofs (F/t over P is
F over t·P); each layer adds two all-reduces (after attention, after the MLP) of the batch's
activations, T tokens × d_model × bytes(dtype), on the link:

    iteration_s = roofline(F, B; t·P, t·W) + 2·L·all_reduce_s(T·d_model·bytes, t)

With t = 1 that is SimulatedExecutor's time exactly (no communication).

A decode instance (`kv_arrivals`) computes no prompt: the scheduler still reserves a prompt's
blocks (a request is admitted only when its KV fits the pool), but the chunk costs nothing;
the chunk that ends the prompt (prompt + the first token, which came from the prefill
instance) is the first decode, costed as one decode over that context.
"""

from __future__ import annotations

from collections.abc import Mapping

from inferlab.engines.cluster.links import LinkPreset
from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.hardware.presets import HardwarePreset
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.interconnect import ring_all_reduce_s
from inferlab.engines.serve.executors import SimulatedExecutor
from inferlab.engines.serve.request import Sequence
from inferlab.engines.serve.scheduler import SchedulerOutput


class InstanceExecutor(SimulatedExecutor):
    """SimulatedExecutor for a group of `tp` GPUs joined by `link`; `kv_arrivals`: a decode
    instance (see the module docstring). `comm_s` sums the all-reduce time so far."""

    def __init__(self, model_config: ModelConfig, hardware: HardwarePreset, tp: int = 1,
                 link: LinkPreset | None = None, dtype: str = "fp16",
                 kv_arrivals: bool = False) -> None:
        if tp > 1 and link is None:
            raise ValueError("a tensor-parallel instance needs a link for its all-reduces")
        super().__init__(model_config, (hardware.peak_flops_for(dtype) * tp,
                                        hardware.bandwidth_bytes_per_s * tp), dtype)
        self.tp = tp
        self.link = link
        self.kv_arrivals = kv_arrivals
        self._activation_bytes = model_config.d_model * bytes_per_element(dtype)
        self.comm_s = 0.0

    def iteration_time_s(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]) -> float:
        batch = self.computed_batch(out, seqs)
        if batch is None:
            return 0.0
        prefills, n_decodes, context_tokens = batch
        compute_s = self.batch_time_s(prefills, n_decodes, context_tokens)
        n_tokens = sum(n for _, n in prefills) + n_decodes
        comm_s = self.comm_time_s(n_tokens) if n_tokens else 0.0
        self.comm_s += comm_s
        return self.step_s(compute_s, comm_s, n_tokens)

    def computed_batch(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]
                       ) -> tuple[list[tuple[int, int]], int, int] | None:
        """What the step computes: (prefill chunks (start, n), decodes, their summed context),
        None when nothing. A decode instance computes no prompt: a chunk that ends one is
        its first decode, over that context."""
        if out.is_empty:
            return None
        if not self.kv_arrivals:
            return ([(c.start, c.n_tokens) for c in out.prefills], len(out.decodes),
                    out.decode_context_tokens)
        finals = [c.start + c.n_tokens for c in out.prefills
                  if c.start + c.n_tokens == seqs[c.seq_id].num_prefill_tokens]
        n_decodes = len(out.decodes) + len(finals)
        if not n_decodes:  # only KV arriving: nothing is computed
            return None
        return [], n_decodes, out.decode_context_tokens + sum(finals)

    def comm_time_s(self, n_tokens: int) -> float:
        """The step's communication: 2·L all-reduces of the T tokens' activations (0 at
        t = 1)."""
        if self.tp == 1:
            return 0.0
        return 2 * self.config.n_layers * ring_all_reduce_s(
            n_tokens * self._activation_bytes, self.tp, self.link.bandwidth_bytes_per_s,
            self.link.latency_s)

    def step_s(self, compute_s: float, comm_s: float, n_tokens: int) -> float:
        """The step's time from its parts: compute, then communication (no overlap)."""
        return compute_s + comm_s if comm_s else compute_s
