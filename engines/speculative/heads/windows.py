"""Training sequences cut into fixed-length windows and stacked into padded batches.

A sequence of T tokens gives windows of `window` positions: starts 0, W, 2W, … and a last
one ending at T - 1 (overlapping the one before), or one shorter window when T - 1 < W. For
positions t = a .. a + n - 1 of a window starting at a, a batch holds

    feats[t]    = unit_rms(f_t)            the head's input feature
    next_ids[t] = x_{t+1}                  EAGLE's input token
    next_feat[t]= unit_rms(f_{t+1})        EAGLE's regression target
    labels[k][t]= greedy[t + k]            the target's token after position t + k (k = 1:
                                           EAGLE's and Medusa head 1's; Medusa head k: k),
                                           -100 where t + k is past the sequence

and `valid` [B, W] marks the real (unpadded) positions; padding sits after them, so causal
attention keeps it from changing the real positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.speculative.heads.dims import unit_rms
from inferlab.engines.speculative.heads.features import TrainingSequence

IGNORE = -100


@dataclass(frozen=True, eq=False)
class Batch:
    feats: torch.Tensor  # [B, W, d]
    next_ids: torch.Tensor  # [B, W]
    next_feat: torch.Tensor  # [B, W, d]
    labels: torch.Tensor  # [n_labels, B, W] full-vocabulary ids or IGNORE
    valid: torch.Tensor  # [B, W] bool


def window_starts(length: int, window: int) -> list[tuple[int, int]]:
    """(start, n) of each window of a sequence of `length` tokens (n <= window positions,
    each with a next token)."""
    usable = length - 1
    if usable < 1:
        return []
    if usable <= window:
        return [(0, usable)]
    starts = list(range(0, usable - window + 1, window))
    if starts[-1] + window < usable:
        starts.append(usable - window)
    return [(a, window) for a in starts]


def all_windows(seqs: Sequence[TrainingSequence], window: int) -> list[tuple[int, int, int]]:
    """(sequence index, start, n) of every window, in sequence order."""
    return [(i, a, n) for i, s in enumerate(seqs) for a, n in window_starts(len(s), window)]


def make_batch(seqs: Sequence[TrainingSequence], picks: Sequence[tuple[int, int, int]],
               window: int, n_labels: int) -> Batch:
    d = seqs[0].hidden.shape[1]
    b = len(picks)
    feats = torch.zeros(b, window, d)
    next_feat = torch.zeros(b, window, d)
    next_ids = torch.zeros(b, window, dtype=torch.int64)
    labels = torch.full((n_labels, b, window), IGNORE, dtype=torch.int64)
    valid = torch.zeros(b, window, dtype=torch.bool)
    for row, (i, a, n) in enumerate(picks):
        s = seqs[i]
        u = unit_rms(s.hidden[a:a + n + 1])
        feats[row, :n] = u[:n]
        next_feat[row, :n] = u[1:n + 1]
        next_ids[row, :n] = s.tokens[a + 1:a + n + 1]
        valid[row, :n] = True
        for k in range(1, n_labels + 1):
            got = s.greedy[a + k:a + n + k]
            labels[k - 1, row, :got.numel()] = got
    return Batch(feats, next_ids, next_feat, labels, valid)
