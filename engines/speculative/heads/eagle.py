"""EAGLE's draft head: one decoder layer that predicts the target's next hidden state from
its current one and the next token.

    x_t     = W_fc · [f_t ; e(x_{t+1})] + b_fc                  (2d -> d, as EAGLE's fc)
    f̂_{t+1} = layer(x_0 .. x_t)                                 (pre-norm, causal, RoPE at t)
    draft   = argmax over the draft vocabulary of rms(f̂_{t+1}) · W_lm[d2t]ᵀ   (target's own
              final norm and lm_head, frozen: `target_head.FrozenHead`)

f_t is the target's residual stream after its last layer at position t (before the final
norm), e(·) its input embedding (frozen). layer: h = x + W_o·attn(rope(W_q·rms(x)),
rope(W_k·rms(x)), W_v·rms(x)); y = h + W_down·(silu(W_gate·rms(h)) * W_up·rms(h)), the
target's widths (heads, GQA, d_ff). Drafting K tokens runs the layer K times: the real
(f_t, x_{t+1}) pairs the head has not seen yet in one forward, then each draft's
(f̂, d) pair, its K/V kept in the head's own cache (`HeadCache`) and rolled back when the
target rejects the drafts (their pairs are rerun with the target's real features).

A dimension that is massive and constant in the target's features (`dims.constant_dims`:
Gemma 3 270M's dim 163 holds 23.4 ± 0.96 of a unit-RMS row) is output as its value, not
learned: the final norm divides by the row's RMS, which that dimension sets, so a head left
free learns to use it as a logit temperature (Gemma's went to −38 where the target holds +23:
its first drafts were fine, and every later draft, reading that output back, was garbage).

Training-time test (EAGLE-3's idea, one extra step): `forward_step2` runs the pairs
(f̂_p, x_{p+1}) built from the first step's own outputs, each query at position p reading
the first step's keys 0 .. p - 1 (the real pairs) and its own key only: exactly what the
cache holds when the head drafts its second token after the real pairs 0 .. p - 1.

Drafting (`for_drafting`, no gradient) multiplies by copies of the weights in the native
layout (`engines.model.linear.Linear`: fp32 panels, the same values): a draft step streams
the head's ~17 MB of weights from memory, which torch's one-row products did at about half
the speed (measured with the caches flushed between calls, as a target step leaves them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import rms_norm
from inferlab.engines.model.rope import RopeTables, apply_rope
from inferlab.engines.speculative.heads.dims import HeadDims, init_parameters


class HeadCache:
    """The K/V of one sequence's head layer, positions 0 .. length-1 (fp32 [max, Hkv, D])."""

    def __init__(self, dims: HeadDims, max_tokens: int) -> None:
        self.k = torch.zeros(max_tokens, dims.n_kv_heads, dims.d_head)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v [T, Hkv, D]; return every position's [length, Hkv, D]."""
        end = self.length + k.shape[0]
        if end > self.k.shape[0]:
            raise ValueError(f"head cache holds {self.k.shape[0]} positions, {end} asked")
        self.k[self.length:end] = k
        self.v[self.length:end] = v
        self.length = end
        return self.k[:end], self.v[:end]

    def truncate(self, n: int) -> None:
        self.length = min(self.length, n)


