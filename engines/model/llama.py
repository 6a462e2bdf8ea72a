"""A Llama-family decoder in torch that reads and writes a paged KV cache.

Per layer (pre-norm, residual):

    h = x + W_o · attn(rope(W_q · rms(x)), rope(W_k · rms(x)), W_v · rms(x))
    y = h + W_down · (silu(W_gate · rms(h)) * (W_up · rms(h)))

with rms(x) = x / sqrt(mean(x²) + eps) * w, grouped-query attention (n_heads query heads share
n_kv_heads K/V heads: MHA, GQA or MQA) and RoPE (`rope.py`). Q, K and V are one fused matrix,
gate and up another, so a layer runs four matmuls.

`forward` takes a FLAT batch: the new tokens of several sequences, their positions and an
`AttentionMetadata` (engines/kv: where each sequence's tokens start, the slot each new K/V
goes to, block tables, context lengths), so prefills and decodes of many sequences run in one
call; attention reads K/V through the block tables (`engines.kv.PagedAttention`, planned once
per forward and reused by every layer).
On the native path a step whose attention reads the cache in place and whose linears all run
native kernels for its rows (decode, K+1 verification, a batch of decodes) runs every layer in
one call (`engines.kernels.decoder`: the same kernels, bit for bit, without a Python call per op).
`forward_nocache` recomputes one whole sequence with plain causal attention: the reference.
`forward_with` runs tokens at caller-given positions through caller-given attention (token
trees: a tree mask over the paged cache).

Weights come in as a state dict with Hugging Face's Llama names (`model.layers.0.self_attn.
q_proj.weight`, ...), whatever file they were read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inferlab.engines.kernels import fused, resolve
from inferlab.engines.kernels.decoder import DecoderPlan
from inferlab.engines.kv.attention_metadata import AttentionMetadata, PagedAttention
from inferlab.engines.kv.cache import PagedKVCache
from inferlab.engines.kv.paged_attention import sdpa_gqa
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.rope import RopeTables, apply_rope

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _rms_norm_formula(x: torch.Tensor, shape: tuple[int, ...], weight: torch.Tensor,
                      eps: float) -> torch.Tensor:
    """rms(x) = x / sqrt(mean(x²) + eps) * weight (torch < 2.4 has no F.rms_norm)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


rms_norm = getattr(F, "rms_norm", None) or _rms_norm_formula


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A torch dtype from "fp32" / "bf16" / "fp16" (or a torch dtype)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}") from None


