"""Drafters that run a trained head (heads/: EAGLE, Medusa) on the target's own features.

The decoder hands each drafter, after every verify forward, the tokens the target ran and
their last-layer hidden states (`observe_target`); the drafter keeps them by position. A
`propose(text, K)` with the text's length L needs the real features of positions 0 .. L - 2
(the target has run all of the text but its last token, which it emitted): on the first
step (nothing run yet) it proposes nothing and the decoder takes a plain target step (the
prompt's prefill). Features of rejected drafts are overwritten by the next forward's; a
position's stored token tells whether its feature still belongs to the text.

    EagleDrafter    the head's cache holds pairs (u_t, x_{t+1}) computed from real features
                    for the longest prefix still in the text; the rest (the last step's
                    drafts, and pairs whose tokens changed) is rolled back, the new real
                    pairs run in one forward, then K chained draft steps (heads/chain.py)
    MedusaDrafter   K = min(K, its heads) drafts from the feature at L - 2 in one call

Drafts are drawn from q = filtered_probs(full-vocabulary logits, settings), the logits
-inf outside the draft vocabulary (DraftVocab.to_full_logits): the verifier's settings, so
rejection sampling stays exact at temperature > 0; greedy drafts take the argmax over the
draft vocabulary (the same token) and their q rows are the softmax, for display.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.sequences import common_prefix_len
from inferlab.engines.speculative import mass
from inferlab.engines.speculative.checks import check_count, check_vocab, token_tensor
from inferlab.engines.speculative.drafter import Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.chain import eagle_chain, medusa_chain
from inferlab.engines.speculative.heads.dims import unit_rms
from inferlab.engines.speculative.heads.draft_tree import eagle_tree
from inferlab.engines.speculative.heads.eagle import HeadCache
from inferlab.engines.speculative.heads.head_file import TrainedHead
from inferlab.engines.speculative.heads.target_head import FrozenHead, target_embed
from inferlab.engines.speculative.sampling import (
    GREEDY,
    SamplingSettings,
    check_drafter_sampling,
    filtered_probs,
)


class _HeadDrafter:
    """What both head drafters share: the target's features by position, sampling."""

    def __init__(self, target: Llama, head: TrainedHead, kind: str,
                 settings: SamplingSettings, seed: int, tokenizer: Tokenizer | None,
                 max_tokens: int | None) -> None:
        if not isinstance(head, TrainedHead) or head.kind != kind:
            raise SpeculativeError(f"a {kind} drafter needs a trained {kind} head, got "
                                   f"{getattr(head, 'kind', head)!r}")
        check_drafter_sampling(settings, seed)
        self.head = head
        self.settings = settings
        self.tokenizer = tokenizer
        self.vocab_size = target.config.vocab_size
        self.name = kind
        self.generator = torch.Generator().manual_seed(seed)
        self.max_tokens = min(target.config.max_position, max_tokens or 4096)
        self.scorer = FrozenHead(target, head.vocab)
        self.embed = target_embed(target)
        self.feats = torch.zeros(self.max_tokens, target.config.d_model)
        """u = unit_rms(f) of each position the target ran, [position, d]."""
        self.feat_ids: list[int] = []
        """The token at each position whose feature `feats` holds."""
        self.n_forwards = 0
        """Head forwards run, ever (EAGLE: the catch-up forward included)."""

    def observe_target(self, first: int, token_ids: Sequence[int], hidden: torch.Tensor) -> None:
        """The target ran `token_ids` from position `first` on; `hidden` [n, d] their
        last-layer residual stream."""
        n = len(token_ids)
        if first > len(self.feat_ids) or first + n > self.max_tokens:
            return  # a gap before them (or past the buffer): they cannot be used
        with torch.no_grad():
            self.feats[first:first + n] = unit_rms(hidden[-n:].float().cpu())
        self.feat_ids = self.feat_ids[:first] + [int(t) for t in token_ids]

    def reset(self) -> None:
        self.feat_ids = []

    def _known(self, ids: list[int]) -> bool:
        """Whether the real features of positions 0 .. len(ids) - 2 are held."""
        need = len(ids) - 1
        return need >= 1 and common_prefix_len(self.feat_ids, ids, need) == need

    def _checked_ids(self, token_ids: Sequence[int], k: int) -> list[int]:
        check_count(k, "k")
        ids = token_tensor(token_ids, "token_ids")
        if ids.shape[0] == 0:
            raise SpeculativeError("token_ids must not be empty: the draft needs a prompt")
        check_vocab(ids, self.vocab_size, "token_ids")
        if ids.shape[0] + k > self.max_tokens:
            raise SpeculativeError(f"token_ids ({ids.shape[0]}) plus k ({k}) drafts exceed the "
                                   f"draft's max_tokens ({self.max_tokens})")
        return ids.tolist()

    def _pick(self, rows: list[torch.Tensor]):
        """`pick(draft logits) -> token` for this drafter's settings, recording q in `rows`."""
        vocab = self.scorer.vocab

        def pick(logits: torch.Tensor) -> int:
            full = vocab.to_full_logits(logits.detach()[None])
            if self.settings.greedy:
                rows.append(torch.softmax(full[0], dim=-1))
                return int(vocab.d2t[int(logits.argmax())])
            q = filtered_probs(full, self.settings)[0]
            rows.append(q)
            u = torch.rand((), generator=self.generator, dtype=torch.float64)
            return int(mass.draw(q.double(), u))
        return pick


