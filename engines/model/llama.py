"""The decoder in torch, configured by a model description, reading and writing a paged KV cache.

Per layer (pre-norm, residual), for every family the description names (`ModelConfig`):

    h = x + post(W_o · attn(rope(qk_norm(W_q · rms(x) + b_q)), rope(qk_norm(W_k · rms(x) + b_k)),
                             W_v · rms(x) + b_v))
    y = h + post(MLP(rms(h)))      MLP: W_down · (act(W_gate ·) * (W_up ·)), act SiLU or tanh
                                   GELU; or a Mixture-of-Experts block (`moe.py`)

Biases (Qwen 2), q/k-norms (Qwen 3, Gemma 3, OLMoE), the `post` norms (Gemma 2/3) and the
experts are there only where the family has them. Gemma's x·(1 + w) norms are held as
w' = 1 + w (folded at load), so every norm is x · rsqrt(mean(x²) + eps) · w'. A layer is
global or attends over a sliding window of its last W tokens, with RoPE tables per layer kind
(Gemma 3: base 10⁶ global, 10⁴ local). Embeddings are scaled by `embed_scale` (Gemma: √d),
logits soft-capped where configured.

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

Weights come in as a state dict with the family's Hugging Face names
(`engines.model.checkpoint_names`), whatever file they were read from. A plain Llama layout
(the description asks for nothing else) runs the fused native paths described above; the
others run the per-op path, its linears on whichever kernels their weights have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inferlab.engines.kernels import fused, resolve
from inferlab.engines.kernels.decoder import DecoderPlan
from inferlab.engines.kv.attention_metadata import (
    AttentionMetadata,
    GroupedMetadata,
    PagedAttention,
)
from inferlab.engines.kv.cache import PagedKVCache
from inferlab.engines.kv.paged_attention import masked_attention, sdpa_gqa
from inferlab.engines.model import moe as moe_block
from inferlab.engines.model.checkpoint_names import (
    attention_names,
    hf_weight_shapes,
    mlp_names,
    norm_names,
)
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.rope import RopeTables, apply_rope, scaled_inv_freq

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


RUNNABLE_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3",
                     "qwen2_moe", "qwen3_moe", "mixtral", "olmoe")


def check_runs(cfg: ModelConfig, origin: str = "") -> None:
    """ModelLoadError unless this decoder runs `cfg` exactly (a family it knows, an MLP with a
    gate, full RoPE of an even head width, no MLA)."""
    where = f"{origin or cfg.id}: "
    if cfg.family not in RUNNABLE_FAMILIES:
        raise ModelLoadError(f"{where}architecture {cfg.family!r} is not supported by the "
                             f"decoder (it runs {', '.join(RUNNABLE_FAMILIES)})")
    if cfg.mlp_kind == "gelu":
        raise ModelLoadError(f"{where}a gelu MLP without a gate is not supported")
    if cfg.is_mla or cfg.router != "softmax":
        raise ModelLoadError(f"{where}MLA attention and sigmoid routing are not supported")
    if cfg.d_head % 2:
        raise ModelLoadError(f"{where}head width d_head {cfg.d_head} is odd; RoPE needs an even "
                             "one")
    if "chunked" in cfg.layer_types:
        raise ModelLoadError(f"{where}chunked attention layers are not supported")


def check_weight_shapes(cfg: ModelConfig, shapes: Mapping[str, tuple[int, ...]],
                        origin: str = "") -> None:
    """Raise ModelLoadError unless `shapes` (tensor name -> shape, e.g. read from a file's
    header) holds every tensor `cfg` needs with the shape it needs, and `cfg` is a decoder this
    module runs (`check_runs`). Extra tensors are ignored. `origin` (a path) starts the
    message. Loaders call this before reading any weight."""
    where = f"{origin or cfg.id}: "
    check_runs(cfg, origin)
    for name, shape in hf_weight_shapes(cfg).items():
        if name not in shapes:
            raise ModelLoadError(f"{where}missing tensor {name!r}")
        got = tuple(shapes[name])
        if got != shape:
            raise ModelLoadError(f"{where}tensor {name!r} has shape {got}, expected {shape}")


def is_llama_layout(cfg: ModelConfig) -> bool:
    """Whether `cfg` asks for nothing beyond a Llama layer (then the fused native paths run):
    no biases, q/k-norms, post-norms, experts, soft-caps or scalars, SwiGLU, one RoPE table."""
    return (cfg.mlp_kind == "swiglu" and not cfg.qkv_bias and not cfg.qk_norm
            and not cfg.post_norms and not cfg.is_moe and cfg.embed_scale == 1.0
            and cfg.attn_scale in (0.0, cfg.d_head ** -0.5) and not cfg.attn_softcap
            and not cfg.final_softcap and not (cfg.layer_types and cfg.rope_local_theta)
            and cfg.rotary_dim in (0, cfg.d_head))


@dataclass
class LayerWeights:
    """One decoder layer: norms [d] (fp32, any (1 + w) folded in); linears qkv
    ((H+2·Hkv)·d_head out), o, gate_up (2·d_ff out: gate rows first), down — or, in a MoE
    layer, `moe` and gate_up = down = None. The optional parts are None where the family has
    none: qkv_bias [(H+2·Hkv)·d_head], q_norm / k_norm ([d_head] per head, or the whole
    projection's), post_attn_norm / post_mlp_norm (Gemma). `window`: the sliding window in
    tokens, 0 for a global layer."""

    attn_norm: torch.Tensor
    qkv: object
    o: object
    mlp_norm: torch.Tensor
    gate_up: object | None
    down: object | None
    qkv_bias: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    post_attn_norm: torch.Tensor | None = None
    post_mlp_norm: torch.Tensor | None = None
    moe: moe_block.MoEWeights | None = None
    window: int = 0


def _layer_weights(cfg: ModelConfig, i: int, norm, vec, lin) -> LayerWeights:
    """Layer `i` from the family's checkpoint names (`checkpoint_names`): `norm(name)` an fp32
    norm, `vec(name)` an fp32 vector (a bias), `lin(*names)` the linear of those tensors' rows
    one after the other."""
    norms = {role: norm(name) for role, name in norm_names(cfg, i).items()}
    attn = {role: name for role, (name, _) in attention_names(cfg, i).items()}
    qkv = lin(attn["qkv"]) if "qkv" in attn else lin(attn["q"], attn["k"], attn["v"])
    bias = torch.cat([vec(attn[r]) for r in ("q_bias", "k_bias", "v_bias")]) \
        if cfg.qkv_bias else None
    qk = {r: norm(attn[r]) for r in ("q_norm", "k_norm") if r in attn}
    mlp = {role: name for role, (name, _) in mlp_names(cfg, i).items()}
    dense_up = moe = None
    if not cfg.is_moe_layer(i):
        dense_up = lin(mlp["gate_up"]) if "gate_up" in mlp else lin(mlp["gate"], mlp["up"])
        down = lin(mlp["down"])
    else:
        experts = [moe_block.ExpertWeights(lin(mlp[f"expert.{e}.gate"], mlp[f"expert.{e}.up"]),
                                           lin(mlp[f"expert.{e}.down"]))
                   for e in range(cfg.n_experts)]
        shared = moe_block.ExpertWeights(lin(mlp["shared.gate"], mlp["shared.up"]),
                                         lin(mlp["shared.down"])) \
            if "shared.gate" in mlp else None
        gate = lin(mlp["shared_gate"]) if "shared_gate" in mlp else None
        moe = moe_block.MoEWeights(lin(mlp["router"]), experts, shared, gate)
        down = None
    return LayerWeights(attn_norm=norms["attn_norm"], qkv=qkv, o=lin(attn["o"]),
                        mlp_norm=norms["mlp_norm"], gate_up=dense_up, down=down, qkv_bias=bias,
                        q_norm=qk.get("q_norm"), k_norm=qk.get("k_norm"),
                        post_attn_norm=norms.get("post_attn_norm"),
                        post_mlp_norm=norms.get("post_mlp_norm"), moe=moe,
                        window=cfg.layer_window(i))


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
        check_runs(config)
        self.config = config
        self.kernel_path = resolve(kernels)
        self.tied = lm_head is None
        if not isinstance(embed, torch.Tensor):  # a linear of codes read by rows (GGUF, INT4)
            self.lm_head = embed if lm_head is None else lm_head
            self.embed = embed
        else:
            self.lm_head = Linear(embed, kernels=self.kernel_path) if lm_head is None else lm_head
            self.embed = self.lm_head.weight if lm_head is None else embed
        self.layers = layers
        self.final_norm = final_norm
        self.dtype = embed.dtype
        self.device = getattr(embed, "device", torch.device("cpu"))
        self.ropes = self.rope_tables(self.dtype)
        self.scale = config.attn_scale or config.d_head ** -0.5
        self._q_dim = config.n_heads * config.d_head
        self._qk_heads = config.n_heads + config.n_kv_heads
        self.llama_layout = is_llama_layout(config)
        """Whether the fused native paths apply (`is_llama_layout`)."""
        # the small ops between the matmuls fused on the native library (fp32 on the CPU)
        ops = fused.for_model(self.kernel_path, self.device, self.dtype, config.d_head)
        self.glue = ops if self.llama_layout else None
        self.family_ops = ops if not self.llama_layout and not config.rotary_dim else None
        """The fused ops for another family's per-op path (Gemma, Qwen, MoE ...): norms with
        their residual adds, RoPE in place (None: torch's ops)."""
        self.one_call_per_step = True
        """Whether a step the native decoder can run goes through it (every layer in one call,
        `engines.kernels.decoder`); False keeps the per-op path (the bench compares them)."""
        self._decoder: DecoderPlan | None = None

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def from_state_dict(cls, config: ModelConfig, weights: Mapping[str, torch.Tensor],
                        dtype: str | torch.dtype = "fp32", device: str | torch.device = "cpu",
                        origin: str = "", kernels: str | None = None,
                        make_linear=None) -> Llama:
        """Build from Hugging Face-named tensors (any float dtype); checks every name and shape.
        `kernels`: the kernel path the layers are laid out for ("native", "torch"; None or
        "auto": the process default).

        A missing tensor, a wrong shape or a tensor holding NaN or ±inf raises ModelLoadError
        naming it; `origin` (a path) starts the message. A tied model may omit `lm_head.weight`.
        `make_linear(names)`, where given, may build the linear of those tensors' rows itself
        (a GGUF file's codes, multiplied where they lie: `gguf_loader`); None keeps the
        default, a `Linear` of the tensors at `dtype`.
        """
        where = f"{origin or config.id}: "
        dt, dev, path = resolve_dtype(dtype), torch.device(device), resolve(kernels)
        check_weight_shapes(config, {n: tuple(t.shape) for n, t in weights.items()}, origin)

        def tensor(name: str) -> torch.Tensor:
            """Tensor `name` as the file holds it (a lazy one read now), checked finite."""
            t = weights[name]
            t = t.to_torch() if hasattr(t, "to_torch") else t
            if not bool(torch.isfinite(t).all()):
                raise ModelLoadError(f"{where}tensor {name!r} holds NaN or infinite values")
            return t

        def w(name: str) -> torch.Tensor:
            return tensor(name).to(device=dev, dtype=dt).contiguous()

        def norm(name: str) -> torch.Tensor:  # norms run in fp32, any (1 + w) folded in
            t = tensor(name).to(device=dev, dtype=torch.float32)
            return (t + config.norm_offset).contiguous() if config.norm_offset else t.contiguous()

        def vec(name: str) -> torch.Tensor:
            return tensor(name).to(device=dev, dtype=torch.float32).contiguous()

        def lin(*names: str):
            made = make_linear(names) if make_linear is not None else None
            if made is not None:
                return made
            return Linear(torch.cat([w(n) for n in names]) if len(names) > 1 else w(names[0]),
                          kernels=path)

        layers = [_layer_weights(config, i, norm, vec, lin) for i in range(config.n_layers)]
        lm_head = None if config.tie_embeddings else lin("lm_head.weight")
        embed = make_linear(("model.embed_tokens.weight",)) if make_linear is not None else None
        return cls(config, w("model.embed_tokens.weight") if embed is None else embed, layers,
                   norm("model.norm.weight"), lm_head, kernels=path)

    def _weights(self) -> list:
        """Every weight held: tensors, and the linears of any kind (the tied lm_head counted
        once: the embedding is then the lm_head's weight tensor, or the low-bit lm_head
        itself)."""
        items: list = [self.embed, self.final_norm]
        if not self.tied:
            items.append(self.lm_head)
        for lw in self.layers:
            items += [t for t in (lw.attn_norm, lw.qkv, lw.o, lw.mlp_norm, lw.gate_up, lw.down,
                                  lw.qkv_bias, lw.q_norm, lw.k_norm, lw.post_attn_norm,
                                  lw.post_mlp_norm) if t is not None]
            if lw.moe is not None:
                items += lw.moe.linears()
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
    def forward(self, token_ids: torch.Tensor, meta: AttentionMetadata | GroupedMetadata,
                cache: PagedKVCache, positions: torch.Tensor | None = None,
                logits_index: torch.Tensor | str | None = None,
                hidden_out: list | None = None) -> torch.Tensor:
        """Run the flat batch `token_ids` [T]; write its K/V into `cache` at the metadata's slots.

        `positions` [T] default to the metadata's. Returns fp32 logits [n, vocab] for
        `logits_index` (flat token indices); by default each sequence's last token
        (n = number of sequences); "all" gives every token's. A `GroupedMetadata` (layer
        groups, engines/kv/kv_groups) gives each layer its group's block tables and slots in
        the same `cache`: layer i writes and attends through `meta.groups[meta.layer_group[i]]`.
        `hidden_out`, where given, gets the residual stream after the last layer appended
        (fp32 [T, d_model], every token, before the final norm): what a trained draft head
        (EAGLE, Medusa) reads. The logits are the same with or without it.
        """
        if token_ids.shape[0] != meta.n_tokens:
            raise ValueError(f"{token_ids.shape[0]} tokens but the metadata describes "
                             f"{meta.n_tokens}")
        token_ids = token_ids.to(self.device)
        positions = meta.positions if positions is None else positions
        rope = self._rope_at(positions.to(self.device))
        cos, sin = rope["full"]
        scale, softcap = self.scale, self.config.attn_softcap
        layers = self.layers

        if isinstance(meta, GroupedMetadata):  # one block table per layer group, one store
            group_of = meta.layer_group
            windows = {group_of[i]: lw.window for i, lw in enumerate(layers)}
            planned = [PagedAttention(m, cache, self.kernel_path, windows[g])
                       for g, m in enumerate(meta.groups)]
            group_slots = [m.slot_mapping for m in meta.groups]
            writers = [self._native_write(cache, slots) for slots in group_slots]

            def attend_in_group(q: torch.Tensor, layer: int) -> torch.Tensor:
                return planned[group_of[layer]](q, layer, scale, layers[layer].window, softcap)

            def write_in_group(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
                g = group_of[layer]
                if writers[g] is None:
                    cache.write(layer, group_slots[g], k, v)
                else:
                    writers[g](layer, k, v)

            x = self._layers(self.embed_rows(token_ids), rope, attend_in_group, write_in_group)
        else:
            slots = meta.slot_mapping
            paged = PagedAttention(meta, cache, self.kernel_path)

            def attend(q: torch.Tensor, layer: int) -> torch.Tensor:
                return paged(q, layer, scale, layers[layer].window, softcap)

            x = self._decoder_layers(token_ids, cos, sin, slots, paged, cache, meta)
            if x is None:
                write = self._native_write(cache, slots)
                if write is None:
                    def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
                        cache.write(layer, slots, k, v)

                x = self._layers(self.embed_rows(token_ids), rope, attend, write)
        if hidden_out is not None:
            hidden_out.append(x.float())
        if logits_index is None:
            x = x[meta.query_start_loc[1:].to(device=self.device, dtype=torch.int64) - 1]
        elif not isinstance(logits_index, str):
            x = x[logits_index.to(self.device)]
        elif logits_index != "all":
            raise ValueError(f"logits_index must be a tensor, None or 'all', got {logits_index!r}")
        return self.head_logits(x)

    def _decoder_layers(self, token_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                        slots: torch.Tensor, paged: PagedAttention, cache: PagedKVCache,
                        meta: AttentionMetadata) -> torch.Tensor | None:
        """The residual stream after every layer, run in one native call, or None where that
        does not apply (the per-op path runs): it needs the fused ops, attention read in place
        (`paged.native`), an fp32, INT8 or FP8 E4M3 cache on the CPU and every linear on a native
        kernel for this many rows."""
        glue, n = self.glue, token_ids.shape[0]
        if glue is None or not self.one_call_per_step or paged.native is None:
            return None
        if any(lw.window and meta.max_context_len > lw.window for lw in self.layers):
            return None  # a window the context outgrew: the per-op path masks it
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
        x = self.embed_rows(token_ids).float().contiguous()
        return plan.run(x, cos.contiguous(), sin.contiguous(), slots64, paged.native, view)

    def _native_write(self, cache: PagedKVCache, slots: torch.Tensor):
        """`write(layer, k, v)` on the fused ops into the store the cache's native view
        describes (the slots checked once for the whole step), or None: the cache's own
        `write`."""
        return None if self.glue is None else self.glue.kv_writer(cache.native_view(), slots)

    @torch.inference_mode()
    def forward_with(self, token_ids: torch.Tensor, positions: torch.Tensor, attend, write,
                     logits_index: torch.Tensor | str = "all",
                     hidden_out: list | None = None) -> torch.Tensor:
        """Run `token_ids` [T] at caller-given RoPE `positions` [T] with caller-given attention:
        per layer `write(layer, k, v)` (k, v [T, Hkv, D], after RoPE) then `attend(q, layer)`
        (q [T, H, D] -> [T, H, D]). A token tree's verify forward: nodes at prefix_len + depth,
        attending through a tree mask (`engines.kv.MaskedAttention`).

        Returns fp32 logits [n, vocab] for `logits_index` (token indices), or every token's
        ("all"); `hidden_out`, where given, gets every token's residual stream after the last
        layer appended (fp32 [T, d_model], as `forward`'s).
        """
        if positions.shape != token_ids.shape or token_ids.dim() != 1:
            raise ValueError(f"token_ids {tuple(token_ids.shape)} and positions "
                             f"{tuple(positions.shape)} must be two 1-d tensors of one length")
        rope = self._rope_at(positions.to(self.device))
        x = self._layers(self.embed_rows(token_ids.to(self.device)), rope, attend, write)
        if hidden_out is not None:
            hidden_out.append(x.float())
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
        x = self.layers_nocache(self.embed_rows(token_ids.to(self.device)))
        return self.head_logits(x if all_logits else x[-1:])

    @torch.inference_mode()
    def layers_nocache(self, x: torch.Tensor) -> torch.Tensor:
        """This model's layers over the hidden states [T, d_model] of one whole sequence
        (positions 0..T-1, causal, no cache): the residual stream after the last layer, fp32.
        `x` is left as it was (a self-draft's search resumes from a layer's input)."""
        n = x.shape[0]
        rope = self._rope_at(torch.arange(n, device=self.device))
        kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        softcap = self.config.attn_softcap

        def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
            kv[layer] = (k, v)

        def attend(q: torch.Tensor, layer: int) -> torch.Tensor:
            k, v = kv.pop(layer)
            window = self.layers[layer].window
            if not softcap and not (window and n > window):
                out = sdpa_gqa(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                               is_causal=True, scale=self.scale)
                return out.transpose(0, 1)
            return masked_attention(q, k, v, self.scale, window, softcap)

        return self._layers(x.clone(), rope, attend, write)

    def _layers(self, x: torch.Tensor, rope: dict, attend, write) -> torch.Tensor:
        if self.glue is not None and x.dtype == torch.float32:
            cos, sin = rope["full"]
            return self._layers_fused(x, cos, sin, attend, write)
        if self.family_ops is not None and x.dtype == torch.float32:
            return self._family_layers_fused(x, rope, attend, write)
        c = self.config
        n, eps, d_head = x.shape[0], c.norm_eps, c.d_head
        rot = c.rotary_dim or d_head
        q_dim, kv_dim, d_model = self._q_dim, c.n_kv_heads * d_head, c.d_model
        dt = self.dtype
        x = x.float()  # the residual stream and the norms stay fp32 whatever the weights
        for i, lw in enumerate(self.layers):
            h = rms_norm(x, (d_model,), lw.attn_norm, eps).to(dt)
            qkv = lw.qkv(h)
            if lw.qkv_bias is not None:
                qkv = qkv + lw.qkv_bias.to(qkv.dtype)
            q, k, v = qkv[:, :q_dim], qkv[:, q_dim:q_dim + kv_dim], qkv[:, q_dim + kv_dim:]
            if c.qk_norm == "full":  # OLMoE: over the whole projection, before the heads split
                q = rms_norm(q.float(), (q_dim,), lw.q_norm, eps).to(dt)
                k = rms_norm(k.float(), (kv_dim,), lw.k_norm, eps).to(dt)
            q = q.reshape(n, c.n_heads, d_head)
            k = k.reshape(n, c.n_kv_heads, d_head)
            if c.qk_norm == "head":
                q = rms_norm(q.float(), (d_head,), lw.q_norm, eps).to(dt)
                k = rms_norm(k.float(), (d_head,), lw.k_norm, eps).to(dt)
            cos, sin = rope["sliding" if lw.window else "full"]
            if rot < d_head:  # partial RoPE: the leading dims turn, the rest pass through
                q = torch.cat([apply_rope(q[..., :rot], cos, sin), q[..., rot:]], dim=-1)
                k = torch.cat([apply_rope(k[..., :rot], cos, sin), k[..., rot:]], dim=-1)
            else:
                q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            write(i, k, v.reshape(n, c.n_kv_heads, d_head))
            a = lw.o(attend(q, i).reshape(n, q_dim)).float()
            if lw.post_attn_norm is not None:
                a = rms_norm(a, (d_model,), lw.post_attn_norm, eps)
            x = x + a
            h = rms_norm(x, (d_model,), lw.mlp_norm, eps).to(dt)
            if lw.moe is not None:
                m = moe_block.forward_grouped(c, lw.moe, h)
            else:
                m = lw.down(moe_block.gated(lw.gate_up(h), c.mlp_kind)).float()
            if lw.post_mlp_norm is not None:
                m = rms_norm(m, (d_model,), lw.post_mlp_norm, eps)
            x = x + m
        return x

    def _family_layers_fused(self, x: torch.Tensor, rope: dict, attend, write) -> torch.Tensor:
        """`_layers` for the other families with the small ops on the native library (fp32):
        each residual add folded into the next norm (a post-norm normalises the block's
        output first), RoPE in place on the product; q/k-norms and activations stay torch's."""
        c, ops = self.config, self.family_ops
        n, eps, d_head = x.shape[0], c.norm_eps, c.d_head
        q_dim, kv_dim, qk_heads = self._q_dim, c.n_kv_heads * d_head, self._qk_heads
        tables = {kind: (cos.contiguous(), sin.contiguous()) for kind, (cos, sin) in rope.items()}
        x = x.contiguous().clone()  # the residual stream, updated in place
        h = torch.empty_like(x)
        residual = None
        for i, lw in enumerate(self.layers):
            ops.add_rms_norm(x, residual, lw.attn_norm, eps, out=h)
            qkv = lw.qkv(h)
            if lw.qkv_bias is not None:
                qkv.add_(lw.qkv_bias)
            if c.qk_norm == "head":
                q = qkv[:, :q_dim].view(n, c.n_heads, d_head)
                k = qkv[:, q_dim:q_dim + kv_dim].view(n, c.n_kv_heads, d_head)
                q.copy_(rms_norm(q, (d_head,), lw.q_norm, eps))
                k.copy_(rms_norm(k, (d_head,), lw.k_norm, eps))
            elif c.qk_norm == "full":
                q, k = qkv[:, :q_dim], qkv[:, q_dim:q_dim + kv_dim]
                q.copy_(rms_norm(q, (q_dim,), lw.q_norm, eps))
                k.copy_(rms_norm(k, (kv_dim,), lw.k_norm, eps))
            ops.rope(qkv, *tables["sliding" if lw.window else "full"], qk_heads, d_head)
            write(i, qkv[:, q_dim:q_dim + kv_dim].view(n, c.n_kv_heads, d_head),
                  qkv[:, q_dim + kv_dim:].view(n, c.n_kv_heads, d_head))
            a = lw.o(attend(qkv[:, :q_dim].view(n, c.n_heads, d_head), i).reshape(n, q_dim))
            if lw.post_attn_norm is not None:
                a = ops.add_rms_norm(a.contiguous(), None, lw.post_attn_norm, eps,
                                     out=torch.empty_like(h))
            ops.add_rms_norm(x, a.contiguous(), lw.mlp_norm, eps, out=h)
            if lw.moe is not None:
                m = moe_block.forward_grouped(c, lw.moe, h)
            else:
                gu = lw.gate_up(h)
                m = lw.down(ops.silu_mul(gu) if c.mlp_kind == "swiglu" else
                            moe_block.gated(gu, c.mlp_kind))
            if lw.post_mlp_norm is not None:
                m = ops.add_rms_norm(m.contiguous(), None, lw.post_mlp_norm, eps,
                                     out=torch.empty_like(h))
            residual = m.contiguous()
        return x.add_(residual) if residual is not None else x

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
        """The final norm and the lm_head over hidden states [T, d_model]: fp32 logits,
        soft-capped where the family caps them."""
        x = rms_norm(x, (self.config.d_model,), self.final_norm, self.config.norm_eps)
        logits = self.lm_head(x.to(self.dtype)).float()
        cap = self.config.final_softcap
        return cap * torch.tanh(logits / cap) if cap else logits

    def embed_rows(self, token_ids: torch.Tensor) -> torch.Tensor:
        """The embeddings of `token_ids`, times the family's scale (Gemma: √d_model, rounded to
        the model's dtype as Gemma rounds it)."""
        x = self.embed[token_ids]
        scale = self.config.embed_scale
        if scale == 1.0:
            return x
        return x * torch.tensor(scale, dtype=x.dtype if x.is_floating_point() else
                                torch.float32)

    def rope_tables(self, dtype: torch.dtype) -> dict[str, RopeTables]:
        """RoPE tables per layer kind, "full" and "sliding" (one object where they agree)."""
        c = self.config
        inv, factor = scaled_inv_freq(c, c.rope_theta)
        rot = c.rotary_dim or c.d_head
        full = RopeTables(rot, c.max_position, c.rope_theta, dtype, self.device, inv, factor)
        if not c.layer_types or (not c.rope_local_theta and c.rope_local_scaling):
            return {"full": full, "sliding": full}
        theta = c.rope_local_theta or c.rope_theta
        inv, factor = scaled_inv_freq(c, theta, c.rope_local_scaling)
        return {"full": full, "sliding": RopeTables(rot, c.max_position, theta, dtype,
                                                    self.device, inv, factor)}

    @property
    def rope(self) -> RopeTables:
        """The global layers' RoPE tables."""
        return self.ropes["full"]

    def _rope_at(self, positions: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        full = self.ropes["full"].at(positions)
        if self.ropes["sliding"] is self.ropes["full"]:
            return {"full": full, "sliding": full}
        return {"full": full, "sliding": self.ropes["sliding"].at(positions)}