def hf_weight_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a Llama checkpoint holds, by its Hugging Face name, with its shape."""
    d, q_dim, kv_dim = cfg.d_model, cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg.vocab_size, d),
                                          "model.norm.weight": (d,)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (q_dim, d),
            p + "self_attn.k_proj.weight": (kv_dim, d),
            p + "self_attn.v_proj.weight": (kv_dim, d),
            p + "self_attn.o_proj.weight": (d, q_dim),
            p + "post_attention_layernorm.weight": (d,),
            p + "mlp.gate_proj.weight": (cfg.d_ff, d),
            p + "mlp.up_proj.weight": (cfg.d_ff, d),
            p + "mlp.down_proj.weight": (d, cfg.d_ff),
        }
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, d)
    return shapes


def check_weight_shapes(cfg: ModelConfig, shapes: Mapping[str, tuple[int, ...]],
                        origin: str = "") -> None:
    """Raise ModelLoadError unless `shapes` (tensor name -> shape, e.g. read from a file's
    header) holds every tensor `cfg` needs with the shape it needs, and `cfg` is a decoder this
    module runs (SwiGLU MLP, even head width for RoPE). Extra tensors are ignored. `origin`
    (a path) starts the message. Loaders call this before reading any weight."""
    where = f"{origin or cfg.id}: "
    if cfg.mlp_kind != "swiglu":
        raise ModelLoadError(f"{where}a {cfg.mlp_kind} MLP is not Llama-family")
    if cfg.d_head % 2:
        raise ModelLoadError(f"{where}head width d_head {cfg.d_head} is odd; RoPE needs an even "
                             "one")
    for name, shape in hf_weight_shapes(cfg).items():
        if name not in shapes:
            raise ModelLoadError(f"{where}missing tensor {name!r}")
        got = tuple(shapes[name])
        if got != shape:
            raise ModelLoadError(f"{where}tensor {name!r} has shape {got}, expected {shape}")


@dataclass
class LayerWeights:
    """One decoder layer: norms [d]; linears qkv ((H+2·Hkv)·d_head out), o, gate_up (2·d_ff
    out: gate rows first), down."""

    attn_norm: torch.Tensor
    qkv: Linear
    o: Linear
    mlp_norm: torch.Tensor
    gate_up: Linear
    down: Linear


def held_bytes(item) -> int:
    """Bytes one weight holds: a tensor's at its dtype, or the linear's own `nbytes` (any
    linear: `Linear` at its dtype without layout padding, a low-bit layer its codes, scales
    and minima)."""
    if isinstance(item, torch.Tensor):
        return item.numel() * item.element_size()
    return item.nbytes


def held_params(item) -> int:
    """Parameters one weight stands for: a tensor's elements, or the linear's out × in
    (`out_features`, `in_features`: whatever codes hold them)."""
    if isinstance(item, torch.Tensor):
        return item.numel()
    return item.out_features * item.in_features


class Llama:
    """The decoder: weights in one dtype on one device, plus RoPE tables. No autograd.

    `kernel_path` ("native" or "torch") is the kernel path it runs on, fixed when it is built:
    its layers' layouts were chosen for it, and the small ops between the matmuls, the K/V
    writes and attention follow it."""

    def __init__(self, config: ModelConfig, embed: torch.Tensor, layers: list[LayerWeights],
                 final_norm: torch.Tensor, lm_head: Linear | None = None,
                 kernels: str | None = None) -> None:
        """`lm_head` None ties it to `embed` (the embedding is then read through its layout).
        `kernels`: the path ("native", "torch"; None or "auto": the process default) the
        layers were built for."""
        if config.mlp_kind != "swiglu":
            raise ModelLoadError(f"{config.id}: a {config.mlp_kind} MLP is not Llama-family")
        self.config = config
        self.kernel_path = resolve(kernels)
        self.tied = lm_head is None
        self.lm_head = Linear(embed, kernels=self.kernel_path) if lm_head is None else lm_head
        self.embed = self.lm_head.weight if lm_head is None else embed
        self.layers = layers
        self.final_norm = final_norm
        self.dtype = embed.dtype
        self.device = embed.device
        self.rope = RopeTables(config.d_head, config.max_position, config.rope_theta,
                               self.dtype, self.device)
        self.scale = config.d_head ** -0.5
        self._q_dim = config.n_heads * config.d_head
        self._qk_heads = config.n_heads + config.n_kv_heads
        # the small ops between the matmuls fused on the native library (fp32 on the CPU)
        self.glue = fused.for_model(self.kernel_path, self.device, self.dtype, config.d_head)
        self.one_call_per_step = True
        """Whether a step the native decoder can run goes through it (every layer in one call,
        `engines.kernels.decoder`); False keeps the per-op path (the bench compares them)."""
        self._decoder: DecoderPlan | None = None

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def from_state_dict(cls, config: ModelConfig, weights: Mapping[str, torch.Tensor],
                        dtype: str | torch.dtype = "fp32", device: str | torch.device = "cpu",
                        origin: str = "", kernels: str | None = None) -> Llama:
        """Build from Hugging Face-named tensors (any float dtype); checks every name and shape.
        `kernels`: the kernel path the layers are laid out for ("native", "torch"; None or
        "auto": the process default).

        A missing tensor, a wrong shape or a tensor holding NaN or ±inf raises ModelLoadError
        naming it; `origin` (a path) starts the message. A tied model may omit `lm_head.weight`.
        """
        where = f"{origin or config.id}: "
        dt, dev, path = resolve_dtype(dtype), torch.device(device), resolve(kernels)
        check_weight_shapes(config, {n: tuple(t.shape) for n, t in weights.items()}, origin)
        for name in hf_weight_shapes(config):
            if not bool(torch.isfinite(weights[name]).all()):
                raise ModelLoadError(f"{where}tensor {name!r} holds NaN or infinite values")

        def w(name: str) -> torch.Tensor:
            return weights[name].to(device=dev, dtype=dt).contiguous()

        def norm(name: str) -> torch.Tensor:  # norms run in fp32 (see `_layers`)
            return weights[name].to(device=dev, dtype=torch.float32).contiguous()

        def linear(weight: torch.Tensor) -> Linear:
            return Linear(weight, kernels=path)

        def cat(*names: str) -> Linear:
            return linear(torch.cat([weights[n].to(device=dev, dtype=dt) for n in names]))

        layers = []
        for i in range(config.n_layers):
            p = f"model.layers.{i}."
            layers.append(LayerWeights(
                attn_norm=norm(p + "input_layernorm.weight"),
                qkv=cat(*(p + f"self_attn.{n}_proj.weight" for n in "qkv")),
                o=linear(w(p + "self_attn.o_proj.weight")),
                mlp_norm=norm(p + "post_attention_layernorm.weight"),
                gate_up=cat(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"),
                down=linear(w(p + "mlp.down_proj.weight")),
            ))
        lm_head = None if config.tie_embeddings else linear(w("lm_head.weight"))
        return cls(config, w("model.embed_tokens.weight"), layers, norm("model.norm.weight"),
                   lm_head, kernels=path)

    def _weights(self) -> list:
        """Every weight held: tensors, and the linears of any kind (the tied lm_head counted
        once: the embedding is then the lm_head's weight tensor, or the low-bit lm_head
        itself)."""
        items: list = [self.embed, self.final_norm]
        if not self.tied:
            items.append(self.lm_head)
        for lw in self.layers:
            items += [lw.attn_norm, lw.qkv, lw.o, lw.mlp_norm, lw.gate_up, lw.down]
        return items

    @property
    def n_params(self) -> int:
        """Parameters actually held (the tied lm_head counted once), each weight's own
        count (`held_params`)."""
        return sum(held_params(t) for t in self._weights())

    @property
    def weight_bytes(self) -> int:
        """Bytes of every weight held (norm vectors are kept in fp32), each weight's own
        count (`held_bytes`): a low-bit model's codes, scales and minima."""
        return sum(held_bytes(t) for t in self._weights())

    def new_cache(self, n_blocks: int, block_size: int = 16) -> PagedKVCache:
        """An empty paged KV cache shaped for this model (same dtype and device)."""
        c = self.config
        return PagedKVCache(c.n_layers, n_blocks, block_size, c.n_kv_heads, c.d_head,
                            self.dtype, self.device)

    # ---- forward --------------------------------------------------------------------------------

    @torch.inference_mode()
    def forward(self, token_ids: torch.Tensor, meta: AttentionMetadata, cache: PagedKVCache,
                positions: torch.Tensor | None = None,
                logits_index: torch.Tensor | str | None = None) -> torch.Tensor:
        """Run the flat batch `token_ids` [T]; write its K/V into `cache` at the metadata's slots.

        `positions` [T] default to the metadata's. Returns fp32 logits [n, vocab] for
        `logits_index` (flat token indices); by default each sequence's last token
        (n = number of sequences); "all" gives every token's.
        """
        if token_ids.shape[0] != meta.n_tokens:
            raise ValueError(f"{token_ids.shape[0]} tokens but the metadata describes "
                             f"{meta.n_tokens}")
        token_ids = token_ids.to(self.device)
        positions = meta.positions if positions is None else positions
        cos, sin = self.rope.at(positions.to(self.device))
        slots, scale = meta.slot_mapping, self.scale

        paged = PagedAttention(meta, cache, self.kernel_path)

        def attend(q: torch.Tensor, layer: int) -> torch.Tensor:
            return paged(q, layer, scale)

        x = self._decoder_layers(token_ids, cos, sin, slots, paged, cache)
        if x is None:
            write = self._native_write(cache, slots)
            if write is None:
                def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
                    cache.write(layer, slots, k, v)

            x = self._layers(self.embed[token_ids], cos, sin, attend, write)
        if logits_index is None:
            x = x[meta.query_start_loc[1:].to(device=self.device, dtype=torch.int64) - 1]
        elif not isinstance(logits_index, str):
            x = x[logits_index.to(self.device)]
        elif logits_index != "all":
            raise ValueError(f"logits_index must be a tensor, None or 'all', got {logits_index!r}")
        return self.head_logits(x)

    def _decoder_layers(self, token_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                        slots: torch.Tensor, paged: PagedAttention, cache: PagedKVCache
                        ) -> torch.Tensor | None:
        """The residual stream after every layer, run in one native call, or None where that
        does not apply (the per-op path runs): it needs the fused ops, attention read in place
        (`paged.native`), an fp32, INT8 or FP8 E4M3 cache on the CPU and every linear on a native
        kernel for this many rows."""
        glue, n = self.glue, token_ids.shape[0]
        if glue is None or not self.one_call_per_step or paged.native is None:
            return None
        view = cache.native_view()
        if view is None:
            return None
        plan = self._decoder
        if plan is None or plan.key != DecoderPlan.key_of(self.layers):  # a layer was replaced
            plan = self._decoder = DecoderPlan(glue.native, self.config, self.layers, self.scale)
        if not plan.runs(n):
            return None
        if not (view.kv.is_contiguous() and (view.scales is None or view.scales.is_contiguous())):
            return None
        slots64 = glue.checked_slots(slots, view.n_slots)
        x = self.embed[token_ids].float().contiguous()
        return plan.run(x, cos.contiguous(), sin.contiguous(), slots64, paged.native, view)

    def _native_write(self, cache: PagedKVCache, slots: torch.Tensor):
        """`write(layer, k, v)` on the fused ops into the store the cache's native view
        describes (the slots checked once for the whole step), or None: the cache's own
        `write`."""
        return None if self.glue is None else self.glue.kv_writer(cache.native_view(), slots)

    @torch.inference_mode()
    def forward_with(self, token_ids: torch.Tensor, positions: torch.Tensor, attend, write,
                     logits_index: torch.Tensor | str = "all") -> torch.Tensor:
        """Run `token_ids` [T] at caller-given RoPE `positions` [T] with caller-given attention:
        per layer `write(layer, k, v)` (k, v [T, Hkv, D], after RoPE) then `attend(q, layer)`
        (q [T, H, D] -> [T, H, D]). A token tree's verify forward: nodes at prefix_len + depth,
        attending through a tree mask (`engines.kv.MaskedAttention`).

        Returns fp32 logits [n, vocab] for `logits_index` (token indices), or every token's
        ("all").
        """
        if positions.shape != token_ids.shape or token_ids.dim() != 1:
            raise ValueError(f"token_ids {tuple(token_ids.shape)} and positions "
                             f"{tuple(positions.shape)} must be two 1-d tensors of one length")
        cos, sin = self.rope.at(positions.to(self.device))
        x = self._layers(self.embed[token_ids.to(self.device)], cos, sin, attend, write)
        if isinstance(logits_index, str):
            if logits_index != "all":
                raise ValueError(f"logits_index must be a tensor or 'all', got {logits_index!r}")
        else:
            x = x[logits_index.to(self.device)]
        return self.head_logits(x)

    @torch.inference_mode()
    def forward_nocache(self, token_ids: torch.Tensor, all_logits: bool = False) -> torch.Tensor:
        """Recompute one whole sequence [T] with plain causal attention (no cache): the reference.

        Returns fp32 logits [T, vocab] if `all_logits`, else the last token's [1, vocab].
        """
        x = self.layers_nocache(self.embed[token_ids.to(self.device)])
        return self.head_logits(x if all_logits else x[-1:])

    @torch.inference_mode()
    def layers_nocache(self, x: torch.Tensor) -> torch.Tensor:
        """This model's layers over the hidden states [T, d_model] of one whole sequence
        (positions 0..T-1, causal, no cache): the residual stream after the last layer, fp32.
        `x` is left as it was (a self-draft's search resumes from a layer's input)."""
        n = x.shape[0]
        cos, sin = self.rope.at(torch.arange(n, device=self.device))
        kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

        def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
            kv[layer] = (k, v)

        def attend(q: torch.Tensor, layer: int) -> torch.Tensor:
            k, v = kv.pop(layer)
            out = sdpa_gqa(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                           is_causal=True, scale=self.scale)
            return out.transpose(0, 1)

        return self._layers(x.clone(), cos, sin, attend, write)

    def _layers(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend, write
                ) -> torch.Tensor:
        if self.glue is not None and x.dtype == torch.float32:
            return self._layers_fused(x, cos, sin, attend, write)
        c = self.config
        n, eps, d_head, d_ff = x.shape[0], c.norm_eps, c.d_head, c.d_ff
        q_dim, qk_heads, d_model = self._q_dim, self._qk_heads, c.d_model
        dt = self.dtype
        x = x.float()  # the residual stream and the norms stay fp32 whatever the weights
        for i, lw in enumerate(self.layers):
            h = rms_norm(x, (d_model,), lw.attn_norm, eps).to(dt)
            qkv = lw.qkv(h)
            qk = apply_rope(qkv[:, : qk_heads * d_head].view(n, qk_heads, d_head), cos, sin)
            q, k = qk[:, : c.n_heads], qk[:, c.n_heads:]
            v = qkv[:, qk_heads * d_head:].view(n, c.n_kv_heads, d_head)
            write(i, k, v)
            o = attend(q, i).reshape(n, q_dim)
            x = x + lw.o(o)
            h = rms_norm(x, (d_model,), lw.mlp_norm, eps).to(dt)
            gu = lw.gate_up(h)
            x = x + lw.down(F.silu(gu[:, :d_ff]) * gu[:, d_ff:])
        return x

    def _layers_fused(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend,
                      write) -> torch.Tensor:
        """`_layers` with the small ops on the native library: each residual add folded into
        the next RMSNorm, RoPE in place on the QKV product, SwiGLU in one pass (fp32)."""
        c, glue = self.config, self.glue
        n, eps, d_head = x.shape[0], c.norm_eps, c.d_head
        q_dim, qk_dim = self._q_dim, self._qk_heads * d_head
        x = x.contiguous().clone()  # the residual stream, updated in place
        h = torch.empty_like(x)
        cos, sin = cos.contiguous(), sin.contiguous()
        residual = None
        for i, lw in enumerate(self.layers):
            glue.add_rms_norm(x, residual, lw.attn_norm, eps, out=h)
            qkv = lw.qkv(h)
            glue.rope(qkv, cos, sin, self._qk_heads, d_head)
            q = qkv[:, :q_dim].view(n, c.n_heads, d_head)
            k = qkv[:, q_dim:qk_dim].view(n, c.n_kv_heads, d_head)
            v = qkv[:, qk_dim:].view(n, c.n_kv_heads, d_head)
            write(i, k, v)
            residual = lw.o(attend(q, i).reshape(n, q_dim))
            glue.add_rms_norm(x, residual, lw.mlp_norm, eps, out=h)
            residual = lw.down(glue.silu_mul(lw.gate_up(h)))
        return x.add_(residual) if residual is not None else x

    def head_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The final norm and the lm_head over hidden states [T, d_model]: fp32 logits."""
        x = rms_norm(x, (self.config.d_model,), self.final_norm, self.config.norm_eps)
        return self.lm_head(x.to(self.dtype)).float()