class EagleHead(nn.Module):
    def __init__(self, dims: HeadDims, seed: int = 0) -> None:
        super().__init__()
        d, q_dim, kv_dim = dims.d_model, dims.n_heads * dims.d_head, dims.n_kv_heads * dims.d_head
        self.dims = dims
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, q_dim + 2 * kv_dim, bias=False)
        self.o = nn.Linear(q_dim, d, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(d))
        self.gate_up = nn.Linear(d, 2 * dims.d_ff, bias=False)
        self.down = nn.Linear(dims.d_ff, d, bias=False)
        # o and down start at zero: the layer starts as the identity on W_fc's output
        init_parameters(self, seed, zero=("o.weight", "down.weight"))
        self.rope = RopeTables(dims.d_head, dims.max_position, dims.rope_theta)
        # the target's massive constant dimensions (dims.constant_dims, set before training):
        # predicted as their value, not learned (see the module docstring)
        self.register_buffer("constant_mask", torch.zeros(d, dtype=torch.bool))
        self.register_buffer("constant_value", torch.zeros(d))
        self._drafting: dict[str, Linear] | None = None
        """Native copies of the linears' weights (`for_drafting`); None: nn.Linear."""

    LINEARS = ("fc", "qkv", "o", "gate_up", "down")

    def train(self, mode: bool = True) -> EagleHead:
        self._drafting = None  # the weights may change: drafting copies them again
        return super().train(mode)

    def for_drafting(self) -> EagleHead:
        """Evaluation mode, its products (outside autograd) on native copies of the weights;
        undone by `train()`."""
        self.eval()
        self._drafting = {n: Linear(getattr(self, n).weight.detach().clone())
                          for n in self.LINEARS}
        return self

    def _linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        layer = getattr(self, name)
        fast = self._drafting
        if fast is None or torch.is_grad_enabled():
            return layer(x)
        y = fast[name](x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], -1)
        return y if layer.bias is None else y + layer.bias

    def _qkv(self, feats: torch.Tensor, embeds: torch.Tensor, start: int | torch.Tensor):
        """x (fc's output), and q, k, v [B, T, heads, D] with RoPE at start .. start+T-1
        (`start` a tensor [T]: at those positions, a token tree's levels)."""
        dm = self.dims
        b, t, _ = feats.shape
        x = self._linear("fc", torch.cat([feats, embeds], dim=-1))
        h = rms_norm(x, (dm.d_model,), self.attn_norm, dm.norm_eps)
        q_dim, kv_dim = dm.n_heads * dm.d_head, dm.n_kv_heads * dm.d_head
        qkv = self._linear("qkv", h)
        q = qkv[..., :q_dim].reshape(b, t, dm.n_heads, dm.d_head)
        k = qkv[..., q_dim:q_dim + kv_dim].reshape(b, t, dm.n_kv_heads, dm.d_head)
        v = qkv[..., q_dim + kv_dim:].reshape(b, t, dm.n_kv_heads, dm.d_head)
        positions = torch.arange(start, start + t) if isinstance(start, int) else start
        cos, sin = self.rope.at(positions)
        return x, apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def _finish(self, x: torch.Tensor, q, k, v, mask) -> torch.Tensor:
        """The layer's output after attention of q over k, v [B, *, heads, D] (`mask`: None
        for a single query, else [queries, keys] bool)."""
        dm = self.dims
        b, t = q.shape[:2]
        # grouped-query attention read in place (no copy of the cache per KV head's group)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), attn_mask=mask, enable_gqa=True)
        x = x + self._linear("o", a.transpose(1, 2).reshape(b, t, dm.n_heads * dm.d_head))
        h = rms_norm(x, (dm.d_model,), self.mlp_norm, dm.norm_eps)
        gate, up = self._linear("gate_up", h).chunk(2, dim=-1)
        return torch.where(self.constant_mask, self.constant_value,
                           x + self._linear("down", F.silu(gate) * up))

    def forward_step2(self, feats: torch.Tensor, embeds: torch.Tensor,
                      feats2: torch.Tensor, embeds2: torch.Tensor) -> torch.Tensor:
        """Training-time test, no cache: the real pairs (feats, embeds) [B, T, d] at positions
        0 .. T-1 give the keys; the pairs (feats2, embeds2) [B, T, d] at the same positions
        are the second step's, query p reading real keys 0 .. p - 1 and its own. Returns f̂
        [B, T, d] of the second step."""
        t = feats.shape[1]
        _, _, k1, v1 = self._qkv(feats, embeds, 0)
        x2, q2, k2, v2 = self._qkv(feats2, embeds2, 0)
        eye = torch.eye(t, dtype=torch.bool)
        mask = torch.cat([torch.ones(t, t, dtype=torch.bool).tril(diagonal=-1), eye], dim=1)
        return self._finish(x2, q2, torch.cat([k1, k2], dim=1), torch.cat([v1, v2], dim=1),
                            mask)

    def forward_tree(self, feats: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor,
                     cache: HeadCache, tree_k: torch.Tensor, tree_v: torch.Tensor,
                     mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Draft-tree nodes' pairs (feats, embeds) [T, d] at RoPE `positions` [T]: each query
        reads every key of `cache` (the real pairs), the earlier nodes' keys `tree_k`,
        `tree_v` [n, Hkv, D] that mask[:, :n] allows (its ancestors), and its own key. Returns
        f̂ [T, d] and the nodes' k, v [T, Hkv, D]; the cache is left as it was."""
        t = feats.shape[0]
        x, q, k, v = self._qkv(feats[None], embeds[None], positions)
        past = cache.length
        keys = torch.cat([cache.k[:past], tree_k, k[0]]).unsqueeze(0)
        values = torch.cat([cache.v[:past], tree_v, v[0]]).unsqueeze(0)
        full = torch.cat([torch.ones(t, past, dtype=torch.bool), mask,
                          torch.eye(t, dtype=torch.bool)], dim=1)
        return self._finish(x, q, keys, values, full)[0], k[0], v[0]

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, start: int = 0,
                cache: HeadCache | None = None) -> torch.Tensor:
        """f̂ [B, T, d] after (f, e) pairs [B, T, d] at positions start .. start+T-1. Without
        a cache the T pairs attend causally among themselves (training, start 0); with one
        (B = 1) they also read its earlier positions and their K/V joins it."""
        t = feats.shape[1]
        x, q, k, v = self._qkv(feats, embeds, start)
        past = 0
        if cache is not None:
            past = cache.length
            k_all, v_all = cache.extend(k[0], v[0])
            k, v = k_all.unsqueeze(0), v_all.unsqueeze(0)
        mask = None
        if t > 1:  # query i (position past + i) reads keys 0 .. past + i
            mask = torch.ones(t, past + t, dtype=torch.bool).tril(diagonal=past)
        return self._finish(x, q, k, v, mask)
