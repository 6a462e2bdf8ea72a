"""The quantization lab's settings and snapshot section (`labs.quant`).

Settings: the model, the layer drawn (layer index, which linear, a data-free scheme), the
schemes the model tab runs, whether their decode speed is timed, and how perplexity is
computed (`ppl_convention` "sliding" or "llama.cpp", `ppl_window_tokens` — null: the model's
whole context — and `ppl_stride_tokens` — null: window - 1). State: the drawn layer's
`LayerAnalysis` and every finished `SchemeRun`, with the model, the held-out texts they were
measured on (name -> tokens) and the window and stride as used. `read_quant_section` reads it
strictly (ValueError naming the field).
"""

from __future__ import annotations

import math
from functools import partial

from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.labs.quant.evaluation import SchemeRun, lab_schemes
from inferlab.engines.labs.quant.layer import LayerAnalysis
from inferlab.engines.model.perplexity import CONVENTIONS, SLIDING, WINDOW
from inferlab.engines.quant.metrics import TensorError
from inferlab.engines.quant.schemes import SCHEMES
from inferlab.engines.fields import (
    Setting,
    as_tuple,
    check_settings,
    or_none,
    read_fields,
    read_floats,
    read_list,
    read_map,
    read_object,
    read_tuple,
)
from inferlab.engines.trace.snapshot import lab_section, section_field

LINEAR_CHOICES = ("qkv", "o", "gate_up", "down")


def layer_schemes() -> tuple[str, ...]:
    return tuple(SCHEMES)


QUANT_DEFAULTS = {
    "model": "auto",  # engines.model.cache names: tiny, smollm2-135m, auto, or a path
    "layer": 0,
    "linear": "gate_up",
    "layer_scheme": "int4-g128",
    # Data-free schemes that finish in seconds; GPTQ and AWQ calibrate for minutes on a CPU.
    "schemes": ["fp32", "int8", "fp8-e4m3", "q4_1", "int4-g128", "sparse-2:4", "kv-int8"],
    "measure_speed": True,
    "decode_tokens": 32,
    "kernels": "auto",  # the fp32 model's kernel path (engines.kernels)
    "ppl_convention": SLIDING,
    "ppl_window_tokens": WINDOW,  # None: the model's whole context
    "ppl_stride_tokens": None,  # None: window - 1 (llama.cpp: the window)
}
PPL_KEYS = ("ppl_convention", "ppl_window_tokens", "ppl_stride_tokens")

QUANT_SETTINGS = {
    "model": Setting("str"),
    "layer": Setting("int", 0, 10_000),
    "linear": Setting("str", choices=LINEAR_CHOICES),
    "layer_scheme": Setting("str", choices=layer_schemes),
    "schemes": Setting("str-list", choices=lab_schemes),
    "measure_speed": Setting("bool"),
    "decode_tokens": Setting("int", 2, 512),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "ppl_convention": Setting("str", choices=CONVENTIONS),
    "ppl_window_tokens": Setting("int", 4, 1 << 20, none=True),
    "ppl_stride_tokens": Setting("int", 1, 1 << 20, none=True),
}


def check_quant_settings(settings, where: str = "settings") -> dict:
    s = check_settings(settings, QUANT_SETTINGS, QUANT_DEFAULTS, where)
    if not s["model"].strip():
        raise ValueError(f"{where}.model: expected a model name or path, got {s['model']!r}")
    return s


# ---- strict field readers ---------------------------------------------------------------------

TEXT = Setting("str")
COUNT = Setting("int", 0)
POSITIVE = Setting("int", 1)
SECONDS = Setting("float", 0)
NUMBER = Setting("float")  # any finite number
FLOATS = partial(read_floats, max_len=10_000)  # a histogram's edges, a row of scales
COUNTS = as_tuple(Setting("int-list", 0, max_len=10_000))  # a histogram's counts


_DB = Setting("float", -1e4, 1e4)


def _sqnr(v, where):
    """dB; JSON has no infinity, so an exact reproduction (x̂ = x, SQNR = +inf) is null."""
    return math.inf if v is None else _DB(v, where)


_ERROR_FIELDS = {"mse": SECONDS, "sqnr_db": _sqnr, "max_abs_error": SECONDS}

RUN_FIELDS = {
    "scheme": Setting("str", choices=lab_schemes), "perplexity": Setting("float", 1.0),
    "weight_bytes": POSITIVE, "kv_bytes_per_token": POSITIVE,
    "decode_tokens_per_s": Setting("float", 0, none=True), "runs_as": TEXT,
    "quantize_seconds": SECONDS, "eval_seconds": SECONDS, "sample_text": TEXT,
    "sample_agree_tokens": COUNT,
    "sqnr_db": lambda v, w: read_map(v, _sqnr, w, keys=TEXT),  # linear name -> dB
}


RUN_FIELDS |= {
    "perplexity_by_text": lambda v, w: read_map(v, Setting("float", 1.0), w, 100, keys=TEXT),
    "calibration_tokens": COUNT,
}
RUN_OPTIONAL = {"perplexity_by_text": {}, "calibration_tokens": 0}  # older snapshots


