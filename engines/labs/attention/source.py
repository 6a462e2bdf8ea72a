"""Where the lab's Q, K and V come from: seeded normal values, or one layer of a model
(SmolLM2-135M, Gemma 3 270M, the seeded tiny models) run on the shipped texts.

A model's layer gives Q and K as its attention reads them (after its q/k-norms and the RoPE
table of the layer's kind: Gemma 3's sliding layers rotate with base 10⁴, its global ones
with 10⁶) [T, H, d] and [T, Hkv, d], and V; the model's own forward computes them
(`forward_with`), every layer before the chosen one attending causally within its window as
the model does (`causal_attention`). Grouped-query K/V heads are repeated to the query heads
they serve (query head h reads KV head h // (H / Hkv)), so every execution sees the H × N × d
inputs the model's attention saw, and the first `heads` of them are kept. The executions
attend over all N (causal or not, scale d^-0.5); where the model's layer attends within a
window shorter than N, or scales otherwise, `what` says so."""

from __future__ import annotations

import importlib.resources

import torch

from inferlab.engines.kv.paged_attention import masked_attention, sdpa_gqa
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.registry import MODEL_NAMES

SEEDED = "seeded"
SOURCES = (SEEDED, *MODEL_NAMES)
TEXTS = ("clocks.txt", "kiln.txt", "backups.txt", "lighthouse.txt")
"""Shipped prose (assets/text, sources in SOURCES.md), joined: ~7,000 SmolLM2 tokens."""


def seeded_qkv(n: int, d: int, heads: int, seed: int):
    """Q, K, V [heads, N, d], standard normal from `seed`."""
    g = torch.Generator().manual_seed(int(seed))
    return [torch.randn(heads, n, d, generator=g) for _ in range(3)]


def shipped_text() -> str:
    folder = importlib.resources.files("inferlab.assets") / "text"
    return "\n\n".join((folder / name).read_text(encoding="utf-8") for name in TEXTS)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                     window: int = 0, softcap: float = 0.0) -> torch.Tensor:
    """One whole sequence's attention as a model layer runs it: q [T, H, d], k / v
    [T, Hkv, d] -> [T, H, d]; query t attends keys t - window < j <= t (window 0: every
    j <= t); scores soft-capped, cap · tanh(s / cap), where `softcap`."""
    n = q.shape[0]
    qh, kh, vh = (x.float().transpose(0, 1) for x in (q, k, v))
    if not softcap:
        mask = None
        if window and n > window:
            pos = torch.arange(n, device=q.device)
            mask = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - window)
        out = sdpa_gqa(qh, kh, vh, attn_mask=mask, is_causal=mask is None, scale=scale)
        return out.transpose(0, 1).to(q.dtype)
    return masked_attention(q, k, v, scale, window, softcap)


def model_attention(model, stop_at: int | None = None):
    """(write, attend, kept) for `model.forward_with` over one whole sequence: every layer
    attends as the model does (`causal_attention`, its window and soft-cap); at layer
    `stop_at` its Q, K, V are kept in `kept` ("q", "k", "v") and the forward stops (`Done`)."""
    kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    kept: dict[str, torch.Tensor] = {}
    softcap = model.config.attn_softcap

    def write(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
        kv[i] = (k, v)

    def attend(q: torch.Tensor, i: int) -> torch.Tensor:
        k, v = kv.pop(i)
        if i == stop_at:
            kept.update(q=q, k=k, v=v)
            raise Done
        return causal_attention(q, k, v, model.scale, model.layers[i].window, softcap)

    return write, attend, kept


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
    write, attend, kept = model_attention(model, stop_at=layer)
    try:
        model.forward_with(tokens, torch.arange(len(ids)), attend, write)
    except Done:
        pass
    group = cfg.n_heads // cfg.n_kv_heads
    q = kept["q"].transpose(0, 1).float()
    k = kept["k"].transpose(0, 1).float().repeat_interleave(group, dim=0)
    v = kept["v"].transpose(0, 1).float().repeat_interleave(group, dim=0)
    h = min(heads, cfg.n_heads)
    what = (f"{spec} layer {layer}, {len(ids)} tokens of the shipped texts, heads 0..{h - 1} "
            f"of {cfg.n_heads} ({cfg.n_kv_heads} KV heads)")
    window = model.layers[layer].window
    if window:
        what += (f"; a sliding-window layer: the model attends over its last {window} tokens"
                 + (", the executions here over all of them" if len(ids) > window else ""))
    if abs(model.scale - cfg.d_head ** -0.5) > 1e-9 * model.scale:
        what += f"; the model scales scores by {model.scale:.4g}, the executions by d^-0.5"
    if cfg.attn_softcap:
        what += f"; the model soft-caps scores at {cfg.attn_softcap:g}, the executions do not"
    return [x[:h].contiguous().cpu() for x in (q, k, v)] + [what]


class Done(Exception):
    """Raised from the chosen layer's attention: the layers after it need not run."""
