"""Every decoder layer of a step in one native call (`decoder.c`): at decode a layer is ten
kernel calls of a few microseconds each, and from Python each also costs a ctypes call, its
checks and an output tensor — measured, a third of an INT4 SmolLM2 token. Here the same
kernels run in the same order on the same data (the result is the per-op path's bit for bit),
driven from C.

A linear takes part through its `native_operand()`: a `NativeOperand` naming its kernel, its
tensors and the most input rows it runs natively (None: it cannot, and the model keeps the
per-op path). `DecoderPlan` holds one model's layer descriptors, rebuilt when a layer's
object changes, and runs a step.

Inside `recording_timings()` each step also reads every kernel's start and end (the C side's
timings buffer: CLOCK_MONOTONIC ns) and hands a `DecoderTiming` to the list it yields, the
call itself marked as a torch.profiler span ("il_decoder_layers"); outside it nothing is timed.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch

from inferlab.engines.kernels.kv_view import NativeKV
from inferlab.engines.kernels.library import I32, I64, NativeLibrary, P
from inferlab.engines.kernels.paged_attention import MAX_GROUP, PagedPlan

WEIGHT_KINDS = {"f32": 0, "bf16": 1, "int8": 2, "int4": 3, "f32p": 4, "fp8": 5, "int8g": 6}
"""f32p: fp32 packed in panels (`engines.kernels.panel`); int8g: INT8 with a scale per group
of `group_size` along the input (Q8_0)."""
KV_KINDS = {"f32": 0, "int8": 1, "fp8-e4m3": 2}
"""`NativeKV.kind` -> the C enum."""
SIGNATURES = {
    "il_decoder_scratch": ([P], I64),
    "il_decoder_layers": ([P, P, P, I64, P, P, P, P, P, P, I64, I64, I32, P, P, I64, I64, P,
                           I32, P], None),
}
TIMING_KINDS = ("attn_norm", "qkv", "rope", "q_copy", "kv_write", "attention", "o", "mlp_norm",
                "gate_up", "silu_mul", "down")
"""The kernels of one layer in the order they run: decoder.c's timing slots (IL_T_*)."""
FINAL_KIND = "residual_add"
"""The one kernel after the last layer (x += r)."""
PROFILER_SPAN = "il_decoder_layers"
"""The torch.profiler span a recorded call runs in."""

_recording = threading.local()  # .sink: the list a recording thread's timings go to


@dataclass(frozen=True)
class LinearShape:
    """A linear as the timings' costs read it: its kernel (a WEIGHT_KINDS key), out × in, and
    the bytes its weight and scales hold (what the kernel reads)."""

    kind: str
    out_features: int
    in_features: int
    weight_bytes: int


@dataclass(frozen=True)
class DecoderTiming:
    """One recorded `il_decoder_layers` call: `kernels` [(kind, layer, start_ns, end_ns)] in the
    order they ran, ns after the call's entry (the final add's layer is n_layers); the step's
    rows (`n_tokens`), each row's position (it reads keys 0..position of its sequence) and
    sequence start rows (`query_starts`, one past the end last), the cache's `kv_kind`
    (a KV_KINDS key) and each layer's linears (`linears[layer][name]`)."""

    kernels: tuple[tuple[str, int, int, int], ...]
    n_tokens: int
    positions: tuple[int, ...]
    query_starts: tuple[int, ...]
    kv_kind: str
    linears: tuple[dict, ...] = field(repr=False)


@contextmanager
def recording_timings() -> Iterator[list[DecoderTiming]]:
    """Inside, every native decoder step this thread runs appends its DecoderTiming to the
    list yielded (steps of other threads are not timed)."""
    previous = getattr(_recording, "sink", None)
    sink: list[DecoderTiming] = []
    _recording.sink = sink
    try:
        yield sink
    finally:
        _recording.sink = previous


