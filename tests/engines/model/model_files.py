"""Small model files written on the fly: a tiny Llama as GGUF and as a Hugging Face folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from inferlab.engines.model.config import ModelConfig
from inferlab.engines.model.gguf_file import permute_rope_rows
from inferlab.engines.model.tiny import tiny_config, tiny_state_dict
from inferlab.engines.model.tokenizer import byte_to_unicode

# The tiny GGUF's vocabulary: 256 byte tokens, one merge ("h" + "e"), one control token.
MERGED, SPECIAL = "he", "<|end|>"


def gguf_tokens() -> list[str]:
    table = byte_to_unicode()
    return [table[b] for b in range(256)] + [MERGED, SPECIAL]


def gguf_config() -> ModelConfig:
    return tiny_config(vocab_size=258, tie_embeddings=True)


def quantized_state_dict(config: ModelConfig) -> dict[str, torch.Tensor]:
    """The tiny weights with every MLP matrix passed through Q8_0 and back: exactly the values
    a reader dequantizes from a Q8_0 file."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    sd = tiny_state_dict(config)
    for name, t in sd.items():
        if ".mlp." in name:
            q = quantize(t.numpy(), GGMLQuantizationType.Q8_0)
            sd[name] = torch.from_numpy(dequantize(q, GGMLQuantizationType.Q8_0).copy())
    return sd

LAYER_TENSORS = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
"""Hugging Face layer tensor -> its GGUF name (blk.N.<name>.weight)."""


def add_llama_tensors(w, config: ModelConfig, sd: dict, skip=()) -> None:
    """`sd`'s tensors into GGUFWriter `w` under llama.cpp's names: Q/K rows permuted as its
    converter does, MLP matrices Q8_0, the rest F32; names in `skip` left out."""
    import gguf

    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight"}
    for i in range(config.n_layers):
        names |= {f"model.layers.{i}.{hf}.weight": f"blk.{i}.{gg}.weight"
                  for hf, gg in LAYER_TENSORS.items()}
    for hf, name in names.items():
        if name in skip:
            continue
        t = sd[hf]
        if hf.endswith("q_proj.weight"):
            t = permute_rope_rows(t, config.n_heads)
        elif hf.endswith("k_proj.weight"):
            t = permute_rope_rows(t, config.n_kv_heads)
        arr = t.numpy().astype(np.float32)
        if ".mlp." in hf:
            qtype = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, arr)


def write_tiny_gguf(path: Path, arch: str = "llama", skip: tuple[str, ...] = ()) -> Path:
    """A Llama GGUF of the tiny model (vocab 258, tied): F32 tensors except Q8_0 MLP matrices,
    Q/K rows permuted as llama.cpp's converter does. Metadata keys or tensor names in `skip`
    are left out."""
    import gguf

    config = gguf_config()
    sd = quantized_state_dict(config)
    w = gguf.GGUFWriter(str(path), arch)
    meta = {
        "block_count": lambda: w.add_block_count(config.n_layers),
        "context_length": lambda: w.add_context_length(config.max_position),
        "embedding_length": lambda: w.add_embedding_length(config.d_model),
        "feed_forward_length": lambda: w.add_feed_forward_length(config.d_ff),
        "head_count": lambda: w.add_head_count(config.n_heads),
        "head_count_kv": lambda: w.add_head_count_kv(config.n_kv_heads),
        "rope_freq_base": lambda: w.add_rope_freq_base(config.rope_theta),
        "rms_eps": lambda: w.add_layer_norm_rms_eps(config.norm_eps),
    }
    for key, add in meta.items():
        if key not in skip:
            add()
    w.add_name("tiny-gguf")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(gguf_tokens())
    w.add_token_types([1] * 257 + [3])
    w.add_token_merges(["h e"])
    w.add_eos_token_id(257)
    w.add_chat_template("{{'<|im_start|>' + message['role'] + '\n'}}<|im_end|>")
    add_llama_tensors(w, config, sd, skip)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def write_tiny_hf_folder(folder: Path, **config_overrides) -> Path:
    """config.json + model.safetensors + tokenizer.json of the (untied) tiny model."""
    from safetensors.torch import save_file

    from inferlab.engines.model.tokenizer import Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config()
    raw = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": cfg.d_model, "intermediate_size": cfg.d_ff,
           "num_hidden_layers": cfg.n_layers, "num_attention_heads": cfg.n_heads,
           "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.d_head,
           "vocab_size": cfg.vocab_size, "rope_theta": cfg.rope_theta,
           "rms_norm_eps": cfg.norm_eps, "max_position_embeddings": cfg.max_position,
           "tie_word_embeddings": False, "hidden_act": "silu", "eos_token_id": 10,
           "bos_token_id": 0, "torch_dtype": "float32"} | config_overrides
    (folder / "config.json").write_text(json.dumps(raw))
    save_file({k: v.contiguous() for k, v in tiny_state_dict(cfg).items()},
              str(folder / "model.safetensors"))
    Tokenizer.byte_level().backend.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    return folder
