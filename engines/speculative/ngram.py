"""Prompt lookup: draft by copying what followed an earlier occurrence of the text's ending.

No model. For n from max_n down to min_n, the last n tokens of prompt + output are searched
for earlier in the sequence; at the longest n that occurs, the most recent occurrence wins
(the nearest repeat tends to continue most like the text now, e.g. code being re-emitted
after an edit) and the up to K tokens that followed it are the draft. Each draft token is
certain (q one-hot), so verification accepts x with probability p(x).

    ... the cat sat on the mat . the cat  -> suffix "the cat" occurred at 0 -> draft "sat on"

For trees, `propose_candidates` returns several distinct continuations: those of other
occurrences of the same suffix, most recent first, then of shorter suffixes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from inferlab.engines.speculative.checks import check_count, token_tensor
from inferlab.engines.speculative.drafter import Proposal
from inferlab.engines.speculative.errors import SpeculativeError


class NgramDrafter:
    """Proposes continuations of the longest suffix (max_n .. min_n tokens) seen before."""

    def __init__(self, max_n: int = 3, min_n: int = 1) -> None:
        check_count(min_n, "min_n")
        check_count(max_n, "max_n")
        if min_n > max_n:
            raise SpeculativeError(f"min_n ({min_n}) must be <= max_n ({max_n})")
        self.max_n = max_n
        self.min_n = min_n

    def _continuations(self, token_ids: Sequence[int], k: int) -> Iterator[tuple[int, ...]]:
        """Every match's continuation, longest suffix first, most recent occurrence first."""
        check_count(k, "k")
        ids = token_tensor(token_ids, "token_ids")
        length = ids.shape[0]
        if length == 0:
            raise SpeculativeError("token_ids must not be empty: an empty prompt has nothing "
                                   "to look up")
        for n in range(min(self.max_n, length - 1), self.min_n - 1, -1):
            # windows starting at j = 0 .. length-1-n: each ends before the last token, so a
            # continuation follows it and the suffix itself is not counted
            windows = ids[: length - 1].unfold(0, n, 1)
            starts = (windows == ids[length - n:]).all(dim=-1).nonzero()[:, 0]
            for j in reversed(starts.tolist()):
                yield tuple(ids[j + n : j + n + k].tolist())

    name = "ngram"

    def reset(self) -> None:
        """Nothing to forget: each lookup reads only the text it is given."""

    def propose(self, token_ids: Sequence[int], k: int) -> Proposal:
        """Up to k tokens that followed the longest earlier match; none when nothing matches."""
        return Proposal(next(self._continuations(token_ids, k), ()))

    def propose_candidates(self, token_ids: Sequence[int], k: int,
                           width: int) -> tuple[Proposal, ...]:
        """Up to `width` distinct continuations (the first is `propose`'s); for token trees."""
        check_count(width, "width")
        seen: list[tuple[int, ...]] = []
        for continuation in self._continuations(token_ids, k):
            if continuation not in seen:
                seen.append(continuation)
                if len(seen) == width:
                    break
        return tuple(Proposal(c) for c in seen)
