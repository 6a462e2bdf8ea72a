"""Quantize a model one decoder layer at a time on calibration activations (GPTQ's schedule).

For each layer i in order:

1. run the calibration sequences through layer i alone, from the hidden states that enter it,
   and record what each of its four linears sees: the Gram matrix Σ xᵀx, Σ|x| per input
   channel, the row count, and (for AWQ) the rows themselves;
2. quantize the layer's linears from those statistics (the caller's `quantize_linear`);
3. `sequential`: run the calibration through the QUANTIZED layer to get the hidden states
   that enter layer i + 1, so each layer is calibrated on the inputs it will really see
   (GPTQ does this); otherwise the fp layer's outputs are used.

A layer runs alone through the model's own code: a shallow copy of the model holds only that
layer and, as its "embedding", the hidden states (token id t reads row t), and recorders stand
in for its linears. The layer's output is rebuilt from the recorded linear outputs exactly as
the model adds them (x + o(·), then + down(·)), and the forward stops after `down`: the final
norm and lm_head never run. Every sequence starts at position 0.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import LayerWeights, Llama
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.model_quant import LINEARS, QuantizedModel, assemble, linear_name
from inferlab.engines.quant.schemes import Quantized


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
        x = x.detach().float().clone()
        self.gram += x.t() @ x
        self.abs_sum += x.abs().sum(0, dtype=torch.float64)
        self.n_rows += x.shape[0]
        if keep_rows:
            self.rows.append(x)

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
    """Raised by the `down` recorder: the layer has run; skip the rest of the forward."""


class _Recorder:
    """Stands in for a Linear: records its input (optionally) and its output, then runs it."""

    def __init__(self, linear, stats: LinearInputs | None, keep_rows: bool, last: bool) -> None:
        self.linear, self.stats, self.keep_rows, self.last = linear, stats, keep_rows, last
        self.output: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.stats is not None:
            self.stats.add(x, self.keep_rows)
        self.output = self.linear(x)
        if self.last:
            raise _LayerDone
        return self.output


def run_layer(model: Llama, layer: LayerWeights, hidden: torch.Tensor,
              stats: dict[str, LinearInputs] | None = None, keep_rows: bool = False
              ) -> torch.Tensor:
    """The hidden states [T, d] after `layer`, for one sequence entering it as `hidden`
    (fp32); with `stats`, each linear's input is added to stats[which]."""
    rec = {w: _Recorder(getattr(layer, w), None if stats is None else stats[w], keep_rows,
                        last=w == "down") for w in LINEARS}
    alone = copy.copy(model)
    alone.layers = [replace(layer, **rec)]
    alone.embed = hidden
    try:
        alone.forward_nocache(torch.arange(hidden.shape[0]))
    except _LayerDone:
        pass
    else:  # pragma: no cover - the down recorder always raises
        raise RuntimeError("the layer ran without reaching its down projection")
    return (hidden + rec["o"].output) + rec["down"].output


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
                       progress: Callable[[int, int], None] | None = None) -> QuantizedModel:
    """Every decoder linear of `model` quantized by `quantize_linear` on the calibration
    token sequences `chunks`; `progress(layers_done, n_layers)` after each layer (raise from
    it to cancel). The embedding, norms and lm_head are left as they are."""
    t0 = time.perf_counter()
    seqs = _check_chunks(chunks, model.config.vocab_size)
    with torch.inference_mode():
        hidden = [model.embed[ids].float() for ids in seqs]
    records: dict[str, Quantized] = {}
    n_layers = len(model.layers)
    for i, lw in enumerate(model.layers):
        stats = {w: LinearInputs.empty(getattr(lw, w).in_features) for w in LINEARS}
        outputs = [run_layer(model, lw, h, stats, keep_rows) for h in hidden]
        quantized = {}
        for w in LINEARS:
            name = linear_name(i, w)
            if not (bool(torch.isfinite(stats[w].gram).all())
                    and bool(torch.isfinite(stats[w].abs_sum).all())):
                raise QuantError(f"calibration activations at {name} hold non-finite values")
            records[name] = quantize_linear(name, getattr(lw, w).weight.float(), stats[w])
            quantized[w] = Linear(records[name].dequantize().to(model.dtype))
        del stats
        if sequential:
            q_layer = replace(lw, **quantized)
            hidden = [run_layer(model, q_layer, h) for h in hidden]
        else:
            hidden = outputs
        if progress is not None:
            progress(i + 1, n_layers)
    return assemble(model, records, scheme_name, time.perf_counter() - t0)
