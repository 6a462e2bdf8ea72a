"""Quantize a model one decoder layer at a time on calibration activations (GPTQ's schedule).

For each layer i in order:

1. run the calibration sequences through layer i alone, from the hidden states that enter it,
   and record what each of its four linears sees: the Gram matrix Σ xᵀx, Σ|x| per input
   channel, the row count, and (for AWQ) the rows themselves;
2. quantize the layer's linears from those statistics (the caller's `quantize_linear`);
3. `sequential`: run the calibration through the QUANTIZED layer to get the hidden states
   that enter layer i + 1, so each layer is calibrated on the inputs it will really see;
   otherwise the fp layer's outputs are used.

`true_sequential` (GPTQ's reference code's `--true-sequential`, the default of its GPTQ
here) goes further inside each layer: qkv is quantized on attn_norm(x), o on the attention
output of the QUANTIZED qkv, gate_up on mlp_norm(h) with h = x + post_attn(o(·)) and o
quantized, down on the gated product of the quantized gate_up, and the layer's output is
h + post_mlp(down(·)) from those (post_attn and post_mlp: Gemma's norms after attention and
after the MLP, absent elsewhere). Each linear then runs once per calibration token instead of
twice (fp pass, then quantized pass): the quantization's cost is about one forward of the
calibration set plus the Gram matrices. The norms and the gated activation are the model's
own formulas (`llama.rms_norm`, `moe.gated`: SiLU or tanh-GELU by the family); attention runs
through the model's own code (q/k-norms, RoPE per layer kind, windows).

A layer runs alone through the model's own code: a shallow copy of the model holds only that
layer and runs it over the hidden states (`Llama.layers_nocache`: the final norm and lm_head
never run), with recorders standing in for its linears. The first layer's inputs are the
model's own embeddings (`embed_rows`: Gemma's scaled by √d). Every sequence starts at
position 0. A Mixture-of-Experts model is refused (`model_quant.check_dense`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import LayerWeights, Llama, rms_norm
from inferlab.engines.model.moe import gated
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.model_quant import (
    LINEARS,
    QuantizedModel,
    assemble,
    check_dense,
    linear_name,
)
from inferlab.engines.quant.schemes import Quantized

GRAM_BLOCK = 512
"""Inputs wider than two of these add Σ xᵀx block by block, the upper blocks only."""


def add_gram(gram: torch.Tensor, x: torch.Tensor) -> None:
    """gram += xᵀx in place. Wide inputs (SmolLM2's 1536-wide down projection) compute only
    the blocks on and above the diagonal and mirror the rest: 6 of 9 block products at 1536."""
    n = x.shape[1]
    if n < 2 * GRAM_BLOCK:
        gram.addmm_(x.t(), x)
        return
    edges = list(range(0, n, GRAM_BLOCK)) + [n]
    blocks = list(zip(edges[:-1], edges[1:], strict=True))
    for k, (a, b) in enumerate(blocks):
        for c, d in blocks[k:]:
            gram[a:b, c:d].addmm_(x[:, a:b].t(), x[:, c:d])
            if c != a:
                gram[c:d, a:b].copy_(gram[a:b, c:d].t())


@dataclass
class LinearInputs:
    """What one linear saw over the calibration set (x: its input rows, [n, in])."""

    gram: torch.Tensor
    """Σ xᵀx, [in, in] fp32."""
    abs_sum: torch.Tensor
    """Σ |x| per input channel, [in] fp64."""
    n_rows: int = 0
    rows: list[torch.Tensor] = field(default_factory=list)
    """The rows themselves, one tensor per sequence, when kept."""

    @classmethod
    def empty(cls, in_features: int) -> LinearInputs:
        return cls(torch.zeros(in_features, in_features), torch.zeros(in_features,
                                                                      dtype=torch.float64))

    def add(self, x: torch.Tensor, keep_rows: bool) -> None:
        x = x.detach().float()
        add_gram(self.gram, x)
        self.abs_sum += x.abs().sum(0)  # fp32 within a sequence (fast), fp64 across them
        self.n_rows += x.shape[0]
        if keep_rows:
            self.rows.append(x.clone())

    def hessian(self) -> torch.Tensor:
        """H = 2/n Σ xᵀx: the Hessian of the output error ||x Wᵀ - x Ŵᵀ||² / n in Ŵ's rows."""
        return self.gram * (2.0 / self.n_rows)

    def abs_mean(self) -> torch.Tensor:
        """mean |x| per input channel, [in] fp32."""
        return (self.abs_sum / self.n_rows).float()

    def stacked_rows(self) -> torch.Tensor:
        if not self.rows:
            raise QuantError("rows were not kept (keep_rows=False)")
        return torch.cat(self.rows)


class _LayerDone(Exception):
    """Raised by a recorder that stops the forward (`last`): the rest of it is not needed."""


class _Recorder:
    """Stands in for a Linear: records its input (optionally) and its output, then runs it;
    `last`: stops the forward after it (`compute` False: before running it)."""

    def __init__(self, linear, stats: LinearInputs | None, keep_rows: bool, last: bool,
                 compute: bool = True) -> None:
        self.linear, self.stats, self.keep_rows, self.last = linear, stats, keep_rows, last
        self.compute = compute
        self.input: torch.Tensor | None = None
        self.output: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.stats is not None:
            self.stats.add(x, self.keep_rows)
        if not self.compute:
            self.input = x.clone()  # a buffer the next forward may reuse
            raise _LayerDone
        self.output = self.linear(x)
        if self.last:
            raise _LayerDone
        return self.output


def _run_alone(model: Llama, layer: LayerWeights, hidden: torch.Tensor
               ) -> torch.Tensor | None:
    """`layer` alone on `hidden` through the model's own code: the hidden states after it,
    or None where a recorder stopped it."""
    alone = copy.copy(model)
    alone.layers = [layer]
    try:
        return alone.layers_nocache(hidden)
    except _LayerDone:
        return None


def run_layer(model: Llama, layer: LayerWeights, hidden: torch.Tensor,
              stats: dict[str, LinearInputs] | None = None, keep_rows: bool = False
              ) -> torch.Tensor:
    """The hidden states [T, d] after `layer`, for one sequence entering it as `hidden`
    (fp32); with `stats`, each linear's input is added to stats[which]."""
    rec = {w: _Recorder(getattr(layer, w), None if stats is None else stats[w], keep_rows,
                        last=False) for w in LINEARS}
    return _run_alone(model, replace(layer, **rec), hidden)


def true_sequential_layer(model: Llama, layer: LayerWeights, hidden: list[torch.Tensor],
                          quantize: Callable[[str, LinearInputs], Linear],
                          keep_rows: bool = False) -> list[torch.Tensor]:
    """The hidden states after `layer` for every sequence of `hidden`, its four linears
    quantized one after the other by `quantize(which, inputs) -> the quantized Linear`, each
    on the inputs the already-quantized ones give it (module docstring)."""
    c, dt = model.config, model.dtype
    d, eps = c.d_model, c.norm_eps

    def inputs(which: str) -> LinearInputs:
        return LinearInputs.empty(getattr(layer, which).in_features)

    def post(y: torch.Tensor, norm: torch.Tensor | None) -> torch.Tensor:
        """A linear's output as the residual stream adds it: post-normed where the family
        norms it (Gemma), fp32."""
        return y.float() if norm is None else rms_norm(y.float(), (d,), norm, eps)

    stats = inputs("qkv")
    for h in hidden:
        stats.add(rms_norm(h, (d,), layer.attn_norm, eps).to(dt), keep_rows)
    qkv = quantize("qkv", stats)

    stats, attn = inputs("o"), []
    for h in hidden:
        rec = _Recorder(layer.o, stats, keep_rows, last=True, compute=False)
        _run_alone(model, replace(layer, qkv=qkv, o=rec), h)
        attn.append(rec.input)
    o = quantize("o", stats)

    stats, mid = inputs("gate_up"), []
    for h, a in zip(hidden, attn, strict=True):
        mid.append(h + post(o(a), layer.post_attn_norm))
        stats.add(rms_norm(mid[-1], (d,), layer.mlp_norm, eps).to(dt), keep_rows)
    del attn
    gate_up = quantize("gate_up", stats)

    stats, acts = inputs("down"), []
    for m in mid:
        acts.append(gated(gate_up(rms_norm(m, (d,), layer.mlp_norm, eps).to(dt)), c.mlp_kind))
        stats.add(acts[-1], keep_rows)
    down = quantize("down", stats)
    return [m + post(down(a), layer.post_mlp_norm) for m, a in zip(mid, acts, strict=True)]


def _check_chunks(chunks: Sequence[Sequence[int]], vocab_size: int) -> list[torch.Tensor]:
    out = [torch.as_tensor(list(c), dtype=torch.int64) for c in chunks if len(c)]
    if not out:
        raise QuantError("calibration is empty: no token sequences to calibrate on")
    for t in out:
        if int(t.min()) < 0 or int(t.max()) >= vocab_size:
            raise QuantError(f"calibration token ids must lie in [0, {vocab_size}), got "
                             f"[{int(t.min())}, {int(t.max())}]")
    return out


QuantizeLinear = Callable[[str, torch.Tensor, LinearInputs], Quantized]
"""(linear name, its fp32 weight [out, in], what it saw) -> the quantized record."""


def quantize_layerwise(model: Llama, chunks: Sequence[Sequence[int]],
                       quantize_linear: QuantizeLinear, scheme_name: str,
                       sequential: bool = True, keep_rows: bool = False,
                       progress: Callable[[int, int], None] | None = None,
                       true_sequential: bool = False) -> QuantizedModel:
    """Every decoder linear of `model` quantized by `quantize_linear` on the calibration
    token sequences `chunks`; `progress(layers_done, n_layers)` after each layer (raise from
    it to cancel). The embedding, norms and lm_head are left as they are. The result's
    `calibration_tokens` counts the tokens of `chunks`."""
    check_dense(model)
    t0 = time.perf_counter()
    seqs = _check_chunks(chunks, model.config.vocab_size)
    with torch.inference_mode():
        hidden = [model.embed_rows(ids.to(model.device)).float() for ids in seqs]
    records: dict[str, Quantized] = {}
    n_layers = len(model.layers)
    for i, lw in enumerate(model.layers):
        if true_sequential:
            def quantize(which: str, inputs: LinearInputs, i=i, lw=lw) -> Linear:
                records[linear_name(i, which)] = _quantize_one(
                    quantize_linear, linear_name(i, which), getattr(lw, which), inputs)
                return Linear(records[linear_name(i, which)].dequantize().to(model.dtype),
                              kernels=model.kernel_path)

            hidden = true_sequential_layer(model, lw, hidden, quantize, keep_rows)
            if progress is not None:
                progress(i + 1, n_layers)
            continue
        stats = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in LINEARS}
        outputs = [run_layer(model, lw, h, stats, keep_rows) for h in hidden]
        quantized = {}
        for w in LINEARS:
            name = linear_name(i, w)
            records[name] = _quantize_one(quantize_linear, name, getattr(lw, w), stats[w])
            quantized[w] = Linear(records[name].dequantize().to(model.dtype),
                                  kernels=model.kernel_path)
        del stats
        if sequential:
            q_layer = replace(lw, **quantized)
            hidden = [run_layer(model, q_layer, h) for h in hidden]
        else:
            hidden = outputs
        if progress is not None:
            progress(i + 1, n_layers)
    out = assemble(model, records, scheme_name, time.perf_counter() - t0)
    return replace(out, calibration_tokens=sum(len(t) for t in seqs))


def _quantize_one(quantize_linear: QuantizeLinear, name: str, linear, inputs: LinearInputs
                  ) -> Quantized:
    if not (bool(torch.isfinite(inputs.gram).all()) and bool(torch.isfinite(inputs.abs_sum).all())):
        raise QuantError(f"calibration activations at {name} hold non-finite values")
    return quantize_linear(name, linear.weight.float(), inputs)
