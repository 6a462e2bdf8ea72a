"""What one verify step hands out: the tokens it emits and why each was emitted.

A step over K drafts emits n_accepted + 1 tokens: the accepted drafts, then one token the
target chose itself, either RESAMPLED (from the residual at the first rejection; in greedy
mode the target's argmax where it disagreed) or a BONUS (every draft accepted: drawn from the
target's distribution after the last draft). Rejected drafts are not emitted; `accepted`
says which drafts were kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class TokenFate(str, Enum):
    """Why an emitted token was emitted."""

    ACCEPTED = "accepted"
    """A draft token the target accepted."""
    RESAMPLED = "resampled"
    """The target's own token at the first rejection (residual draw, or greedy correction)."""
    BONUS = "bonus"
    """The target's token after every draft was accepted."""


@dataclass(frozen=True)
class Verification:
    """One chain of K drafts verified.

    accepted[i] is True when draft i was kept (always a run from the start: after the first
    rejection nothing is kept). uniforms: u[i] decided draft i (accept when u[i] * q(x_i) <
    p(x_i)), u[K] drew the last token; empty in greedy mode, which draws nothing.
    """

    token_ids: tuple[int, ...]
    n_accepted: int
    accepted: tuple[bool, ...]
    fates: tuple[TokenFate, ...]
    uniforms: tuple[float, ...]

    @property
    def n_drafts(self) -> int:
        return len(self.accepted)


@dataclass(frozen=True)
class TreeVerification:
    """One token tree verified.

    path: the accepted nodes, root first (indices into the tree). accepted[i] is True for the
    nodes on that path. uniforms: u[i] decided node i when it was tried, u[N] drew the last
    token; entries of nodes never tried are unused. Empty in greedy mode.
    """

    token_ids: tuple[int, ...]
    path: tuple[int, ...]
    accepted: tuple[bool, ...]
    fates: tuple[TokenFate, ...]
    uniforms: tuple[float, ...]

    @property
    def n_accepted(self) -> int:
        return len(self.path)
