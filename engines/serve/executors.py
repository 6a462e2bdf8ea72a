"""The executors a ServingEngine runs an iteration on, one per clock.

Both take the scheduler's batch and the sequences, and return `(sampled, forward_s,
sample_s)`: `sampled` is one token per `out.sample_ids`; the two times are how long the
forward and the sampling took on the executor's `clock`:

    ModelExecutor      "wall": the real model (a ModelRunner) runs ONE flat forward over the
                       batch (prefill chunks [start, start + n) and one token per decode),
                       then samples; each time is time.perf_counter() around its part.
    SimulatedExecutor  "simulated": no model. forward_s is the roofline time of the same
                       flat batch on a device (`mixed_step_cost`), sample_s 0; every sampled
                       token is one fixed id, so with no EOS every request runs to
                       max_new_tokens (ignore_eos semantics).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from operator import index

from inferlab.engines.hardware.presets import HardwarePreset
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.sampler import Sampler, sample_batch
from inferlab.engines.roofline import formulas
from inferlab.engines.roofline.costs import (
    OpCost,
    attention_decode_cost,
    attention_prefill_cost,
    decode_step_parts,
)
from inferlab.engines.roofline.memory import kv_bytes_per_request, plan_memory
from inferlab.engines.serve.request import Sequence
from inferlab.engines.serve.scheduler import SampledTokens, SchedulerOutput

WALL = "wall"
SIMULATED = "simulated"


class ModelExecutor:
    """Runs the batch on a real model. The Scheduler must be built over `runner.blocks`: its
    reservations are the runner's block tables, so the forward writes K/V where the scheduler
    put the slots (and a preemption's free is the runner's free)."""

    clock = WALL

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.max_tokens = runner.model.config.max_position
        """A request's prompt + outputs must fit the model's context (RoPE positions)."""
        self._samplers: dict[str, Sampler] = {}

    def execute(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]
                ) -> tuple[dict[str, int], float, float]:
        # Preempted sequences need nothing here: the scheduler freed their blocks in the
        # shared BlockManager, and their samplers continue where they were.
        t0 = time.perf_counter()
        if out.copies:  # copy-on-write: the shared blocks' K/V into their fresh copies first
            self.runner.cache.copy_blocks([(c.src, c.dst) for c in out.copies])
        chunks = [(sid, seqs[sid].num_computed_tokens, 1) for sid in out.decodes]
        chunks += [(c.seq_id, c.start, c.n_tokens) for c in out.prefills]
        sampled: dict[str, int] = {}
        t1 = t0
        if chunks:
            logits = self.runner.forward(chunks)
            t1 = time.perf_counter()
            row = {sid: i for i, (sid, _, _) in enumerate(chunks)}
            ids = out.sample_ids
            if ids:  # the batch's rows at once: greedy one argmax, each sampling group one draw
                tokens = sample_batch(logits[[row[sid] for sid in ids]],
                                      [self._sampler(seqs[sid]) for sid in ids])
                sampled = SampledTokens(ids, tokens)  # python ints (sample_batch's)
        return sampled, t1 - t0, time.perf_counter() - t1

    def _sampler(self, seq: Sequence) -> Sampler:
        """One seeded sampler per request: its draws do not depend on who shares the batch."""
        sampler = self._samplers.get(seq.seq_id)
        if sampler is None:
            sampler = self._samplers[seq.seq_id] = Sampler(seq.request.sampling)
        return sampler


def mixed_step_cost(cfg: ModelConfig, prefills: list[tuple[int, int]], decode_contexts: list[int],
                    dtype: str = "fp16") -> OpCost:
    """One flat iteration: prefill chunks (start, n) and decodes (their context after the
    step), built from engines/roofline's step and attention costs:

    - weights read once, linears and KV writes for the T = Σn + n_decodes tokens, lm_head for
      one row per sequence (decode_step_parts' "linears", "embeddings and norms", "kv write"
      at batch T, its "lm_head" at batch n_seqs);
    - a chunk's attention: attention_prefill_cost(n) (causal within the chunk) plus its n
      queries over the `start` cached tokens: attention_decode_cost(n, start)'s FLOPs, the
      cached K/V read once (kv_bytes_per_request(start): a windowed layer's last W tokens);
    - the decodes' attention: attention_decode_cost(n_decodes, their mean context), which is
      the sum of each one's attention_decode_cost(1, context) (the cost is linear in context;
      with windowed layers it is not past the window, and the mean stands for each context).
    A MoE's weights read are those the T tokens touch (step_costs, memory.experts_touched).
    """
    return step_cost_from_counts(cfg, prefills, len(decode_contexts), sum(decode_contexts), dtype)


def step_cost_from_counts(cfg: ModelConfig, prefills, n_decodes: int,
                          decode_context_tokens: int, dtype: str) -> OpCost:
    """mixed_step_cost from the decodes' count and summed context (all it needs of them)."""
    n_tokens = sum(n for _, n in prefills) + n_decodes
    n_seqs = len(prefills) + n_decodes
    flops, bytes_moved = step_flops_bytes(cfg, prefills, n_decodes, decode_context_tokens,
                                          dtype)
    return OpCost(f"iteration T={n_tokens} seqs={n_seqs}", flops, bytes_moved)


