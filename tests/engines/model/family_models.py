"""Seeded tiny models of every decoder family, as Hugging Face folders and as GGUF files.

Each family is built by transformers from a small config (hidden 64, 2-7 layers, a 262-token
vocabulary) under a fixed seed, saved with `save_pretrained` (safetensors), then written as
GGUF the way llama.cpp's convert_hf_to_gguf.py writes it: from the saved config.json and
model.safetensors (not from the model in memory), tensor names from the `gguf` package's own
`TensorNameMap` (the converter's table), its metadata keys family by family, W_q and W_k
rows permuted for the Llama family only, Gemma's norms stored as w + 1, experts stacked into
`ffn_*_exps`; F32 throughout, or with the converter's Q8_0 rules (`q8_0=True`: vectors,
norms and routers stay F32, a matrix whose rows do not split into 32-value blocks falls back
to F16).

Where a family's GGUF cannot hold a setting, the tiny config uses the value llama.cpp
assumes, so that the file describes the same model: Gemma's `query_pre_attn_scalar` is the
head size, qwen3_moe renormalises its top-k routing weights, OLMoE's norm epsilon is 1e-5.
One setting is lost on purpose, as it is for every real Mistral GGUF: Mistral's sliding
window (16 tokens here) is not written (`LOST_IN_GGUF`).

Norm weights and biases are set to seeded random values (norms on a 1/1024 grid, so that
Gemma's w + 1 and back is exact in fp32) so that a misplaced norm or bias shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from inferlab.engines.model.gguf_file import permute_rope_rows
from inferlab.engines.model.tokenizer import byte_to_unicode

FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "gemma2",
            "gemma3_text", "phi3", "olmoe")
TRANSFORMERS_GGUF = frozenset(FAMILIES) - {"mixtral", "olmoe"}
"""Families transformers 5.25's own GGUF loader maps (mixtral and olmoe it refuses)."""
LOST_IN_GGUF = {"mistral": {"sliding_window": 16}}
"""HF config fields the GGUF cannot hold (llama.cpp's converter does not write them)."""

SEED = 20260601
_BYTES = byte_to_unicode()
# 256 byte tokens, one merge, and control tokens; llama.cpp's vocabulary loader looks up
# "<s>", "</s>", "<unk>" and "<|endoftext|>" by name for a model named like Phi-3.
TOKENS = [_BYTES[b] for b in range(256)] + ["he", "<|end|>", "<s>", "</s>", "<unk>",
                                             "<|endoftext|>"]
VOCAB = len(TOKENS)
END_ID = 257
_N_CONTROL = 5

_COMMON = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=128,
               bos_token_id=END_ID, eos_token_id=END_ID, pad_token_id=None,
               initializer_range=0.1)
FAMILY_CONFIGS: dict[str, dict] = {
    "llama": {"rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}},
    "mistral": {"sliding_window": 16,
                "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 64},
    "qwen2": {},
    "qwen3": {"head_dim": 32, "tie_word_embeddings": True},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 48},
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "head_dim": 16, "norm_topk_prob": True},
    "gemma2": {"num_hidden_layers": 4, "head_dim": 16, "sliding_window": 8,
               "query_pre_attn_scalar": 16},
    # 7 layers: llama.cpp's Gemma 3 pattern makes layer 5 global, the others sliding
    "gemma3_text": {"num_hidden_layers": 7, "head_dim": 16, "sliding_window": 8,
                    "query_pre_attn_scalar": 16},
    "phi3": {"partial_rotary_factor": 0.5},
    # OLMoE has one K/V head per query head (llama.cpp's q/k norms are hidden_size wide)
    "olmoe": {"num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 32,
              "rms_norm_eps": 1e-5, "num_key_value_heads": 4},
}

# model_type -> (GGUF architecture, the converter class's behaviour)
_ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2",
         "qwen3": "qwen3", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "gemma2": "gemma2",
         "gemma3_text": "gemma3", "phi3": "phi3", "olmoe": "olmoe"}


