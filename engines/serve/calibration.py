"""How well the simulated clock predicts the wall clock: the cost model beside the real model,
iteration by iteration, on the same schedule.

`PredictingExecutor` wraps the real executor of a wall-clock run. Before each batch runs it
asks a `SimulatedExecutor` (the same model config, the local device's measured roofs) what the
batch would cost, then runs it for real; each iteration yields one `Prediction` (predicted vs
measured executor time: forward + sample, what the simulated clock stands in for).
`prediction_errors` summarises |predicted - measured| / measured per iteration kind:

    decode-only    no prefill chunk
    prefill-heavy  prefill tokens are at least half the batch's tokens
    mixed          prefill chunks and decodes, decodes the larger part

Two cost models stand beside the wall clock: the roofline (SimulatedExecutor on the measured
roofs, what the simulated clock uses) and `ProfiledCostModel` (this device's measured forward
times for the model, interpolated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.serve.request import Sequence
from inferlab.engines.serve.scheduler import SchedulerOutput

KINDS = ("prefill-heavy", "decode-only", "mixed")


def iteration_kind(prefill_tokens: int, decode_tokens: int) -> str:
    if prefill_tokens == 0:
        return "decode-only"
    return "prefill-heavy" if prefill_tokens >= decode_tokens else "mixed"


@dataclass(frozen=True)
class Prediction:
    kind: str
    prefill_tokens: int
    decode_tokens: int
    predicted_s: float
    measured_s: float

    @property
    def relative_error(self) -> float:
        return abs(self.predicted_s - self.measured_s) / self.measured_s


class PredictingExecutor:
    """The real executor, timed, with the cost model's prediction of every batch beside it."""

    def __init__(self, executor, cost_model) -> None:
        self.executor = executor
        self.cost_model = cost_model  # a SimulatedExecutor: iteration_time_s(out, seqs)
        self.clock = executor.clock
        self.predictions: list[Prediction] = []

    def execute(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]):
        predicted_s = self.cost_model.iteration_time_s(out, seqs)  # before seqs change
        sampled, forward_s, sample_s = self.executor.execute(out, seqs)
        prefill = sum(c.n_tokens for c in out.prefills)
        decode = len(out.decodes)
        self.predictions.append(Prediction(iteration_kind(prefill, decode), prefill, decode,
                                           predicted_s, forward_s + sample_s))
        return sampled, forward_s, sample_s


def prediction_errors(predictions: Iterable[Prediction]) -> dict:
    """{"all" and each kind present: {"iterations", "median", "p90"}} of the relative error,
    and "predicted_over_measured_median" (< 1: the cost model is optimistic)."""
    predictions = list(predictions)
    out: dict = {}
    for kind in ("all", *KINDS):
        chosen = [p for p in predictions if kind == "all" or p.kind == kind]
        if not chosen:
            continue
        errors = np.array([p.relative_error for p in chosen])
        ratio = np.array([p.predicted_s / p.measured_s for p in chosen])
        out[kind] = {"iterations": len(chosen), "median": float(np.median(errors)),
                     "p90": float(np.percentile(errors, 90)),
                     "predicted_over_measured_median": float(np.median(ratio))}
    return out


class ProfiledCostModel:
    """This device's own cost model of a real model, from forwards it measured (as the Vidur
    simulator profiles operators before it simulates), for when the roofline is far off (on
    a CPU, small matrix products run far below the measured peak).

    Two profiles on a scratch paged cache, each point the median of `repeats` forwards:

        t_prefill(T)  one sequence, a chunk of T tokens (no cached context)
        t_decode(S)   S sequences of `context` tokens, one new token each

    A flat batch of T tokens over S sequences is predicted as t_prefill(T) plus what S
    sequences cost beyond one (their logits rows, their attention):
    t_decode(S) - t_prefill(S), both interpolated linearly between the profiled sizes.
    """

    def __init__(self, token_grid, t_prefill_s, seq_grid, t_decode_s) -> None:
        self.token_grid = np.asarray(token_grid, dtype=np.float64)
        self.t_prefill = np.asarray(t_prefill_s, dtype=np.float64)
        self.seq_grid = np.asarray(seq_grid, dtype=np.float64)
        self.t_decode = np.asarray(t_decode_s, dtype=np.float64)
        if self.seq_grid[-1] > self.token_grid[-1]:
            raise ValueError("the token grid must reach the largest profiled sequence count")

    @classmethod
    def measure(cls, model, token_grid=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                seq_grid=(1, 2, 4, 8, 16, 32, 64), context: int = 64, repeats: int = 3,
                block_size: int = 16) -> ProfiledCostModel:
        """Profile `model` on its device (a scratch cache; a warm-up forward per point)."""
        def timed(run) -> float:
            return median_call_s(run, model.device, repeats=repeats, warmup=1)

        per_seq = -(-(max(max(token_grid), context + 1)) // block_size) + 1
        runner = ModelRunner(model, n_blocks=per_seq * (max(seq_grid) + 1),
                             block_size=block_size, enable_prefix_caching=False)
        vocab = model.config.vocab_size
        runner.add("p", [(7 * j + 1) % vocab for j in range(max(token_grid))])
        t_prefill = [timed(lambda n=n: runner.forward([("p", 0, n)])) for n in token_grid]
        runner.free("p")
        ids = [f"s{i}" for i in range(max(seq_grid))]
        for i, sid in enumerate(ids):
            runner.add(sid, [(11 * i + 3 * j + 1) % vocab for j in range(context + 1)])
        t_decode = [timed(lambda s=s: runner.forward([(sid, context, 1) for sid in ids[:s]]))
                    for s in seq_grid]
        return cls(token_grid, t_prefill, seq_grid, t_decode)

    def predict_s(self, n_tokens: int, n_seqs: int) -> float:
        prefill = np.interp(n_tokens, self.token_grid, self.t_prefill)
        if n_tokens > self.token_grid[-1]:  # past the profile: linear in tokens
            prefill = self.t_prefill[-1] * n_tokens / self.token_grid[-1]
        seqs = min(n_seqs, int(self.seq_grid[-1]))
        extra = (np.interp(seqs, self.seq_grid, self.t_decode)
                 - np.interp(seqs, self.token_grid, self.t_prefill))
        return float(prefill + max(0.0, extra) * n_seqs / seqs)

    def iteration_time_s(self, out: SchedulerOutput, seqs: Mapping[str, Sequence]) -> float:
        if out.is_empty:
            return 0.0
        return self.predict_s(out.num_batched_tokens, len(out.prefills) + len(out.decodes))
