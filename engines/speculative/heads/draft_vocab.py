"""The draft vocabulary (EAGLE-3): the N tokens the target emits most often in the training
data. A head scores only these (an N-row slice of the target's lm_head: the draft step's
largest product shrinks by V / N) and every draft token maps back to its full-vocabulary id:

    draft index i  ->  token d2t[i]              (d2t: sorted full ids, distinct)
    token t        ->  draft index t2d[t], or -1 where t is outside the draft vocabulary
    full-vocabulary logits = -inf everywhere, draft logits scattered at d2t

so an argmax, a softmax or a sampled token over the draft vocabulary is the same one over the
full vocabulary with the tokens outside it given no mass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inferlab.engines.speculative.errors import SpeculativeError


@dataclass(frozen=True, eq=False)
class DraftVocab:
    """`d2t` [N] int64: the full-vocabulary ids of the draft vocabulary, increasing;
    `vocab_size`: the target's V."""

    d2t: torch.Tensor
    vocab_size: int

    def __post_init__(self) -> None:
        d2t = self.d2t
        if d2t.dim() != 1 or d2t.dtype != torch.int64 or d2t.numel() == 0:
            raise SpeculativeError(f"draft vocab: d2t must be a non-empty 1-d int64 tensor, got "
                                   f"{d2t.dtype} {tuple(d2t.shape)}")
        if bool((d2t[1:] <= d2t[:-1]).any()) or int(d2t[0]) < 0 \
                or int(d2t[-1]) >= self.vocab_size:
            raise SpeculativeError(f"draft vocab: d2t must hold distinct increasing ids in "
                                   f"[0, {self.vocab_size})")

    @property
    def size(self) -> int:
        return int(self.d2t.numel())

    @property
    def t2d(self) -> torch.Tensor:
        """[V] int64: each token's draft index, -1 outside the draft vocabulary."""
        out = torch.full((self.vocab_size,), -1, dtype=torch.int64)
        out[self.d2t] = torch.arange(self.size)
        return out

    def to_full_logits(self, draft_logits: torch.Tensor) -> torch.Tensor:
        """[..., N] -> [..., V]: -inf outside the draft vocabulary."""
        out = torch.full((*draft_logits.shape[:-1], self.vocab_size), float("-inf"),
                         dtype=draft_logits.dtype)
        out[..., self.d2t] = draft_logits
        return out

    @classmethod
    def full(cls, vocab_size: int) -> DraftVocab:
        """The whole vocabulary (no restriction)."""
        return cls(torch.arange(vocab_size, dtype=torch.int64), vocab_size)

    @classmethod
    def most_frequent(cls, token_ids: torch.Tensor, vocab_size: int, size: int) -> DraftVocab:
        """The `size` most frequent ids of `token_ids` (ties: the smaller id first; ids never
        seen fill up by id), as a sorted d2t."""
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= vocab_size:
            raise SpeculativeError(f"draft vocab size must be an integer in [1, {vocab_size}], "
                                   f"got {size!r}")
        counts = torch.bincount(token_ids.reshape(-1).to(torch.int64), minlength=vocab_size)
        # a stable sort of -count keeps equal counts in id order
        order = torch.sort(-counts, stable=True).indices[:size]
        return cls(torch.sort(order).values, vocab_size)

    def coverage(self, token_ids: torch.Tensor) -> float:
        """The share of `token_ids` inside the draft vocabulary."""
        if token_ids.numel() == 0:
            return 0.0
        return float((self.t2d[token_ids.reshape(-1)] >= 0).float().mean())
