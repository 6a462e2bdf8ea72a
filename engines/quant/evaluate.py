"""A scheme by name on a whole model, and the quantized model's perplexity on held-out text.

    quantize_by_name(model, "int8" | ... | "gptq-int4-g128" | "awq-int4-g128" | "wanda-2:4",
                     tokenizer)
    evaluate_scheme(model, tokenizer, name) -> SchemeResult (perplexity, bytes, SQNR per layer)
    score_held_out(model, {"prose": ids, ...}) -> HeldOutScore (perplexity per text, mean, seconds)
    linear_sqnr_db(qm) -> {"layers.0.qkv": dB, ...}

`evaluate_scheme` is those steps on one text; the quant lab (`engines.labs.quant.evaluation`)
runs the same steps on its texts and adds the runtime model's speed and a sample.

The data-free names are `schemes.SCHEMES` (with the pruning schemes "sparse-2:4" and
"unstructured-50%"); GPTQ, AWQ and Wanda calibrate on `calibration.py`'s text and are
scored, like every scheme, on OTHER texts (the held-out ones).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferlab.engines.model.perplexity import PerplexityResult, perplexity
from inferlab.engines.quant.awq import awq_model
from inferlab.engines.quant.calibration import calibration_chunks, eval_text
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.gptq import ACT_ORDER, gptq_model
from inferlab.engines.quant.layerwise import LinearInputs, quantize_layerwise
from inferlab.engines.quant.model_quant import QuantizedModel, quantize_model
from inferlab.engines.quant.pruning import Sparse24, input_feature_norms, wanda_2_4
from inferlab.engines.quant.schemes import SCHEMES

CALIBRATED = ("gptq-int4-g128", "gptq-int4-g128-act", "gptq-int4-g128-noact", "awq-int4-g128",
              "wanda-2:4")
"""Scheme names that need calibration text."""
NAMES = (*SCHEMES, *CALIBRATED)


def wanda_model(model, chunks, sequential: bool = True, progress=None) -> QuantizedModel:
    """Every decoder linear of `model` 2:4-pruned by Wanda (`pruning.wanda_2_4`) on the
    calibration token sequences `chunks`, layer by layer (`layerwise.py`).

    `sequential` (the default) is the paper's schedule: each layer's ‖X_j‖ come from the
    hidden states that leave the already-pruned layers before it; within a layer all four
    linears are scored on that layer's dense inputs, as the paper's forward hooks record
    them. (Here and not in pruning.py: `schemes.py` imports pruning.py, and the layerwise
    pass imports `schemes.py`.)"""

    def one(name: str, weight, inputs: LinearInputs) -> Sparse24:
        return wanda_2_4(weight, input_feature_norms(inputs))

    return quantize_layerwise(model, chunks, one, "wanda-2:4", sequential=sequential,
                              progress=progress)


def quantize_by_name(model, name: str, tokenizer=None,
                     calibration_text: str | Sequence[str] | None = None,
                     progress=None) -> QuantizedModel:
    """`model` quantized with the scheme `name` (one of NAMES); the calibrated ones tokenize
    `calibration_text` (one text, or several; default the shipped set) with `tokenizer`.
    "gptq-int4-g128" is GPTQ as measured best (`gptq.ACT_ORDER`, `gptq.DAMP`);
    "gptq-int4-g128-act" is act-order, "gptq-int4-g128-noact" natural column order."""
    if name in SCHEMES:
        return quantize_model(model, name)
    if name not in CALIBRATED:
        raise QuantError(f"scheme must be one of {', '.join(NAMES)}, got {name!r}")
    if tokenizer is None:
        raise QuantError(f"tokenizer is needed to calibrate {name}")
    chunks = calibration_chunks(tokenizer, calibration_text)
    if name == "wanda-2:4":
        return wanda_model(model, chunks, progress=progress)
    if name.startswith("gptq"):
        act = {"gptq-int4-g128": ACT_ORDER, "gptq-int4-g128-act": True}.get(name, False)
        return gptq_model(model, chunks, bits=4, group_size=128, act_order=act,
                          progress=progress)
    return awq_model(model, chunks, bits=4, group_size=128, progress=progress)


def held_out_perplexity(model, tokenizer, text: str | None = None, **method) -> PerplexityResult:
    """Perplexity on `text` (default the shipped held-out prose passage, never calibration
    text); `method`: `perplexity`'s window, stride, convention."""
    return perplexity(model, held_out_ids(tokenizer, text), **method)


def held_out_ids(tokenizer, text: str | None = None) -> list[int]:
    """`text` (default the shipped held-out prose passage) as token ids; QuantError if it is
    empty."""
    text = eval_text() if text is None else text
    if not text.strip():
        raise QuantError("eval text is empty")
    return tokenizer.encode(text)


def linear_sqnr_db(qm: QuantizedModel) -> dict[str, float]:
    """SQNR in dB of each quantized linear of `qm`, by its name ("layers.0.qkv", ...)."""
    return {r.name: r.error.sqnr_db for r in qm.linears}


@dataclass(frozen=True)
class HeldOutScore:
    """A model's perplexity on each held-out text, their mean, and how long scoring took."""

    by_text: dict[str, float]
    """Text name -> perplexity on it."""
    mean: float
    """The mean of `by_text`."""
    eval_s: float


def score_held_out(model, eval_sets: Mapping[str, Sequence[int]], paged: bool = False,
                   **method) -> HeldOutScore:
    """Perplexity of `model` on each held-out text of `eval_sets` (name -> token ids, never
    calibration text), timed; `paged` and `method` (window, stride, convention, bos_id) as
    `perplexity` takes them (`paged`: through the model's own KV cache, for a quantized one)."""
    t0 = time.perf_counter()
    by_text = {k: perplexity(model, ids, paged=paged, **method).perplexity
               for k, ids in eval_sets.items()}
    mean = sum(by_text.values()) / len(by_text)
    return HeldOutScore(by_text, mean, time.perf_counter() - t0)


@dataclass(frozen=True)
class SchemeResult:
    """One scheme on one model: quality, size and cost."""

    name: str
    perplexity: float
    weight_bytes: int
    quantize_s: float
    eval_s: float
    sqnr_db: dict[str, float]
    """Per quantized linear."""

    def to_dict(self) -> dict:
        return {"name": self.name, "perplexity": self.perplexity,
                "weight_bytes": self.weight_bytes, "quantize_seconds": self.quantize_s,
                "eval_seconds": self.eval_s, "sqnr_db": self.sqnr_db}


def evaluate_scheme(model, tokenizer, name: str, eval_text_: str | None = None,
                    calibration_text: str | None = None, progress=None) -> SchemeResult:
    """Quantize `model` with `name` and score it on the held-out text (default the shipped
    prose passage)."""
    qm = quantize_by_name(model, name, tokenizer, calibration_text, progress)
    held = score_held_out(qm.model, {"held-out": held_out_ids(tokenizer, eval_text_)})
    return SchemeResult(name, held.mean, qm.weight_bytes, qm.quantize_s, held.eval_s,
                        linear_sqnr_db(qm))
