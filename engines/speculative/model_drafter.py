"""Drafters that run a model: a smaller model with the target's tokenizer, or the target's own
layers (the first N: layer-skip; or all but a chosen set: skip self-draft). Each keeps its
own paged KV cache (a `ModelRunner`).

Each `propose` first brings the draft's cache in line with the text it is given: the longest
prefix of what the draft has computed that still agrees is kept, the rest is rolled back
(`ModelRunner.truncate`: the drafts the target rejected) and the new tokens are run in one
forward. Then K draft tokens follow one forward each:

    draft cache: prompt + out + d_1 .. d_{K-1}      (d_K is proposed, never run)
    next call:   prompt + out + d_1 .. d_n + y      -> keep up to d_min(n, K-1), run the rest

Drafts are drawn from q = filtered_probs(draft logits, settings): the same settings as the
target's verification (the decoder checks), so rejection sampling stays exact. Greedy drafts
take the argmax; their q rows are then the draft's softmax, for display only (greedy
verification reads tokens, not q).

    layer_skip_model(target, n)  the target's first n layers + its final norm and head, sharing
                                 the target's weight tensors (no copy)
    skip_layers_model(target, S) the target without the layers in S (any set: Draft & Verify,
                                 SWIFT); `skip_search` finds S on calibration text
    quantized_self_draft(target, bits)   the whole target with INT8 or INT4 weights on the
                                 low-bit kernels (engines.quant.lowbit_linear; a MoE's experts
                                 each); built once per target and kept while the target lives
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from collections.abc import Sequence

import torch

from inferlab.engines.model.llama import Llama, check_runs
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.lowbit_linear import lowbit_model
from inferlab.engines.speculative import mass
from inferlab.engines.speculative.checks import check_count, check_vocab, token_tensor
from inferlab.engines.speculative.drafter import Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import (
    GREEDY,
    SamplingSettings,
    check_drafter_sampling,
    filtered_probs,
)

_SEQ = "draft"
_QUANTIZED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def quantized_self_draft(target: Llama, bits: int) -> Llama:
    """The target with `bits`-bit weights (8: symmetric per channel; 4: groups of 128; a MoE
    layer's experts each; the lm_head INT8, or kept where it is a file's codes already),
    computing in fp32 on the CPU (`lowbit_model`); SpeculativeError off the CPU."""
    per_target = _QUANTIZED.setdefault(target, {})
    if bits not in per_target:
        try:
            per_target[bits] = lowbit_model(target, bits=bits, group_size=128, lm_head_bits=8)
        except QuantError as e:
            raise SpeculativeError(f"quant:int{bits}: {e}") from None
    return per_target[bits]


class ModelDrafter:
    """Drafts with `model` (its vocabulary must be the target's: the decoder checks
    `vocab_size` and, when both are known, `tokenizer`). `max_tokens` sizes its KV cache."""

    def __init__(self, model: Llama, settings: SamplingSettings = GREEDY, seed: int = 0,
                 tokenizer: Tokenizer | None = None, max_tokens: int | None = None,
                 block_size: int = 16, name: str | None = None) -> None:
        check_drafter_sampling(settings, seed)
        self.model = model
        self.settings = settings
        self.tokenizer = tokenizer
        self.vocab_size = model.config.vocab_size
        self.name = name or f"model:{model.config.id}"
        self.generator = torch.Generator().manual_seed(seed)
        self.max_tokens = min(model.config.max_position, max_tokens or 4096)
        self.block_size = block_size
        self.runner: ModelRunner | None = None
        self.n_forwards = 0
        """Draft forwards run, ever (the catch-up forward included)."""

    def reset(self) -> None:
        """Forget the cached text (a new prompt follows); the cache is kept for reuse."""
        if self.runner is not None and _SEQ in self.runner.blocks:
            self.runner.free(_SEQ)

    def propose(self, token_ids: Sequence[int], k: int) -> Proposal:
        """k draft tokens after `token_ids` and the q rows [k, V] they were drawn from."""
        check_count(k, "k")
        ids = token_tensor(token_ids, "token_ids")
        if ids.shape[0] == 0:
            raise SpeculativeError("token_ids must not be empty: the draft needs a prompt")
        check_vocab(ids, self.vocab_size, "token_ids")
        if ids.shape[0] + k > self.max_tokens:
            raise SpeculativeError(f"token_ids ({ids.shape[0]}) plus k ({k}) drafts exceed the "
                                   f"draft's max_tokens ({self.max_tokens})")
        runner = self._sync(ids.tolist())
        logits = self._forward(runner)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        for i in range(k):
            if self.settings.greedy:
                token = int(logits[0].argmax())
                q = torch.softmax(logits[0].float().cpu(), dim=-1)
            else:
                q = filtered_probs(logits, self.settings)[0]
                u = torch.rand((), generator=self.generator, dtype=torch.float64)
                token = int(mass.draw(q.double(), u))
            tokens.append(token)
            rows.append(q)
            if i < k - 1:
                runner.append(_SEQ, token)
                logits = self._forward(runner)
        return Proposal(tuple(tokens), torch.stack(rows))

    def _forward(self, runner: ModelRunner) -> torch.Tensor:
        self.n_forwards += 1
        return runner.step([_SEQ])

    def _sync(self, ids: list[int]) -> ModelRunner:
        """The draft sequence made `ids` with at least its last token pending."""
        if self.runner is None:
            self.runner = ModelRunner(self.model, max_tokens=self.max_tokens,
                                      block_size=self.block_size, enable_prefix_caching=False)
        runner = self.runner
        if _SEQ not in runner.blocks:
            runner.add(_SEQ, ids)
            return runner
        have = runner.token_ids(_SEQ)
        n_computed = len(have) - runner.pending(_SEQ)
        common = 0
        limit = min(n_computed, len(ids) - 1)  # the last token runs again for its logits
        while common < limit and have[common] == ids[common]:
            common += 1
        runner.truncate(_SEQ, common)
        runner.append_tokens(_SEQ, ids[common:])
        return runner

    def cached_token_ids(self) -> list[int]:
        """The tokens whose K/V the draft's cache holds now (tests check it stays a prefix)."""
        if self.runner is None or _SEQ not in self.runner.blocks:
            return []
        ids = self.runner.token_ids(_SEQ)
        return ids[: len(ids) - self.runner.pending(_SEQ)]


