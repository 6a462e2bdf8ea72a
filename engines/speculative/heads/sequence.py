"""One training sequence of a draft head: tokens, the target's hidden states, its greedy
tokens (features.py and distill.py build them; windows.py cuts them)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class TrainingSequence:
    """One training sequence: `tokens` [T] int64, `hidden` [T, d] fp32, `greedy` [T] int64."""

    name: str
    tokens: torch.Tensor
    hidden: torch.Tensor
    greedy: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.numel())
