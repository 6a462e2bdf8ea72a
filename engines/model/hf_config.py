"""A Hugging Face `config.json` read into a `ModelConfig`, family by family.

The families each have a row in `FAMILIES`: what their layout adds to a Llama (biases,
q/k-norm, Gemma's norms and GeGLU, experts). Sizes are read under Hugging Face's names (and
the GPT-2 / Falcon spellings); a multimodal config's `text_config` is read. A `model_type`
that no row describes is refused by name: a config is never read as something it is not
(DeepSeek-V3 read as a dense Llama would report 25× its KV and 1/17 of its weights).

`runs` says whether the decoder (`engines.model.llama`) runs the family; the others (MLA,
sigmoid routing, gpt-oss, Llama 4, Falcon-style GELU) are described for the calculators only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferlab.engines.model.config import (
    ConfigError,
    ModelConfig,
    check_field,
    read_json_file,
    show,
)


@dataclass(frozen=True)
class Family:
    """What a family's layout adds to a Llama decoder."""

    mlp_kind: str = "swiglu"
    gemma: bool = False
    """Gemma: (1 + w) norms, norms after each block, √d embedding scale, query_pre_attn_scalar."""
    qk_norm: str = ""
    qkv_bias: bool | None = False
    """True / False, or None: the config's `attention_bias` says."""
    moe: bool = False
    runs: bool = True
    default_tie: bool = False


FAMILIES: dict[str, Family] = {
    "llama": Family(qkv_bias=None),
    "mistral": Family(),
    "qwen2": Family(qkv_bias=True),
    "qwen3": Family(qk_norm="head", qkv_bias=None),
    "gemma2": Family(mlp_kind="geglu", gemma=True, default_tie=True),
    "gemma3_text": Family(mlp_kind="geglu", gemma=True, qk_norm="head", default_tie=True),
    "phi3": Family(),
    "qwen2_moe": Family(qkv_bias=True, moe=True),
    "qwen3_moe": Family(qk_norm="head", qkv_bias=None, moe=True),
    "mixtral": Family(moe=True),
    "olmoe": Family(qk_norm="full", moe=True),
    # described for the calculators; the decoder refuses them by name
    "deepseek_v3": Family(moe=True, runs=False),
    "deepseek_v2": Family(moe=True, runs=False),
    "kimi_k2": Family(moe=True, runs=False),
    "gpt_oss": Family(qkv_bias=True, moe=True, runs=False),
    "llama4_text": Family(moe=True, runs=False),
}
"""Families by Hugging Face model_type."""

_GELU_MODEL_TYPES = {"falcon", "RefinedWeb", "RefinedWebModel", "gpt2", "gpt_bigcode",
                     "gpt_neox", "starcoder2", "phi"}
"""Model types whose MLP is up → GELU → down (no gate); they may omit the MLP width (then 4 ×
hidden) and tie the embeddings by default. Described approximately, for the calculators."""

RUNNABLE = tuple(t for t, f in FAMILIES.items() if f.runs)
_ALIASES = {"gemma3": "gemma3_text", "llama4": "llama4_text"}  # multimodal wrappers' text part


def load_hf_config(path: str | Path) -> ModelConfig:
    """Read a Hugging Face config.json; the id is its folder's name (or the file's stem)."""
    path = Path(path)
    data = read_json_file(path)
    model_id = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return model_config_from_hf(data, id=model_id or "custom", source=str(path))


def model_type_of(d: dict) -> str:
    """The model_type a config describes (its text part for a multimodal wrapper)."""
    if isinstance(d.get("text_config"), dict) and "num_hidden_layers" not in d:
        inner = d["text_config"].get("model_type")
        if isinstance(inner, str) and inner:
            return _ALIASES.get(inner, inner)
    model_type = d.get("model_type", "")
    return _ALIASES.get(model_type, model_type) if isinstance(model_type, str) else model_type


