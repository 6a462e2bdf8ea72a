"""The quantization lab's settings and snapshot section (`labs.quant`).

Settings: the model, the layer drawn (layer index, which linear, a data-free scheme), the
schemes the model tab runs, and whether their decode speed is timed. State: the drawn layer's
`LayerAnalysis` and every finished `SchemeRun`, with the model and the held-out text they were
measured on. `read_quant_section` reads it strictly (ValueError naming the field).
"""

from __future__ import annotations

import math

from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.quant.metrics import TensorError
from inferlab.engines.quantlab.evaluation import SchemeRun, lab_schemes
from inferlab.engines.quantlab.layer import LayerAnalysis
from inferlab.engines.settings import (
    Setting,
    check_settings,
    read_fields,
    read_list,
    read_map,
    read_object,
    read_tuple,
)
from inferlab.engines.trace.snapshot import lab_section, section_field

LINEAR_CHOICES = ("qkv", "o", "gate_up", "down")


def layer_schemes() -> tuple[str, ...]:
    from inferlab.engines.quant.schemes import SCHEMES

    return tuple(SCHEMES)


QUANT_DEFAULTS = {
    "model": "auto",  # engines.kvlab.models names: tiny, smollm2-135m, auto, or a path
    "layer": 0,
    "linear": "gate_up",
    "layer_scheme": "int4-g128",
    # Data-free schemes that finish in seconds; GPTQ and AWQ calibrate for minutes on a CPU.
    "schemes": ["fp32", "int8", "fp8-e4m3", "q4_1", "int4-g128", "sparse-2:4", "kv-int8"],
    "measure_speed": True,
    "decode_tokens": 32,
    "kernels": "auto",  # the fp32 model's kernel path (engines.kernels)
}

QUANT_SETTINGS = {
    "model": Setting("str"),
    "layer": Setting("int", 0, 10_000),
    "linear": Setting("str", choices=LINEAR_CHOICES),
    "layer_scheme": Setting("str", choices=layer_schemes),
    "schemes": Setting("str-list", choices=lab_schemes),
    "measure_speed": Setting("bool"),
    "decode_tokens": Setting("int", 2, 512),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
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


def _numbers(kind: str, max_len: int, low: float | None = None):
    """A reader of a list of numbers ("float" or "int", at least `low`) as a tuple."""
    setting = Setting(f"{kind}-list", low, max_len=max_len)
    return lambda v, where: tuple(setting(v, where))


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


def read_scheme_run(d, where: str) -> SchemeRun:
    f = read_fields(d, RUN_FIELDS, where)
    return SchemeRun(f["scheme"], f["perplexity"], f["weight_bytes"], f["kv_bytes_per_token"],
                     f["decode_tokens_per_s"], f["runs_as"], f["quantize_seconds"],
                     f["eval_seconds"], f["sample_text"], f["sample_agree_tokens"], f["sqnr_db"])


LAYER_FIELDS = {
    "scheme": TEXT, "linear": TEXT,
    "shape": lambda v, w: read_tuple(v, (POSITIVE, POSITIVE), w, "[out, in]"),
    "hist_edges": _numbers("float", 10_000), "hist_counts": _numbers("int", 10_000, 0),
    "levels": _numbers("float", 70_000), "unit": TEXT,
    "clip_range": lambda v, w: None if v is None else read_tuple(v, (NUMBER, NUMBER), w,
                                                                 "[low, high]"),
    "error_edges": _numbers("float", 10_000), "error_counts": _numbers("int", 10_000, 0),
    "scales": lambda v, w: tuple(read_list(v, _numbers("float", 10_000), w, 10_000)),
    "scale_rows": _numbers("int", 10_000, 0), "scale_label": TEXT,
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


def quant_section(settings: dict, model: str | None, eval_tokens: int,
                  layer: LayerAnalysis | None, runs) -> dict:
    """The snapshot's `labs.quant` (model None: the lab had not loaded a model)."""
    if model is None:
        return lab_section(settings, {}, {"schemes_run": 0})
    state = {"model": model, "eval_tokens": eval_tokens,
             "layer": None if layer is None else layer.to_dict(),
             "runs": [r.to_dict() for r in runs]}
    return lab_section(settings, state, quant_metrics(runs))


def read_quant_section(sec):
    """(settings, model name or None, eval tokens, LayerAnalysis or None, [SchemeRun]);
    ValueError names a bad field."""
    where = "labs.quant"
    settings = check_quant_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    read_object(section_field(sec, "metrics", where), f"{where}.metrics")  # no view reads it
    if not state:
        return settings, None, 0, None, []
    f = read_fields(state, {
        "model": TEXT, "eval_tokens": COUNT,
        "layer": lambda v, w: None if v is None else read_layer_analysis(v, w),
        "runs": lambda v, w: read_list(v, read_scheme_run, w, 1000)}, f"{where}.state")
    return settings, f["model"], f["eval_tokens"], f["layer"], f["runs"]
