"""Perplexity of a model on a text: exp of the mean negative log-likelihood per scored token,

    ppl = exp( -1/N · Σ_{t scored} log p(x_t | the window's tokens before t) )

and the way the text is cut into windows, which changes the number, named in the result:

- "sliding" (Hugging Face's "perplexity of fixed-length models"): windows of `window`
  tokens starting every `stride` tokens (0, S, 2S, ...; the last one ends at the text's
  end); each window scores only the tokens past the previous window's end, so every token
  but the first is scored exactly once (N = len - 1), the first window's with less left
  context than the later ones'. The default stride, window - 1, makes the windows meet:
  each window's first token is the previous one's last, context only. A stride under
  window - 1 gives every scored token at least window - stride tokens of context.
  `window=None` is the model's whole context (`config.max_position`): a text shorter than it
  is one forward.
- "llama.cpp" (`llama-perplexity -c n_ctx`, tools/perplexity/perplexity.cpp): the text in
  floor(len / n_ctx) chunks of n_ctx tokens (the tail dropped; at least 2 chunks needed),
  each chunk a fresh context whose first token is replaced by BOS (`bos_id`, when the
  tokenizer adds one) and whose tokens n_ctx/2 + 1 .. n_ctx - 1 are scored (the second half:
  each scored token sees at least n_ctx/2 tokens), N = chunks · (n_ctx - n_ctx/2 - 1). Its
  stride is n_ctx. llama.cpp also prepends BOS to the whole text when the vocabulary says so:
  the caller's token ids include it then.

`passage_text()` is the fixed English passage shipped in assets/text.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.runner import ModelRunner

PASSAGE = "lighthouse.txt"
SLIDING = "sliding"
LLAMA_CPP = "llama.cpp"
CONVENTIONS = (SLIDING, LLAMA_CPP)
WINDOW = 1024
"""The default window (tokens)."""


def passage_text(name: str = PASSAGE) -> str:
    """A text from assets/text (see assets/text/SOURCES.md)."""
    return (importlib.resources.files("inferlab.assets") / "text" / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class PerplexityResult:
    n_tokens: int
    """Tokens scored."""
    mean_nll: float
    """Mean negative log-likelihood per scored token, in nats."""
    window_tokens: int = WINDOW
    """The window (llama.cpp: n_ctx) the text was scored in, as used (the model's context
    caps it)."""
    stride_tokens: int = WINDOW - 1
    """Tokens from one window's start to the next's."""
    convention: str = SLIDING

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_nll)

    def to_dict(self) -> dict:
        return {"n_tokens": self.n_tokens, "mean_nll": self.mean_nll,
                "perplexity": self.perplexity, "ppl_window_tokens": self.window_tokens,
                "ppl_stride_tokens": self.stride_tokens, "ppl_convention": self.convention}


def resolve_window(model: Llama, window: int | None = WINDOW, stride: int | None = None,
                   convention: str = SLIDING) -> tuple[int, int]:
    """(window, stride) as `perplexity` uses them: window None is the model's context, a
    larger one is capped to it; stride None is window - 1 (sliding) or window (llama.cpp).
    ValueError names a bad one."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got "
                         f"{convention!r}")
    context = int(model.config.max_position)
    for value, name in ((window, "window"), (stride, "stride")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name} must be a whole number of tokens, got {value!r}")
    w = context if window is None else min(window, context)
    if w < (4 if convention == LLAMA_CPP else 2):
        raise ValueError(f"window must be at least {4 if convention == LLAMA_CPP else 2} "
                         f"tokens, got {window}")
    if convention == LLAMA_CPP:
        if stride is not None and stride != w:
            raise ValueError(f"llama.cpp's chunks do not overlap: stride is the window "
                             f"({w}), got {stride}")
        return w, w
    s = w - 1 if stride is None else stride
    if not 1 <= s <= w - 1:
        raise ValueError(f"stride must be in 1..{w - 1} (window - 1: every token scored "
                         f"once), got {stride}")
    return w, s


def perplexity(model: Llama, token_ids: Sequence[int], window: int | None = WINDOW,
               paged: bool = False, stride: int | None = None, convention: str = SLIDING,
               bos_id: int | None = None) -> PerplexityResult:
    """Score `token_ids` (at least 2) with full-recompute forwards of `window` tokens, cut
    by `convention` (module docstring); `bos_id` is llama.cpp's chunk-start BOS.

    `paged`: each window runs as one prefill through the model's own paged KV cache
    (`model.new_cache`), whose attention reads K/V back from the cache: what a quantized
    cache (`engines.quant.kv_quant`) stores is what every token attends to, as in decoding."""
    ids = list(token_ids)
    if len(ids) < 2:
        raise ValueError("perplexity needs at least 2 tokens")
    w, s = resolve_window(model, window, stride, convention)
    total, count = 0.0, 0
    for start, first_target, end in windows(len(ids), w, s, convention):
        chunk = ids[start:end]
        if convention == LLAMA_CPP and bos_id is not None:
            chunk[0] = bos_id
        t = torch.tensor(chunk)
        logits = _paged_logits(model, t) if paged else model.forward_nocache(t, all_logits=True)
        # logits[i] predicts chunk[i + 1]: the targets first_target..end-1 (text positions)
        a = first_target - start
        nll = torch.nn.functional.cross_entropy(logits[a - 1: -1], t[a:].to(logits.device),
                                                reduction="sum")
        total += float(nll)
        count += end - first_target
    return PerplexityResult(count, total / count, w, s, convention)


def windows(n_tokens: int, window: int, stride: int, convention: str = SLIDING
            ) -> list[tuple[int, int, int]]:
    """(start, first scored position, end) of every window over a text of `n_tokens`, in
    text positions (end exclusive): which tokens each forward sees and which it scores."""
    if convention == LLAMA_CPP:
        if n_tokens < 2 * window:
            raise ValueError(f"llama.cpp's convention needs at least 2 * n_ctx = "
                             f"{2 * window} tokens, the text has {n_tokens}")
        first = window // 2
        return [(i * window, i * window + first + 1, (i + 1) * window)
                for i in range(n_tokens // window)]
    out, start, scored_to = [], 0, 1
    while True:
        end = min(start + window, n_tokens)
        out.append((start, max(scored_to, start + 1), end))
        scored_to = end
        if end == n_tokens:
            return out
        start += stride


def _paged_logits(model: Llama, chunk: torch.Tensor) -> torch.Tensor:
    block_size = 16
    runner = ModelRunner(model, n_blocks=-(-len(chunk) // block_size) + 1,
                         block_size=block_size, enable_prefix_caching=False)
    runner.add(0, chunk.tolist())
    return runner.step([0], logits="all")
