"""The quantization lab's snapshot section (`labs.quant`) and its strict reader.

State: the drawn layer's `LayerAnalysis` and every finished `SchemeRun`, with the model, the
held-out texts they were measured on (name -> tokens) and the perplexity window and stride
as used. `read_quant_section` reads it into a `QuantSnapshot` (ValueError naming the field).
"""

from __future__ import annotations

from inferlab.engines.fields import Setting, or_none, read_fields, read_list, read_map, read_object
from inferlab.engines.labs.quant.records import (
    COUNT,
    TEXT,
    LayerAnalysis,
    QuantSnapshot,
    read_layer_analysis,
    read_scheme_run,
)
from inferlab.engines.labs.quant.settings import check_quant_settings
from inferlab.engines.model.perplexity import CONVENTIONS, SLIDING
from inferlab.engines.trace.snapshot import lab_section, section_field


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
STATE_FIELDS = {
    "model": TEXT, "eval_tokens": COUNT,
    "eval_texts": lambda v, w: read_map(v, COUNT, w, 100, keys=TEXT),
    "ppl_convention": Setting("str", choices=CONVENTIONS),
    "ppl_window_tokens": Setting("int", 2, 1 << 20, none=True),
    "ppl_stride_tokens": Setting("int", 1, 1 << 20, none=True),
    "layer": or_none(read_layer_analysis),
    "runs": lambda v, w: tuple(read_list(v, read_scheme_run, w, 1000))}


def read_quant_section(sec) -> QuantSnapshot:
    """A snapshot's `labs.quant` as a QuantSnapshot; ValueError names a bad field."""
    where = "labs.quant"
    settings = check_quant_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    read_object(section_field(sec, "metrics", where), f"{where}.metrics")  # no view reads it
    if not state:
        return QuantSnapshot(settings)
    f = read_fields(state, STATE_FIELDS, f"{where}.state", STATE_OPTIONAL)
    return QuantSnapshot(settings, **f | {"eval_texts": dict(f["eval_texts"])})
