"""The decoder families llama.cpp writes as GGUF, read back as Hugging Face sees them.

Two functions make the bridge to the one decoder, whose interface is the Hugging Face
world: `hf_config_from_gguf` gives the config.json dict transformers 5.25 would have for
the model (its field names, `model_type`, `architectures`), and `hf_tensors_from_gguf`
names every weight as `save_pretrained` would (per-expert MoE tensors, Phi-3's fused
`qkv_proj` and `gate_up_proj`), each a lazy `GGUFTensorRef`: nothing is dequantized until
`to_torch()` is called, and `raw_rows()` hands out the file's own bytes without a copy.

What llama.cpp's converter (convert_hf_to_gguf.py) changes on the way, undone here:

| GGUF arch | model_type                | Q/K rows permuted | norms stored as w + 1 |
| --------- | ------------------------- | ----------------- | --------------------- |
| llama     | llama, mistral, mixtral   | yes               | no                    |
| qwen2     | qwen2                     | no                | no                    |
| qwen3     | qwen3                     | no                | no                    |
| qwen2moe  | qwen2_moe                 | no                | no                    |
| qwen3moe  | qwen3_moe                 | no                | no                    |
| gemma2    | gemma2                    | no                | yes                   |
| gemma3    | gemma3_text               | no                | yes                   |
| phi3      | phi3                      | no                | no                    |
| olmoe     | olmoe                     | no                | no                    |

- Only the converter's `LlamaModel` permutes W_q and W_k (and their biases) so that
  llama.cpp's "normal" RoPE rotates adjacent pairs; every other family here uses NeoX RoPE
  (rotate half), as Hugging Face does, and is stored as it is.
- Gemma's RMSNorm multiplies by (1 + w); the converter stores every `*norm.weight` as w + 1,
  so HF's w is the stored value minus 1 (exact in fp32 for stored values in [0.5, 2]).
- Experts are stacked per layer into `ffn_{gate,up,down}_exps` ([experts, out, in]); each
  expert is one contiguous slice, handed out as its own tensor. A fused `ffn_gate_up_exps`
  (the converter's --fuse-gate-up-exps) is split by rows.
- Mistral and Mixtral are written as "llama": a file with `llama.expert_count` > 0 is
  Mixtral; one whose `general.name` or `general.basename` says "mistral" (or that carries
  `llama.attention.sliding_window`, which llama.cpp's converter never writes) is Mistral;
  any other is Llama. llama.cpp runs all three alike, with full attention everywhere.

What a GGUF does not hold is filled in with llama.cpp's own rule, so that the config runs
the model as llama.cpp runs it: Mistral's sliding window (None: full attention), Gemma's
`query_pre_attn_scalar` (head_dim, or hidden/heads for the 27B shapes), Gemma 3's layer
pattern (every 6th layer global unless `attention.sliding_window_pattern` says otherwise),
the MoE routers' top-k renormalisation (`norm_topk_prob`: on for qwen3_moe, off for
qwen2_moe and olmoe, unless `expert_weights_norm` is present) and qwen2_moe/qwen3_moe's
dense layers (`mlp_only_layers`: the layers without a router).

Every metadata value is type- and range-checked before use, and every tensor's shape is
compared with the config before a ref is made; any problem is a `ModelLoadError` naming the
file and the field or tensor. Not supported (refused by name): Llama 3's `rope_freqs`
frequency factors, partial RoPE outside Phi-3, MLA and sigmoid-routed families (DeepSeek).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from inferlab.engines.model.config import ConfigError, check_field, show
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_file import GGUFFile, tensor_shape, unpermute_rope_rows

SUPPORTED_ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "gemma2", "gemma3",
                           "phi3", "olmoe")
_MODEL_TYPES = {"qwen2": "qwen2", "qwen3": "qwen3", "qwen2moe": "qwen2_moe",
                "qwen3moe": "qwen3_moe", "gemma2": "gemma2", "gemma3": "gemma3_text",
                "phi3": "phi3", "olmoe": "olmoe"}  # "llama": llama, mistral or mixtral
HF_ARCHITECTURES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
    "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM", "olmoe": "OlmoeForCausalLM",
}
PERMUTED_FAMILIES = frozenset({"llama", "mistral", "mixtral"})
NORM_OFFSET_FAMILIES = frozenset({"gemma2", "gemma3_text"})
# The HF config field that counts the routed experts (as save_pretrained writes it).
EXPERT_FIELD = {"mixtral": "num_local_experts", "qwen3_moe": "num_local_experts",
                "qwen2_moe": "num_experts", "olmoe": "num_experts"}
# Families whose HF config switches all four attention biases (q, k, v, o) with one field.
_BIAS_FIELD = {"llama": "attention_bias", "qwen3": "attention_bias",
               "qwen3_moe": "attention_bias", "olmoe": "attention_bias",
               "gemma2": "attention_bias", "gemma3_text": "attention_bias"}
_QK_NORM = {"qwen3": "head", "qwen3_moe": "head", "gemma3_text": "head", "olmoe": "all"}
_NORM_TOPK_DEFAULT = {"qwen2_moe": False, "qwen3_moe": True, "olmoe": False}
_CONFIG_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")  # phi3 longrope
_REQUIRED = object()
_MAX_EXPERTS = 2**16


@dataclass(frozen=True)
class GGUFTensorRef:
    """One Hugging Face checkpoint tensor, still in the GGUF file.

    `shape` is HF's ([out, in] for a matrix), `qtype` the file's encoding. `raw_rows()` is a
    zero-copy uint8 view of the file's bytes, one row of blocks per output row (one expert's
    contiguous slice for a stacked expert tensor), or None where a transform needs a copy
    (un-permuted Q/K rows, Gemma's norm offset). `to_torch()` dequantizes and applies them.
    """

    name: str  # HF checkpoint name
    source: str  # GGUF tensor name
    shape: tuple[int, ...]
    qtype: GGMLQuantizationType
    origin: str  # the file, for messages
    data: np.ndarray = field(repr=False, compare=False)  # the reader's view of `source`
    expert: int | None = None  # index into a stacked [experts, ...] tensor
    rows: tuple[int, int] | None = None  # row range (a fused gate_up_exps half)
    rope_heads: int = 0  # > 0: undo llama.cpp's Q/K row permutation over this many heads
    norm_offset: float = 0.0  # added after dequantizing (Gemma: -1)

    def raw_rows(self) -> np.ndarray | None:
        """The file's bytes for this tensor as [rows, bytes per row] uint8, no copy; None
        where the stored rows are not HF's (permuted, or offset)."""
        if self.rope_heads or self.norm_offset:
            return None
        return self._stored_rows()

    def to_torch(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dequantized (`gguf.quants.dequantize`), transforms undone, in HF's shape."""
        try:
            with np.errstate(all="ignore"):  # NaN / inf scales pass through, as in the file
                arr = np.asarray(dequantize(self._stored_rows(), self.qtype), dtype=np.float32)
        except Exception as e:
            raise ModelLoadError(f"{self.origin}: cannot dequantize tensor {self.source!r} "
                                 f"({self.qtype.name}): {e}") from None
        if arr.size != math.prod(self.shape):
            raise ModelLoadError(f"{self.origin}: tensor {self.source!r} holds {arr.size} values "
                                 f"for {self.name!r}, whose shape {self.shape} needs "
                                 f"{math.prod(self.shape)}")
        if not arr.flags.writeable:  # F32 dequantizes to a view of the read-only map
            arr = arr.copy()
        t = torch.from_numpy(arr.reshape(self.shape))
        if self.rope_heads:
            t = unpermute_rope_rows(t.reshape(self.shape[0], -1), self.rope_heads
                                    ).reshape(self.shape)
        if self.norm_offset:
            t = t + self.norm_offset  # fp32, as the converter's w + 1 was
        return t.to(dtype)

    def _stored_rows(self) -> np.ndarray:
        raw = self.data if self.data.dtype == np.uint8 else self.data.view(np.uint8)
        if self.expert is not None:
            raw = raw[self.expert]
        raw = raw.reshape(-1, raw.shape[-1])
        if self.rows is not None:
            raw = raw[self.rows[0]:self.rows[1]]
        return raw


# ---- config ----------------------------------------------------------------------------------

def hf_config_from_gguf(g: GGUFFile) -> dict[str, Any]:
    """The config.json dict transformers 5.25 would have for the model in `g`."""
    arch = g.architecture
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelLoadError(f"{g.path}: architecture {show(arch)} is not supported "
                             f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    mt = _model_type(g, arch)

    def key(name: str) -> str:
        return f"{arch}.{name}"

    n_layers = g.size("n_layers", key("block_count"))
    if n_layers > len(g.tensors):
        raise ModelLoadError(f"{g.path}: metadata {key('block_count')!r} is {n_layers:,} but the "
                             f"file holds only {len(g.tensors)} tensors")
    hidden = g.size("d_model", key("embedding_length"))
    heads = g.size("n_heads", key("attention.head_count"))
    kv_heads = g.size("n_kv_heads", key("attention.head_count_kv"), heads)
    if heads % kv_heads:
        raise ModelLoadError(f"{g.path}: metadata {key('attention.head_count_kv')!r} "
                             f"({kv_heads}) must divide {key('attention.head_count')!r} ({heads})")
    head_dim = g.size("d_head", key("attention.key_length"), None)
    if head_dim is None:
        head_dim = hidden // heads
        if head_dim < 1:
            raise ModelLoadError(f"{g.path}: metadata {key('attention.head_count')!r} ({heads}) "
                                 f"exceeds {key('embedding_length')!r} ({hidden})")
    value_dim = g.size("d_head", key("attention.value_length"), head_dim)
    if value_dim != head_dim:
        raise ModelLoadError(f"{g.path}: metadata {key('attention.value_length')!r} ({value_dim}) "
                             f"differs from the key length ({head_dim}): not supported")
    if mt in PERMUTED_FAMILIES and head_dim % 2:
        raise ModelLoadError(f"{g.path}: head size {head_dim} is odd: RoPE needs pairs")
    tie = "output.weight" not in g.tensors
    vocab = _vocab_size(g, key("vocab_size"))
    cfg: dict[str, Any] = {
        "model_type": mt,
        "architectures": [HF_ARCHITECTURES[mt]],
        "hidden_size": hidden,
        "num_hidden_layers": n_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": g.size("d_ff", key("feed_forward_length")),
        "vocab_size": vocab,
        "max_position_embeddings": g.size("max_position", key("context_length")),
        "rms_norm_eps": _decimal(g, key("attention.layer_norm_rms_epsilon"),
                                 g.size("norm_eps", key("attention.layer_norm_rms_epsilon"))),
        "tie_word_embeddings": tie,
        "rope_parameters": _rope(g, key, mt, head_dim),
    }
    if mt in NORM_OFFSET_FAMILIES:
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
    else:
        cfg["hidden_act"] = "silu"
    for meta, name in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                       ("padding_token_id", "pad_token_id")):
        token = _int(g, f"tokenizer.ggml.{meta}", 0, vocab - 1, None)
        if token is not None:
            cfg[name] = token

    def any_layer(suffix: str) -> bool:
        return any(f"blk.{i}.{suffix}" in g.tensors for i in range(n_layers))

    if mt in _BIAS_FIELD:
        cfg[_BIAS_FIELD[mt]] = any_layer("attn_q.bias")
    elif mt == "qwen2_moe":
        cfg["qkv_bias"] = any_layer("attn_q.bias")
    if mt == "llama":
        cfg["mlp_bias"] = False
    _family_fields(g, key, mt, cfg)
    return cfg


def _model_type(g: GGUFFile, arch: str) -> str:
    if arch != "llama":
        return _MODEL_TYPES[arch]
    if _int(g, "llama.expert_count", 0, _MAX_EXPERTS, 0) > 0:
        return "mixtral"
    names = " ".join(g.get(k, "", kind=str) for k in ("general.name", "general.basename"))
    if "mistral" in names.lower() or g.get("llama.attention.sliding_window") is not None:
        return "mistral"
    return "llama"


def _family_fields(g: GGUFFile, key, mt: str, cfg: dict[str, Any]) -> None:
    """The fields only some families have: experts, windows, soft-capping, RoPE details."""
    n_layers = cfg["num_hidden_layers"]
    if mt in EXPERT_FIELD:
        n_experts = _int(g, key("expert_count"), 1, _MAX_EXPERTS)
        cfg[EXPERT_FIELD[mt]] = n_experts
        cfg["num_experts_per_tok"] = _int(g, key("expert_used_count"), 1, n_experts)
        gating = _int(g, key("expert_gating_func"), 0, 2**31, None)
        if gating not in (None, 1):  # 1: softmax, what these families route with
            raise ModelLoadError(f"{g.path}: metadata {key('expert_gating_func')!r} is {gating}: "
                                 "only softmax routing (1) is supported")
        scale = _float(g, key("expert_weights_scale"), 0.0, 1e6, None)
        if scale not in (None, 1.0):
            raise ModelLoadError(f"{g.path}: metadata {key('expert_weights_scale')!r} is {scale}: "
                                 "scaled expert weights are not supported")
        norm = g.get(key("expert_weights_norm"), kind=bool)
        if mt in _NORM_TOPK_DEFAULT:
            cfg["norm_topk_prob"] = _NORM_TOPK_DEFAULT[mt] if norm is None else norm
        elif norm is False:  # Mixtral always renormalises its top-k weights
            raise ModelLoadError(f"{g.path}: metadata {key('expert_weights_norm')!r} is false: "
                                 "a Mixtral model renormalises its top-k weights")
    if mt in ("qwen2_moe", "qwen3_moe"):
        cfg["moe_intermediate_size"] = g.size("d_ff", key("expert_feed_forward_length"))
        cfg["decoder_sparse_step"] = 1
        cfg["mlp_only_layers"] = [
            i for i in range(n_layers) if f"blk.{i}.ffn_gate_inp.weight" not in g.tensors
            and (f"blk.{i}.ffn_up.weight" in g.tensors or f"blk.{i}.ffn_gate.weight" in g.tensors)]
    if mt == "qwen2_moe":
        cfg["shared_expert_intermediate_size"] = g.size(
            "d_ff", key("expert_shared_feed_forward_length"))
    if mt == "mixtral":
        ff_exp = g.size("d_ff", key("expert_feed_forward_length"), cfg["intermediate_size"])
        if ff_exp != cfg["intermediate_size"]:
            raise ModelLoadError(f"{g.path}: metadata {key('expert_feed_forward_length')!r} "
                                 f"({ff_exp}) differs from {key('feed_forward_length')!r} "
                                 f"({cfg['intermediate_size']}): a Mixtral expert is one MLP")
    if mt == "olmoe":
        cfg["clip_qkv"] = None
    if mt in ("mistral", "mixtral"):  # never written by llama.cpp's converter, honoured if there
        cfg["sliding_window"] = _int(g, key("attention.sliding_window"), 0, 2**28, 0) or None
    if mt in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):  # llama.cpp: no sliding window
        cfg["sliding_window"] = None
        cfg["use_sliding_window"] = False
    if mt in ("qwen2", "qwen3", "qwen2_moe"):
        cfg["layer_types"] = ["full_attention"] * n_layers
    if mt == "phi3":
        cfg["original_max_position_embeddings"] = _int(
            g, key("rope.scaling.original_context_length"), 1, 2**28,
            cfg["max_position_embeddings"])
        cfg["sliding_window"] = _int(g, key("attention.sliding_window"), 0, 2**28, 0) or None
    if mt in NORM_OFFSET_FAMILIES:
        _gemma_fields(g, key, mt, cfg)


def _gemma_fields(g: GGUFFile, key, mt: str, cfg: dict[str, Any]) -> None:
    n_layers, head_dim = cfg["num_hidden_layers"], cfg["head_dim"]
    # llama.cpp scales queries by 1/sqrt(head_dim), or 1/sqrt(hidden/heads) for the 27B shapes
    big = n_layers == (46 if mt == "gemma2" else 62)
    cfg["query_pre_attn_scalar"] = (cfg["hidden_size"] // cfg["num_attention_heads"] if big
                                    else head_dim)
    softcap = (0.0, 1e6)
    if mt == "gemma2":
        cfg["attn_logit_softcapping"] = _float(g, key("attn_logit_softcapping"), *softcap, 50.0)
        cfg["final_logit_softcapping"] = _float(g, key("final_logit_softcapping"), *softcap, 30.0)
        window = _int(g, key("attention.sliding_window"), 1, 2**28, 4096)
        sliding = _swa_layers(g, key("attention.sliding_window_pattern"), n_layers, 2)
    else:
        cfg["attn_logit_softcapping"] = None
        cfg["final_logit_softcapping"] = _float(g, key("final_logit_softcapping"), *softcap, None)
        window = _int(g, key("attention.sliding_window"), 0, 2**28, 0)
        sliding = (_swa_layers(g, key("attention.sliding_window_pattern"), n_layers, 6)
                   if window else [False] * n_layers)
    cfg["sliding_window"] = window or None
    cfg["layer_types"] = ["sliding_attention" if s else "full_attention" for s in sliding]


def _swa_layers(g: GGUFFile, field_key: str, n_layers: int, default: int) -> list[bool]:
    """Which layers use the sliding window, as llama.cpp decides: a per-layer array of
    booleans, or a period n (layer i slides unless i % n == n - 1; n = 0: all slide)."""
    value = g.get(field_key)
    if isinstance(value, list):
        value = g.get(field_key, kind=list, items=bool)
        if len(value) != n_layers:
            raise ModelLoadError(f"{g.path}: metadata {field_key!r} has {len(value)} entries for "
                                 f"{n_layers} layers")
        return list(value)
    n = default if value is None else _int(g, field_key, 0, 2**12)
    return [n == 0 or i % n < n - 1 for i in range(n_layers)]


def _rope(g: GGUFFile, key, mt: str, head_dim: int) -> dict[str, Any]:
    """`rope_parameters` as transformers 5.25 writes them (nested per layer kind for Gemma 3)."""
    if "rope_freqs.weight" in g.tensors:
        raise ModelLoadError(f"{g.path}: RoPE frequency factors (tensor 'rope_freqs.weight', "
                             "Llama 3.1-style scaling) are not supported")
    rope: dict[str, Any] = {
        "rope_theta": _decimal(g, key("rope.freq_base"),
                               g.size("rope_theta", key("rope.freq_base"), 10000.0)),
        "rope_type": "default"}
    rot = _int(g, key("rope.dimension_count"), 1, 2**12, None)
    if mt == "phi3":
        rot = head_dim if rot is None else rot
        if rot > head_dim or rot % 2:
            raise ModelLoadError(f"{g.path}: metadata {key('rope.dimension_count')!r} is {rot}: "
                                 f"must be even and at most the head size {head_dim}")
        rope["partial_rotary_factor"] = rot / head_dim
    elif rot not in (None, head_dim):
        raise ModelLoadError(f"{g.path}: partial RoPE ({rot} of {head_dim} dims, metadata "
                             f"{key('rope.dimension_count')!r}) is not supported")
    rope |= _rope_scaling(g, key, mt, rot or head_dim)
    if mt == "gemma3_text":
        local = _decimal(g, key("rope.freq_base_swa"),
                         g.size("rope_theta", key("rope.freq_base_swa"), 10000.0))
        return {"full_attention": rope,
                "sliding_attention": {"rope_theta": local, "rope_type": "default"}}
    return rope


def _rope_scaling(g: GGUFFile, key, mt: str, rot: int) -> dict[str, Any]:
    """The `rope.scaling.*` metadata as rope_parameters entries (empty: no scaling)."""
    factor_key = key("rope.scaling.factor")
    factor = _float(g, factor_key, 0.0, 1e6, None)
    if factor is None:
        factor_key = key("rope.scale_linear")  # the older name
        factor = _float(g, factor_key, 0.0, 1e6, None)
    kind = g.get(key("rope.scaling.type"), kind=str)
    if "rope_factors_long.weight" in g.tensors:
        kind = "longrope"
    kind = kind or ("linear" if factor else "none")  # llama.cpp's default type is "linear"
    if kind == "none" or (kind == "linear" and factor in (None, 0.0, 1.0)):
        return {}
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    orig_key = key("rope.scaling.original_context_length")
    if kind == "yarn":
        if not factor:
            raise ModelLoadError(f"{g.path}: YaRN RoPE scaling without {factor_key!r}")
        out = {"rope_type": "yarn", "factor": factor,
               "original_max_position_embeddings": _int(g, orig_key, 1, 2**28)}
        for name, hf in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow"),
                         ("yarn_attn_factor", "attention_factor")):
            value = _float(g, key(f"rope.scaling.{name}"), 0.0, 1e6, None)
            if value is not None:
                out[hf] = value
        return out
    if kind == "longrope" and mt == "phi3":
        long, short = (_factors(g, name, rot // 2) for name in _CONFIG_TENSORS)
        return {"rope_type": "longrope", "long_factor": long, "short_factor": short,
                "original_max_position_embeddings": _int(g, orig_key, 1, 2**28)}
    raise ModelLoadError(f"{g.path}: RoPE scaling {show(kind)} (metadata "
                         f"{key('rope.scaling.type')!r}) is not supported for {mt}")


def _factors(g: GGUFFile, name: str, n: int) -> list[float]:
    t = g.tensors.get(name)
    if t is None:
        raise ModelLoadError(f"{g.path}: missing tensor {name!r} (LongRoPE needs both factor sets)")
    if tensor_shape(t) != (n,):
        raise ModelLoadError(f"{g.path}: tensor {name!r} has shape {tensor_shape(t)}, expected "
                             f"({n},): one factor per rotated pair")
    values = g.tensor(name).tolist()
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ModelLoadError(f"{g.path}: tensor {name!r} holds a factor that is not a finite "
                             "positive number")
    return values


def _vocab_size(g: GGUFFile, vocab_key: str) -> int:
    vocab = g.size("vocab_size", vocab_key, None)
    if vocab is not None:
        return vocab
    embd = g.tensors.get("token_embd.weight")
    if embd is None:
        raise ModelLoadError(f"{g.path}: missing tensor 'token_embd.weight'")
    if len(tensor_shape(embd)) != 2:
        raise ModelLoadError(f"{g.path}: tensor 'token_embd.weight' has shape "
                             f"{tensor_shape(embd)}, expected (vocab_size, hidden_size)")
    try:
        return check_field("vocab_size", tensor_shape(embd)[0], "token_embd.weight", label="tensor")
    except ConfigError as e:
        raise ModelLoadError(f"{g.path}: {e} rows") from None


def _int(g: GGUFFile, key: str, lo: int, hi: int, default: Any = _REQUIRED) -> Any:
    """Integer metadata `key` in [lo, hi]; `default` when absent (required without one)."""
    value = g.require(key, int) if default is _REQUIRED else g.get(key, kind=int)
    if value is None:
        return default
    if not lo <= value <= hi:
        raise ModelLoadError(f"{g.path}: metadata {key!r} must be an integer in [{lo:,}, {hi:,}], "
                             f"got {show(value)}")
    return value


def _float(g: GGUFFile, key: str, lo: float, hi: float, default: Any = _REQUIRED) -> Any:
    """Finite number metadata `key` in (lo, hi]; `default` when absent."""
    value = g.require(key, float) if default is _REQUIRED else g.get(key, kind=float)
    if value is None:
        return default
    if not lo < value <= hi:
        raise ModelLoadError(f"{g.path}: metadata {key!r} must be a finite number in "
                             f"({lo:g}, {hi:g}], got {show(value)}")
    return _decimal(g, key, value)


def _decimal(g: GGUFFile, key: str, value: float) -> float:
    """A float32 metadata value as the shortest decimal that rounds to it (1e-06, not
    9.999999974752427e-07): the number the converter was given, as config.json spells it."""
    field_ = g.reader.fields.get(key)
    if field_ is not None and field_.types[:1] == [GGUFValueType.FLOAT32]:
        return float(str(np.float32(value)))
    return float(value)


# ---- tensors ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Spec:
    """One HF tensor that a GGUF tensor provides (a stacked expert tensor provides many)."""

    hf: str
    shape: tuple[int, ...]
    expert: int | None = None
    rows: tuple[int, int] | None = None
    rope_heads: int = 0
    norm_offset: float = 0.0


@dataclass
class _Entry:
    """A GGUF tensor the config asks for: the shapes it may have, and what it becomes."""

    shapes: tuple[tuple[int, ...], ...]
    specs: list[_Spec]
    n_experts: int = 0  # > 0: the leading dimension counts experts (stacks, routers)


def hf_tensors_from_gguf(g: GGUFFile, hf_config: dict[str, Any]) -> dict[str, GGUFTensorRef]:
    """Every weight of `g` under its HF checkpoint name, as a lazy `GGUFTensorRef`.

    The tensors `hf_config` (from `hf_config_from_gguf`) asks for must all be in the file
    with the shapes it implies, and the file may hold no other: a missing tensor, an extra
    one, a shape or an expert count that disagrees is a ModelLoadError naming the tensor.
    Nothing is dequantized here.
    """
    table = _expected_tensors(g, hf_config)
    where = g.path
    unexpected = [n for n in g.tensors if n not in table and n not in _CONFIG_TENSORS]
    if unexpected:
        more = f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""
        raise ModelLoadError(f"{where}: unexpected tensor {show(unexpected[0], 80)}{more} for a "
                             f"{hf_config['model_type']} model")
    for name, entry in table.items():  # shapes first: they say what is wrong with the config
        if name in g.tensors:
            _check_shape(g, hf_config, name, tensor_shape(g.tensors[name]), entry)
    refs: dict[str, GGUFTensorRef] = {}
    for name, entry in table.items():
        t = g.tensors.get(name)
        if t is None:
            first, last = entry.specs[0].hf, entry.specs[-1].hf
            what = first if first == last else f"{first} ... {last}"
            raise ModelLoadError(f"{where}: missing tensor {name!r} ({what})")
        for s in entry.specs:
            refs[s.hf] = GGUFTensorRef(
                name=s.hf, source=name, shape=s.shape, qtype=t.tensor_type, origin=str(where),
                data=t.data, expert=s.expert, rows=s.rows, rope_heads=s.rope_heads,
                norm_offset=s.norm_offset)
    return refs


def _check_shape(g: GGUFFile, cfg: dict, name: str, shape: tuple[int, ...], entry: _Entry
                 ) -> None:
    if shape in entry.shapes:
        return
    expected = entry.shapes[0]
    if entry.n_experts and len(shape) == len(expected) and shape[1:] == expected[1:]:
        field_name = EXPERT_FIELD[cfg["model_type"]]
        raise ModelLoadError(
            f"{g.path}: tensor {name!r} has {shape[0]} experts (its shape is {shape}) but the "
            f"config has {field_name} = {entry.n_experts} (metadata "
            f"'{g.architecture}.expert_count')")
    raise ModelLoadError(f"{g.path}: tensor {name!r} has shape {shape}, the config needs "
                         f"{expected} (for {entry.specs[0].hf})")


def _expected_tensors(g: GGUFFile, cfg: dict[str, Any]) -> dict[str, _Entry]:
    """GGUF tensor name -> what the config says it must be, in llama.cpp's naming."""
    mt = cfg.get("model_type")
    if mt not in HF_ARCHITECTURES:
        raise ModelLoadError(f"{g.path}: config model_type {show(mt)} is not one of "
                             f"{', '.join(HF_ARCHITECTURES)}")
    n_layers = _cfg_int(g, cfg, "num_hidden_layers")
    hidden = _cfg_int(g, cfg, "hidden_size")
    heads = _cfg_int(g, cfg, "num_attention_heads")
    kv_heads = _cfg_int(g, cfg, "num_key_value_heads")
    head_dim = _cfg_int(g, cfg, "head_dim")
    vocab = _cfg_int(g, cfg, "vocab_size")
    ff = _cfg_int(g, cfg, "intermediate_size")
    q_rows, kv_rows = heads * head_dim, kv_heads * head_dim
    norm_offset = -1.0 if mt in NORM_OFFSET_FAMILIES else 0.0
    permute = mt in PERMUTED_FAMILIES
    table: dict[str, _Entry] = {}

    def add(gguf: str, hf: str, shape: tuple[int, ...], *alternatives: tuple[int, ...],
            rope_heads: int = 0, norm: bool = False, n_experts: int = 0) -> None:
        table[gguf] = _Entry((shape, *alternatives), [_Spec(
            hf, shape, rope_heads=rope_heads, norm_offset=norm_offset if norm else 0.0)],
            n_experts=n_experts)

    def add_experts(gguf: str, hf: str, n: int, shape: tuple[int, int],
                    halves: tuple[str, str] | None = None) -> None:
        """A stacked [n, *shape] tensor; `halves`: HF names of its row halves (gate_up)."""
        if halves is None:
            specs = [_Spec(hf.format(e=e), shape, expert=e) for e in range(n)]
            stacked = (n, *shape)
        else:
            rows = shape[0]
            specs = [_Spec(hf.format(e=e, w=w), shape, expert=e, rows=(h * rows, (h + 1) * rows))
                     for e in range(n) for h, w in enumerate(halves)]
            stacked = (n, 2 * rows, shape[1])
        table[gguf] = _Entry((stacked,), specs, n_experts=n)

    add("token_embd.weight", "model.embed_tokens.weight", (vocab, hidden))
    add("output_norm.weight", "model.norm.weight", (hidden,), norm=True)
    if not cfg.get("tie_word_embeddings", False):
        add("output.weight", "lm_head.weight", (vocab, hidden))
    bias_qkv = cfg.get(_BIAS_FIELD.get(mt, "qkv_bias"), False) or mt == "qwen2"
    bias_o = mt in _BIAS_FIELD and cfg.get(_BIAS_FIELD[mt], False)
    sparse = _sparse_layers(g, cfg, mt, n_layers)
    for i in range(n_layers):
        b, m = f"blk.{i}.", f"model.layers.{i}."
        add(b + "attn_norm.weight", m + "input_layernorm.weight", (hidden,), norm=True)
        if mt == "phi3":
            add(b + "attn_qkv.weight", m + "self_attn.qkv_proj.weight",
                (q_rows + 2 * kv_rows, hidden))
        else:
            for w, rows, n_heads in (("q", q_rows, heads), ("k", kv_rows, kv_heads),
                                     ("v", kv_rows, 0)):
                rope = n_heads if permute else 0
                add(f"{b}attn_{w}.weight", f"{m}self_attn.{w}_proj.weight", (rows, hidden),
                    rope_heads=rope)
                if bias_qkv:
                    add(f"{b}attn_{w}.bias", f"{m}self_attn.{w}_proj.bias", (rows,),
                        rope_heads=rope)
        add(b + "attn_output.weight", m + "self_attn.o_proj.weight", (hidden, q_rows))
        if bias_o:
            add(b + "attn_output.bias", m + "self_attn.o_proj.bias", (hidden,))
        if mt in _QK_NORM:
            per_head = _QK_NORM[mt] == "head"
            add(b + "attn_q_norm.weight", m + "self_attn.q_norm.weight",
                (head_dim,) if per_head else (q_rows,), norm=True)
            add(b + "attn_k_norm.weight", m + "self_attn.k_norm.weight",
                (head_dim,) if per_head else (kv_rows,), norm=True)
        if mt in NORM_OFFSET_FAMILIES:
            add(b + "post_attention_norm.weight", m + "post_attention_layernorm.weight",
                (hidden,), norm=True)
            add(b + "ffn_norm.weight", m + "pre_feedforward_layernorm.weight", (hidden,),
                norm=True)
            add(b + "post_ffw_norm.weight", m + "post_feedforward_layernorm.weight", (hidden,),
                norm=True)
        else:
            add(b + "ffn_norm.weight", m + "post_attention_layernorm.weight", (hidden,))
        if mt == "phi3":
            add(b + "ffn_up.weight", m + "mlp.gate_up_proj.weight", (2 * ff, hidden))
            add(b + "ffn_down.weight", m + "mlp.down_proj.weight", (hidden, ff))
        elif i not in sparse:
            for w, shape in (("gate", (ff, hidden)), ("up", (ff, hidden)),
                             ("down", (hidden, ff))):
                add(f"{b}ffn_{w}.weight", f"{m}mlp.{w}_proj.weight", shape)
        else:
            _add_moe(g, cfg, mt, b, m, hidden, ff, add, add_experts)
    return table


def _sparse_layers(g: GGUFFile, cfg: dict, mt: str, n_layers: int) -> set[int]:
    if mt not in EXPERT_FIELD:
        return set()
    dense = (cfg.get("mlp_only_layers") or []) if mt in ("qwen2_moe", "qwen3_moe") else []
    if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
        raise ModelLoadError(f"{g.path}: config field 'mlp_only_layers' must be a list of layer "
                             f"indices, got {show(dense)}")
    return set(range(n_layers)) - set(dense)


def _add_moe(g: GGUFFile, cfg: dict, mt: str, b: str, m: str, hidden: int, ff: int, add,
             add_experts) -> None:
    """One MoE layer: router, routed experts (stacked), and qwen2_moe's shared expert."""
    n = _cfg_int(g, cfg, EXPERT_FIELD[mt])
    if mt == "mixtral":
        moe, names, ff_exp = m + "block_sparse_moe.", {"gate": "w1", "up": "w3", "down": "w2"}, ff
    else:
        moe, names = m + "mlp.", {w: f"{w}_proj" for w in ("gate", "up", "down")}
        ff_exp = _cfg_int(g, cfg, "moe_intermediate_size") if mt != "olmoe" else ff
    add(b + "ffn_gate_inp.weight", moe + "gate.weight", (n, hidden), n_experts=n)
    expert = moe + "experts.{e}."
    if b + "ffn_gate_up_exps.weight" in g.tensors:  # the converter's --fuse-gate-up-exps
        add_experts(b + "ffn_gate_up_exps.weight", expert + "{w}.weight", n, (ff_exp, hidden),
                    halves=(names["gate"], names["up"]))
    else:
        for w in ("gate", "up"):
            add_experts(f"{b}ffn_{w}_exps.weight", f"{expert}{names[w]}.weight", n,
                        (ff_exp, hidden))
    add_experts(b + "ffn_down_exps.weight", expert + names["down"] + ".weight", n,
                (hidden, ff_exp))
    if mt == "qwen2_moe":
        ff_sh = _cfg_int(g, cfg, "shared_expert_intermediate_size")
        for w, shape in (("gate", (ff_sh, hidden)), ("up", (ff_sh, hidden)),
                         ("down", (hidden, ff_sh))):
            add(f"{b}ffn_{w}_shexp.weight", f"{moe}shared_expert.{w}_proj.weight", shape)
        add(b + "ffn_gate_inp_shexp.weight", moe + "shared_expert_gate.weight", (1, hidden),
            (hidden,))


def _cfg_int(g: GGUFFile, cfg: dict, name: str) -> int:
    value = cfg.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelLoadError(f"{g.path}: config field {name!r} must be a positive integer, got "
                             f"{show(value)}")
    return value
