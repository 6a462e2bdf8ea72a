"""A real server's costs fitted to what a short probe measured of it, as Vidur fits its
operator profiles before it simulates: TTFT at a few prompt lengths on an idle server, and the
gaps between streamed tokens. Least squares (numpy's lstsq) on polynomials, each point's
residual taken relative to its own value ((fit − y) / y), so that a 4-token prompt's 0.1 s
counts as much as a 192-token prompt's 3 s (the errors a fidelity run reports are relative too,
and an absolute fit lets the constant a go negative):

    prefill_s(n)   = a + b·n (+ c·n²)    n: the prompt tokens the server computes; the
                                         constant a holds the HTTP round trip and the first
                                         token's sampling, as the client's TTFT does
    decode_s(ctx)  = d (+ e·ctx)         one more output token with ctx tokens in context

engines/serve/serial_queue.py runs requests through these on the simulated clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def _polyfit(points: Sequence[tuple[float, float]], terms: int, what: str) -> tuple[float, ...]:
    """Coefficients (c0, c1, ...) of y = Σ c_k x^k, `terms` of them, minimising
    Σ ((Σ c_k x^k − y) / y)²."""
    if len(points) < terms:
        raise ValueError(f"{what}: {terms} coefficients need at least {terms} points, got "
                         f"{len(points)}")
    xs = np.array([float(x) for x, _ in points])
    ys = np.array([float(y) for _, y in points])
    if not (np.isfinite(xs).all() and np.isfinite(ys).all() and (ys > 0).all()):
        raise ValueError(f"{what}: the points must be finite numbers, times > 0")
    if len(set(xs.tolist())) < terms:
        raise ValueError(f"{what}: {terms} coefficients need {terms} distinct x values")
    scale = max(1.0, float(np.abs(xs).max()))  # x / scale keeps the columns of one size
    columns = np.vander(xs / scale, terms, increasing=True)
    coef, *_ = np.linalg.lstsq(columns / ys[:, None], np.ones_like(ys), rcond=None)
    return tuple(float(c) / scale**k for k, c in enumerate(coef))


@dataclass(frozen=True)
class FittedCost:
    """prefill_coef (a, b[, c]) and decode_coef (d[, e]) of the module's formulas, seconds."""

    prefill_coef: tuple[float, ...]
    decode_coef: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("prefill_coef", "decode_coef"):
            coef = getattr(self, name)
            if not coef or not all(isinstance(c, float) and math.isfinite(c) for c in coef):
                raise ValueError(f"{name}: expected finite floats, got {coef!r}")

    @classmethod
    def fit(cls, prefill_points: Iterable[tuple[float, float]],
            decode_points: Iterable[tuple[float, float]], prefill_terms: int = 3,
            decode_terms: int = 2) -> FittedCost:
        """From (prompt tokens, TTFT s) and (context tokens, token gap s) points; ValueError
        when there are too few, or too few distinct lengths, for the terms asked."""
        return cls(_polyfit(list(prefill_points), prefill_terms, "prefill points"),
                   _polyfit(list(decode_points), decode_terms, "decode points"))

    def prefill_s(self, n_tokens: float) -> float:
        """a + b·n (+ c·n²), never below 0."""
        return max(0.0, sum(c * n_tokens**k for k, c in enumerate(self.prefill_coef)))

    def decode_s(self, context_tokens: float) -> float:
        """d (+ e·ctx), never below 0."""
        return max(0.0, sum(c * context_tokens**k for k, c in enumerate(self.decode_coef)))

    def to_dict(self) -> dict:
        return {"prefill_coef": list(self.prefill_coef),
                "decode_coef": list(self.decode_coef)}