class EagleDrafter(_HeadDrafter):
    """Drafts a chain of K tokens with a trained EAGLE head (one decoder layer)."""

    def __init__(self, target: Llama, head: TrainedHead, settings: SamplingSettings = GREEDY,
                 seed: int = 0, tokenizer: Tokenizer | None = None,
                 max_tokens: int | None = None) -> None:
        super().__init__(target, head, "eagle", settings, seed, tokenizer, max_tokens)
        head.module.for_drafting()
        self.cache = HeadCache(head.dims, self.max_tokens)
        self.pair_ids: list[int] = []
        """The text x_0 .. x_m whose real pairs t = 0 .. m - 1 the cache holds first."""

    def reset(self) -> None:
        super().reset()
        self.pair_ids = []
        self.cache.truncate(0)

    def _catch_up(self, ids: list[int]) -> torch.Tensor:
        """Run the real pairs the cache lacks in one forward; the head's output at the last
        one (the first draft's feature)."""
        last = len(ids) - 2  # the last real pair: (u_last, x_{last+1})
        # real pairs still valid: their tokens x_0 .. x_{t+1} are the text's; at least the
        # last one runs again (its output is the first draft's feature)
        keep = min(max(0, common_prefix_len(self.pair_ids, ids, len(ids)) - 1), last)
        self.cache.truncate(keep)
        feats = self.feats[keep:last + 1]
        embeds = self.embed(torch.tensor(ids[keep + 1:last + 2]))
        out = self.head.module(feats[None], embeds[None], keep, self.cache)[0, -1]
        self.n_forwards += 1
        self.pair_ids = ids[:last + 2]
        return out

    def propose(self, token_ids: Sequence[int], k: int) -> Proposal:
        ids = self._checked_ids(token_ids, k)
        if not self._known(ids):
            return Proposal(())
        rows: list[torch.Tensor] = []
        with torch.no_grad():
            out = self._catch_up(ids)
            tokens, _ = eagle_chain(self.head.module, self.scorer, self.embed, self.cache, out,
                                    k, self._pick(rows))
            self.n_forwards += k - 1
        return Proposal(tuple(tokens), torch.stack(rows))

    def propose_candidates(self, token_ids: Sequence[int], k: int,
                           width: int) -> tuple[Proposal, ...]:
        """A dynamic draft tree (heads/draft_tree.py, EAGLE-2's): up to `width` paths of up
        to `k` tokens, at most k · width nodes; certain (top-k, not sampled), so the tree
        verifier keeps sampling exact."""
        check_count(width, "width")
        ids = self._checked_ids(token_ids, k)
        if not self._known(ids):
            return ()
        with torch.no_grad():
            out = self._catch_up(ids)
            paths = eagle_tree(self.head.module, self.scorer, self.embed, self.cache, out, k,
                               width)
            self.n_forwards += k - 1
        return tuple(Proposal(p) for p in paths)


class MedusaDrafter(_HeadDrafter):
    """Drafts up to its number of heads with trained Medusa heads, in one call."""

    def __init__(self, target: Llama, head: TrainedHead, settings: SamplingSettings = GREEDY,
                 seed: int = 0, tokenizer: Tokenizer | None = None,
                 max_tokens: int | None = None) -> None:
        super().__init__(target, head, "medusa", settings, seed, tokenizer, max_tokens)

    def propose(self, token_ids: Sequence[int], k: int) -> Proposal:
        ids = self._checked_ids(token_ids, k)
        if not self._known(ids):
            return Proposal(())
        rows: list[torch.Tensor] = []
        with torch.no_grad():
            tokens, _ = medusa_chain(self.head.module, self.scorer, self.feats[len(ids) - 2],
                                     min(k, self.head.dims.n_medusa), self._pick(rows))
        self.n_forwards += 1
        return Proposal(tuple(tokens), torch.stack(rows))
