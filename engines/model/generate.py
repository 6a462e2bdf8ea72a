"""Text generation: prefill every prompt in one flat batch, then decode step by step.

With the cache (the normal path) each step runs only the newest token of every live
sequence through `ModelRunner`, reading earlier K/V from the paged cache. With
`use_cache=False` each step recomputes every sequence from its first token
(`Llama.forward_nocache`): slow, and the reference the cached path must match token for token.

Decode speed is tokens_per_s = (tokens generated after the prefill) / (time after the
prefill): the first token of each sequence comes out of the prefill and is not counted.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.sampler import GREEDY, Sampler, SamplingParams


@dataclass(frozen=True)
class Generation:
    """One prompt's output. finish_reason: "stop" (a stop token, not included) or "length"."""

    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    finish_reason: str


@dataclass(frozen=True)
class GenerationResult:
    generations: tuple[Generation, ...]
    prefill_s: float
    decode_s: float
    decode_tokens: int
    """Tokens generated after the prefill step (all sequences)."""
    use_cache: bool

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput over all sequences (0 when nothing was decoded)."""
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s

    def to_dict(self) -> dict:
        return {"generations": [{"prompt_token_ids": list(g.prompt_token_ids),
                                 "token_ids": list(g.token_ids),
                                 "finish_reason": g.finish_reason} for g in self.generations],
                "prefill_s": self.prefill_s, "decode_s": self.decode_s,
                "decode_tokens": self.decode_tokens, "tokens_per_s": self.tokens_per_s,
                "use_cache": self.use_cache}


def _token_ids(prompt: list, i: int, vocab_size: int) -> list[int]:
    """`prompt` as plain ints, each a token id of the model (else ValueError naming it)."""
    out = []
    for t in prompt:
        try:
            if isinstance(t, bool):
                raise TypeError
            t = operator.index(t)  # int, numpy integer, 0-d integer tensor
        except TypeError:
            raise ValueError(f"prompt {i} holds {t!r}, not an integer token id") from None
        if not 0 <= t < vocab_size:
            raise ValueError(f"prompt {i} holds token id {t}, outside the model's vocabulary "
                             f"[0, {vocab_size})")
        out.append(t)
    return out


def generate(model: Llama, prompts: Sequence[Sequence[int]], max_new_tokens: int = 32,
             sampling: SamplingParams = GREEDY, stop_token_ids: Sequence[int] = (),
             use_cache: bool = True, block_size: int = 16) -> GenerationResult:
    """Continue every prompt (token ids) by up to `max_new_tokens` tokens.

    Generation of a sequence stops at any of `stop_token_ids` (not included in its output).
    The KV cache holds exactly the blocks the prompts and their outputs can need.
    """
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise ValueError(f"max_new_tokens must be an integer, got {max_new_tokens!r}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    prompts = [list(p) for p in prompts]
    if not prompts or any(not p for p in prompts):
        raise ValueError("every prompt needs at least one token")
    prompts = [_token_ids(p, i, model.config.vocab_size) for i, p in enumerate(prompts)]
    limit = model.config.max_position
    longest = max(len(p) for p in prompts) + max_new_tokens - 1
    if longest > limit:
        raise ValueError(f"prompt plus {max_new_tokens} new tokens is {longest} tokens, past "
                         f"the model's context of {limit}")
    sampler = Sampler(sampling)
    stops = set(stop_token_ids)
    outputs: list[list[int]] = [[] for _ in prompts]
    reasons = ["length"] * len(prompts)
    live = list(range(len(prompts)))

    if use_cache:
        n_blocks = sum(-(-(len(p) + max_new_tokens) // block_size) for p in prompts)
        runner = ModelRunner(model, n_blocks=n_blocks, block_size=block_size,
                             enable_prefix_caching=False)
        for i in live:
            runner.add(i, prompts[i])

        def next_logits(seqs: list[int], first: bool) -> torch.Tensor:
            if not first:
                for i in seqs:
                    runner.append(i, outputs[i][-1])
            return runner.step(seqs)
    else:
        def next_logits(seqs: list[int], first: bool) -> torch.Tensor:
            rows = [model.forward_nocache(torch.tensor(prompts[i] + outputs[i]))
                    for i in seqs]
            return torch.cat(rows)

    t0 = time.perf_counter()
    t_prefill = None
    first = True
    while live:
        ids = sampler(next_logits(live, first))
        first = False
        still = []
        for i, tok in zip(live, ids, strict=True):
            if tok in stops:
                reasons[i] = "stop"
                continue
            outputs[i].append(tok)
            if len(outputs[i]) < max_new_tokens:
                still.append(i)
        if use_cache:
            for i in set(live) - set(still):
                runner.free(i)
        live = still
        if t_prefill is None:
            t_prefill = time.perf_counter() - t0
    total = time.perf_counter() - t0
    decode_tokens = sum(max(len(o) - 1, 0) for o in outputs)
    gens = tuple(Generation(tuple(p), tuple(o), r)
                 for p, o, r in zip(prompts, outputs, reasons, strict=True))
    return GenerationResult(gens, t_prefill or 0.0, total - (t_prefill or 0.0), decode_tokens,
                            use_cache)