def sub_model(target: Llama, layers: list, tag: str, what: str) -> Llama:
    """`layers` (the target's own, in order), then its final norm and head: nothing copied,
    the RoPE tables neither (a shallow copy of the target: building Gemma 3's tables for its
    32,768 positions anew takes about a second, and the skip search builds hundreds)."""
    c = target.config
    kinds = tuple("sliding" if lw.window else "full" for lw in layers) if c.layer_types else ()
    dense = tuple(i for i, lw in enumerate(layers) if lw.moe is None) if c.is_moe else ()
    config = dataclasses.replace(c, n_layers=len(layers), layer_types=kinds, dense_layers=dense,
                                 id=f"{c.id}-{tag}", name=f"{c.name}, {what}")
    check_runs(config)
    out = copy.copy(target)
    out.config, out.layers = config, list(layers)
    out._decoder = None  # the native one-call plan is made for these layers at first use
    return out


def layer_skip_model(target: Llama, n_layers: int) -> Llama:
    """The target's first `n_layers` layers, then its final norm and head: a self-draft whose
    tensors ARE the target's (nothing copied). 1 <= n_layers < the target's layer count."""
    total = target.config.n_layers
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or not 1 <= n_layers < total:
        raise SpeculativeError(f"n_layers must be an integer in [1, {total - 1}] for a "
                               f"{total}-layer target, got {n_layers!r}")
    return sub_model(target, target.layers[:n_layers], f"first{n_layers}",
                      f"first {n_layers} layers")


def check_skipped(target: Llama, skipped: Sequence[int]) -> tuple[int, ...]:
    """`skipped` as sorted layer indices: distinct, inside the target, at least one layer
    kept (SpeculativeError otherwise)."""
    total = target.config.n_layers
    ids = list(skipped)
    ok = all(not isinstance(i, bool) and isinstance(i, int) and 0 <= i < total for i in ids)
    out = tuple(sorted(set(ids))) if ok else ()
    if not out or len(out) != len(ids) or len(out) >= total:
        raise SpeculativeError(f"skipped layers must be distinct indices in [0, {total - 1}] "
                               f"leaving at least one of the {total}, got {list(skipped)!r}")
    return out


def skip_layers_model(target: Llama, skipped: Sequence[int]) -> Llama:
    """The target with the layers `skipped` left out (the others in order, then its final norm
    and head): the training-free self-draft of Draft & Verify / SWIFT, tensors shared."""
    out = check_skipped(target, skipped)
    kept = [lw for i, lw in enumerate(target.layers) if i not in out]
    return sub_model(target, kept, "skip" + "-".join(map(str, out)),
                      f"{len(out)} layers skipped")


def skip_spec(skipped: Sequence[int]) -> str:
    """The drafter name of a skipped set, runs of layers written a-b: `skip:3,5-9,12`."""
    parts: list[str] = []
    ids = sorted(skipped)
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return "skip:" + ",".join(parts)


class LayerSkipDrafter(ModelDrafter):
    """Self-draft: the target's first `n_layers` layers + its final norm and head."""

    def __init__(self, target: Llama, n_layers: int, settings: SamplingSettings = GREEDY,
                 seed: int = 0, tokenizer: Tokenizer | None = None,
                 max_tokens: int | None = None, block_size: int = 16) -> None:
        super().__init__(layer_skip_model(target, n_layers), settings, seed, tokenizer,
                         max_tokens, block_size, name=f"layerskip:{n_layers}")
        self.n_layers = n_layers


class SkipDrafter(ModelDrafter):
    """Self-draft: the target with a set of its layers skipped (`skip_layers_model`)."""

    def __init__(self, target: Llama, skipped: Sequence[int],
                 settings: SamplingSettings = GREEDY, seed: int = 0,
                 tokenizer: Tokenizer | None = None, max_tokens: int | None = None,
                 block_size: int = 16) -> None:
        self.skipped = check_skipped(target, skipped)
        super().__init__(skip_layers_model(target, self.skipped), settings, seed, tokenizer,
                         max_tokens, block_size, name=skip_spec(self.skipped))
