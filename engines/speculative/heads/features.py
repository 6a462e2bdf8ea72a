"""What a head learns from: the target's own hidden states and greedy tokens, computed once
and kept in the user cache.

A training sequence is a chat prompt (chat template applied) followed by the target's greedy
answer to it (self-distillation: distill.py, PROMPT_BATCH prompts stepped together, the
hidden states kept as they are computed), or a shipped text as it is (`training_data`). For
each sequence of T tokens x_0 .. x_{T-1}:

    hidden[t] = f_t        the residual stream after the target's last layer (the cached
                           runner's; `sequence_features` recomputes it with no cache, the
                           reference), fp32 [T, d]
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
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.speculative.heads.distill import distill, greedy_tokens
from inferlab.engines.speculative.heads.sequence import TrainingSequence

FEATURES_VERSION = 2
PROMPT_BATCH = 128
"""Prompts continued together (distill.py): ~410 answer tokens/s on 2 threads of this
project's EPYC against ~310 at 32 (SmolLM2-135M, 160-token answers)."""
TEXT_BATCH = 2
"""Shipped texts (up to max_text_tokens each) read together: their K/V blocks bound it."""


def sequence_features(target: Llama, name: str, ids: Sequence[int]) -> TrainingSequence:
    """The features of one token sequence (`target` read with no cache)."""
    tokens = torch.tensor(list(ids), dtype=torch.int64)
    with torch.inference_mode():
        hidden = target.layers_nocache(target.embed_rows(tokens.to(target.device))).float()
        greedy = greedy_tokens(target, hidden)
    return TrainingSequence(name, tokens, hidden.cpu().clone(), greedy)


def build_sequences(target: Llama, tokenizer: Tokenizer, prompts: Sequence[str],
                    texts: dict[str, str], max_new_tokens: int, max_text_tokens: int,
                    progress: Callable[[str, int, int, float | None], None] | None = None,
                    should_stop: Callable[[], bool] | None = None,
                    stats_out: dict | None = None) -> list[TrainingSequence]:
    """Every training sequence: each prompt (chat template where the tokenizer has one)
    answered greedily by the target, up to its end of turn or `max_new_tokens` (distill.py,
    PROMPT_BATCH at a time), then the texts as they are (each cut to its first
    `max_text_tokens` tokens). `progress(stage, done, total, None)`; `should_stop`
    (engines.hardware.cancel) checked between steps. `stats_out` gets the generation's
    figures ("distill_*": sequences, tokens run and written, seconds, tokens/s)."""
    chat = tokenizer.chat_template is not None
    prompt_items = [(f"prompt:{i}", tokenizer.encode_prompt(p, chat=chat), max_new_tokens)
                    for i, p in enumerate(prompts)]
    text_items = [(f"text:{n}", ids, 0) for n, t in texts.items()
                  if len(ids := tokenizer.encode(t)[:max_text_tokens]) >= 2]
    out: list[TrainingSequence] = []
    figures = {"sequences": 0, "run_tokens": 0, "answer_tokens": 0, "seconds": 0.0}
    for items, batch in ((prompt_items, PROMPT_BATCH), (text_items, TEXT_BATCH)):
        if not items:
            continue
        seqs, st = distill(target, items, batch, tuple(tokenizer.eos_token_ids), progress,
                           should_stop)
        out += seqs
        for k in figures:
            figures[k] += getattr(st, k)
    if stats_out is not None:
        s = figures["seconds"]
        stats_out.update({f"distill_{k}": v for k, v in figures.items()})
        stats_out["distill_tokens_per_s"] = figures["run_tokens"] / s if s else 0.0
        stats_out["distill_answer_tokens_per_s"] = figures["answer_tokens"] / s if s else 0.0
    return out


def features_key(model_hash: str, prompts: Sequence[str], texts: dict[str, str],
                 max_new_tokens: int, max_text_tokens: int) -> str:
    # the batch sizes too: a batch's row count can change a near tie's argmax
    blob = json.dumps([FEATURES_VERSION, model_hash, list(prompts), sorted(texts.items()),
                       max_new_tokens, max_text_tokens, PROMPT_BATCH, TEXT_BATCH])
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def save_sequences(path: Path, seqs: Sequence[TrainingSequence],
                   stats: dict | None = None) -> None:
    """All sequences in one safetensors file, atomically (temporary file, then rename);
    `stats` (how they were built: numbers by name) kept in its metadata."""
    tensors = {"tokens": torch.cat([s.tokens for s in seqs]),
               "hidden": torch.cat([s.hidden for s in seqs]),
               "greedy": torch.cat([s.greedy for s in seqs]),
               "lengths": torch.tensor([len(s) for s in seqs], dtype=torch.int64)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"names": json.dumps([s.name for s in seqs]),
                                           "stats": json.dumps(stats or {})})
    tmp.replace(path)


def _metadata(path: Path) -> dict:
    """A safetensors file's header metadata (ValueError where the header's length is past
    the file's end or the header is not JSON)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if n > path.stat().st_size - 8:
            raise ValueError(f"{path.name}: a {n}-byte header in a smaller file")
        header = json.loads(f.read(n))
    return header["__metadata__"]


def stored_stats(path: Path) -> dict:
    """The build figures a features file keeps (numbers by name; {} where it keeps none or
    they do not read)."""
    try:
        raw = json.loads(_metadata(path).get("stats", "{}"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str)
            and isinstance(v, int | float) and not isinstance(v, bool)}


def load_sequences(path: Path) -> list[TrainingSequence] | None:
    """The sequences of a features file, or None where it is missing or does not read back."""
    try:
        t = load_file(str(path))
        names = json.loads(_metadata(path)["names"])  # the names live in the header
        lengths = t["lengths"].tolist()
        if sum(lengths) != t["tokens"].numel() or len(names) != len(lengths):
            return None
        starts = [0]
        for n in lengths:
            starts.append(starts[-1] + n)
        return [TrainingSequence(name, t["tokens"][a:b], t["hidden"][a:b], t["greedy"][a:b])
                for name, a, b in zip(names, starts[:-1], starts[1:], strict=True)]
    except (OSError, ValueError, KeyError, TypeError, SafetensorError):
        return None


def cached_sequences(target: Llama, tokenizer: Tokenizer, model_hash: str, cache_dir: Path,
                     prompts: Sequence[str], texts: dict[str, str], max_new_tokens: int,
                     max_text_tokens: int, progress=None, should_stop=None,
                     stats_out: dict | None = None) -> tuple[list[TrainingSequence], bool]:
    """`build_sequences`, from the cache where it was built before; (sequences, from cache).
    `stats_out` gets the build's figures (`build_sequences`' and `features_build_s`, the
    seconds it took), those kept in the cached file when it is read from there."""
    key = features_key(model_hash, prompts, texts, max_new_tokens, max_text_tokens)
    path = cache_dir / "heads" / model_hash.replace(":", "-") / f"features-{key}.safetensors"
    found = load_sequences(path)
    if found is not None:
        if stats_out is not None:
            stats_out.update(stored_stats(path))
        return found, True
    t0 = time.perf_counter()
    stats: dict = {}
    seqs = build_sequences(target, tokenizer, prompts, texts, max_new_tokens, max_text_tokens,
                           progress, should_stop, stats)
    stats["features_build_s"] = time.perf_counter() - t0
    save_sequences(path, seqs, stats)
    if stats_out is not None:
        stats_out.update(stats)
    return seqs, False