def operand_bytes(op: NativeOperand) -> int:
    """The bytes a native operand's kernel reads of it: codes or weights, scales, mins."""
    return sum(t.numel() * t.element_size() for t in (op.weight, op.scale, op.mins,
                                                      op.in_scale, op.zero_term)
               if t is not None)


@dataclass(frozen=True)
class NativeOperand:
    """A linear as the native decoder reads it: `kind` (a WEIGHT_KINDS key), the weight (codes)
    tensor, INT8's or FP8's per-row scales or INT4's per-group scales and mins, and the most
    input rows the linear's own call gives this kernel (`max_rows`; past it the linear runs
    another path, so the decoder does too)."""

    kind: str
    weight: torch.Tensor = field(repr=False)
    out_features: int
    in_features: int
    max_rows: int
    scale: torch.Tensor | None = field(default=None, repr=False)
    mins: torch.Tensor | None = field(default=None, repr=False)
    group_size: int = 0
    in_scale: torch.Tensor | None = field(default=None, repr=False)
    """[in_features] fp32: the input is multiplied by it first (AWQ's 1/s), or None."""
    zero_term: torch.Tensor | None = field(default=None, repr=False)
    """[out_features] fp32, affine INT8's S ⊙ Z: (Σ x) · zero_term is subtracted after."""


class _Linear(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("pad", ctypes.c_int32), ("w", ctypes.c_void_p),
                ("scale", ctypes.c_void_p), ("mins", ctypes.c_void_p), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("n_groups", ctypes.c_int64),
                ("group_size", ctypes.c_int64), ("in_scale", ctypes.c_void_p),
                ("zero_term", ctypes.c_void_p)]


class _Layer(ctypes.Structure):
    _fields_ = [("attn_norm", ctypes.c_void_p), ("qkv", _Linear), ("o", _Linear),
                ("mlp_norm", ctypes.c_void_p), ("gate_up", _Linear), ("down", _Linear)]


class _Model(ctypes.Structure):
    _fields_ = [("n_layers", ctypes.c_int64), ("d_model", ctypes.c_int64),
                ("n_heads", ctypes.c_int64), ("n_kv_heads", ctypes.c_int64),
                ("d_head", ctypes.c_int64), ("d_ff", ctypes.c_int64), ("eps", ctypes.c_float),
                ("scale", ctypes.c_float)]


def _fp32_vector(t: torch.Tensor, n: int) -> bool:
    return (t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous()
            and t.numel() == n)


