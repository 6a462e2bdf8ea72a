"""Whole-model weight quantization: every linear layer of a `Llama`, as one new model.

The four linears of each decoder layer (qkv, o, gate_up, down) are quantized with one
scheme; the result is a NEW `Llama` whose linears hold the dequantized weights x̂ (the
"fake-quantized" model: the same matmuls, the quantizer's error in the weights), for
perplexity and generation, plus each linear's error against the original weight
(MSE, SQNR dB, max |x - x̂|; `metrics.py`) and the real packed size of its codes.

What is quantized, and what is not:
- The fused matrices are quantized as the model holds them: qkv is Q, K and V stacked, gate_up
  gate and up. Row-wise and group-wise schemes give the same codes as quantizing the
  projections one by one; a per-tensor scheme (FP8) shares one scale across the fused parts.
- The embedding, the norms and (by default) the lm_head stay as they are: GPTQ and AWQ leave
  them unquantized too. `include_lm_head=True` quantizes the lm_head; in a tied model
  (SmolLM2) it IS the embedding, so the embedding is then read from the same codes.
- A Mixture-of-Experts layer (its MLP a router and experts, `lw.moe`) is refused by name
  (`check_dense`): the schemes, their reports and the calibrated passes (GPTQ, AWQ, Wanda:
  one linear's inputs per layer) are written for the four linears of a dense layer; an
  expert sees only the tokens routed to it. (The low-bit self-draft, `lowbit_model`, does
  quantize each expert: it needs no per-linear inputs.)
- `weight_bytes` is the whole model as stored: the linears' packed bytes plus everything left
  unquantized at its own dtype (the tied embedding counted once).

The source model is never changed: the new one shares its embedding, norms and RoPE tables.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import torch

from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import Llama, held_bytes
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.metrics import TensorError, tensor_error
from inferlab.engines.quant.schemes import Quantized, Scheme, scheme

LINEARS = ("qkv", "o", "gate_up", "down")
"""The linear layers of a decoder layer (`LayerWeights` fields), in the order they run."""
LM_HEAD = "lm_head"


def linear_name(layer: int, which: str) -> str:
    """"layers.3.gate_up": a linear's name in reports."""
    return f"layers.{layer}.{which}"


def check_dense(model: Llama, what: str = "whole-model quantization") -> None:
    """QuantError naming the Mixture-of-Experts layers of `model`, if it has any (module
    docstring)."""
    moe = [i for i, lw in enumerate(model.layers) if lw.moe is not None]
    if moe:
        c = model.config
        layers = f"layers {moe[0]}-{moe[-1]}" if moe == list(range(moe[0], moe[-1] + 1)) \
            else "layers " + ", ".join(map(str, moe))
        raise QuantError(f"{what}: {c.id}'s {layers} are Mixture-of-Experts blocks "
                         f"({c.n_experts} experts, top-{c.n_experts_active}); the schemes "
                         f"here quantize the {', '.join(LINEARS)} linears of dense layers "
                         "only (an expert sees only the tokens routed to it)")


def model_linears(model: Llama, include_lm_head: bool = False) -> Iterator[tuple[str, Linear]]:
    """(name, Linear) of every linear to quantize, in the order the model runs them;
    QuantError for a Mixture-of-Experts model (`check_dense`)."""
    check_dense(model)
    for i, lw in enumerate(model.layers):
        for which in LINEARS:
            yield linear_name(i, which), getattr(lw, which)
    if include_lm_head:
        yield LM_HEAD, model.lm_head


@dataclass(frozen=True)
class LinearReport:
    """One quantized linear: its error against the original weight and its storage."""

    name: str
    shape: tuple[int, int]
    """[out, in]."""
    error: TensorError
    nbytes: int
    """The quantized record's bytes (codes packed, plus scales and minima)."""
    source_bytes: int
    """The original weight's bytes at the model's dtype."""

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), **self.error.to_dict(),
                "nbytes": self.nbytes, "source_bytes": self.source_bytes}


