"""Where the lab's Q, K and V come from: seeded normal values, or one layer of a real model
(SmolLM2-135M, or the seeded tiny model) run on the shipped texts.

A model's layer gives Q after RoPE [T, H, d] and K, V [T, Hkv, d]; grouped-query K/V heads are
repeated to the query heads they serve (query head h reads KV head h // (H / Hkv)), so every
execution sees the H × N × d inputs the model's attention saw, and the first `heads` of them
are kept."""

from __future__ import annotations

import importlib.resources

import torch

from inferlab.engines.model.cache import load_lab_model

SEEDED = "seeded"
SOURCES = (SEEDED, "smollm2-135m", "tiny")
TEXTS = ("clocks.txt", "kiln.txt", "backups.txt", "lighthouse.txt")
"""Shipped prose (assets/text, sources in SOURCES.md), joined: ~7,000 SmolLM2 tokens."""


def seeded_qkv(n: int, d: int, heads: int, seed: int):
    """Q, K, V [heads, N, d], standard normal from `seed`."""
    g = torch.Generator().manual_seed(int(seed))
    return [torch.randn(heads, n, d, generator=g) for _ in range(3)]


def shipped_text() -> str:
    folder = importlib.resources.files("inferlab.assets") / "text"
    return "\n\n".join((folder / name).read_text(encoding="utf-8") for name in TEXTS)


@torch.inference_mode()
def model_layer_qkv(spec: str, layer: int, n: int, heads: int, device: str = "cpu"):
    """(Q, K, V [heads', N', d], what they are): layer `layer` of model `spec` on the first N'
    = min(N, tokens of the text, the model's context) tokens; heads' = min(heads, H)."""
    model, tokenizer = load_lab_model(spec, device)
    cfg = model.config
    if not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer must be in 0..{cfg.n_layers - 1} for {spec}, got {layer}")
    ids = tokenizer.encode(shipped_text())[: min(n, cfg.max_position)]
    tokens = torch.tensor(ids, dtype=torch.long)
    kept: dict = {}

    def write(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
        if i == layer:
            kept["k"], kept["v"] = k, v

    def attend(q: torch.Tensor, i: int) -> torch.Tensor:
        if i == layer:
            kept["q"] = q
            raise _Done
        return q  # never reached: the run stops at `layer`, whose inputs are all we need

    try:
        model.forward_with(tokens, torch.arange(len(ids)), attend, write)
    except _Done:
        pass
    group = cfg.n_heads // cfg.n_kv_heads
    q = kept["q"].transpose(0, 1).float()
    k = kept["k"].transpose(0, 1).float().repeat_interleave(group, dim=0)
    v = kept["v"].transpose(0, 1).float().repeat_interleave(group, dim=0)
    h = min(heads, cfg.n_heads)
    what = (f"{spec} layer {layer}, {len(ids)} tokens of the shipped texts, heads 0..{h - 1} "
            f"of {cfg.n_heads} ({cfg.n_kv_heads} KV heads)")
    return [x[:h].contiguous().cpu() for x in (q, k, v)] + [what]


class _Done(Exception):
    """Raised from the chosen layer's attention: the layers after it need not run."""
