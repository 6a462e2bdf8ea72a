"""The quantization lab's records: what one scheme run on the whole model measured
(`SchemeRun`), one linear under one scheme as the layer tab draws it (`LayerAnalysis`),
their strict readers, and `QuantSnapshot`, a snapshot's `labs.quant` read once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

from inferlab.engines.fields import (
    Setting,
    as_tuple,
    or_none,
    read_fields,
    read_floats,
    read_list,
    read_map,
    read_tuple,
)
from inferlab.engines.labs.quant.settings import lab_schemes
from inferlab.engines.model.perplexity import SLIDING
from inferlab.engines.quant.metrics import TensorError


@dataclass(frozen=True)
class SchemeRun:
    """What one scheme costs and keeps, measured in one run."""

    scheme: str
    perplexity: float
    """The mean of `perplexity_by_text`."""
    weight_bytes: int
    kv_bytes_per_token: int
    decode_tokens_per_s: float | None
    """None when the run skipped the speed measurement."""
    runs_as: str
    """What the decode ran on ("120 on int4 kernel", "fp32 (dequantized)", ...)."""
    quantize_s: float
    eval_s: float
    sample_text: str
    sample_agree_tokens: int
    """Leading greedy tokens equal to the fp32 model's sample (all of them for fp32)."""
    sqnr_db: dict[str, float] = field(default_factory=dict)
    """Per quantized linear (empty for fp32 and the KV schemes)."""
    perplexity_by_text: dict[str, float] = field(default_factory=dict)
    """Held-out text name -> perplexity on it."""
    calibration_tokens: int = 0
    """Calibration tokens the scheme saw (0: data-free)."""

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "perplexity": self.perplexity,
                "perplexity_by_text": dict(self.perplexity_by_text),
                "calibration_tokens": self.calibration_tokens,
                "weight_bytes": self.weight_bytes,
                "kv_bytes_per_token": self.kv_bytes_per_token,
                "decode_tokens_per_s": self.decode_tokens_per_s, "runs_as": self.runs_as,
                "quantize_seconds": self.quantize_s, "eval_seconds": self.eval_s,
                "sample_text": self.sample_text,
                "sample_agree_tokens": self.sample_agree_tokens, "sqnr_db": dict(self.sqnr_db)}


@dataclass(frozen=True)
class LayerAnalysis:
    scheme: str
    linear: str
    shape: tuple[int, int]
    hist_edges: tuple[float, ...]
    hist_counts: tuple[int, ...]
    levels: tuple[float, ...]
    """The drawn unit's representable values (empty: no grid)."""
    unit: str
    """Which scale unit the grid belongs to ("row 17, group 2 (columns 256-383)")."""
    clip_range: tuple[float, float] | None
    """The unit's smallest and largest representable value."""
    error_edges: tuple[float, ...]
    error_counts: tuple[int, ...]
    """Histogram of x̂ - x over the whole weight."""
    scales: tuple[tuple[float, ...], ...]
    """[rows shown][units per row]: each unit's step (per channel: one column)."""
    scale_rows: tuple[int, ...]
    """Which weight rows the strip's rows are."""
    scale_label: str
    error: TensorError
    nbytes: int
    source_bytes: int

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "linear": self.linear, "shape": list(self.shape),
                "hist_edges": list(self.hist_edges), "hist_counts": list(self.hist_counts),
                "levels": list(self.levels), "unit": self.unit,
                "clip_range": None if self.clip_range is None else list(self.clip_range),
                "error_edges": list(self.error_edges), "error_counts": list(self.error_counts),
                "scales": [list(r) for r in self.scales], "scale_rows": list(self.scale_rows),
                "scale_label": self.scale_label, "error": self.error.to_dict(),
                "nbytes": self.nbytes, "source_bytes": self.source_bytes}


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


@dataclass(frozen=True)
class QuantSnapshot:
    """A snapshot's `labs.quant`, read: the settings as checked, and what the lab had
    measured (model None: it had loaded no model, and nothing else is set)."""

    settings: dict
    model: str | None = None
    eval_tokens: int = 0
    """Held-out tokens over every text."""
    eval_texts: dict[str, int] = field(default_factory=dict)
    """Held-out text name -> tokens (empty in older snapshots)."""
    layer: LayerAnalysis | None = None
    runs: tuple[SchemeRun, ...] = ()
    ppl_convention: str = SLIDING
    ppl_window_tokens: int | None = None
    """None: an older snapshot that did not say."""
    ppl_stride_tokens: int | None = None

    def ppl_method(self) -> dict:
        """How perplexity was computed, as `QuantSession.ppl_method` says it."""
        return {"ppl_convention": self.ppl_convention,
                "ppl_window_tokens": self.ppl_window_tokens,
                "ppl_stride_tokens": self.ppl_stride_tokens}
