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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

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
