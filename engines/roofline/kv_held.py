"""The KV bytes a cache holds against one that keeps every token in every layer.

A cache that frees a sliding layer's tokens once they fall out of its window (engines/kv's
layer groups) holds, for requests of `contexts` tokens,

    held = Σ_requests kv_bytes_per_request(cfg, c)
         = Σ_requests Σ_layers min(c, W_layer or c) × kv_bytes_per_token_per_layer
    full = Σ_requests c × kv_bytes_per_token(cfg)

(`memory.kv_bytes_per_request`, the one formula). Gemma 3 270M at 8,192 tokens (3 global
layers, 15 of W = 512): (3 · 8192 + 15 · 512) / (18 · 8192) ≈ 0.22 of keeping everything. A
paged cache holds whole blocks: the KV lab shows its blocks beside this closed form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.memory import (
    kv_bytes_per_request,
    kv_bytes_per_token,
    kv_layers,
)


@dataclass(frozen=True)
class KVGroupBytes:
    """The layers of one window (0: full attention): bytes held and kept-everything."""

    window: int
    n_layers: int
    held_bytes: int
    full_bytes: int


@dataclass(frozen=True)
class KVHeld:
    """Bytes held against a cache that keeps every token, in all and per layer group."""

    held_bytes: int
    full_bytes: int
    groups: tuple[KVGroupBytes, ...]
    """Full-attention layers first, then each window from the smallest (`memory.kv_layers`)."""

    @property
    def ratio(self) -> float:
        """held_bytes / full_bytes (1 before any token)."""
        return self.held_bytes / self.full_bytes if self.full_bytes else 1.0


def kv_held(cfg: ModelConfig, contexts: int | Iterable[int], kv_dtype: str = "fp16") -> KVHeld:
    """The cache of requests of `contexts` tokens each (one int: one request) against keeping
    every token: held = Σ kv_bytes_per_request(cfg, c), full = Σ c × kv_bytes_per_token."""
    contexts = [contexts] if isinstance(contexts, int) else [int(c) for c in contexts]
    if any(c < 0 for c in contexts):
        raise ValueError(f"contexts must not be negative, got {contexts}")
    per_token = kv_bytes_per_token(cfg, kv_dtype)
    groups = tuple(
        KVGroupBytes(g.window, g.n_layers, int(sum(g.bytes_held(c) for c in contexts)),
                     sum(contexts) * g.n_layers * g.bytes_per_token)
        for g in kv_layers(cfg, kv_dtype))
    held = sum(kv_bytes_per_request(cfg, c, kv_dtype) for c in contexts)
    return KVHeld(held, sum(contexts) * per_token, groups)
