"""FP8 E4M3 and E5M2 with one fp32 scale per tensor, saturating, encoded without torch's cast.

    S = max|x| / fp8_max          code = fp8(clamp(x · (1/S), -fp8_max, fp8_max))
    x̂ = S · value(code)

E4M3 ("fn": finite, no inf; S.1111.111 is NaN) reaches 448, E5M2 (IEEE-like, with inf)
57344. Values are clamped BEFORE rounding to the format: torch 2.13's cast itself saturates
for float8_e4m3fn (even inf -> 448) but overflows to inf for float8_e5m2 (values from 61440
up), and older torch turned E4M3 overflow into NaN, so saturating first is what makes the
result the same everywhere.

The encoder rounds to nearest, ties to even, in exact arithmetic: with E the exponent of
|v| (never below the format's smallest normal exponent 1 - bias, which makes subnormals one
more binade of spacing 2^(1 - bias - m)),

    code = (E + bias - 1) · 2^m + round(|v| · 2^(m - E))

where |v| · 2^(m - E) is an exact power-of-two scaling; a round-up to 2^(m+1) carries into
the exponent field by itself. It equals torch's float8 casts bit for bit (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from inferlab.engines.quant.checks import check_tensor
from inferlab.engines.quant.errors import QuantError


@dataclass(frozen=True)
class Fp8Format:
    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_value: float
    has_inf: bool
    torch_dtype_name: str
    """The matching torch dtype's attribute name (for tests and casts where torch has it)."""

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    def value(self, code: int) -> float:
        """The number a code 0..255 stands for (nan / inf where the format says so)."""
        sign = -1.0 if code & 0x80 else 1.0
        m = self.mantissa_bits
        exponent = (code >> m) & ((1 << self.exponent_bits) - 1)
        mantissa = code & ((1 << m) - 1)
        top = (1 << self.exponent_bits) - 1
        if self.has_inf and exponent == top:
            return sign * math.inf if mantissa == 0 else math.nan
        if not self.has_inf and exponent == top and mantissa == (1 << m) - 1:
            return math.nan
        if exponent == 0:
            return sign * mantissa * 2.0 ** (1 - self.bias - m)
        return sign * ((1 << m) + mantissa) * 2.0 ** (exponent - self.bias - m)


E4M3 = Fp8Format("e4m3", 4, 3, 7, 448.0, False, "float8_e4m3fn")
E5M2 = Fp8Format("e5m2", 5, 2, 15, 57344.0, True, "float8_e5m2")
FORMATS = {"e4m3": E4M3, "e5m2": E5M2}
NAN_CODE = 0x7F  # both formats' positive quiet NaN, as torch writes it


def fp8_format(name: str | Fp8Format) -> Fp8Format:
    if isinstance(name, Fp8Format):
        return name
    if name not in FORMATS:
        raise QuantError(f"fp8 format must be one of {', '.join(FORMATS)}, got {name!r}")
    return FORMATS[name]


def _pow2(exponent: torch.Tensor) -> torch.Tensor:
    """2^exponent as fp32, built from its bits (exact; exponent within the normal range)."""
    return ((exponent.to(torch.int32) + 127) << 23).view(torch.float32)


def encode_fp8(v: torch.Tensor, fmt: str | Fp8Format = "e4m3") -> torch.Tensor:
    """The uint8 codes of fp32 `v` rounded to `fmt`, saturating at ±max (NaN -> 0x7F)."""
    fmt = fp8_format(fmt)
    v = v.to(torch.float32)
    m = fmt.mantissa_bits
    a = v.abs().clamp(max=fmt.max_value)
    exponent = torch.frexp(a).exponent - 1  # a = 1.f · 2^exponent
    exponent = torch.where(a < fmt.min_normal, 1 - fmt.bias, exponent)
    steps = torch.round(a * _pow2(m - exponent)).to(torch.int32)
    code = (exponent + fmt.bias - 1) * (1 << m) + steps
    code = code | (torch.signbit(v).to(torch.int32) << 7)
    code = torch.where(torch.isnan(v), NAN_CODE, code)
    return code.to(torch.uint8)


def _table(fmt: Fp8Format) -> torch.Tensor:
    return torch.tensor([fmt.value(c) for c in range(256)], dtype=torch.float32)


_TABLES: dict[str, torch.Tensor] = {}


def decode_fp8(codes: torch.Tensor, fmt: str | Fp8Format = "e4m3") -> torch.Tensor:
    """fp32 values of uint8 `codes` in `fmt`."""
    fmt = fp8_format(fmt)
    if codes.dtype != torch.uint8:
        raise QuantError(f"codes must be a uint8 tensor, got {codes.dtype}")
    if fmt.name not in _TABLES:
        _TABLES[fmt.name] = _table(fmt)
    return _TABLES[fmt.name].to(codes.device)[codes.long()]


@dataclass(frozen=True)
class Fp8Quantized:
    codes: torch.Tensor
    """uint8 FP8 codes, the input's shape."""
    scale: torch.Tensor
    """S, a 0-d fp32 tensor."""
    format: Fp8Format

    def dequantize(self) -> torch.Tensor:
        return decode_fp8(self.codes, self.format) * self.scale

    @property
    def nbytes(self) -> int:
        return self.codes.numel() + 4


def quantize_fp8(x: torch.Tensor, fmt: str | Fp8Format = "e4m3") -> Fp8Quantized:
    """x scaled so that max|x| lands on the format's largest value, then encoded.

    The scale multiplies by its fp32 reciprocal, as torch's INT8 kernels do; an all-zero
    tensor gets S = 1, and S is at least 2^-126 so that 1/S stays finite.
    """
    fmt = fp8_format(fmt)
    x = check_tensor(x)
    scale = x.abs().amax() / fmt.max_value
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    scale = scale.clamp(min=torch.finfo(torch.float32).tiny)
    return Fp8Quantized(codes=encode_fp8(x * (1.0 / scale), fmt), scale=scale, format=fmt)
