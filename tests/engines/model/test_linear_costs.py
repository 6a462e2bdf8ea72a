"""Which kernels a model's linears run on (`linear_costs`), and the model cache's names and
descriptions that the labs offer."""

from __future__ import annotations

import copy
from dataclasses import replace

import gguf
import numpy as np

from inferlab.engines.model import cache
from inferlab.engines.model.gguf_linear import NATIVE_ROWS, GGUFLinear
from inferlab.engines.model.linear_costs import linear_paths
from inferlab.engines.model.tiny import tiny_model, tiny_moe_model


def q8_0(linear) -> GGUFLinear:
    """`linear`'s weight as Q8_0 codes (what a GGUF file would hold), on the native path."""
    w = linear.weight.float().numpy()
    raw = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    return GGUFLinear(np.ascontiguousarray(raw), gguf.GGMLQuantizationType.Q8_0, w.shape,
                      kernels="native")


def test_float_models_hold_no_codes_and_moe_experts_are_counted():
    model, _ = tiny_moe_model()
    paths = linear_paths(model)
    # 2 layers: qkv and o each; router + 16 experts × (gate_up, down) each
    assert paths.kinds == {"float32 Linear": 4, "MoE: float32 Linear": 34,
                           "lm_head: float32 Linear": 1}
    assert not paths.holds_codes and paths.fallback_note == ""
    assert paths.code_linears == 0 and paths.fallback_fp32_bytes == 0
    assert not cache.holds_codes(model)


def test_code_linears_say_where_they_dequantize_and_what_it_costs():
    model, _ = tiny_model()
    coded = copy.copy(model)
    coded.layers = [replace(lw, qkv=q8_0(lw.qkv)) for lw in model.layers]
    paths = linear_paths(coded)
    assert paths.kinds["Q8_0 codes"] == 2 and paths.code_linears == 2
    qkv = model.layers[0].qkv
    assert paths.fallback_fp32_bytes == 2 * qkv.out_features * qkv.in_features * 4
    assert paths.codes_bytes == sum(lw.qkv.nbytes for lw in coded.layers)
    assert paths.holds_codes and paths.fallback_note == paths.note
    assert "Q8_0 codes 2" in paths.note and "dequantize" in paths.note
    if paths.native_rows:  # the block kernels built here
        assert paths.native_rows == NATIVE_ROWS and f"up to {NATIVE_ROWS} rows" in paths.note


def test_every_registry_model_is_offered_and_described_by_name():
    names = dict(cache.model_choices())
    assert {"smollm2-135m", "gemma3-270m", "tiny", "tiny-moe"} <= set(names)
    assert names["gemma3-270m"].startswith("Gemma 3 270M")
    choices = dict(cache.description_choices())
    assert "llama-3-8b" in choices and "tiny-moe" in choices and "gemma3-270m" in choices
    assert cache.described("llama-3-8b").id == "llama-3-8b"  # a preset
    assert cache.described("nope") is None
    cfg = cache.described("tiny-moe")  # the loaded model's own description
    assert cfg == cache.load_lab_model("tiny-moe")[0].config and cfg.n_experts == 8
    assert cache.described("tiny-moe", load=False) == cfg