def model_config_from_hf(d: Any, id: str = "custom", name: str | None = None,
                         source: str = "") -> ModelConfig:
    """Build a ModelConfig from a Hugging Face config.json dict.

    Sizes: num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (default:
    the heads), head_dim (default: hidden_size // heads), intermediate_size, vocab_size,
    rope_theta (or rope_parameters), tie_word_embeddings, max_position_embeddings,
    rms_norm_eps; also the GPT-2 / Falcon spellings (n_layer, n_embd, n_head, n_head_kv,
    num_kv_heads, multi_query, ffn_hidden_size, n_inner, n_positions) and a nested text_config.
    Then the family's own fields: layer_types and sliding_window, RoPE per layer kind and its
    scaling, Gemma's scalars, experts and MLA. An unknown model_type is refused by name.
    """
    origin = source or "Hugging Face config"
    if not isinstance(d, dict):
        raise ConfigError(f"{origin}: expected a JSON object, got {type(d).__name__}")
    model_type = model_type_of(d)
    if isinstance(d.get("text_config"), dict) and "num_hidden_layers" not in d:
        d = d["text_config"]
    if not isinstance(model_type, str):
        raise ConfigError(f"{origin}: field 'model_type' must be a string, got {show(model_type)}")
    gelu = model_type in _GELU_MODEL_TYPES
    family = FAMILIES.get(model_type)
    if family is None and not gelu:
        known = ", ".join(sorted([*FAMILIES, *_GELU_MODEL_TYPES]))
        raise ConfigError(f"{origin}: model_type {show(model_type or None)} is not supported: "
                          f"its layout cannot be described exactly (known: {known})")
    family = family or Family(mlp_kind="gelu", default_tie=True)
    read = _Reader(d, origin)

    n_layers = read.get("num_hidden_layers", "n_layer", "num_layers", field="n_layers")
    d_model = read.get("hidden_size", "n_embd", "d_model", field="d_model")
    n_heads = read.get("num_attention_heads", "n_head", field="n_heads")
    multi_query = read.flag("multi_query", False)
    n_kv_heads = 1 if multi_query else read.get(
        "num_key_value_heads", "num_kv_heads", "n_head_kv", field="n_kv_heads", default=n_heads)
    fields: dict[str, Any] = {
        "id": id,
        "name": name if name is not None else id,
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "d_head": read.get("head_dim", field="d_head", default=d_model // n_heads),
        "d_ff": read.get("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size",
                         "n_inner", field="d_ff",
                         **({"default": 4 * d_model} if gelu else {})),
        "vocab_size": read.get("vocab_size", field="vocab_size"),
        "tie_embeddings": read.flag("tie_word_embeddings", family.default_tie),
        "max_position": read.get("max_position_embeddings", "n_positions", "max_seq_len",
                                 field="max_position", default=4096),
        "source": source,
        "mlp_kind": family.mlp_kind,
        "norm_eps": read.get("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps",
                             field="norm_eps", default=1e-5),
        "notes": (f"{model_type}: non-Llama layout; n_params ignores its biases and "
                  "LayerNorm shapes, so it is approximate") if gelu else "",
        "family": model_type,
        "qk_norm": family.qk_norm,
        "qkv_bias": read.flag("attention_bias", False) if family.qkv_bias is None
        else family.qkv_bias,
    }
    if read.flag("mlp_bias", False):
        raise ConfigError(f"{origin}: mlp_bias is true; MLP biases cannot be described")
    rope_params = read.d.get("rope_parameters")
    partial = read.number("partial_rotary_factor", 1.0, float, 0.0, 1.0) \
        if "partial_rotary_factor" in read.d or not isinstance(rope_params, dict) else \
        read.number("partial_rotary_factor", 1.0, float, 0.0, 1.0, d=rope_params)
    if partial < 1.0:
        fields["rotary_dim"] = int(fields["d_head"] * partial)
    fields |= _layer_kinds(read, model_type, n_layers)
    fields |= _rope(read, fields["layer_types"])
    if family.gemma:
        fields |= _gemma(read, d_model)
    if family.moe:
        fields |= _experts(read, model_type, n_layers)
    if model_type in ("deepseek_v3", "deepseek_v2", "kimi_k2"):
        fields |= _mla(read)
    return ModelConfig.from_dict(fields, origin)


class _Reader:
    """Fields of one config dict, checked under their own names."""

    def __init__(self, d: dict, origin: str) -> None:
        self.d, self.origin = d, origin

    def has(self, key: str) -> bool:
        return self.d.get(key) is not None

    def get(self, *keys: str, field: str | None = None, default: Any = dataclasses.MISSING
            ) -> Any:
        """The first of `keys` present; checked as ModelConfig's `field` under its own name."""
        for key in keys:
            if self.d.get(key) is not None:
                if field is not None:
                    try:
                        check_field(field, self.d[key], key)
                    except ConfigError as e:
                        raise ConfigError(f"{self.origin}: {e}") from None
                return self.d[key]
        if default is dataclasses.MISSING:
            raise ConfigError(f"{self.origin}: missing field {keys[0]!r}")
        return default

    def flag(self, key: str, default: bool) -> bool:
        value = self.d.get(key, default)
        value = default if value is None else value
        if not isinstance(value, bool):
            raise ConfigError(f"{self.origin}: field {key!r} must be true or false, got "
                              f"{show(value)}")
        return value

    def number(self, key: str, default: float | int, kind: type = float, low: float = 0.0,
               high: float = 1e18, d: dict | None = None) -> Any:
        """A number (int for kind int) in [low, high]; `d` another dict than the config."""
        src = self.d if d is None else d
        value = src.get(key, default)
        value = default if value is None else value
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if kind is int:
            ok = ok and isinstance(value, int)
        if not (ok and (isinstance(value, int) or math.isfinite(value)) and low <= value <= high):
            raise ConfigError(f"{self.origin}: field {key!r} must be "
                              f"{'an integer' if kind is int else 'a number'} in [{low:g}, "
                              f"{high:g}], got {show(value)}")
        return value

    def int_list(self, key: str, n_layers: int) -> list[int]:
        value = self.d.get(key) or []
        if not isinstance(value, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers
                for i in value):
            raise ConfigError(f"{self.origin}: field {key!r} must be a list of layer indices, "
                              f"got {show(value)}")
        return value


_KIND_NAMES = {"full_attention": "full", "sliding_attention": "sliding",
               "chunked_attention": "chunked"}


def _layer_kinds(read: _Reader, model_type: str, n_layers: int) -> dict[str, Any]:
    """layer_types and sliding_window: the config's `layer_types` where it has them, else
    derived as transformers derives them per family."""
    window = read.get("sliding_window", field="max_position", default=0) \
        if read.d.get("sliding_window") != 0 else 0
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not read.flag(
            "use_sliding_window", False):
        window = 0
    if model_type == "llama4_text":
        window = read.get("attention_chunk_size", field="max_position", default=0)
    names = read.d.get("layer_types")
    if names is not None:
        if not isinstance(names, list) or len(names) != n_layers or any(
                n not in _KIND_NAMES for n in names):
            raise ConfigError(f"{read.origin}: field 'layer_types' must list one of "
                              f"{tuple(_KIND_NAMES)} per layer ({n_layers}), got {show(names)}")
        kinds = [_KIND_NAMES[n] for n in names]
    elif model_type == "gemma3_text":
        pattern = read.number("sliding_window_pattern", 6, int, 1, 2**12)
        kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n_layers)]
    elif model_type == "gemma2":
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)]
    elif model_type == "llama4_text":
        step = read.number("no_rope_layer_interval", 4, int, 1, 2**12)
        kinds = ["full" if (i + 1) % step == 0 else "chunked" for i in range(n_layers)]
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and window:
        first = read.number("max_window_layers", n_layers, int, 0, 2**12)
        kinds = ["sliding" if i >= first else "full" for i in range(n_layers)]
    else:
        kinds = ["sliding" if window else "full"] * n_layers
    if all(k == "full" for k in kinds):
        return {"layer_types": (), "sliding_window": 0}
    if not window:
        raise ConfigError(f"{read.origin}: layers of kind 'sliding' need a 'sliding_window'")
    return {"layer_types": tuple(kinds), "sliding_window": window}


