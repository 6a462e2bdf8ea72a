"""Model shapes: the numbers every cost, memory and KV calculation starts from.

A `ModelConfig` describes a Llama-family decoder (RMSNorm, RoPE, GQA, SwiGLU) by its sizes
only: no weights. Presets are JSON files in `assets/models/<id>.json`, each naming the
source of its numbers; `load_hf_config` reads a Hugging Face `config.json` directly.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferlab.engines.presets import dataclass_from_dict, load_preset, preset_ids

MLP_KINDS = ("swiglu", "gelu")

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

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check_type(f.name, f.type, getattr(self, f.name))
        for name in FIELD_LIMITS:
            check_field(name, getattr(self, name))
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"field 'n_kv_heads' ({self.n_kv_heads}) must divide n_heads ({self.n_heads})"
            )
        if self.mlp_kind not in MLP_KINDS:
            raise ConfigError(f"field 'mlp_kind' must be one of {MLP_KINDS}, got {self.mlp_kind!r}")
        object.__setattr__(self, "rope_theta", float(self.rope_theta))
        object.__setattr__(self, "norm_eps", float(self.norm_eps))

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

    @property
    def linear_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """(name, d_in, d_out) of every linear layer in ONE decoder layer, no biases.

        q: d_model → n_heads·d_head, k and v: d_model → n_kv_heads·d_head,
        o: n_heads·d_head → d_model; SwiGLU adds gate and up (d_model → d_ff) and
        down (d_ff → d_model); a GELU MLP has only up and down.
        """
        q_dim, kv_dim = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        attn = (("q", self.d_model, q_dim), ("k", self.d_model, kv_dim),
                ("v", self.d_model, kv_dim), ("o", q_dim, self.d_model))
        mlp = (("up", self.d_model, self.d_ff), ("down", self.d_ff, self.d_model))
        if self.mlp_kind == "swiglu":
            mlp = (("gate", self.d_model, self.d_ff), *mlp)
        return attn + mlp

    @property
    def linear_params_per_layer(self) -> int:
        """Weights of the linear layers of one decoder layer: Σ d_in · d_out."""
        return sum(d_in * d_out for _, d_in, d_out in self.linear_shapes)

    @property
    def n_params(self) -> int:
        """Exact parameter count of a Llama-family decoder.

        n_params = V·d (embedding) + L·(Σ d_in·d_out + 2·d) (linears and two RMSNorm
        weights per layer) + d (final norm) + V·d (lm_head, unless tied).
        """
        embeddings = self.vocab_size * self.d_model
        per_layer = self.linear_params_per_layer + 2 * self.d_model
        lm_head = 0 if self.tie_embeddings else embeddings
        return embeddings + self.n_layers * per_layer + self.d_model + lm_head

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


def load_hf_config(path: str | Path) -> ModelConfig:
    """Read a Hugging Face config.json; the id is its folder's name (or the file's stem)."""
    path = Path(path)
    data = read_json_file(path)
    model_id = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return model_config_from_hf(data, id=model_id or "custom", source=str(path))


# Hugging Face model types whose MLP is up → GELU → down (no gate); their configs may
# omit the MLP width (then 4 × hidden) and tie the embeddings by default.
_GELU_MODEL_TYPES = {"falcon", "RefinedWeb", "RefinedWebModel", "gpt2", "gpt_bigcode",
                     "gpt_neox", "starcoder2", "phi"}


def model_config_from_hf(d: Any, id: str = "custom", name: str | None = None,
                         source: str = "") -> ModelConfig:
    """Build a ModelConfig from a Hugging Face config.json dict.

    Reads num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
    (default: num_attention_heads), head_dim (default: hidden_size // heads),
    intermediate_size, vocab_size, rope_theta (or rope_parameters.rope_theta),
    tie_word_embeddings, max_position_embeddings and rms_norm_eps. Also accepts the GPT-2 / Falcon
    spellings (n_layer, n_embd, n_head, n_head_kv, num_kv_heads, multi_query,
    ffn_hidden_size, n_inner, n_positions) and a nested text_config (multimodal models).
    """
    origin = source or "Hugging Face config"
    if not isinstance(d, dict):
        raise ConfigError(f"{origin}: expected a JSON object, got {type(d).__name__}")
    if "text_config" in d and "num_hidden_layers" not in d and isinstance(d["text_config"], dict):
        d = d["text_config"]
    model_type = d.get("model_type", "")
    if not isinstance(model_type, str):
        raise ConfigError(f"{origin}: field 'model_type' must be a string, got {show(model_type)}")
    gelu = model_type in _GELU_MODEL_TYPES

    def get(*keys: str, field: str | None = None, default: Any = dataclasses.MISSING) -> Any:
        """The first of `keys` present; checked as ModelConfig's `field` under its own name."""
        for key in keys:
            if d.get(key) is not None:
                if field is not None:
                    try:
                        check_field(field, d[key], key)
                    except ConfigError as e:
                        raise ConfigError(f"{origin}: {e}") from None
                return d[key]
        if default is dataclasses.MISSING:
            raise ConfigError(f"{origin}: missing field {keys[0]!r}")
        return default

    n_layers = get("num_hidden_layers", "n_layer", "num_layers", field="n_layers")
    d_model = get("hidden_size", "n_embd", "d_model", field="d_model")
    n_heads = get("num_attention_heads", "n_head", field="n_heads")
    multi_query = d.get("multi_query", False)
    if not isinstance(multi_query, bool):
        raise ConfigError(f"{origin}: field 'multi_query' must be true or false, got "
                          f"{show(multi_query)}")
    n_kv_heads = 1 if multi_query else get(
        "num_key_value_heads", "num_kv_heads", "n_head_kv", field="n_kv_heads", default=n_heads)
    tie = get("tie_word_embeddings", default=gelu)
    if not isinstance(tie, bool):
        raise ConfigError(f"{origin}: field 'tie_word_embeddings' must be true or false, got "
                          f"{show(tie)}")
    rope_parameters = d.get("rope_parameters") if isinstance(d.get("rope_parameters"), dict) else {}
    fields = {
        "id": id,
        "name": name if name is not None else id,
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "d_head": get("head_dim", field="d_head", default=d_model // n_heads),
        "d_ff": get("intermediate_size", "ffn_hidden_size", "n_inner", field="d_ff",
                    **({"default": 4 * d_model} if gelu else {})),
        "vocab_size": get("vocab_size", field="vocab_size"),
        "rope_theta": get("rope_theta", field="rope_theta",
                          default=rope_parameters.get("rope_theta", 10000.0)),
        "tie_embeddings": tie,
        "max_position": get("max_position_embeddings", "n_positions", "max_seq_len",
                            field="max_position", default=4096),
        "source": source,
        "mlp_kind": "gelu" if gelu else "swiglu",
        "norm_eps": get("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", field="norm_eps",
                        default=1e-5),
        "notes": (f"{model_type}: non-Llama layout; n_params ignores its biases and "
                  "LayerNorm shapes, so it is approximate") if gelu else "",
    }
    return ModelConfig.from_dict(fields, origin)