def _linear_struct(op: NativeOperand, out: int, inp: int) -> _Linear | None:
    """The operand as C reads it, or None where its shapes or tensors do not fit."""
    if (op.kind not in WEIGHT_KINDS or op.out_features != out or op.in_features != inp
            or op.weight.device.type != "cpu" or not op.weight.is_contiguous()):
        return None
    s = _Linear(kind=WEIGHT_KINDS[op.kind], w=op.weight.data_ptr(), n=out, k=inp)
    if op.in_scale is not None:
        if not _fp32_vector(op.in_scale, inp):
            return None
        s.in_scale = op.in_scale.data_ptr()
    if op.zero_term is not None:
        if not _fp32_vector(op.zero_term, out):
            return None
        s.zero_term = op.zero_term.data_ptr()
    if op.kind in ("int8", "fp8"):
        if (op.scale is None or not _fp32_vector(op.scale, out) or op.weight.shape != (out, inp)
                or op.weight.dtype != (torch.int8 if op.kind == "int8" else torch.uint8)):
            return None
        s.scale = op.scale.data_ptr()
    elif op.kind == "int8g":
        g = op.group_size
        if (g <= 0 or g % 16 or inp % g or op.scale is None
                or not _fp32_vector(op.scale, out * (inp // g))
                or op.weight.dtype != torch.int8 or op.weight.shape != (out, inp)):
            return None
        s.scale, s.n_groups, s.group_size = op.scale.data_ptr(), inp // g, g
    elif op.kind == "int4":
        g = op.group_size
        n_groups = -(-inp // g) if g > 0 else 0
        if (g <= 0 or g % 32 or inp % 64 or op.scale is None or op.mins is None
                or not _fp32_vector(op.scale, out * n_groups)
                or not _fp32_vector(op.mins, out * n_groups)
                or op.weight.numel() * op.weight.element_size() != out * inp // 2):
            return None
        s.scale, s.mins, s.n_groups, s.group_size = (op.scale.data_ptr(), op.mins.data_ptr(),
                                                     n_groups, g)
    elif op.kind == "f32p":
        n_panels, k, width = op.weight.shape if op.weight.dim() == 3 else (0, 0, 0)
        if op.weight.dtype != torch.float32 or k != inp or width < 1 or \
                n_panels != -(-out // width):
            return None
    elif op.weight.dtype != (torch.float32 if op.kind == "f32" else torch.bfloat16) or \
            op.weight.shape != (out, inp):
        return None
    return s


class DecoderPlan:
    """One model's layers described for `il_decoder_layers`, for as long as its layer objects
    stay the same (the model makes a new plan when `key_of` its layers changes)."""

    def __init__(self, lib: NativeLibrary, config, layers, scale: float) -> None:
        self.lib = lib.functions("decoder", SIGNATURES)
        self.key = self.key_of(layers)
        c = config
        self.model = _Model(n_layers=len(layers), d_model=c.d_model, n_heads=c.n_heads,
                            n_kv_heads=c.n_kv_heads, d_head=c.d_head, d_ff=c.d_ff,
                            eps=c.norm_eps, scale=scale)
        self.per_token = int(self.lib.il_decoder_scratch(ctypes.byref(self.model)))
        self.layers = None  # a ctypes array of _Layer, or None: some layer cannot run here
        self.max_rows = 0
        self._keep: list = []  # the tensors whose pointers the descriptors hold
        q_dim, kv_dim = c.n_heads * c.d_head, c.n_kv_heads * c.d_head
        shapes = {"qkv": (q_dim + 2 * kv_dim, c.d_model), "o": (c.d_model, q_dim),
                  "gate_up": (2 * c.d_ff, c.d_model), "down": (c.d_model, c.d_ff)}
        descs, rows = [], []
        self.linear_shapes: list[dict[str, LinearShape]] = []
        """Each layer's linears by name (qkv, o, gate_up, down): what recorded timings cost."""
        for lw in layers:
            if not (_fp32_vector(lw.attn_norm, c.d_model) and _fp32_vector(lw.mlp_norm,
                                                                           c.d_model)):
                return
            structs, shaped = {}, {}
            for name, (out, inp) in shapes.items():
                describe = getattr(getattr(lw, name), "native_operand", None)
                op = describe() if describe is not None else None
                s = _linear_struct(op, out, inp) if op is not None else None
                if s is None:
                    return
                structs[name] = s
                shaped[name] = LinearShape(op.kind, out, inp, operand_bytes(op))
                rows.append(op.max_rows)
                self._keep += [op.weight, op.scale, op.mins, op.in_scale, op.zero_term]
            # the layer's objects too: the key holds their ids, which are not reused while
            # the objects live
            self._keep += [lw.attn_norm, lw.mlp_norm, *(getattr(lw, n) for n in shapes)]
            descs.append(_Layer(attn_norm=lw.attn_norm.data_ptr(),
                                mlp_norm=lw.mlp_norm.data_ptr(), **structs))
            self.linear_shapes.append(shaped)
        if not descs:
            return
        self.layers = (_Layer * len(descs))(*descs)
        self.max_rows = min(rows)

    @staticmethod
    def key_of(layers) -> tuple:
        """What identifies the layers a plan describes: every norm's and linear's object."""
        return tuple(id(getattr(lw, name)) for lw in layers
                     for name in ("attn_norm", "qkv", "o", "mlp_norm", "gate_up", "down"))

    def runs(self, n_tokens: int) -> bool:
        """Whether every layer runs natively for a step of `n_tokens` rows."""
        return self.layers is not None and 0 < n_tokens <= self.max_rows

    def run(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, slots: torch.Tensor,
            plan: PagedPlan, view: NativeKV) -> torch.Tensor:
        """Every layer on the residual stream `x` [T, d_model] (fp32, updated in place and
        returned). `slots` from `fused.Glue.checked_slots`; `plan` the step's
        `paged_attention.PagedPlan` (its int32 tables and query starts, int64 positions);
        `view` the cache's whole store (`PagedKVCache.native_view()`: fp32 values, or INT8 or
        E4M3 codes with their [n_layers, 2, Hkv, n_blocks, bs] scales)."""
        m, t = self.model, x.shape[0]
        kv, kv_scales = view.kv, view.scales
        n_blocks, bs = kv.shape[3], kv.shape[4]
        # what the per-op path's own checks would refuse, refused before C reads anything
        if (x.dtype != torch.float32 or not x.is_contiguous() or x.shape != (t, m.d_model)
                or plan.positions.numel() != t or slots.shape != (t,)
                or slots.dtype != torch.int64 or cos.shape[0] != t or sin.shape[0] != t
                or cos.numel() != t * m.d_head or sin.numel() != t * m.d_head
                or not (cos.is_contiguous() and sin.is_contiguous())
                or kv.dim() != 6 or kv.shape[0] < m.n_layers or kv.shape[1:3] != (2, m.n_kv_heads)
                or kv.shape[5] != m.d_head or not kv.is_contiguous()
                or m.n_heads % m.n_kv_heads or m.n_heads // m.n_kv_heads > MAX_GROUP
                or (kv_scales is not None and (kv_scales.shape != kv.shape[:5]
                                               or not kv_scales.is_contiguous()))):
            raise ValueError("decoder: the step's tensors do not fit the model or the cache")
        scratch = torch.empty(t * self.per_token)
        sink = getattr(_recording, "sink", None)
        n_slots = m.n_layers * len(TIMING_KINDS) + 1
        timings = None if sink is None else torch.zeros(1 + 2 * n_slots, dtype=torch.int64)
        with nullcontext() if sink is None else torch.profiler.record_function(PROFILER_SPAN):
            self.lib.il_decoder_layers(
                ctypes.byref(self.model), self.layers, x.data_ptr(), t, cos.data_ptr(),
                sin.data_ptr(), slots.data_ptr(), plan.tables.data_ptr(), plan.qsl.data_ptr(),
                plan.positions.data_ptr(), plan.n_seqs, plan.tables.shape[1],
                KV_KINDS[view.kind], kv.data_ptr(),
                0 if kv_scales is None else kv_scales.data_ptr(), n_blocks, bs,
                scratch.data_ptr(), torch.get_num_threads(),
                0 if timings is None else timings.data_ptr())
        if sink is not None:
            sink.append(self._timing(timings.tolist(), t, plan, view.kind))
        return x

    def _timing(self, ns: list[int], n_tokens: int, plan: PagedPlan, kv_kind: str
                ) -> DecoderTiming:
        """The DecoderTiming of one call from its timings buffer (decoder.c's layout)."""
        per_layer = len(TIMING_KINDS)
        kernels = []
        for slot in range(self.model.n_layers * per_layer + 1):
            start, end = ns[1 + 2 * slot], ns[2 + 2 * slot]
            if end == 0:  # the final add runs only after a layer
                continue
            layer, j = divmod(slot, per_layer)
            kind = TIMING_KINDS[j] if layer < self.model.n_layers else FINAL_KIND
            kernels.append((kind, layer, start - ns[0], end - ns[0]))
        return DecoderTiming(tuple(kernels), n_tokens,
                             tuple(int(p) for p in plan.positions.tolist()),
                             tuple(int(q) for q in plan.qsl[:plan.n_seqs + 1].tolist()),
                             kv_kind, tuple(self.linear_shapes))
