"""Prompt texts of about the workload's length for requests that carry none.

A generated workload gives token counts, not text. Each prompt here is words drawn (seeded by
the request's index) from the shipped everyday prompts, one word per workload token unless a
tokenizer is given (then the word count is scaled by the measured tokens per word, once).
Every prompt starts differently, so a server's prefix cache does not turn the workload's
prefills into cache hits it never asked for; requests with the same `prefix_id` share their
first `shared_prefix_tokens` words, as the workload means them to.
"""

from __future__ import annotations

import functools

import numpy as np

from inferlab.engines.endpoint.client import TokenCounter, count_with
from inferlab.engines.serve.workload import WorkloadRequest, prompt_texts


@functools.lru_cache(maxsize=1)
def _vocabulary() -> tuple[str, ...]:
    words = {w.strip(".,?!;:\"'()").lower() for line in prompt_texts() for w in line.split()}
    return tuple(sorted(w for w in words if w.isalpha() and len(w) < 10))


def _words(seed: int, n: int) -> list[str]:
    vocab = _vocabulary()
    rng = np.random.default_rng(seed)
    return [vocab[i] for i in rng.integers(0, len(vocab), size=max(0, n))]


def tokens_per_word(counter: TokenCounter | None) -> float:
    """The tokenizer's tokens per filler word (1.0 without a tokenizer)."""
    if counter is None:
        return 1.0
    sample = " ".join(_words(12345, 400))
    return max(0.1, count_with(counter, sample) / 400)


def build_prompt(req: WorkloadRequest, index: int, shared_prefix_tokens: int = 0,
                 per_word: float = 1.0) -> str:
    """`req.prompt` when it has one, else filler of about req.prompt_tokens tokens."""
    if req.prompt:
        return req.prompt
    n = max(1, round(req.prompt_tokens / per_word))
    shared = 0
    head: list[str] = []
    if req.prefix_id is not None and shared_prefix_tokens > 0:
        shared = min(n, round(shared_prefix_tokens / per_word))
        head = _words(1_000_003 + req.prefix_id, shared)
    return " ".join(head + [f"r{index}"] + _words(index, n - shared - 1))
