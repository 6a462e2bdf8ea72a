"""How many tokens a head would let each target forward emit, on sequences the target wrote
itself (the held-out prompts' greedy answers), drafting as the decoder would:

    for each position L - 1 inside an answer (the tokens from there on are the target's
    greedy ones), draft K tokens from the real features up to L - 2 (`chain`), and count
    n = the leading drafts equal to x_L, x_{L+1}, …  (greedy verification accepts those)

    tokens_per_forward = mean(n + 1)        (what the decoder's yield per forward would be)
    first_token_agreement = share of positions where d_1 = x_L
    accept_by_position[j - 1] = P(d_j accepted | d_1 .. d_{j-1} accepted), j = 1..K: the
                            head's own per-position acceptance, from which the lab's theory
                            predicts E(K) = 1 + a_1 + a_1·a_2 + … (statistics.
                            expected_tokens_positional)

A position counts as inside an answer when x_{t+1} = greedy[t] from L - 1 to the end of the
chain's reach (the text is the target's own continuation there).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inferlab.engines.speculative.heads.chain import eagle_chain, medusa_chain
from inferlab.engines.speculative.heads.dims import unit_rms
from inferlab.engines.speculative.heads.eagle import EagleHead, HeadCache
from inferlab.engines.speculative.heads.features import TrainingSequence
from inferlab.engines.speculative.heads.target_head import FrozenHead


def chain_acceptance(module, scorer: FrozenHead, embed, seqs: Sequence[TrainingSequence],
                     k: int, stride: int = 1) -> dict:
    """{"tokens_per_forward", "first_token_agreement", "accept_by_position", "positions"}
    over `seqs`."""
    lengths: list[int] = []
    firsts: list[bool] = []
    reached = [0] * k  # positions whose chain reached draft j and had d_1 .. d_{j-1} accepted
    taken = [0] * k  # … and accepted d_j too
    with torch.no_grad():
        for s in seqs:
            u = unit_rms(s.hidden)
            x, greedy = s.tokens, s.greedy
            own = torch.zeros(len(x), dtype=torch.bool)  # own[t]: x[t] is the target's greedy
            own[1:] = x[1:] == greedy[:-1]
            cache = None
            if isinstance(module, EagleHead):
                cache = HeadCache(module.dims, len(x) + k)
                e = embed(x[1:])
                outs = module(u[None, :-1], e[None], 0, cache)[0]  # all real pairs at once
                real_k, real_v = cache.k.clone(), cache.v.clone()
            for last in range(2, len(x), stride):  # y = x[last - 1] just emitted
                reach = min(k, len(x) - last)
                if reach < 1 or not bool(own[last - 1:last + reach].all()):
                    continue
                if cache is not None:
                    cache.truncate(last - 1)  # real pairs t = 0 .. last - 2
                    drafts, _ = eagle_chain(module, scorer, embed, cache, outs[last - 2], reach)
                    # the drafts' pairs overwrote real ones: put those back
                    cache.k[last - 1:last + reach] = real_k[last - 1:last + reach]
                    cache.v[last - 1:last + reach] = real_v[last - 1:last + reach]
                    cache.length = len(x) - 1
                else:
                    drafts, _ = medusa_chain(module, scorer, u[last - 2], reach)
                n = 0
                while n < reach and drafts[n] == int(x[last + n]):
                    n += 1
                for j in range(min(n + 1, reach)):
                    reached[j] += 1
                    taken[j] += j < n
                lengths.append(n + 1)
                firsts.append(drafts[0] == int(x[last]))
    by_position = [t / r for t, r in zip(taken, reached, strict=True) if r]
    if not lengths:
        return {"tokens_per_forward": 0.0, "first_token_agreement": 0.0,
                "accept_by_position": [], "positions": 0}
    return {"tokens_per_forward": sum(lengths) / len(lengths),
            "first_token_agreement": sum(firsts) / len(firsts),
            "accept_by_position": by_position, "positions": len(lengths)}