def step_flops_bytes(cfg: ModelConfig, prefills, n_decodes: int, decode_context_tokens: int,
                     dtype: str) -> tuple[float, float]:
    """(FLOPs, bytes) of step_cost_from_counts without its records: the same parts added in
    the same order (sum_costs' left-to-right float sums, so the same bits), each part's
    figures memoised where they repeat (the weights' parts by batch size, a chunk's own
    attention by its length)."""
    n_tokens = sum(n for _, n in prefills) + n_decodes
    flops, bytes_moved = _weights_part(cfg, n_tokens, len(prefills) + n_decodes, dtype)
    for start, n in prefills:
        f, b = _prefill_attention(cfg, n, dtype)
        flops += f
        bytes_moved += b
        if start:
            flops += attention_decode_cost(cfg, n, start, dtype, dtype).flops
            bytes_moved += kv_bytes_per_request(cfg, start, dtype)
    if n_decodes:
        cost = attention_decode_cost(cfg, n_decodes, decode_context_tokens / n_decodes, dtype,
                                     dtype)
        flops += cost.flops
        bytes_moved += cost.bytes_moved
    return float(flops), float(bytes_moved)


@functools.lru_cache(maxsize=65_536)
def _weights_part(cfg: ModelConfig, n_tokens: int, n_seqs: int, dtype: str
                  ) -> tuple[float, float]:
    """The running (FLOPs, bytes) after the first four parts: linears, embeddings and norms,
    KV write at batch T, lm_head at batch n_seqs (started from sum's 0)."""
    by_tokens, by_seqs = _step_parts(cfg, n_tokens, dtype), _step_parts(cfg, n_seqs, dtype)
    flops = bytes_moved = 0
    for p in (by_tokens["linears"], by_tokens["embeddings and norms"], by_tokens["kv write"],
              by_seqs["lm_head"]):
        flops += p.flops
        bytes_moved += p.bytes_moved
    return flops, bytes_moved


@functools.lru_cache(maxsize=65_536)
def _prefill_attention(cfg: ModelConfig, n: int, dtype: str) -> tuple[float, float]:
    cost = attention_prefill_cost(cfg, n, 1, dtype, dtype)
    return cost.flops, cost.bytes_moved


@functools.lru_cache(maxsize=8192)
def _step_parts(cfg: ModelConfig, batch: int, dtype: str) -> dict[str, OpCost]:
    """decode_step_parts by name; cached: a simulated run asks for the same batch sizes
    thousands of times (the parts are frozen records, shared safely)."""
    return {p.name: p for p in decode_step_parts(cfg, batch, 1, dtype, dtype, dtype)}


class SimulatedExecutor:
    """No forward: an iteration takes its roofline time, F / min(P, I × W) (formulas), on a
    device given as a HardwarePreset or as roofs (peak FLOP/s, bandwidth bytes/s)."""

    clock = SIMULATED

    def __init__(self, model_config: ModelConfig,
                 hardware: HardwarePreset | tuple[float, float], dtype: str = "fp16",
                 token_id: int = 0) -> None:
        if isinstance(hardware, HardwarePreset):
            hardware = (hardware.peak_flops_for(dtype), hardware.bandwidth_bytes_per_s)
        self.config = model_config
        self.peak_flops, self.bw_bytes_per_s = (float(v) for v in hardware)
        self.dtype = dtype
        self.token_id = index(token_id)

    def iteration_time_s(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]) -> float:
        if out.is_empty:
            return 0.0
        return self.batch_time_s([(c.start, c.n_tokens) for c in out.prefills],
                                 len(out.decodes), out.decode_context_tokens)

    def batch_time_s(self, prefills: list[tuple[int, int]], n_decodes: int,
                     decode_context_tokens: int) -> float:
        """The roofline time of prefill chunks (start, n) and `n_decodes` decodes over
        `decode_context_tokens` summed context (mixed_step_cost), F / min(P, I × W)."""
        flops, bytes_moved = step_flops_bytes(self.config, prefills, n_decodes,
                                              decode_context_tokens, self.dtype)
        if not bytes_moved:  # formulas' inf / nan conventions
            intensity = formulas.arithmetic_intensity(flops, bytes_moved)
            attainable = formulas.attainable_flops(self.peak_flops, self.bw_bytes_per_s,
                                                   intensity)
            return float(flops / attainable)
        # formulas.arithmetic_intensity and attainable_flops on floats: the same IEEE
        # operations as numpy's true_divide, multiply and minimum, without their overhead
        attainable = min(self.peak_flops, flops / bytes_moved * self.bw_bytes_per_s)
        return flops / attainable

    def execute(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]
                ) -> tuple[dict[str, int], float, float]:
        sampled = SampledTokens(out.sample_ids, [self.token_id] * len(out.sample_ids))
        return sampled, self.iteration_time_s(out, seqs), 0.0


def simulated_pool_blocks(model_config: ModelConfig, preset: HardwarePreset,
                          block_size: int = 16, utilization: float = 0.9,
                          dtype: str = "fp16") -> int:
    """KV blocks that fit beside the weights: ⌊(budget ⌊memory × utilization⌋ − weights) /
    kv_bytes_per_token / block_size⌋ (plan_memory's budget and weights). A block holds its
    tokens in every layer: the pool does not free a sliding layer's tokens past its window,
    so a windowed model's pool is counted as if every layer held every token."""
    plan = plan_memory(model_config, 1, 1, dtype, dtype, preset.memory_bytes, utilization)
    free = max(0, plan.budget_bytes - plan.weight_bytes)
    n_blocks = free // plan.kv_bytes_per_token // block_size
    if n_blocks < 1:
        raise ValueError(
            f"{model_config.id} in {dtype}: weights of {plan.weight_bytes:,} bytes leave no "
            f"KV block of {block_size} tokens in {preset.id}'s budget of "
            f"{plan.budget_bytes:,} bytes ({utilization:.0%} of {preset.memory_bytes:,})")
    return n_blocks
