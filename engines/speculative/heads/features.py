"""What a head learns from: the target's own hidden states and greedy tokens, computed once
and kept in the user cache.

A training sequence is a chat prompt (chat template applied) followed by the target's greedy
answer to it (self-distillation: `engines.model.generate`, every prompt in one batch), or a
shipped text as it is (`training_data`). For each sequence of T tokens x_0 .. x_{T-1}:

    hidden[t] = f_t        the residual stream after the target's last layer (no cache:
                           `Llama.layers_nocache`), fp32 [T, d]
    greedy[t] = argmax p(· | x_0 .. x_t)     the target's own next token after position t

A head is taught to predict greedy[t + 1] (EAGLE) or greedy[t + k] (Medusa head k), not the
text's next token: greedy verification accepts a draft exactly when it is the target's
argmax. The features are cached as one safetensors file under
<user cache>/inferlab/heads/<model hash>/features-<key>.safetensors, the key a hash of every
token of every sequence and the settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.model.generate import generate
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer

FEATURES_VERSION = 1
HEAD_ROWS = 256
"""Rows per lm_head product when taking the greedy tokens (bounds the logits' memory)."""


@dataclass(frozen=True, eq=False)
class TrainingSequence:
    """One training sequence: `tokens` [T] int64, `hidden` [T, d] fp32, `greedy` [T] int64."""

    name: str
    tokens: torch.Tensor
    hidden: torch.Tensor
    greedy: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.numel())


def sequence_features(target: Llama, name: str, ids: Sequence[int]) -> TrainingSequence:
    """The features of one token sequence (`target` read with no cache)."""
    tokens = torch.tensor(list(ids), dtype=torch.int64)
    with torch.inference_mode():
        hidden = target.layers_nocache(target.embed_rows(tokens.to(target.device))).float()
        greedy = torch.cat([target.head_logits(hidden[i:i + HEAD_ROWS]).argmax(-1)
                            for i in range(0, len(tokens), HEAD_ROWS)])
    return TrainingSequence(name, tokens, hidden.cpu().clone(), greedy.cpu().to(torch.int64))


def self_distilled_ids(target: Llama, tokenizer: Tokenizer, prompts: Sequence[str],
                       max_new_tokens: int) -> list[list[int]]:
    """Each prompt (chat template where the tokenizer has one) followed by the target's greedy
    answer, up to its end of turn or `max_new_tokens`."""
    chat = tokenizer.chat_template is not None
    prompt_ids = [tokenizer.encode_prompt(p, chat=chat) for p in prompts]
    if not prompt_ids:
        return []
    result = generate(target, prompt_ids, max_new_tokens=max_new_tokens,
                      stop_token_ids=tuple(tokenizer.eos_token_ids))
    return [p + list(g.token_ids) for p, g in zip(prompt_ids, result.generations, strict=True)]


def build_sequences(target: Llama, tokenizer: Tokenizer, prompts: Sequence[str],
                    texts: dict[str, str], max_new_tokens: int, max_text_tokens: int,
                    progress: Callable[[str, int, int], None] | None = None,
                    should_stop: Callable[[], bool] | None = None) -> list[TrainingSequence]:
    """Token ids of every training sequence: prompts answered by the target, then the texts
    (each cut to its first `max_text_tokens` tokens), then their features. `progress(stage,
    done, total)`; `should_stop` (engines.hardware.cancel) checked between sequences."""
    named = [(f"prompt:{i}", ids) for i, ids in
             enumerate(self_distilled_ids(target, tokenizer, prompts, max_new_tokens))]
    named += [(f"text:{n}", tokenizer.encode(t)[:max_text_tokens]) for n, t in texts.items()]
    out = []
    for i, (name, ids) in enumerate(named):
        check_stop(should_stop)
        if len(ids) >= 2:
            out.append(sequence_features(target, name, ids))
        if progress is not None:
            progress("features", i + 1, len(named), None)
    return out


def features_key(model_hash: str, prompts: Sequence[str], texts: dict[str, str],
                 max_new_tokens: int, max_text_tokens: int) -> str:
    blob = json.dumps([FEATURES_VERSION, model_hash, list(prompts), sorted(texts.items()),
                       max_new_tokens, max_text_tokens])
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def save_sequences(path: Path, seqs: Sequence[TrainingSequence]) -> None:
    """All sequences in one safetensors file, atomically (temporary file, then rename)."""
    tensors = {"tokens": torch.cat([s.tokens for s in seqs]),
               "hidden": torch.cat([s.hidden for s in seqs]),
               "greedy": torch.cat([s.greedy for s in seqs]),
               "lengths": torch.tensor([len(s) for s in seqs], dtype=torch.int64)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"names": json.dumps([s.name for s in seqs])})
    tmp.replace(path)


def load_sequences(path: Path) -> list[TrainingSequence] | None:
    """The sequences of a features file, or None where it is missing or does not read back."""
    try:
        t = load_file(str(path))
        with open(path, "rb") as f:  # the names live in the header's metadata
            n = int.from_bytes(f.read(8), "little")
            names = json.loads(json.loads(f.read(n))["__metadata__"]["names"])
        lengths = t["lengths"].tolist()
        if sum(lengths) != t["tokens"].numel() or len(names) != len(lengths):
            return None
        starts = [0]
        for n in lengths:
            starts.append(starts[-1] + n)
        return [TrainingSequence(name, t["tokens"][a:b], t["hidden"][a:b], t["greedy"][a:b])
                for name, a, b in zip(names, starts, starts[1:], strict=True)]
    except (OSError, ValueError, KeyError, SafetensorError, json.JSONDecodeError):
        return None


def cached_sequences(target: Llama, tokenizer: Tokenizer, model_hash: str, cache_dir: Path,
                     prompts: Sequence[str], texts: dict[str, str], max_new_tokens: int,
                     max_text_tokens: int, progress=None, should_stop=None
                     ) -> tuple[list[TrainingSequence], bool]:
    """`build_sequences`, from the cache where it was built before; (sequences, from cache)."""
    key = features_key(model_hash, prompts, texts, max_new_tokens, max_text_tokens)
    path = cache_dir / "heads" / model_hash.replace(":", "-") / f"features-{key}.safetensors"
    found = load_sequences(path)
    if found is not None:
        return found, True
    seqs = build_sequences(target, tokenizer, prompts, texts, max_new_tokens, max_text_tokens,
                           progress, should_stop)
    save_sequences(path, seqs)
    return seqs, False
