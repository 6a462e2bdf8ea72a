"""The host side of one batched decode step, for `bench runtime`: building the attention
metadata and sampling, at the batching bench's 32 sequences, each measured against what it
replaced, side by side:

    metadata_persistent_ms    InputBatch.metadata (block tables kept across steps)
    metadata_rebuilt_ms       build_attention_metadata (every table rebuilt from lists)
    input_batch_speedup       rebuilt / persistent
    sampling_batch_ms         sample_batch: the 32 rows filtered and drawn together
                              (temperature 0.8, top-p 0.9, the model's vocabulary)
    sampling_per_request_ms   the same rows, one Sampler call each
    batched_sampling_speedup  per request / batch
    sampling_transformers_ms  transformers' own sampling of the same batch (its temperature
                              and top-p warpers, which sort the vocabulary, then
                              torch.multinomial), where transformers is installed
    sampling_vs_transformers  transformers' / ours (batch)
    vocab_sorts_ms            one stable sort of each row's vocabulary, alone: what top-p's
                              filter paid per request on top before it selected partially
"""

from __future__ import annotations

import statistics
import time

import torch

from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.kv.attention_metadata import build_attention_metadata
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.input_batch import InputBatch
from inferlab.engines.model.sampler import Sampler, SamplingParams, sample_batch

BATCH = 32
CONTEXT_TOKENS = 512
VOCAB = 49_152
DECODE_STEPS = 100
"""Decode steps per timed sample of the metadata builders (the append each step is in it)."""
CPU = torch.device("cpu")


def host_step_figures(batch: int = BATCH, context_tokens: int = CONTEXT_TOKENS,
                      vocab: int = VOCAB, repeats: int = 5) -> dict:
    block_size, steps = 16, DECODE_STEPS
    grow = 2 * steps * (repeats + 1)  # every timed step appends a token to each sequence
    manager = BlockManager(batch * ((context_tokens + grow) // block_size + 2), block_size,
                           False)
    ids = [f"s{i}" for i in range(batch)]
    for i, seq_id in enumerate(ids):  # mixed contexts around context_tokens
        manager.allocate(seq_id, [1] * (context_tokens // 2 + i * context_tokens // batch))
    persistent = InputBatch(manager)
    ones = [1] * batch
    builders = {"persistent": lambda: persistent.metadata(ids, ones),
                "rebuilt": lambda: build_attention_metadata(manager, ids, ones)}
    samples: dict[str, list[float]] = {name: [] for name in builders}
    for _ in range(repeats + 1):  # the first round warms up, in turn so both see one load
        for name, build in builders.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                for seq_id in ids:
                    manager.append_token(seq_id, 2)  # a decode reserves one slot each
                build()
            samples[name].append((time.perf_counter() - t0) / steps)
    meta_persistent = statistics.median(samples["persistent"][1:])
    meta_rebuilt = statistics.median(samples["rebuilt"][1:])
    logits = torch.randn(batch, vocab, generator=torch.Generator().manual_seed(0)) * 4
    params = [SamplingParams(0.8, 0.9, seed=i) for i in range(batch)]
    samplers = [Sampler(p) for p in params]
    per_request = [Sampler(p) for p in params]
    rows = [logits[i: i + 1] for i in range(batch)]
    probs = torch.softmax(logits / 0.8, dim=-1)
    batch_s = median_call_s(lambda: sample_batch(logits, samplers), CPU, repeats)
    per_request_s = median_call_s(lambda: [s(r) for s, r in zip(per_request, rows,
                                                               strict=True)], CPU, repeats)
    sorts_s = median_call_s(lambda: [probs[i: i + 1].sort(dim=-1, descending=True, stable=True)
                                     for i in range(batch)], CPU, repeats)
    hf_s = _transformers_sampling_s(logits, 0.8, 0.9, repeats)
    return {"host_batch": batch, "host_context_tokens": context_tokens,
            "metadata_persistent_ms": meta_persistent * 1e3,
            "metadata_rebuilt_ms": meta_rebuilt * 1e3,
            "input_batch_speedup": meta_rebuilt / meta_persistent,
            "sampling_batch_ms": batch_s * 1e3,
            "sampling_per_request_ms": per_request_s * 1e3,
            "vocab_sorts_ms": sorts_s * 1e3,
            "batched_sampling_speedup": per_request_s / batch_s,
            "sampling_transformers_ms": hf_s * 1e3 if hf_s else None,
            "sampling_vs_transformers": hf_s / batch_s if hf_s else None}


def _transformers_sampling_s(logits: torch.Tensor, temperature: float, top_p: float,
                             repeats: int) -> float | None:
    """Seconds transformers' sampling step takes on `logits` (None without transformers)."""
    try:
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            TemperatureLogitsWarper,
            TopPLogitsWarper,
        )
    except ImportError:
        return None
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature),
                                   TopPLogitsWarper(top_p)])
    generator = torch.Generator().manual_seed(0)

    def step():
        scores = warpers(None, logits)
        return torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator)

    return median_call_s(step, CPU, repeats)
