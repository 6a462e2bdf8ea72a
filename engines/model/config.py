"""Model descriptions: the numbers every cost, memory and KV calculation starts from.

A `ModelConfig` describes a decoder-only transformer by its sizes and the choices its family
makes, no weights: the norms (RMSNorm, Gemma's x·(1 + w), norms after each block), the
attention (GQA / MQA, biases, q/k-norm, a kind per layer: global, or a sliding window of W
tokens, RoPE per kind and its scaling, DeepSeek's MLA), the MLP (SwiGLU, GeGLU, GELU) and
Mixture-of-Experts blocks (routed and shared experts, top-k, dense first layers). The decoder
(`engines.model.llama`) and every calculator (memory, kv-calc, roofline, cluster) read it.
Presets are JSON files in `assets/models/<id>.json`, each naming the source of its numbers;
`engines.model.hf_config` reads a Hugging Face `config.json`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferlab.engines.presets import dataclass_from_dict, load_preset, preset_ids

MLP_KINDS = ("swiglu", "geglu", "gelu")
LAYER_KINDS = ("full", "sliding", "chunked")
"""Attention per layer: every earlier token, the last `sliding_window` tokens, or the tokens
of the same `sliding_window`-token chunk (Llama 4); the last two hold at most W tokens of KV."""
QK_NORMS = ("", "head", "full")
"""q/k-norm: none, an RMSNorm over each head (Qwen 3, Gemma 3), or over the whole projection
(OLMoE)."""
ROPE_SCALINGS = ("", "linear", "llama3", "yarn")
ROUTERS = ("softmax", "sigmoid")

# The accepted range of every number a ModelConfig holds, (kind, low, high), both ends
# included; "positive" floats exclude 0. Far past any real model (about 130 layers, d_model
# 16k-25k, vocabularies of 256k tokens, contexts of 10M), yet small enough that no size
# derived from them overflows or asks for absurd memory. Every reader checks the numbers of
# its file with `check_field` before using any of them.
FIELD_LIMITS: dict[str, tuple[str, float, float]] = {
    "n_layers": ("int", 1, 2**12),
    "d_model": ("int", 1, 2**18),
    "n_heads": ("int", 1, 2**12),
    "n_kv_heads": ("int", 1, 2**12),
    "d_head": ("int", 1, 2**12),
    "d_ff": ("int", 1, 2**20),
    "vocab_size": ("int", 1, 2**24),
    "max_position": ("int", 1, 2**28),
    "rope_theta": ("float", 1.0, 1e18),
    "norm_eps": ("positive", 0.0, 1.0),
}
# Fields that are 0 when the model does not use them, else in range.
OPTIONAL_LIMITS: dict[str, tuple[str, float, float]] = {
    "sliding_window": ("int", 1, 2**28),
    "rope_local_theta": ("float", 1.0, 1e18),
    "rope_original_max_position": ("int", 1, 2**28),
    "attn_scale": ("positive", 0.0, 1e6),
    "attn_softcap": ("positive", 0.0, 1e6),
    "final_softcap": ("positive", 0.0, 1e6),
    "n_experts": ("int", 1, 2**16),
    "n_experts_active": ("int", 1, 2**16),
    "expert_d_ff": ("int", 1, 2**20),
    "n_shared_experts": ("int", 1, 2**8),
    "shared_d_ff": ("int", 1, 2**20),
    "kv_lora_rank": ("int", 1, 2**16),
    "q_lora_rank": ("int", 1, 2**16),
    "qk_rope_head_dim": ("int", 1, 2**12),
    "rotary_dim": ("int", 2, 2**12),
    "qk_nope_head_dim": ("int", 1, 2**12),
    "v_head_dim": ("int", 1, 2**12),
}
MAX_CONFIG_BYTES = 16 * 2**20  # a config.json is a few KB; a bigger one is not a config


class ConfigError(ValueError):
    """A model config that cannot be used; the message names the file and the field."""


def check_field(field: str, value: Any, key: str | None = None, label: str = "field"
                ) -> int | float:
    """`value` if it is a valid `field` of a ModelConfig (type, finiteness, FIELD_LIMITS).

    Otherwise ConfigError "<label> '<key>' must be an integer in [1, 4096], got 0": `key` is
    the file's own name for the field (default: `field`), `label` what the file calls its
    entries ("field" for JSON, "metadata" for GGUF). bool is not a number here.
    """
    kind, lo, hi = FIELD_LIMITS[field]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "int":
        ok = number and isinstance(value, int) and lo <= value <= hi
        accepted = f"an integer in [{lo:,}, {hi:,}]"
    else:
        finite = number and (isinstance(value, int) or math.isfinite(value))  # ints of any size
        ok = finite and (lo < value if kind == "positive" else lo <= value) and value <= hi
        accepted = f"a finite number in {'(' if kind == 'positive' else '['}{lo:g}, {hi:g}]"
    if not ok:
        raise ConfigError(f"{label} {key or field!r} must be {accepted}, got {show(value)}")
    return value


def show(value: Any, limit: int = 40) -> str:
    """A value from a file as a message shows it: its repr, cut to `limit` characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, list | dict) and len(value) > limit:
        return f"a {type(value).__name__} of {len(value)} items"
    try:
        text = repr(value)
    except RecursionError:
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_json_file(path: Path, error: type[Exception] = ConfigError) -> Any:
    """The JSON value in `path`; `error("<path>: ...")` for anything that is not readable JSON
    (missing, over MAX_CONFIG_BYTES, not UTF-8, bad syntax, nested too deeply, numbers with
    more digits than Python parses)."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise error(f"{path}: {size:,} bytes, too big for a JSON config (limit "
                        f"{MAX_CONFIG_BYTES:,})")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not valid JSON: not UTF-8 text (byte {e.start})") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise error(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise error(f"{path}: not valid JSON: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more than 4300 digits
        raise error(f"{path}: not valid JSON: {e}") from None


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of a decoder-only transformer.

    `mlp_kind` is "swiglu" (gate, up, down: three d_model × d_ff matrices, Llama) or
    "gelu" (up, down: two matrices, Falcon / GPT-2 style). `notes` says where a preset's
    parameter count is only approximate. `norm_eps` is the epsilon inside each RMSNorm
    (Hugging Face's `rms_norm_eps`); it changes no size, only the model's numbers.
    """

    id: str
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab_size: int
    rope_theta: float = 10000.0
    tie_embeddings: bool = False
    max_position: int = 4096
    source: str = ""
    mlp_kind: str = "swiglu"
    notes: str = ""
    norm_eps: float = 1e-5
    # ---- the family's choices (defaults: a Llama) ----
    family: str = "llama"
    """The Hugging Face model_type whose layout this follows."""
    norm_offset: float = 0.0
    """RMSNorm multiplies by (norm_offset + w): 1 for Gemma, 0 elsewhere."""
    post_norms: bool = False
    """A norm on the attention's and the MLP's output before each residual add (Gemma 2/3)."""
    qk_norm: str = ""
    qkv_bias: bool = False
    layer_types: tuple[str, ...] = ()
    """One of LAYER_KINDS per layer; () is every layer "full"."""
    sliding_window: int = 0
    rope_local_theta: float = 0.0
    """RoPE base of the sliding layers (Gemma 3: 10,000 beside 1,000,000); 0: rope_theta."""
    rope_scaling: str = ""
    rope_factor: float = 1.0
    rope_original_max_position: int = 0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_beta_fast: float = 32.0
    rope_beta_slow: float = 1.0
    rotary_dim: int = 0
    """Leading dims of each head RoPE rotates (Phi-3's partial_rotary_factor); 0: all."""
    rope_local_scaling: bool = True
    """Whether the scaling applies to sliding layers too (Gemma 3 scales only global ones)."""
    embed_scale: float = 1.0
    """Embeddings are multiplied by this (Gemma: √d_model)."""
    attn_scale: float = 0.0
    """Scores are q·k times this; 0: 1/√d_head (Gemma: query_pre_attn_scalar^-½)."""
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    """Logits become c·tanh(logits / c) where c > 0 (Gemma 2)."""
    # ---- Mixture-of-Experts (n_experts 0: a dense model) ----
    n_experts: int = 0
    n_experts_active: int = 0
    """Routed experts per token (top-k)."""
    expert_d_ff: int = 0
    n_shared_experts: int = 0
    shared_d_ff: int = 0
    """Width of each shared expert."""
    shared_expert_gate: bool = False
    """A sigmoid gate (d_model → 1) on the shared expert's output (Qwen2-MoE)."""
    norm_topk: bool = False
    """The top-k weights are renormalised to sum to 1."""
    router: str = "softmax"
    dense_layers: tuple[int, ...] = ()
    """Layers of a MoE model whose MLP is dense (d_ff wide)."""
    # ---- DeepSeek's multi-head latent attention (kv_lora_rank 0: none) ----
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        for name in ("layer_types", "dense_layers"):
            value = getattr(self, name)
            if isinstance(value, list):  # from JSON
                object.__setattr__(self, name, tuple(value))
        for f in dataclasses.fields(self):
            _check_type(f.name, f.type, getattr(self, f.name))
        for name in FIELD_LIMITS:
            check_field(name, getattr(self, name))
        for name, (kind, lo, hi) in OPTIONAL_LIMITS.items():
            value = getattr(self, name)
            if value != 0 and not (lo <= value <= hi and (kind != "positive" or value > lo)):
                raise ConfigError(f"field {name!r} must be 0 (unused) or in [{lo:g}, {hi:g}], "
                                  f"got {show(value)}")
        self._check_choices()
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"field 'n_kv_heads' ({self.n_kv_heads}) must divide n_heads ({self.n_heads})"
            )
        object.__setattr__(self, "rope_theta", float(self.rope_theta))
        object.__setattr__(self, "norm_eps", float(self.norm_eps))

    def _check_choices(self) -> None:
        for name, choices in (("mlp_kind", MLP_KINDS), ("qk_norm", QK_NORMS),
                              ("rope_scaling", ROPE_SCALINGS), ("router", ROUTERS)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"field {name!r} must be one of {choices}, got "
                                  f"{show(getattr(self, name))}")
        if self.layer_types and len(self.layer_types) != self.n_layers:
            raise ConfigError(f"field 'layer_types' has {len(self.layer_types)} entries for "
                              f"{self.n_layers} layers")
        bad = [k for k in self.layer_types if k not in LAYER_KINDS]
        if bad:
            raise ConfigError(f"field 'layer_types' holds {show(bad[0])}, expected one of "
                              f"{LAYER_KINDS}")
        if any(k != "full" for k in self.layer_types) and not self.sliding_window:
            raise ConfigError("field 'sliding_window' must be set where a layer is not 'full'")
        moe = (self.n_experts, self.n_experts_active, self.expert_d_ff)
        if any(moe) and not all(moe):
            raise ConfigError("fields 'n_experts', 'n_experts_active' and 'expert_d_ff' are set "
                              f"together or not at all, got {moe}")
        if self.n_experts_active > self.n_experts:
            raise ConfigError(f"field 'n_experts_active' ({self.n_experts_active}) exceeds "
                              f"n_experts ({self.n_experts})")
        if bool(self.n_shared_experts) != bool(self.shared_d_ff):
            raise ConfigError("fields 'n_shared_experts' and 'shared_d_ff' are set together")
        if self.dense_layers and not self.n_experts:
            raise ConfigError("field 'dense_layers' needs n_experts")
        if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.n_layers
               for i in self.dense_layers):
            raise ConfigError(f"field 'dense_layers' must hold layer indices in [0, "
                              f"{self.n_layers}), got {show(self.dense_layers)}")
        mla = (self.kv_lora_rank, self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim)
        if any(mla) and not all(mla):
            raise ConfigError("MLA fields 'kv_lora_rank', 'qk_rope_head_dim', "
                              f"'qk_nope_head_dim' and 'v_head_dim' are set together, got {mla}")
        if self.rotary_dim and (self.rotary_dim % 2 or self.rotary_dim > self.d_head):
            raise ConfigError(f"field 'rotary_dim' ({self.rotary_dim}) must be even and at most "
                              f"d_head ({self.d_head})")
        if self.q_lora_rank and not self.kv_lora_rank:
            raise ConfigError("field 'q_lora_rank' needs the other MLA fields")

    @property
    def attention_kind(self) -> str:
        """"MHA" (one KV head per query head), "MQA" (one KV head) or "GQA" (in between)."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        if self.n_kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head: n_heads / n_kv_heads."""
        return self.n_heads // self.n_kv_heads

    # ---- per layer ----------------------------------------------------------------------

    def layer_kind(self, layer: int) -> str:
        """"full", "sliding" or "chunked" (LAYER_KINDS)."""
        return self.layer_types[layer] if self.layer_types else "full"

    def layer_window(self, layer: int) -> int:
        """Tokens of KV the layer attends to at most: its window, or 0 (every token)."""
        return 0 if self.layer_kind(layer) == "full" else self.sliding_window

    def is_moe_layer(self, layer: int) -> bool:
        return self.n_experts > 0 and layer not in self.dense_layers

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.n_layers))

    @property
    def kv_values_per_token_per_layer(self) -> int:
        """Values one token stores in one layer's cache: 2 · n_kv_heads · d_head (K and V), or
        with MLA the compressed latent and the shared RoPE key, kv_lora_rank + qk_rope_head_dim."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.n_kv_heads * self.d_head

    # ---- linears and parameters -----------------------------------------------------------

    @property
    def attention_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """(name, d_in, d_out) of the attention's linear layers in one layer, no biases.

        q: d_model → n_heads·d_head, k and v: d_model → n_kv_heads·d_head, o: n_heads·d_head →
        d_model. MLA: q (through q_a / q_b where q_lora_rank > 0), kv_a: d_model →
        kv_lora_rank + qk_rope_head_dim, kv_b: kv_lora_rank → n_heads·(qk_nope + v), o:
        n_heads·v_head_dim → d_model.
        """
        d, h = self.d_model, self.n_heads
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = ((("q_a", d, self.q_lora_rank), ("q_b", self.q_lora_rank, h * qk))
                 if self.q_lora_rank else (("q", d, h * qk),))
            return (*q, ("kv_a", d, self.kv_lora_rank + self.qk_rope_head_dim),
                    ("kv_b", self.kv_lora_rank, h * (self.qk_nope_head_dim + self.v_head_dim)),
                    ("o", h * self.v_head_dim, d))
        q_dim, kv_dim = h * self.d_head, self.n_kv_heads * self.d_head
        return (("q", d, q_dim), ("k", d, kv_dim), ("v", d, kv_dim), ("o", q_dim, d))

    def mlp_shapes(self, d_ff: int) -> tuple[tuple[str, int, int], ...]:
        """(name, d_in, d_out) of one MLP of width `d_ff`: gate, up, down (SwiGLU, GeGLU) or
        up, down (GELU)."""
        mlp = (("up", self.d_model, d_ff), ("down", d_ff, self.d_model))
        return mlp if self.mlp_kind == "gelu" else (("gate", self.d_model, d_ff), *mlp)

    @property
    def linear_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """(name, d_in, d_out) of every linear a token runs through in ONE dense decoder layer
        (attention and the dense MLP), no biases. A MoE layer's experts: `expert_shapes`."""
        return self.attention_shapes + self.mlp_shapes(self.d_ff)

    @property
    def linear_params_per_layer(self) -> int:
        """Weights of the linear layers of one dense decoder layer: Σ d_in · d_out."""
        return sum(d_in * d_out for _, d_in, d_out in self.linear_shapes)

    def _matrix_params(self, shapes) -> int:
        return sum(d_in * d_out for _, d_in, d_out in shapes)

    @property
    def attention_params_per_layer(self) -> int:
        """The attention's weights in one layer: its linears, biases (q, k, v), q/k-norms (per
        head: 2·d_head; over the whole projection: q_dim + kv_dim) and MLA's latent norms."""
        n = self._matrix_params(self.attention_shapes)
        q_dim, kv_dim = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        if self.qkv_bias:
            n += q_dim + 2 * kv_dim
        if self.qk_norm == "head":
            n += 2 * self.d_head
        elif self.qk_norm == "full":
            n += q_dim + kv_dim
        if self.is_mla:
            n += self.kv_lora_rank + self.q_lora_rank
        return n

    @property
    def norms_per_layer(self) -> int:
        """RMSNorm weights of one layer outside the attention: 2·d_model, 4·d_model with
        post-norms (Gemma 2/3)."""
        return (4 if self.post_norms else 2) * self.d_model

    @property
    def expert_params(self) -> int:
        """One routed expert's weights."""
        return self._matrix_params(self.mlp_shapes(self.expert_d_ff))

    @property
    def shared_params(self) -> int:
        """The shared experts' weights in one MoE layer, with their gate where there is one."""
        per = self._matrix_params(self.mlp_shapes(self.shared_d_ff)) if self.shared_d_ff else 0
        return self.n_shared_experts * per + (self.d_model if self.shared_expert_gate else 0)

    @property
    def router_params(self) -> int:
        return self.d_model * self.n_experts

    def mlp_params(self, layer: int, active: bool = False) -> int:
        """Layer `layer`'s MLP weights: dense d_ff, or router + experts + shared experts; with
        `active`, those one token reads (top-k experts of n_experts)."""
        if not self.is_moe_layer(layer):
            return self._matrix_params(self.mlp_shapes(self.d_ff))
        experts = self.n_experts_active if active else self.n_experts
        return self.router_params + experts * self.expert_params + self.shared_params

    def _params(self, active: bool) -> int:
        embeddings = self.vocab_size * self.d_model
        lm_head = 0 if self.tie_embeddings else embeddings
        per_layer = sum(self.mlp_params(i, active) for i in range(self.n_layers))
        fixed = self.n_layers * (self.attention_params_per_layer + self.norms_per_layer)
        return embeddings + fixed + per_layer + self.d_model + lm_head

    @property
    def n_params(self) -> int:
        """Exact parameter count of the decoder.

        n_params = V·d (embedding) + Σ_layers (attention + norms + MLP) + d (final norm) + V·d
        (lm_head, unless tied); a MoE layer's MLP is its router, every routed expert and the
        shared ones.
        """
        return self._params(active=False)

    @property
    def n_params_active(self) -> int:
        """Parameters one token's forward reads from the layers: n_params with each MoE layer's
        routed experts cut to the n_experts_active it is sent to (the embedding row counted
        whole, as n_params does). A dense model: n_params."""
        return self._params(active=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, origin: str = "model config") -> ModelConfig:
        """Build from a dict of fields (as `to_dict` writes them); unknown fields are errors.

        `origin` (a file name) starts every error message.
        """
        return dataclass_from_dict(cls, d, origin, error=ConfigError)


def _check_type(name: str, annotation: str, value: Any) -> None:
    """Raise ConfigError unless `value` has the field's declared type (bool is not int)."""
    if annotation.startswith("tuple["):
        item = int if "int" in annotation else str
        ok = isinstance(value, tuple) and all(
            isinstance(v, item) and not isinstance(v, bool) for v in value)
        if not ok:
            raise ConfigError(f"field {name!r} must be a list of {item.__name__}, got "
                              f"{show(value)}")
        return
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
    }[annotation]
    if not ok:
        raise ConfigError(f"field {name!r} must be {annotation}, got {show(value)}")


def list_model_presets() -> list[str]:
    """Ids of the model presets shipped in assets/models, sorted."""
    return preset_ids("models")


def load_model_preset(id: str) -> ModelConfig:
    """The preset `id` from assets/models/<id>.json; unknown ids list the known ones."""
    return load_preset("models", id, "model preset", ModelConfig.from_dict, error=ConfigError)