def read_scheme_run(d, where: str) -> SchemeRun:
    f = read_fields(d, RUN_FIELDS, where, RUN_OPTIONAL)
    return SchemeRun(f["scheme"], f["perplexity"], f["weight_bytes"], f["kv_bytes_per_token"],
                     f["decode_tokens_per_s"], f["runs_as"], f["quantize_seconds"],
                     f["eval_seconds"], f["sample_text"], f["sample_agree_tokens"], f["sqnr_db"],
                     f["perplexity_by_text"], f["calibration_tokens"])


LAYER_FIELDS = {
    "scheme": TEXT, "linear": TEXT,
    "shape": lambda v, w: read_tuple(v, (POSITIVE, POSITIVE), w, "[out, in]"),
    "hist_edges": FLOATS, "hist_counts": COUNTS,
    "levels": partial(read_floats, max_len=70_000), "unit": TEXT,
    "clip_range": or_none(lambda v, w: read_tuple(v, (NUMBER, NUMBER), w, "[low, high]")),
    "error_edges": FLOATS, "error_counts": COUNTS,
    "scales": as_tuple(lambda v, w: read_list(v, FLOATS, w, 10_000)),
    "scale_rows": COUNTS, "scale_label": TEXT,
    "error": lambda v, w: TensorError(**read_fields(v, _ERROR_FIELDS, w)),
    "nbytes": POSITIVE, "source_bytes": POSITIVE,
}


def read_layer_analysis(d, where: str) -> LayerAnalysis:
    f = read_fields(d, LAYER_FIELDS, where)
    for edges, counts in (("hist_edges", "hist_counts"), ("error_edges", "error_counts")):
        if len(f[edges]) != len(f[counts]) + 1:
            raise ValueError(f"{where}.{edges}: expected one more edge than {counts}")
    scales = f["scales"]
    if scales and any(len(row) != len(scales[0]) for row in scales):
        raise ValueError(f"{where}.scales: expected rows of one length (a strip of scales)")
    return LayerAnalysis(**f)


# ---- the section --------------------------------------------------------------------------

def quant_metrics(runs) -> dict:
    by_name = {r.scheme: r for r in runs}
    out: dict = {"schemes_run": len(runs)}
    if "fp32" in by_name:
        out["fp32_perplexity"] = by_name["fp32"].perplexity
        out["fp32_decode_tokens_per_s"] = by_name["fp32"].decode_tokens_per_s
    out["perplexity"] = {r.scheme: r.perplexity for r in runs}
    out["weight_bytes"] = {r.scheme: r.weight_bytes for r in runs}
    return out


def quant_section(settings: dict, model: str | None, eval_texts: dict[str, int] | int,
                  layer: LayerAnalysis | None, runs, ppl: dict | None = None) -> dict:
    """The snapshot's `labs.quant` (model None: the lab had not loaded a model);
    `eval_texts`: held-out text name -> tokens (an int: one text, "eval"); `ppl`: the
    session's `ppl_method()` (ppl_convention, ppl_window_tokens, ppl_stride_tokens)."""
    if model is None:
        return lab_section(settings, {}, {"schemes_run": 0})
    if isinstance(eval_texts, int):
        eval_texts = {"eval": eval_texts}
    state = {"model": model, "eval_tokens": sum(eval_texts.values()),
             "eval_texts": dict(eval_texts),
             "layer": None if layer is None else layer.to_dict(),
             "runs": [r.to_dict() for r in runs], **(ppl or {})}
    return lab_section(settings, state, quant_metrics(runs) | (ppl or {}))


STATE_OPTIONAL = {"eval_texts": {}, "ppl_convention": SLIDING, "ppl_window_tokens": None,
                  "ppl_stride_tokens": None}  # older snapshots


def read_quant_section(sec):
    """(settings, model name or None, eval tokens, LayerAnalysis or None, [SchemeRun],
    {eval_texts, ppl_convention, ppl_window_tokens, ppl_stride_tokens}); ValueError names a
    bad field."""
    where = "labs.quant"
    settings = check_quant_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    read_object(section_field(sec, "metrics", where), f"{where}.metrics")  # no view reads it
    if not state:
        return settings, None, 0, None, [], dict(STATE_OPTIONAL)
    f = read_fields(state, {
        "model": TEXT, "eval_tokens": COUNT,
        "eval_texts": lambda v, w: read_map(v, COUNT, w, 100, keys=TEXT),
        "ppl_convention": Setting("str", choices=CONVENTIONS),
        "ppl_window_tokens": Setting("int", 2, 1 << 20, none=True),
        "ppl_stride_tokens": Setting("int", 1, 1 << 20, none=True),
        "layer": or_none(read_layer_analysis),
        "runs": lambda v, w: read_list(v, read_scheme_run, w, 1000)}, f"{where}.state",
        STATE_OPTIONAL)
    return (settings, f["model"], f["eval_tokens"], f["layer"], f["runs"],
            {k: f[k] for k in STATE_OPTIONAL})