def _rope(read: _Reader, layer_types: tuple[str, ...]) -> dict[str, Any]:
    """RoPE base per layer kind and the scaling: from `rope_parameters` (transformers 5: one
    dict, or one per layer kind) or the older `rope_theta` + `rope_scaling`."""
    params = read.d.get("rope_parameters")
    if params is not None and not isinstance(params, dict):
        raise ConfigError(f"{read.origin}: field 'rope_parameters' must be an object")
    params = params or {}
    per_kind = "full_attention" in params or "sliding_attention" in params
    full = params.get("full_attention", params) if per_kind else params
    local = params.get("sliding_attention") if per_kind else None
    if not full and isinstance(read.d.get("rope_scaling"), dict):
        full = read.d["rope_scaling"]
    for part in (full, local):
        if part is not None and not isinstance(part, dict):
            raise ConfigError(f"{read.origin}: field 'rope_parameters' must hold objects")
    theta = read.get("rope_theta", field="rope_theta",
                     default=(full or {}).get("rope_theta", 10000.0))
    check = read.number
    out: dict[str, Any] = {"rope_theta": check("rope_theta", theta, float, 1.0, 1e18,
                                               d={"rope_theta": theta})}
    local_theta = read.d.get("rope_local_base_freq") or (local or {}).get("rope_theta")
    if local_theta is not None and layer_types:
        out["rope_local_theta"] = check("rope_local_base_freq", local_theta, float, 1.0, 1e18,
                                        d={"rope_local_base_freq": local_theta})
    kind = (full or {}).get("rope_type", (full or {}).get("type", "default")) or "default"
    if kind == "default":
        return out
    if kind not in ("linear", "llama3", "yarn"):
        raise ConfigError(f"{read.origin}: RoPE scaling {show(kind)} cannot be described "
                          "(linear, llama3 and yarn can)")
    out |= {"rope_scaling": kind,
            "rope_factor": check("factor", None, float, 1.0, 1e6, d=full)}
    if kind in ("llama3", "yarn"):
        out["rope_original_max_position"] = check(
            "original_max_position_embeddings", None, int, 1, 2**28, d=full)
    if kind == "llama3":
        out |= {"rope_low_freq_factor": check("low_freq_factor", 1.0, float, 0.0, 1e6, d=full),
                "rope_high_freq_factor": check("high_freq_factor", 4.0, float, 0.0, 1e6, d=full)}
    if kind == "yarn":
        out |= {"rope_beta_fast": check("beta_fast", 32.0, float, 0.0, 1e6, d=full),
                "rope_beta_slow": check("beta_slow", 1.0, float, 0.0, 1e6, d=full)}
        for key in ("attention_factor", "mscale", "mscale_all_dim"):
            if full.get(key) not in (None, 1, 1.0, 0):
                raise ConfigError(f"{read.origin}: YaRN's {key!r} cannot be described")
    if per_kind:
        local_kind = (local or {}).get("rope_type", "default")
        out["rope_local_scaling"] = local_kind != "default"
    return out