def build_family(model_type: str, folder: Path) -> tuple[Path, Path]:
    """(Hugging Face folder, F32 GGUF) of the seeded tiny `model_type` model, in `folder`.

    The folder is named "tiny-<model_type>", and so is the GGUF's `general.name` (the
    converter's fallback): a name that says "mistral" is how a Mistral GGUF is told from a
    Llama one. (transformers would load a GGUF named exactly "mistral" as model_type mistral,
    for which its GGUF loader has no tensor map.)"""
    hf_dir = save_hf_model(model_type, Path(folder) / f"tiny-{model_type}")
    return hf_dir, write_gguf(hf_dir, Path(folder) / f"{model_type}.gguf")


def tiny_hf_config(model_type: str, **overrides):
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **(_COMMON | FAMILY_CONFIGS[model_type] | overrides))


def save_hf_model(model_type: str, hf_dir: Path, **overrides) -> Path:
    """The seeded tiny model of `model_type`, saved with `save_pretrained` into `hf_dir`."""
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    config = tiny_hf_config(model_type, **overrides)
    torch.manual_seed(SEED + FAMILIES.index(model_type))
    model = AutoModelForCausalLM.from_config(config)
    gen = torch.Generator().manual_seed(SEED)
    gemma = model_type in ("gemma2", "gemma3_text")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # 1/1024 steps in [-1/4, 1/4] (around 1: not Gemma)
                step = torch.randint(-256, 257, p.shape, generator=gen).float() / 1024
                p.copy_(step if gemma else 1 + step)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    model.save_pretrained(hf_dir)
    _save_tokenizer(hf_dir)
    return hf_dir


