"""The drafter interface: what the verify loop asks of anything that proposes draft tokens.

The n-gram drafter (no model) and the model drafters (model_drafter.py: a smaller model, the
target's first layers) implement it; a quantized self-draft will implement the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True, eq=False)
class Proposal:
    """Up to K draft tokens and the distributions they were drawn from.

    q_probs [len(tokens), V]: row i is the (already filtered) q token i was drawn from; None
    when every token was certain (q one-hot), as for prompt lookup. No tokens: nothing to
    propose, the loop takes a plain target step.
    """

    tokens: tuple[int, ...]
    q_probs: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.tokens)


class Drafter(Protocol):
    def propose(self, token_ids: Sequence[int], k: int) -> Proposal:
        """Up to `k` (>= 1) tokens to follow `token_ids` (prompt + output so far, not empty)."""
        ...

    def reset(self) -> None:
        """Forget any state kept between calls (a new prompt follows)."""
        ...


# A drafter that reads the target's features (a trained head, heads/) also has
#     observe_target(first_position: int, token_ids: list[int], hidden: torch.Tensor) -> None
# called by the decoder after each verify forward: the tokens run from `first_position` on
# (drafts the verifier may still reject among them) and their last-layer hidden states
# [len(token_ids), d_model]. Optional, so it is not part of the protocol above.
