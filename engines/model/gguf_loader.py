"""Load a GGUF file (llama.cpp's format) of any family the decoder runs: description, weights,
tokenizer.

The file is read into the Hugging Face world (`gguf_families`: a config.json dict, and each
tensor under its checkpoint name, still in the file), described (`hf_config`), checked
(family, every tensor's shape) before any tensor is dequantized, and built by the decoder.

Weights are held one of two ways (`weights`):

    "fp32"   every tensor dequantized (`gguf.quants.dequantize`) and cast to `dtype`: the
             reference, and the fast path of a small Llama-layout model (its fused native
             decoder takes fp32 panels)
    "codes"  each linear keeps the file's blocks where they lie (a view of the memory map,
             nothing copied) and multiplies them natively (`GGUFLinear`: Q4_0 ... Q6_K); a
             tensor the kernels do not read (F32, F16, BF16, or rows the loader must permute)
             is dequantized. A many-GB MoE file costs its page cache, not a copy.
    "auto"   "fp32" for a Llama layout whose fp32 weights take at most AUTO_FP32_BYTES, else
             "codes" (on the native kernel path and fp32; elsewhere "fp32").

Any problem (not a GGUF, truncated, a tensor missing or of the wrong shape, a family the
decoder does not run, a metadata value of the wrong type or out of range) raises
`ModelLoadError` naming the file and what is wrong.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferlab.engines.kernels import ggml_blocks, resolve
from inferlab.engines.model.config import ConfigError, ModelConfig
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_families import (
    GGUFTensorRef,
    hf_config_from_gguf,
    hf_tensors_from_gguf,
)
from inferlab.engines.model.gguf_file import GGUFFile, open_gguf
from inferlab.engines.model.gguf_linear import GGUFLinear
from inferlab.engines.model.gguf_tokenizer import tokenizer_from_gguf
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.model.linear import ConcatLinear
from inferlab.engines.model.llama import Llama, check_runs, check_weight_shapes, is_llama_layout
from inferlab.engines.model.tokenizer import Tokenizer

WEIGHTS = ("auto", "fp32", "codes")
AUTO_FP32_BYTES = 2 * 2**30
"""Under "auto", a Llama-layout model whose fp32 weights fit in this many bytes is expanded."""


def gguf_config(g: GGUFFile, id: str | None = None, hf: dict | None = None) -> ModelConfig:
    """The model description of `g` (any family `hf_config` describes); `hf` its config.json
    dict where the caller has read it already (`hf_config_from_gguf`)."""
    hf = hf_config_from_gguf(g) if hf is None else hf
    try:
        return model_config_from_hf(hf, id=id or g.path.stem,
                                    name=g.get("general.name", g.path.stem, kind=str),
                                    source=str(g.path))
    except ConfigError as e:
        raise ModelLoadError(f"{g.path}: bad model metadata: {e}") from None


def resolve_weights(weights: str, config: ModelConfig, dtype: str, kernels: str | None) -> str:
    """"fp32" or "codes" for the `weights` choice (module docstring)."""
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; expected one of {', '.join(WEIGHTS)}")
    codes_run = dtype == "fp32" and resolve(kernels) == "native" and ggml_blocks.available()
    if weights == "codes":
        return "codes" if codes_run else "fp32"
    if weights == "fp32" or not codes_run:
        return "fp32"
    small = config.n_params * 4 <= AUTO_FP32_BYTES
    return "fp32" if is_llama_layout(config) and small else "codes"


def codes_linear(refs: dict[str, GGUFTensorRef], kernels: str | None,
                 activations: str | None = None):
    """`make_linear(names)` for `Llama.from_state_dict`: the linear of those tensors' rows
    from their blocks (one `GGUFLinear` per run of parts in one encoding: Gemma's q and k in
    Q5_0 are one product, its v in Q8_0 another), or None where a part is not blocks the
    kernels read (the decoder then expands it). Parts are concatenated (a copy of their codes)
    only where a projection fuses several tensors; a single tensor stays a view of the map."""

    def make(names) -> object | None:
        parts = []
        for name in names:
            ref = refs[name]
            raw = ref.raw_rows() if ref.qtype in ggml_blocks.COVERED else None
            if raw is None or len(ref.shape) != 2:
                return None
            parts.append((ref, raw))
        runs: list[list] = []  # neighbours of one encoding share one product
        for ref, raw in parts:
            if runs and runs[-1][0][0].qtype == ref.qtype:
                runs[-1].append((ref, raw))
            else:
                runs.append([(ref, raw)])
        linears = []
        for run in runs:
            raw = run[0][1] if len(run) == 1 else np.concatenate([r for _, r in run])
            rows = sum(ref.shape[0] for ref, _ in run)
            linears.append(GGUFLinear(np.ascontiguousarray(raw), run[0][0].qtype,
                                      (rows, run[0][0].shape[1]), kernels, activations))
        return linears[0] if len(linears) == 1 else ConcatLinear(linears)

    return make


def load_gguf(path: str | Path, dtype: str = "fp32", device: str = "cpu",
              id: str | None = None, kernels: str | None = None,
              weights: str = "auto", activations: str | None = None
              ) -> tuple[Llama, Tokenizer]:
    """(model, tokenizer) from a GGUF file, its layers laid out for the kernel path `kernels`
    ("native", "torch"; None or "auto": the process default), its weights held as `weights`
    says (module docstring); codes multiply fp32 activations, or with `activations` "q8"
    decode rows rounded to int8 per 32 as llama.cpp does (`GGUFLinear`; None: the process
    default, INFERLAB_GGUF_ACTIVATIONS)."""
    g = open_gguf(path)
    hf = hf_config_from_gguf(g)
    config = gguf_config(g, id, hf)
    check_runs(config, str(g.path))
    refs = hf_tensors_from_gguf(g, hf)
    check_weight_shapes(config, {n: r.shape for n, r in refs.items()}, str(g.path))
    tokenizer = tokenizer_from_gguf(g, config.vocab_size)
    held = resolve_weights(weights, config, dtype if isinstance(dtype, str) else "", kernels)
    make = codes_linear(refs, kernels, activations) \
        if held == "codes" and str(device) == "cpu" else None
    model = Llama.from_state_dict(config, refs, dtype, device, origin=str(g.path),
                                  kernels=kernels, make_linear=make)
    return model, tokenizer