@dataclass(frozen=True)
class QuantizedModel:
    """A fake-quantized model and what its quantization cost."""

    scheme: str
    model: Llama
    """The new model: dequantized weights in the source model's dtype."""
    linears: tuple[LinearReport, ...]
    weight_bytes: int
    """The whole model as stored: quantized linears packed, the rest at its own dtype."""
    quantize_s: float
    """Wall time of quantizing (and, for GPTQ/AWQ, of capturing calibration activations)."""
    records: Mapping[str, Quantized] = field(default_factory=dict, repr=False, compare=False)
    """Linear name -> its quantized record (the codes `runtime.runtime_model` runs)."""
    calibration_tokens: int = 0
    """Tokens of calibration text the scheme saw (0: data-free)."""

    @property
    def quantized_bytes(self) -> int:
        """The quantized linears' bytes alone."""
        return sum(r.nbytes for r in self.linears)

    def report(self, name: str) -> LinearReport:
        for r in self.linears:
            if r.name == name:
                return r
        raise QuantError(f"name must be a quantized linear, got {name!r}")

    def to_dict(self) -> dict:
        return {"scheme": self.scheme, "weight_bytes": self.weight_bytes,
                "quantized_bytes": self.quantized_bytes, "quantize_s": self.quantize_s,
                "calibration_tokens": self.calibration_tokens,
                "linears": [r.to_dict() for r in self.linears]}


def assemble(model: Llama, records: Mapping[str, Quantized], scheme_name: str,
             quantize_s: float) -> QuantizedModel:
    """The new model from `records` (linear name -> quantized record of its weight) and the
    reports; linears without a record keep their weight. The weights are compared in fp32."""
    known = dict(model_linears(model, include_lm_head=True))
    unknown = set(records) - set(known)
    if unknown:
        raise QuantError(f"records names linears the model does not have: {sorted(unknown)}")
    reports, dequantized = [], {}
    for name, rec in records.items():
        w = known[name].weight.float()
        w_hat = rec.dequantize()
        if tuple(w_hat.shape) != tuple(w.shape):
            raise QuantError(f"records[{name!r}] dequantizes to shape {tuple(w_hat.shape)}, "
                             f"the weight's is {tuple(w.shape)}")
        dequantized[name] = Linear(w_hat.to(model.dtype), kernels=model.kernel_path)
        reports.append(LinearReport(name, tuple(w.shape), tensor_error(w, w_hat), rec.nbytes,
                                    held_bytes(known[name])))

    out = copy.copy(model)  # shares embedding, norms, RoPE tables; the lists below are new
    out.layers = [replace(lw, **{which: dequantized.get(linear_name(i, which), getattr(lw, which))
                                 for which in LINEARS})
                  for i, lw in enumerate(model.layers)]
    if LM_HEAD in dequantized:
        out.lm_head = dequantized[LM_HEAD]
        if model.tied:
            out.embed = out.lm_head.weight

    # what is left as it is, each at its own size (`held_bytes`: a tensor's, or a linear's
    # own nbytes: never expanded to count it)
    rest = [model.final_norm] + [n for lw in model.layers for n in (lw.attn_norm, lw.mlp_norm)]
    if not (model.tied and LM_HEAD in records):
        rest.append(model.embed)
    if not model.tied and LM_HEAD not in records:
        rest.append(model.lm_head)
    kept = [lin for name, lin in known.items() if name != LM_HEAD and name not in records]
    weight_bytes = sum(r.nbytes for r in reports) + sum(held_bytes(t) for t in rest + kept)
    return QuantizedModel(scheme_name, out, tuple(reports), weight_bytes, quantize_s,
                          dict(records))


def quantize_model(model: Llama, scheme_: str | Scheme | Callable[[torch.Tensor], Quantized],
                   include_lm_head: bool = False) -> QuantizedModel:
    """Every linear of `model` quantized with one data-free scheme (a `SCHEMES` name, a
    `Scheme`, or a function weight -> quantized record): round-to-nearest, no calibration."""
    if isinstance(scheme_, str):
        scheme_ = scheme(scheme_)
    if isinstance(scheme_, Scheme):
        name, fn = scheme_.name, scheme_.quantize
    elif callable(scheme_):
        name, fn = getattr(scheme_, "__name__", "custom"), scheme_
    else:
        raise QuantError(f"scheme must be a scheme name, a Scheme or a function, got "
                         f"{type(scheme_).__name__}")
    t0 = time.perf_counter()
    records = {n: fn(lin.weight.float()) for n, lin in model_linears(model, include_lm_head)}
    return assemble(model, records, name, time.perf_counter() - t0)
