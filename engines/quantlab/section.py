"""The quantization lab's settings and snapshot section (`labs.quant`).

Settings: the model, the layer drawn (layer index, which linear, a data-free scheme), the
schemes the model tab runs, and whether their decode speed is timed. State: the drawn layer's
`LayerAnalysis` and every finished `SchemeRun`, with the model and the held-out text they were
measured on. `read_quant_section` reads it strictly (ValueError naming the field).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.quant.metrics import TensorError
from inferlab.engines.quantlab.evaluation import SchemeRun, lab_schemes
from inferlab.engines.quantlab.layer import LayerAnalysis
from inferlab.engines.settings import Setting, check_settings
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

def _num(low: float = 0.0, high: float = math.inf, none: bool = False) -> Callable:
    """A reader of a finite number in [low, high] (`Setting`'s check; None allowed if `none`)."""
    setting = Setting("float", low, high)

    def read(v, where):
        return None if v is None and none else float(setting.check(v, where))
    return read


def _int(low: int = 0, high: int = 2**53) -> Callable:
    return Setting("int", low, high).check


def _text(v, where):
    if not isinstance(v, str):
        raise ValueError(f"{where}: expected text, got {type(v).__name__}")
    return v


def _list(item: Callable, max_len: int = 100_000) -> Callable:
    def read(v, where):
        if not isinstance(v, list) or len(v) > max_len:
            raise ValueError(f"{where}: expected a list of at most {max_len:,} items")
        return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(v))
    return read


def _record(d, fields: dict[str, Callable], where: str) -> dict:
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
    return {key: read(section_field(d, key, where), f"{where}.{key}")
            for key, read in fields.items()}


_ANY = _num(-math.inf, math.inf)


def _SQNR(v, where):  # noqa: N802 - a reader like the others
    """dB; JSON has no infinity, so an exact reproduction (x̂ = x, SQNR = +inf) is null."""
    return math.inf if v is None else _num(-1e4, 1e4)(v, where)


_ERROR_FIELDS = {"mse": _num(), "sqnr_db": _SQNR, "max_abs_error": _num()}


def _sqnr_map(v, where):
    if not isinstance(v, dict) or len(v) > 100_000:
        raise ValueError(f"{where}: expected an object of linear name -> dB")
    return {_text(k, where): _SQNR(x, f"{where}[{k[:40]!r}]") for k, x in v.items()}


_scheme_name = Setting("str", choices=lab_schemes).check


RUN_FIELDS = {
    "scheme": _scheme_name, "perplexity": _num(1.0), "weight_bytes": _int(1),
    "kv_bytes_per_token": _int(1), "decode_tokens_per_s": _num(none=True),
    "runs_as": _text, "quantize_seconds": _num(), "eval_seconds": _num(),
    "sample_text": _text, "sample_agree_tokens": _int(), "sqnr_db": _sqnr_map,
}


def read_scheme_run(d, where: str) -> SchemeRun:
    f = _record(d, RUN_FIELDS, where)
    return SchemeRun(f["scheme"], f["perplexity"], f["weight_bytes"], f["kv_bytes_per_token"],
                     f["decode_tokens_per_s"], f["runs_as"], f["quantize_seconds"],
                     f["eval_seconds"], f["sample_text"], f["sample_agree_tokens"], f["sqnr_db"])


def _clip(v, where):
    if v is None:
        return None
    pair = _list(_ANY, 2)(v, where)
    if len(pair) != 2:
        raise ValueError(f"{where}: expected [low, high]")
    return pair


LAYER_FIELDS = {
    "scheme": _text, "linear": _text, "shape": _list(_int(1), 2),
    "hist_edges": _list(_ANY, 10_000), "hist_counts": _list(_int(), 10_000),
    "levels": _list(_ANY, 70_000), "unit": _text, "clip_range": _clip,
    "error_edges": _list(_ANY, 10_000), "error_counts": _list(_int(), 10_000),
    "scales": _list(_list(_ANY, 10_000), 10_000), "scale_rows": _list(_int(), 10_000),
    "scale_label": _text, "error": lambda v, w: _record(v, _ERROR_FIELDS, w),
    "nbytes": _int(1), "source_bytes": _int(1),
}


def read_layer_analysis(d, where: str) -> LayerAnalysis:
    f = _record(d, LAYER_FIELDS, where)
    if len(f["shape"]) != 2:
        raise ValueError(f"{where}.shape: expected [out, in]")
    for edges, counts in (("hist_edges", "hist_counts"), ("error_edges", "error_counts")):
        if len(f[edges]) != len(f[counts]) + 1:
            raise ValueError(f"{where}.{edges}: expected one more edge than {counts}")
    scales = f["scales"]
    if scales and any(len(row) != len(scales[0]) for row in scales):
        raise ValueError(f"{where}.scales: expected rows of one length (a strip of scales)")
    e = f["error"]
    return LayerAnalysis(
        f["scheme"], f["linear"], tuple(f["shape"]), f["hist_edges"], f["hist_counts"],
        f["levels"], f["unit"], f["clip_range"], f["error_edges"], f["error_counts"],
        f["scales"], f["scale_rows"], f["scale_label"],
        TensorError(e["mse"], e["sqnr_db"], e["max_abs_error"]), f["nbytes"],
        f["source_bytes"])


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
    state = section_field(sec, "state", where)
    if not isinstance(state, dict):
        raise ValueError(f"{where}.state: expected an object")
    if not isinstance(section_field(sec, "metrics", where), dict):
        raise ValueError(f"{where}.metrics: expected an object")
    if not state:
        return settings, None, 0, None, []
    w = f"{where}.state"
    model = _text(section_field(state, "model", w), f"{w}.model")
    eval_tokens = _int()(section_field(state, "eval_tokens", w), f"{w}.eval_tokens")
    raw_layer = section_field(state, "layer", w)
    layer = None if raw_layer is None else read_layer_analysis(raw_layer, f"{w}.layer")
    raw_runs = section_field(state, "runs", w)
    if not isinstance(raw_runs, list) or len(raw_runs) > 1000:
        raise ValueError(f"{w}.runs: expected a list of scheme runs")
    runs = [read_scheme_run(r, f"{w}.runs[{i}]") for i, r in enumerate(raw_runs)]
    return settings, model, eval_tokens, layer, runs
