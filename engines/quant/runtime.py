"""Each scheme's model as it really runs: its codes on the low-bit kernels where a kernel
takes them, the dequantized weights where none does, and what each linear ran on.

    runtime_model(qm) -> RuntimeModel    (qm: a `QuantizedModel` with its records)
    decode_tokens_per_s(model, prompt_ids, new_tokens)

The fake-quantized model (`QuantizedModel.model`) carries the quantizer's error in fp32
weights: right for perplexity, but it moves as many bytes per token as fp32. The runtime
model is the same numbers (within fp32 summation order) from the stored codes:

    INT8 per output channel, symmetric     Int8Linear (the C kernel)
    INT8 per channel, affine (Z ≠ 0)        Int8Linear, minus (S Z) Σx per row: one extra
                                            row sum of x, the codes untouched
    INT4 groups (RTN, GPTQ, Q4_0, Q4_1)     Int4Linear: the kernel where the group size is a
                                            multiple of 32 (Q4's blocks, g128), its torch path
                                            otherwise
    AWQ                                     x / s, then Int4Linear of the codes of W diag(s)
                                            (a deployed model folds 1/s into the norm before;
                                            here the one-call decoder scales x in C)
    FP8 E4M3 (one scale per tensor)         Fp8Linear: the codes decoded in registers
    INT8 groups (Q8_0: 32, fp16 scales)     GroupInt8Linear: each group's sum scaled once
    anything else (E5M2, pruned, bf16)      the dequantized fp32 weight: no kernel here for
                                            it, so it runs at fp32 speed and says so

The lm_head (the tied embedding) stays as the quantized model keeps it, so the runtime model's
logits are the fake-quantized model's and its perplexity the one reported beside its speed.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass, field, replace

import torch

from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.model.bench import decode_rate, generate_runner
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import Llama
from inferlab.engines.quant.affine import AffineQuantized
from inferlab.engines.quant.awq import AwqQuantized
from inferlab.engines.quant.errors import QuantError
from inferlab.engines.quant.fp8 import Fp8Quantized
from inferlab.engines.quant.group import GroupQuantized
from inferlab.engines.quant.lowbit_linear import (
    Fp8Linear,
    GroupInt8Linear,
    Int4Linear,
    Int8Linear,
    ZeroPointInt8Linear,
)
from inferlab.engines.quant.model_quant import LINEARS, QuantizedModel, linear_name

INT8_KERNEL = "int8 kernel"
INT4_KERNEL = "int4 kernel"
INT4_TORCH = "int4 torch path"
FP8_KERNEL = "fp8 kernel"
DEQUANTIZED = "fp32 (dequantized)"


class InputScaledLinear:
    """AWQ at run time: y = (x / s) · Q(W diag(s))ᵀ."""

    __slots__ = ("base", "inv_scales", "out_features", "in_features")

    def __init__(self, base: Int4Linear, input_scales: torch.Tensor) -> None:
        self.base = base
        self.inv_scales = (1.0 / input_scales.to(torch.float32)).contiguous()
        self.out_features, self.in_features = base.out_features, base.in_features

    @property
    def nbytes(self) -> int:
        return self.base.nbytes + self.inv_scales.numel() * 4

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x.float() * self.inv_scales)

    def native_operand(self) -> NativeOperand | None:
        """The base's operand with 1/s as its input scale: the one-call decoder multiplies
        the input by it in C, the same single rounding as the product above."""
        op = self.base.native_operand()
        return None if op is None else replace(op, in_scale=self.inv_scales)


def _int4_kind(layer: Int4Linear) -> str:
    return INT4_KERNEL if layer.interleaved else INT4_TORCH


def runtime_linear(record, kernels: str | None = None) -> tuple[object, str]:
    """(a callable linear running `record`'s codes, the kind of code it runs on); a
    dequantized weight is laid out for the kernel path `kernels` (its model's)."""
    if isinstance(record, AffineQuantized) and record.bits == 8 and record.axis == 0 \
            and record.q.dim() == 2:
        if record.symmetric:
            return Int8Linear(record.q, record.scale), INT8_KERNEL
        return ZeroPointInt8Linear(record.q, record.scale, record.zero_point), INT8_KERNEL
    if isinstance(record, GroupQuantized) and record.bits == 8 and record.symmetric \
            and record.q.dim() == 2 and not record.ragged and record.group_size % 16 == 0:
        return GroupInt8Linear(record.q, record.scales, record.group_size), INT8_KERNEL
    if isinstance(record, GroupQuantized) and record.bits == 4 and record.q.dim() == 2:
        layer = Int4Linear.from_groups(record)
        return layer, _int4_kind(layer)
    if isinstance(record, Fp8Quantized) and record.format.name == "e4m3" \
            and record.codes.dim() == 2:
        return Fp8Linear(record.codes, record.scale), FP8_KERNEL
    if isinstance(record, AwqQuantized) and record.codes.bits == 4:
        layer = Int4Linear.from_groups(record.codes)
        return InputScaledLinear(layer, record.input_scales), _int4_kind(layer)
    return Linear(record.dequantize().to(torch.float32), kernels=kernels), DEQUANTIZED


@dataclass(frozen=True)
class RuntimeModel:
    scheme: str
    model: Llama
    kinds: dict[str, int] = field(default_factory=dict)
    """Kind of code ("int8 kernel", ...) -> how many linears run on it."""

    @property
    def runs_as(self) -> str:
        """"120 linears on the int4 kernel" / "... fp32 (dequantized)": one line for a table."""
        return ", ".join(f"{n} on {k}" if k != DEQUANTIZED else f"{n} {k}"
                         for k, n in sorted(self.kinds.items()))


def runtime_model(qm: QuantizedModel) -> RuntimeModel:
    """A new model running `qm`'s stored codes; QuantError if `qm` has no records (a
    QuantizedModel made by hand) or is not an fp32 CPU model (the kernels' domain)."""
    source = qm.model
    if source.dtype != torch.float32 or source.device.type != "cpu":
        raise QuantError("runtime_model needs an fp32 model on the CPU")
    if not qm.records:
        raise QuantError(f"the {qm.scheme} model keeps no quantized records to run")
    if "lm_head" in qm.records:
        raise QuantError("runtime_model runs the layers' linears; this model quantized its "
                         "lm_head too")
    kinds: Counter[str] = Counter()
    layers = []
    for i, lw in enumerate(source.layers):
        swapped = {}
        for which in LINEARS:
            rec = qm.records.get(linear_name(i, which))
            if rec is None:
                continue
            swapped[which], kind = runtime_linear(rec, source.kernel_path)
            kinds[kind] += 1
        layers.append(replace(lw, **swapped))
    out = copy.copy(source)
    out.layers = layers
    return RuntimeModel(qm.scheme, out, dict(kinds))


def decode_tokens_per_s(model, prompt_ids: list[int], new_tokens: int = 32,
                        repeats: int = 1) -> float:
    """Greedy single-stream decode speed, prefill excluded (`engines.model.bench.decode_rate`):
    the best of `repeats` (a busy machine only ever slows a run down). A run the noise made
    meaningless (n tokens timed no slower than 1: NaN) is tried again, twice at most."""
    run = generate_runner(model, prompt_ids)
    run(2)  # warm-up: allocations, the kernel library's first load
    rates = []
    for _ in range(max(1, repeats) + 2):
        rate = decode_rate(run, new_tokens)
        if math.isfinite(rate):
            rates.append(rate)
        if len(rates) >= repeats:
            break
    return max(rates) if rates else float("nan")