def _save_tokenizer(folder: Path) -> None:
    """A byte-level BPE of 256 byte tokens, one merge ("he") and one special token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    bpe = models.BPE(vocab={t: i for i, t in enumerate(TOKENS[:257])}, merges=[("h", "e")])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(TOKENS[257:])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=TOKENS[END_ID],
                            eos_token=TOKENS[END_ID]).save_pretrained(folder)


# ---- the converter's GGUF --------------------------------------------------------------------

def write_gguf(hf_dir: Path, path: Path, q8_0: bool = False, skip: tuple[str, ...] = (),
               metadata: dict | None = None, arch: str | None = None,
               squeeze: bool = False, fuse_gate_up: bool = False) -> Path:
    """The GGUF llama.cpp's converter writes for the model in `hf_dir` (`--outtype f32`, or
    `q8_0`). `squeeze`: as older converters did (`data_torch.squeeze()`), which stored
    qwen2_moe's [1, hidden] shared-expert gate as a vector. `fuse_gate_up`: the converter's
    --fuse-gate-up-exps (one [experts, 2 x ff, hidden] `ffn_gate_up_exps`). For error
    tests: GGUF tensor names in `skip` are left out, `metadata` entries replace the
    converter's (key -> (value, GGUFValueType[, item type]), or None to drop the key), `arch`
    renames the architecture."""
    import gguf
    from safetensors.torch import load_file

    hp = json.loads((hf_dir / "config.json").read_text())
    mt = hp["model_type"]
    arch = arch or _ARCH[mt]
    model_arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == _ARCH[mt])
    w = gguf.GGUFWriter(str(path), arch)
    ftype = gguf.LlamaFileType.MOSTLY_Q8_0 if q8_0 else gguf.LlamaFileType.ALL_F32
    w.add_type("model")
    w.add_name(hf_dir.name)  # the converter's fallback: the model folder's name
    _add_hparams(w, mt, hp)
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    _add_vocab(w)
    for key, entry in (metadata or {}).items():
        w.kv_data[0].pop(key, None)
        if entry is not None:
            value, vtype, *sub = entry
            w.add_key_value(key, value, vtype, sub[0] if sub else None)
    names = gguf.get_tensor_name_map(model_arch, hp["num_hidden_layers"])
    sd = load_file(hf_dir / "model.safetensors")
    for hf_name, t in _converter_tensors(mt, hp, sd, fuse_gate_up):
        name = hf_name if hf_name.startswith("blk.") else names.get_name(
            hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        if name not in skip:
            _add_tensor(w, name, (t.squeeze() if squeeze else t).numpy().astype(np.float32), q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _add_hparams(w, mt: str, hp: dict) -> None:
    """The converter's set_gguf_parameters for each family (the values a key ends with)."""
    import gguf

    n_head, n_embd = hp["num_attention_heads"], hp["hidden_size"]
    rope = hp.get("rope_parameters") or {}
    full = rope.get("full_attention", rope)
    if mt == "gemma2":  # Gemma2Model: its own list, no RoPE base
        w.add_context_length(hp["max_position_embeddings"])
        w.add_embedding_length(n_embd)
        w.add_block_count(hp["num_hidden_layers"])
        w.add_feed_forward_length(hp["intermediate_size"])
        w.add_head_count(n_head)
        w.add_head_count_kv(hp.get("num_key_value_heads", n_head))
        w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])
        w.add_attn_logit_softcapping(hp["attn_logit_softcapping"])
        w.add_final_logit_softcapping(hp["final_logit_softcapping"])
        w.add_sliding_window(hp["sliding_window"])
        return
    if mt == "phi3":  # Phi3MiniModel: its own list
        rot_pct = full.get("partial_rotary_factor", 1.0)
        w.add_context_length(hp["max_position_embeddings"])
        w.add_rope_scaling_orig_ctx_len(full.get("original_max_position_embeddings",
                                                 hp["original_max_position_embeddings"]))
        w.add_embedding_length(n_embd)
        w.add_feed_forward_length(hp["intermediate_size"])
        w.add_block_count(hp["num_hidden_layers"])
        w.add_head_count(n_head)
        w.add_head_count_kv(hp["num_key_value_heads"])
        w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
        w.add_rope_dimension_count(int(rot_pct * n_embd) // n_head)
        w.add_rope_freq_base(full["rope_theta"])
        w.add_sliding_window(hp.get("sliding_window") or 0)
        return
    # TextModel.set_gguf_parameters
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(hp["num_key_value_heads"])
    if full.get("rope_type") == "linear" and full.get("factor") is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(full["factor"])
    w.add_rope_freq_base(full["rope_theta"])
    if (local := rope.get("sliding_attention", {}).get("rope_theta")) is not None:
        w.add_rope_freq_base_swa(local)
    w.add_layer_norm_rms_eps(1e-5 if mt == "olmoe" else hp["rms_norm_eps"])  # OlmoeModel: 1e-5
    n_experts = hp.get("num_local_experts", hp.get("num_experts"))
    if n_experts is not None:
        w.add_expert_count(n_experts)
    if hp.get("num_experts_per_tok") is not None:
        w.add_expert_used_count(hp["num_experts_per_tok"])
    if hp.get("head_dim") is not None and mt != "gemma3_text":  # Gemma3Model rewrites them
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])
    if mt in ("llama", "mistral", "mixtral"):  # LlamaModel
        w.add_vocab_size(hp["vocab_size"])
        w.add_rope_dimension_count(hp.get("head_dim") or n_embd // n_head)
    if mt in ("qwen2_moe", "qwen3_moe"):  # Qwen2MoeModel
        w.add_expert_feed_forward_length(hp["moe_intermediate_size"])
        if hp.get("shared_expert_intermediate_size") is not None:
            w.add_expert_shared_feed_forward_length(hp["shared_expert_intermediate_size"])
    if mt == "gemma3_text":  # Gemma3Model, after TextModel's
        w.add_key_length(hp.get("head_dim", 256))
        w.add_value_length(hp.get("head_dim", 256))
        if hp.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(hp["final_logit_softcapping"])
        if hp.get("sliding_window_pattern") != 1:
            w.add_sliding_window(hp["sliding_window"])


def _add_vocab(w) -> None:
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(TOKENS)
    w.add_token_types([1] * (VOCAB - _N_CONTROL) + [3] * _N_CONTROL)
    w.add_token_merges(["h e"])
    w.add_bos_token_id(END_ID)
    w.add_eos_token_id(END_ID)


def _converter_tensors(mt: str, hp: dict, sd: dict[str, torch.Tensor], fuse_gate_up: bool):
    """(HF name the converter maps, tensor) after its modify_tensors: Q/K permuted (Llama
    family), norms + 1 (Gemma), experts stacked per layer."""
    n_head, n_kv = hp["num_attention_heads"], hp["num_key_value_heads"]
    experts: dict[str, torch.Tensor] = {}
    for name in sorted(sd):
        t = sd[name]
        if mt == "gemma2" and name == "lm_head.weight":
            continue
        if mt in ("llama", "mistral", "mixtral"):
            if name.endswith(("q_proj.weight", "q_proj.bias")):
                t = _permute(t, n_head)
            elif name.endswith(("k_proj.weight", "k_proj.bias")):
                t = _permute(t, n_kv)
        if mt in ("gemma2", "gemma3_text") and name.endswith("norm.weight"):
            t = t + 1
        if ".experts." in name:
            experts[name] = t
            continue
        yield name, t
    n_experts = hp.get("num_local_experts", hp.get("num_experts"))
    for i in range(hp["num_hidden_layers"]):
        if mt == "mixtral":
            for wid in ("w1", "w2", "w3"):
                stack = [experts.pop(f"model.layers.{i}.block_sparse_moe.experts.{e}.{wid}.weight")
                         for e in range(n_experts)]
                yield f"layers.{i}.feed_forward.experts.{wid}.weight", torch.stack(stack)
        elif n_experts:
            stacks = {w_name: torch.stack([
                experts.pop(f"model.layers.{i}.mlp.experts.{e}.{w_name}.weight")
                for e in range(n_experts)]) for w_name in ("down_proj", "gate_proj", "up_proj")}
            for w_name, stack in stacks.items():
                if not (fuse_gate_up and w_name in ("gate_proj", "up_proj")):
                    yield f"model.layers.{i}.mlp.experts.{w_name}.weight", stack
            if fuse_gate_up:  # ModelBase.modify_tensors: cat along the rows, gate first
                yield f"blk.{i}.ffn_gate_up_exps.weight", torch.cat(
                    [stacks["gate_proj"], stacks["up_proj"]], dim=1)
    assert not experts, sorted(experts)[:3]


def _permute(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    if t.ndim == 1:
        return permute_rope_rows(t.reshape(-1, 1), n_heads).reshape(-1)
    return permute_rope_rows(t, n_heads)


def _add_tensor(w, name: str, arr: np.ndarray, q8_0: bool) -> None:
    """F32, or the converter's Q8_0 choice (prepare_tensors): vectors, norms, routers and
    biases stay F32; a matrix whose rows do not split into Q8_0 blocks falls back to F16."""
    import gguf

    f32 = (arr.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight")
           or ".ffn_gate_inp." in name or ".ffn_gate_inp_shexp." in name)
    if not q8_0 or f32:
        w.add_tensor(name, arr)
        return
    try:
        w.add_tensor(name, gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    except gguf.QuantError:
        w.add_tensor(name, arr.astype(np.float16))


# ---- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def family_files(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """model_type -> (HF folder, F32 GGUF) for every family, built once per run."""
    folder = tmp_path_factory.mktemp("families")
    return {mt: build_family(mt, folder) for mt in FAMILIES}


@pytest.fixture(scope="session")
def family_q8_0_files(family_files, tmp_path_factory) -> dict[str, Path]:
    """model_type -> Q8_0 GGUF of the same model, for llama (permuted rows) and qwen3_moe
    (stacked experts)."""
    folder = tmp_path_factory.mktemp("families-q8_0")
    return {mt: write_gguf(family_files[mt][0], folder / f"{mt}-q8_0.gguf", q8_0=True)
            for mt in ("llama", "qwen3_moe")}