def _gemma(read: _Reader, d_model: int) -> dict[str, Any]:
    scalar = read.number("query_pre_attn_scalar", 0, float, 0.0, 1e9)
    act = read.d.get("hidden_activation") or read.d.get("hidden_act") or "gelu_pytorch_tanh"
    if act not in ("gelu_pytorch_tanh", "gelu_tanh"):
        raise ConfigError(f"{read.origin}: Gemma activation {show(act)} cannot be described "
                          "(tanh GELU can)")
    return {"norm_offset": 1.0, "post_norms": True, "embed_scale": math.sqrt(d_model),
            "attn_scale": scalar ** -0.5 if scalar else 0.0,
            "attn_softcap": read.number("attn_logit_softcapping", 0.0, float, 0.0, 1e6),
            "final_softcap": read.number("final_logit_softcapping", 0.0, float, 0.0, 1e6)}


def _experts(read: _Reader, model_type: str, n_layers: int) -> dict[str, Any]:
    """The MoE fields, under each family's names."""
    n = read.number
    experts = read.get("num_local_experts", "num_experts", "n_routed_experts", field="n_heads",
                       default=0)
    if not experts:
        raise ConfigError(f"{read.origin}: a {model_type} config needs its expert count "
                          "('num_experts' / 'num_local_experts' / 'n_routed_experts')")
    out: dict[str, Any] = {
        "n_experts": experts,
        "n_experts_active": n("num_experts_per_tok", 0, int, 1, experts),
        # Mixtral and OLMoE size their experts by intermediate_size (they have no dense MLP)
        "expert_d_ff": read.get("intermediate_size", field="d_ff")
        if model_type in ("mixtral", "olmoe") else
        read.get("moe_intermediate_size", "intermediate_size", field="d_ff"),
        # Mixtral renormalises whatever its config says (softmax over all, top-k, / sum)
        "norm_topk": model_type == "mixtral" or read.flag(
            "norm_topk_prob", model_type in ("deepseek_v3", "kimi_k2", "gpt_oss")),
    }
    dense: list[int] = []
    if model_type in ("qwen2_moe", "qwen3_moe"):
        step = n("decoder_sparse_step", 1, int, 1, 2**12)
        only = set(read.int_list("mlp_only_layers", n_layers))
        dense = [i for i in range(n_layers) if i in only or (i + 1) % step != 0]
        shared = n("shared_expert_intermediate_size", 0, int, 0, 2**20)
        if shared:
            out |= {"n_shared_experts": 1, "shared_d_ff": shared, "shared_expert_gate": True}
    elif model_type in ("deepseek_v3", "deepseek_v2", "kimi_k2"):
        dense = list(range(n("first_k_dense_replace", 0, int, 0, n_layers)))
        shared = n("n_shared_experts", 0, int, 0, 2**8)
        if shared:
            out |= {"n_shared_experts": shared, "shared_d_ff": out["expert_d_ff"]}
        if read.d.get("scoring_func", "softmax") == "sigmoid":
            out["router"] = "sigmoid"
    elif model_type == "llama4_text":
        step = n("interleave_moe_layer_step", 1, int, 1, 2**12)
        dense = [i for i in range(n_layers) if (i + 1) % step != 0]
        out |= {"n_shared_experts": 1, "shared_d_ff": out["expert_d_ff"],
                "expert_d_ff": read.get("intermediate_size", field="d_ff")}
    out["dense_layers"] = tuple(dense)
    return out


def _mla(read: _Reader) -> dict[str, Any]:
    n = read.number
    return {"kv_lora_rank": n("kv_lora_rank", None, int, 1, 2**16),
            "q_lora_rank": n("q_lora_rank", 0, int, 0, 2**16),
            "qk_rope_head_dim": n("qk_rope_head_dim", None, int, 1, 2**12),
            "qk_nope_head_dim": n("qk_nope_head_dim", None, int, 1, 2**12),
            "v_head_dim": n("v_head_dim", None, int, 1, 2**12),
            "d_head": n("qk_nope_head_dim", None, int, 1, 2**12)
            + n("qk_rope_head_dim", None, int, 1, 2**12)}
