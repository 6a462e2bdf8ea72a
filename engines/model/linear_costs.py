"""Which kernels a loaded model's linears run on, and what a call that falls back costs, in
one sentence a lab can show beside its numbers.

    linear_paths(model) -> LinearPaths(kinds, ..., note)

A linear held as a GGUF file's codes (`GGUFLinear`) multiplies them in place with the native
block kernels for calls of up to NATIVE_ROWS input rows; a call of more rows (a prefill chunk,
a large batch) dequantizes its weight to fp32, CHUNK_ROWS output rows at a time, then runs a
torch matmul; on the torch kernel path (or without the native library) every call does so
through `gguf.quants` in numpy. The bytes of fp32 such a step writes are

    fallback_fp32_bytes = Σ over the layers' code linears  out × in × 4

against `codes_bytes` = Σ their codes' bytes read by the native kernels. fp32 and bf16
`Linear`s, and the low-bit layers of `engines.quant`, never dequantize a whole weight.
Counts come from `linear.linear_kinds` (the layers' four linears and the lm_head), plus
each Mixture-of-Experts layer's router and experts.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.kernels import ggml_blocks
from inferlab.engines.model.gguf_linear import CHUNK_ROWS, NATIVE_ROWS
from inferlab.engines.model.linear import linear_kinds


@dataclass(frozen=True)
class LinearPaths:
    """A model's linears by kind, and what running them from codes costs."""

    kinds: dict[str, int]
    """Kind ("Q4_K codes", "float32 Linear", "lm_head: Q8_0 codes", "MoE: float32
    Linear") -> how many linears."""
    code_linears: int
    """The layers' linears (lm_head aside) that multiply GGUF codes."""
    native_rows: int
    """The most input rows a code linear multiplies in place (0: every call dequantizes)."""
    codes_bytes: int
    """Bytes of those linears' codes."""
    fallback_fp32_bytes: int
    """fp32 bytes they dequantize into per step that falls back (module docstring)."""
    note: str

    @property
    def holds_codes(self) -> bool:
        """Whether any linear (the lm_head and experts too) multiplies a file's codes."""
        return any(kind.endswith(" codes") for kind in self.kinds)

    @property
    def fallback_note(self) -> str:
        """`note` where a call can fall back to dequantizing (the model holds codes), else
        "": what a lab shows beside its timings."""
        return self.note if self.holds_codes else ""


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.1f} MiB"


def _parts(linear) -> list:
    parts = getattr(linear, "parts", None)
    return [p for q in parts for p in _parts(q)] if parts is not None else [linear]


def _runs_native(linear) -> bool:
    return (getattr(linear, "kernel_path", None) == "native" and ggml_blocks.available()
            and linear.qtype in ggml_blocks.COVERED)


def _expert_kinds(model) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lw in model.layers:
        if lw.moe is None:
            continue
        for linear in lw.moe.linears():
            for p in _parts(linear):
                qtype = getattr(p, "qtype", None)
                k = ("MoE: " + (f"{qtype.name} codes" if qtype is not None else
                                    f"{str(p.dtype).removeprefix('torch.')} {type(p).__name__}"))
                counts[k] = counts.get(k, 0) + 1
    return counts


def linear_paths(model) -> LinearPaths:
    """The record of the module docstring for a loaded `model` (a `Llama`)."""
    kinds = linear_kinds(model) | _expert_kinds(model)
    code_parts = []
    for lw in model.layers:
        linears = [lw.qkv, lw.o, lw.gate_up, lw.down]
        linears += lw.moe.linears() if lw.moe is not None else []
        code_parts += [p for lin in linears if lin is not None for p in _parts(lin)
                       if getattr(p, "qtype", None) is not None]
    head = [p for p in _parts(model.lm_head) if getattr(p, "qtype", None) is not None]
    codes = sum(p.nbytes for p in code_parts)
    fp32 = sum(p.out_features * p.in_features * 4 for p in code_parts)
    native = bool(code_parts + head) and all(_runs_native(p) for p in code_parts + head)
    rows = NATIVE_ROWS if native else 0
    listing = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    if not code_parts and not head:
        note = (f"{model.config.id}'s linears: {listing}; none is held as a file's codes, so "
                "no call dequantizes a weight.")
    elif native:
        note = (f"{model.config.id}'s linears: {listing}. The {len(code_parts)} code linears "
                f"run the native block kernels up to {NATIVE_ROWS} rows a call; a step of more "
                f"rows (a prefill chunk, a large batch) dequantizes each to fp32 "
                f"{CHUNK_ROWS} rows at a time before a torch matmul: "
                f"{_mib(fp32)} of fp32 written per such step, against "
                f"{_mib(codes)} of codes read in place.")
    else:
        note = (f"{model.config.id}'s linears: {listing}. No native block kernel runs them "
                f"here (torch kernel path, or the library did not build): EVERY call "
                f"dequantizes its weight with gguf.quants, {CHUNK_ROWS} rows at a time: "
                f"{_mib(fp32)} of fp32 per step from {_mib(codes)} of codes, "
                "many times slower than the native path.")
    if head and native:
        note += (f" The lm_head ({model.lm_head.out_features:,} × "
                 f"{model.lm_head.in_features:,} {head[0].qtype.name}) falls back only past "
                 f"{NATIVE_ROWS} logits rows.")
    return LinearPaths(kinds, len(code_parts), rows, codes, fp32, note)
