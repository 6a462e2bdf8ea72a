"""Choosing the next token from logits: greedy, or temperature with top-k and nucleus (top-p),
seeded.

`filtered_probs` is the one place the distribution is defined (speculative decoding filters
its target and draft with it too):

    probs = softmax(logits / temperature)
    top-k: keep the k most likely tokens (ties broken by position), renormalise
    top-p: keep the smallest most-likely-first set whose mass reaches top_p, renormalise
           (a token is dropped when the tokens more likely than it already hold top_p)

A given seed gives the same draws every run.
Logits holding NaN or +inf (a broken model or weights) are refused with a ValueError, in
both modes: NaN never reaches a draw, and greedy never returns a NaN's index.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy (argmax; top_k, top_p and seed are then unused); top_k 0
    keeps every token. top_k comes last so that positional (temperature, top_p, seed) keeps
    its meaning."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    top_k: int = 0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0, got {self.top_k!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = SamplingParams()


def check_logits(logits: torch.Tensor) -> None:
    """ValueError if a row of `logits` [n, vocab] holds NaN or +inf. One pass: a row's max
    is NaN if any entry is (amax propagates NaN) and +inf if any entry is."""
    row_max = logits.amax(dim=-1)
    bad = torch.isnan(row_max) | torch.isposinf(row_max)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(f"logits row {row} holds NaN or +inf: the model's numbers are "
                         "broken (check its weights and config), nothing to sample from")


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """The argmax of every row of `logits` [n, vocab], checked (a batch's greedy rows at once:
    a greedy pick needs no generator)."""
    check_logits(logits)
    return logits.argmax(dim=-1).tolist()


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int = 0,
                   top_p: float = 1.0) -> torch.Tensor:
    """The distribution to sample from, per row of `logits` [..., V]: fp32 on the CPU, rows
    summing to 1 (the formula in the module docstring). Temperature 0 gives the one-hot row of
    the argmax (its limit). ValueError for NaN / +inf logits or a row that is all -inf.

    No row's vocabulary is sorted: the kept set is found from a partial selection
    (`torch.topk`) of the most likely tokens, widened only when top-p's mass is not reached
    within it, then the ties at the cut are resolved by position. The result is the stable
    sort's, value for value; a whole batch of rows is filtered in one call."""
    check_logits(logits)
    x = logits.float().cpu()
    if temperature == 0:
        return torch.zeros_like(x).scatter_(-1, x.argmax(dim=-1, keepdim=True), 1.0)
    probs = torch.softmax(x / temperature, dim=-1)
    if not _finite_rows(probs):  # x / T overflowed: a tiny temperature
        xd = x.double()
        probs = torch.softmax((xd - xd.max(dim=-1, keepdim=True).values) / temperature,
                              dim=-1).float()
    if not _finite_rows(probs):
        raise ValueError("a logits row is -inf for every token: nothing to sample from")
    vocab = probs.shape[-1]
    if 0 < top_k < vocab:
        kth = probs.topk(top_k, dim=-1).values[..., -1:]
        probs = probs.masked_fill(~_most_likely(probs, kth, top_k), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p < 1:
        n_keep, cut = _top_p_cut(probs, top_p, min(vocab, top_k or vocab))
        probs = probs.masked_fill(~_most_likely(probs, cut, n_keep), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def _finite_rows(probs: torch.Tensor) -> bool:
    """No NaN or inf in `probs` (entries in [0, 1] otherwise): one entry's NaN makes its
    row's sum NaN, so the row sums say it at a fraction of an elementwise check's cost."""
    return bool(torch.isfinite(probs.sum(dim=-1)).all())


TOP_P_CANDIDATES = 256
"""Tokens `filtered_probs` first selects for top-p (doubled until the mass is reached)."""


def _top_p_cut(probs: torch.Tensor, top_p: float, n_max: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(how many tokens top-p keeps, the probability of the last kept) per row [..., 1]: the
    tokens, most likely first, whose more likely tokens hold less than top_p. At most n_max
    tokens have probability above 0 (top-k ran first)."""
    m = min(TOP_P_CANDIDATES, n_max)
    while True:
        values = probs.topk(m, dim=-1).values  # descending: the stable sort's first m values
        before = values.cumsum(dim=-1) - values  # mass of strictly more likely tokens
        keep = before < top_p
        if m == n_max or not bool(keep[..., -1].any()):
            n_keep = keep.sum(dim=-1, keepdim=True).clamp_min(1)
            return n_keep, values.gather(-1, n_keep - 1)
        m = min(2 * m, n_max)


def _most_likely(probs: torch.Tensor, cut: torch.Tensor, n: int | torch.Tensor
                 ) -> torch.Tensor:
    """Bool mask of each row's n most likely tokens, where `cut` is the n-th largest
    probability: every token above it and, of those equal to it, the lowest ids (a stable
    sort's order)."""
    keep = probs >= cut
    if bool((keep.sum(dim=-1, keepdim=True) <= n).all()):  # the ties at the cut all fit
        return keep
    above = probs > cut
    at = keep & ~above
    room = n - above.sum(dim=-1, keepdim=True)
    return above | (at & (at.cumsum(dim=-1) <= room))


DRAW_CHUNK = 1024
"""Tokens per chunk of `draw`'s two-level search."""


def draw(probs: torch.Tensor, uniforms: torch.Tensor) -> list[int]:
    """One token per row of `probs` [n, V] by inverse CDF: the first token whose cumulative
    mass passes u × the row's total (u in [0, 1), `uniforms` [n]), in float64. Two levels, so
    that a batch never builds a float64 CDF of its whole vocabulary: the chunk of DRAW_CHUNK
    tokens the target falls in, from the chunks' masses, then the token within it. A token of
    probability 0 is never drawn (a target that rounding puts past the last mass picks the
    last token above 0)."""
    n, vocab = probs.shape
    pad = -vocab % DRAW_CHUNK
    chunks = torch.nn.functional.pad(probs, (0, pad)) if pad else probs
    chunks = chunks.reshape(n, -1, DRAW_CHUNK)
    chunk_mass = chunks.sum(dim=-1, dtype=torch.float64)  # [n, chunks]
    chunk_cdf = chunk_mass.cumsum(dim=-1)
    target = uniforms.double().unsqueeze(-1) * chunk_cdf[:, -1:]
    k = torch.minimum(torch.searchsorted(chunk_cdf, target, right=True).squeeze(-1),
                      _last_positive(chunk_mass))
    rows = torch.arange(n)
    below = torch.where(k > 0, chunk_cdf[rows, (k - 1).clamp_min(0)], 0.0)
    inside = chunks[rows, k]  # [n, DRAW_CHUNK]
    within = torch.searchsorted(inside.double().cumsum(dim=-1),
                                (target.squeeze(-1) - below).unsqueeze(-1), right=True)
    j = torch.minimum(within.squeeze(-1), _last_positive(inside))
    return (k * DRAW_CHUNK + j).tolist()


def _last_positive(x: torch.Tensor) -> torch.Tensor:
    """Index of each row's last entry above 0 (rows hold at least one)."""
    return x.shape[-1] - 1 - (x.flip(-1) > 0).to(torch.int8).argmax(dim=-1)


class Sampler:
    """Draws next tokens for a batch of logits rows; owns the seeded generator (one uniform
    per row drawn, so a request's draws do not depend on who shares its batch:
    `sample_batch`)."""

    def __init__(self, params: SamplingParams = GREEDY) -> None:
        self.params = params
        self.generator = torch.Generator().manual_seed(params.seed)

    def __call__(self, logits: torch.Tensor) -> list[int]:
        """One token id per row of `logits` [n, vocab]."""
        p = self.params
        if p.greedy:
            return greedy_tokens(logits)
        probs = filtered_probs(logits, p.temperature, p.top_k, p.top_p)
        return draw(probs, self.uniforms(probs.shape[0]))

    def uniforms(self, n: int) -> torch.Tensor:
        """The next n uniforms in [0, 1) of this sampler's stream."""
        return torch.rand(n, generator=self.generator, dtype=torch.float64)


def sample_batch(logits: torch.Tensor, samplers: list[Sampler]) -> list[int]:
    """One token per row of `logits` [n, vocab], row i by `samplers[i]`: the same tokens
    each sampler would draw from its row alone, with the rows of equal sampling parameters
    filtered and drawn together (one softmax, one selection, one search; greedy rows one
    argmax)."""
    if logits.shape[0] != len(samplers):
        raise ValueError(f"{logits.shape[0]} logits rows for {len(samplers)} samplers")
    out: list[int] = [0] * len(samplers)
    groups: dict[SamplingParams, list[int]] = {}
    for i, sampler in enumerate(samplers):
        key = GREEDY if sampler.params.greedy else sampler.params
        groups.setdefault(dataclasses.replace(key, seed=0), []).append(i)
    for params, rows in groups.items():
        sub = logits[rows]
        if params.greedy:
            tokens = greedy_tokens(sub)
        else:
            probs = filtered_probs(sub, params.temperature, params.top_k, params.top_p)
            u = torch.cat([samplers[i].uniforms(1) for i in rows])
            tokens = draw(probs, u)
        for i, token in zip(rows, tokens, strict=True):
            out[i] = token
    return out
