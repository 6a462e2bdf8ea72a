"""Compile a `.tflite` model and its arena plan into C sources for the board firmware.

The firmware (`firmware/` at the top of the repository) has no interpreter: the host does
here, once, everything TFLM's Prepare would do on the board, and writes the result as
constant C data that stays in flash:

- every constant tensor an operator reads (filters, biases) as a `const` array;
- the operator list, each with its parameter struct: shapes, strides, padding, and the
  integer requantisation constants (per-channel multipliers and shifts, clamps, softmax
  and ADD parameters) computed by the same functions the arena interpreter uses
  (`engines.mcu.kernels`), so the board and the interpreter agree bit for bit;
- the planned buffers in the canonical order of the wire protocol (size, first and last
  step, default offset), so the board can check and take a PLAN from the host;
- the graph inputs and outputs, the model's SHA-256 and size (HELLO reports them);
- ONE static arena of `ARENA_SIZE` bytes (the plan's arena), 16-byte aligned.

`generate(model)` returns a `GeneratedModel` (the text of `model.c` and `model.h` plus the
figures); `board_config_h(preset, target)` the text of `board_config.h`. On Arm builds the
constants go to section `.model_data` and the arena to `.arena` (see
`firmware/ports/cortex-m/link.ld.in`); the host port keeps them in ordinary sections.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from inferlab.engines.mcu.graph import Model, load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.kernels.common import (
    OpContext,
    UnsupportedOpError,
    pad_before,
    scale_of,
    scales_of,
    zero_point_of,
)
from inferlab.engines.mcu.kernels.conv import conv_params, per_channel_multipliers
from inferlab.engines.mcu.kernels.depthwise import depthwise_params
from inferlab.engines.mcu.kernels.elementwise import ADD_LEFT_SHIFT_INT8, add_params
from inferlab.engines.mcu.kernels.fixed_point import activation_range, quantize_multiplier
from inferlab.engines.mcu.kernels.fully_connected import per_tensor_multiplier
from inferlab.engines.mcu.kernels.softmax import softmax_params
from inferlab.engines.mcu.lifetimes import model_buffers
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import plan_buffers

_DTYPES = {"int8": "FW_INT8", "int16": "FW_INT16", "int32": "FW_INT32",
           "float32": "FW_FLOAT32", "uint8": "FW_UINT8"}
_C_TYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "uint8": "uint8_t",
            "float32": "uint32_t"}  # float32 constants are written as their bits
MAX_ADD_DIMS = 6
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CodegenError(ValueError):
    """The model cannot be compiled for the firmware; the message says why."""


@dataclass(frozen=True)
class GeneratedModel:
    """C sources for one model and plan, and what they hold."""

    name: str
    symbol: str
    sha256: str  # hex, of the .tflite file
    model_bytes: int  # the .tflite file's size
    arena_bytes: int  # ARENA_SIZE: the plan's arena
    weights_bytes: int  # constant tensor bytes written to flash
    op_count: int
    buffer_count: int
    input_bytes: int
    output_bytes: int
    plan: Plan = field(repr=False)
    model_c: str = field(repr=False)
    model_h: str = field(repr=False)

    def write(self, out_dir: str | os.PathLike, stem: str = "model") -> list[Path]:
        """Write `<stem>.c` and `<stem>.h` into `out_dir` (only files whose text changed,
        so that make rebuilds only what it must). Returns the two paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / f"{stem}.c", out / f"{stem}.h"]
        for path, text in zip(paths, (self.model_c, self.model_h), strict=True):
            write_if_changed(path, text)
        return paths


def write_if_changed(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it already holds exactly that; True if written."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return True


def generate(source: str | os.PathLike | bytes | Model, *, planner: str = "tflm-greedy",
             plan: Plan | None = None, symbol: str = "fw_model",
             model_bytes: bytes | None = None) -> GeneratedModel:
    """Compile a model (a `.tflite` path, its bytes, or a `Model` with `model_bytes`) and a
    plan (default: `planner` over the model's canonical buffers) into C sources."""
    if not _SYMBOL.fullmatch(symbol):
        raise CodegenError(f"symbol {symbol!r} is not a C identifier")
    if isinstance(source, Model):
        if model_bytes is None:
            raise CodegenError("a Model needs its file's bytes (model_bytes) for the hash")
        model, data = source, bytes(model_bytes)
    else:
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
        else:
            data = Path(source).read_bytes()
        model = load_model(data)
        if not isinstance(source, (bytes, bytearray, memoryview)):
            model = _renamed(model, Path(source).stem)
    buffers = tuple(model_buffers(model))
    if plan is None:
        plan = plan_buffers(buffers, planner)
    elif tuple(plan.buffers) != buffers:
        raise CodegenError("the plan was made for another model (its buffers differ)")
    try:  # the interpreter's checks: every operator supported and consistent
        ArenaInterpreter(model, plan)
    except (UnsupportedOpError, ValueError) as exc:
        raise CodegenError(f"{model.name}: {exc}") from None
    return _Writer(model, data, plan, symbol).run()


def _renamed(model: Model, name: str) -> Model:
    return replace(model, name=name) if model.name == "<bytes>" else model


def board_config_h(board_id: str, board_name: str, sram_bytes: int, flash_bytes: int) -> str:
    """The text of `board_config.h`: what HELLO says about the board and the sizes the
    linker script caps RAM and flash at."""
    return (
        "/* Written by inferlab board build: the board preset this image is built for. */\n"
        "#ifndef FW_BOARD_CONFIG_H\n#define FW_BOARD_CONFIG_H\n"
        f"#define FW_BOARD_ID {_c_string(board_id)}\n"
        f"#define FW_BOARD_NAME {_c_string(board_name)}\n"
        f"#define FW_SRAM_BYTES {int(sram_bytes)}\n"
        f"#define FW_FLASH_BYTES {int(flash_bytes)}\n"
        "#endif\n"
    )


def _c_string(text: str) -> str:
    data = text.encode("utf-8")[:64]
    out = []
    for b in data:
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in '"\\?' else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _c_float(value: float) -> str:
    f = float(np.float32(value))
    if not np.isfinite(f):
        raise CodegenError(f"scale {value} is not finite")
    return f"{f.hex()}f"


def _int_list(values: Sequence[int], per_line: int = 24) -> str:
    vals = [str(int(v)) for v in values]
    lines = [", ".join(vals[i:i + per_line]) for i in range(0, len(vals), per_line)]
    return "\n    " + ",\n    ".join(lines) + "\n" if lines else "0"


class _Writer:
    """Builds model.c section by section."""

    def __init__(self, model: Model, data: bytes, plan: Plan, symbol: str):
        self.model, self.data, self.plan, self.symbol = model, data, plan, symbol
        self.buffer_of = {b.tensor: i for i, b in enumerate(plan.buffers) if b.tensor is not None}
        self.decls: list[str] = []
        self.constants: dict[int, str] = {}  # tensor index -> C name
        self.weights_bytes = 0

    # ---- small emitters -------------------------------------------------------------

    def array(self, name: str, ctype: str, values, align: int = 4) -> str:
        values = list(values)
        n = max(1, len(values))
        self.decls.append(f"static const {ctype} {name}[{n}] FW_MODEL_DATA "
                          f"__attribute__((aligned({align}))) = {{{_int_list(values)}}};\n")
        return name

    def struct(self, ctype: str, name: str, fields: dict[str, str]) -> str:
        body = "".join(f"    .{k} = {v},\n" for k, v in fields.items())
        self.decls.append(f"static const {ctype} {name} FW_MODEL_DATA = {{\n{body}}};\n")
        return name

    def constant(self, t: int) -> str:
        """The C array holding constant tensor t (written once)."""
        if t in self.constants:
            return self.constants[t]
        tensor = self.model.tensors[t]
        if tensor.dtype not in _C_TYPES:
            raise CodegenError(f"constant tensor {t} {tensor.name!r} is {tensor.dtype}")
        raw = np.frombuffer(self.model.constant(t), dtype=np.dtype(tensor.dtype))
        if tensor.dtype == "float32":
            raw = raw.view(np.uint32)
        name = self.array(f"c{t}", _C_TYPES[tensor.dtype], raw.tolist())
        self.constants[t] = name
        self.weights_bytes += tensor.nbytes
        return name

    def ref(self, t: int) -> str:
        """A fw_tref_t initialiser for tensor t: its arena buffer, or its constant data."""
        tensor = self.model.tensors[t]
        if t in self.buffer_of:
            return f"{{.buf = {self.buffer_of[t]}, .data = 0}}"
        if tensor.is_constant:
            return f"{{.buf = -1, .data = {self.constant(t)}}}"
        raise CodegenError(f"tensor {t} {tensor.name!r} has neither an arena buffer nor data"
                           f"{' (a variable)' if tensor.is_variable else ''}")

    def optional_constant(self, op, k: int, want: str) -> str:
        t = op.inputs[k] if k < len(op.inputs) else -1
        if t < 0:
            return "0"
        tensor = self.model.tensors[t]
        if not tensor.is_constant:
            raise CodegenError(f"operator {op.index} ({op.op}): input {k} must be constant "
                               f"data for the firmware")
        if tensor.dtype != want:
            raise CodegenError(f"operator {op.index} ({op.op}): input {k} is {tensor.dtype}, "
                               f"expected {want}")
        return self.constant(t)

    # ---- operators --------------------------------------------------------------------

    def run(self) -> GeneratedModel:
        model, plan = self.model, self.plan
        ops = []
        for op in model.operators:
            kind, params = self.operator(op)
            ops.append(f"    {{{kind}, &{params}}},\n")
        sym = self.symbol
        n_ops, n_buf = len(model.operators), len(plan.buffers)
        macs = [min(op_macs(model, i), 0xFFFFFFFF) for i in range(n_ops)]
        self.array("op_macs", "uint32_t", macs)
        buffers = "".join(f"    {{{b.size}u, {b.first}, {b.last}}},\n" for b in plan.buffers)
        io = {}
        for label, tensors in (("inputs", model.inputs), ("outputs", model.outputs)):
            rows = []
            for t in tensors:
                if t not in self.buffer_of:
                    raise CodegenError(f"graph {label[:-1]} tensor {t} has no arena buffer")
                rows.append(f"    {{{self.buffer_of[t]}, {model.tensors[t].nbytes}u}},\n")
            io[label] = rows
        input_bytes = sum(model.tensors[t].nbytes for t in model.inputs)
        output_bytes = sum(model.tensors[t].nbytes for t in model.outputs)
        arena_size = max(16, plan.arena_bytes)
        digest = hashlib.sha256(self.data).digest()
        c = [
            f"/* {model.name}: generated by engines/board/codegen.py from the .tflite file\n"
            f" * (sha256 {digest.hex()}) and its {plan.planner} plan. Do not edit. */\n",
            '#include "fw_model.h"\n\n',
            "#if defined(__arm__)\n",
            '#define FW_MODEL_DATA __attribute__((section(".model_data")))\n',
            '#define FW_ARENA_DATA __attribute__((section(".arena"), aligned(16)))\n',
            "#else\n#define FW_MODEL_DATA\n#define FW_ARENA_DATA __attribute__((aligned(16)))\n",
            "#endif\n\n",
            f"#define ARENA_SIZE {arena_size}u\n\n",
            *self.decls,
            f"\nstatic const fw_op_t ops[{max(1, n_ops)}] FW_MODEL_DATA = {{\n{''.join(ops)}}};\n",
            f"static const fw_buffer_t buffers[{max(1, n_buf)}] FW_MODEL_DATA = {{\n{buffers}}};\n",
        ]
        self.decls = []
        self.array("default_offsets", "uint32_t", plan.offsets)
        self.array("model_sha256", "uint8_t", list(digest), align=1)
        c += self.decls
        c += [
            f"static const fw_io_t inputs[{max(1, len(io['inputs']))}] FW_MODEL_DATA = "
            f"{{\n{''.join(io['inputs'])}}};\n",
            f"static const fw_io_t outputs[{max(1, len(io['outputs']))}] FW_MODEL_DATA = "
            f"{{\n{''.join(io['outputs'])}}};\n\n",
            "static uint8_t arena[ARENA_SIZE] FW_ARENA_DATA;\n",
            f"static uint32_t offsets[{max(1, n_buf)}];\n",
            f"static uint32_t plan_staging[{max(1, n_buf)}];\n",
            f"static uint64_t op_ticks[{max(1, n_ops)}];\n\n",
            f"const fw_model_t {sym} FW_MODEL_DATA = {{\n",
            f"    .name = {_c_string(model.name)},\n",
            "    .sha256 = model_sha256,\n",
            f"    .model_bytes = {len(self.data)}u,\n",
            f"    .op_count = {n_ops},\n    .ops = ops,\n    .op_macs = op_macs,\n",
            f"    .buffer_count = {n_buf},\n    .buffers = buffers,\n",
            "    .default_offsets = default_offsets,\n",
            f"    .default_arena_bytes = {plan.arena_bytes}u,\n",
            f"    .input_count = {len(model.inputs)},\n    .output_count = {len(model.outputs)},\n",
            "    .inputs = inputs,\n    .outputs = outputs,\n",
            f"    .input_bytes = {input_bytes}u,\n    .output_bytes = {output_bytes}u,\n",
            "    .arena = arena,\n    .arena_capacity = ARENA_SIZE,\n",
            "    .offsets = offsets,\n    .plan_staging = plan_staging,\n",
            "    .op_ticks = op_ticks,\n};\n",
        ]
        h = (f"/* {model.name}: generated by engines/board/codegen.py. Do not edit. */\n"
             "#ifndef FW_GENERATED_MODEL_H\n#define FW_GENERATED_MODEL_H\n"
             '#include "fw_model.h"\n'
             f"extern const fw_model_t {sym};\n"
             f"#define FW_MODEL {sym}\n"
             f"#define FW_ARENA_SIZE {arena_size}u\n"
             "#endif\n")
        return GeneratedModel(
            name=model.name, symbol=sym, sha256=digest.hex(), model_bytes=len(self.data),
            arena_bytes=plan.arena_bytes, weights_bytes=self.weights_bytes, op_count=n_ops,
            buffer_count=n_buf, input_bytes=input_bytes, output_bytes=output_bytes,
            plan=plan, model_c="".join(c), model_h=h)

    def operator(self, op) -> tuple[str, str]:
        ctx = OpContext(self.model, op, ())
        name = f"op{op.index}"
        kind = op.op
        if kind == "CONV_2D":
            return "FW_OP_CONV", self.conv(ctx, name, depthwise=False)
        if kind == "DEPTHWISE_CONV_2D":
            return "FW_OP_DEPTHWISE", self.conv(ctx, name, depthwise=True)
        if kind == "FULLY_CONNECTED":
            return "FW_OP_FULLY_CONNECTED", self.fully_connected(ctx, name)
        if kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            k = "FW_OP_AVERAGE_POOL" if kind == "AVERAGE_POOL_2D" else "FW_OP_MAX_POOL"
            return k, self.pool(ctx, name)
        if kind == "SOFTMAX":
            return "FW_OP_SOFTMAX", self.softmax(ctx, name)
        if kind == "ADD":
            return "FW_OP_ADD", self.add(ctx, name)
        if kind in ("QUANTIZE", "DEQUANTIZE"):
            return self.quantize(ctx, name)
        if kind == "RESHAPE":
            x, y = ctx.tensor_in(0), ctx.tensor_out(0)
            return "FW_OP_RESHAPE", self.struct("fw_reshape_t", name, {
                "in": self.ref(x.index), "out": self.ref(y.index), "bytes": f"{y.nbytes}u"})
        raise CodegenError(f"operator {op.index} ({kind}) has no firmware kernel")

    def multipliers(self, name: str, mult, shift) -> dict[str, str]:
        mult = np.atleast_1d(np.asarray(mult, dtype=np.int64))
        shift = np.atleast_1d(np.asarray(shift, dtype=np.int64))
        if np.any(shift < -31) or np.any(shift > 31):
            raise CodegenError(f"{name}: a requantisation shift is outside -31..31")
        return {"multiplier": self.array(f"{name}_mult", "int32_t", mult.tolist()),
                "shift": self.array(f"{name}_shift", "int8_t", shift.tolist(), align=1)}

    def conv(self, ctx: OpContext, name: str, depthwise: bool) -> str:
        xt, wt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
        n, h, w, cin = xt.shape
        _, oh, ow, cout = yt.shape
        if depthwise:
            _, kh, kw, _ = wt.shape
            p, depth_multiplier = depthwise_params(ctx)
            filter_c = cout
        else:
            _, kh, kw, filter_c = wt.shape
            p, depth_multiplier = conv_params(ctx), 1
        mult, shift = p.multiplier, p.shift
        geometry = dict(stride_h=p.stride_h, stride_w=p.stride_w, dilation_h=p.dilation_h,
                        dilation_w=p.dilation_w, pad_h=p.pad_h, pad_w=p.pad_w,
                        input_offset=p.input_offset, output_offset=p.output_offset,
                        act_min=p.act_min, act_max=p.act_max)
        dims = dict(batches=n, in_h=h, in_w=w, in_c=cin, out_h=oh, out_w=ow, out_c=cout,
                    k_h=kh, k_w=kw, filter_c=filter_c, depth_multiplier=depth_multiplier)
        for key, v in dims.items():
            if not 0 < v <= 0xFFFF:
                raise CodegenError(f"{ctx.where}: {key} = {v} is outside 1..65535")
        fields = {"in": self.ref(xt.index), "out": self.ref(yt.index),
                  "filter": self.optional_constant(ctx.op, 1, "int8"),
                  "bias": self.optional_constant(ctx.op, 2, "int32"),
                  **self.multipliers(name, mult, shift)}
        fields |= {k: str(int(v)) for k, v in (dims | geometry).items()}
        return self.struct("fw_conv_t", name, fields)

    def fully_connected(self, ctx: OpContext, name: str) -> str:
        xt, wt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
        units, depth = wt.shape
        scales = scales_of(wt)
        if len(scales) > 1:
            mult, shift = per_channel_multipliers(scale_of(xt), scales, scale_of(yt), units)
        else:
            mult, shift = per_tensor_multiplier(scale_of(xt), scales[0], scale_of(yt))
        lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"),
                                  scale_of(yt), zero_point_of(yt))
        fields = {"in": self.ref(xt.index), "out": self.ref(yt.index),
                  "filter": self.optional_constant(ctx.op, 1, "int8"),
                  "bias": self.optional_constant(ctx.op, 2, "int32"),
                  **self.multipliers(name, mult, shift),
                  "batches": f"{xt.elements // depth}u", "units": f"{units}u",
                  "depth": f"{depth}u", "input_offset": str(-zero_point_of(xt)),
                  "filter_offset": str(-zero_point_of(wt)),
                  "output_offset": str(zero_point_of(yt)), "act_min": str(lo),
                  "act_max": str(hi), "per_channel": str(int(len(scales) > 1))}
        return self.struct("fw_fc_t", name, fields)

    def pool(self, ctx: OpContext, name: str) -> str:
        xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
        n, h, w, c = xt.shape
        _, oh, ow, _ = yt.shape
        fh, fw = int(ctx.option("filter_height", 1)), int(ctx.option("filter_width", 1))
        sh, sw = int(ctx.option("stride_h", 1)), int(ctx.option("stride_w", 1))
        lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"),
                                  scale_of(yt), zero_point_of(yt))
        values = dict(batches=n, in_h=h, in_w=w, channels=c, out_h=oh, out_w=ow, filter_h=fh,
                      filter_w=fw, stride_h=sh, stride_w=sw, pad_h=pad_before(sh, 1, h, fh, oh),
                      pad_w=pad_before(sw, 1, w, fw, ow), act_min=lo, act_max=hi)
        return self.struct("fw_pool_t", name, {"in": self.ref(xt.index),
                                               "out": self.ref(yt.index),
                                               **{k: str(int(v)) for k, v in values.items()}})

    def softmax(self, ctx: OpContext, name: str) -> str:
        xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
        multiplier, left_shift, diff_min = softmax_params(float(ctx.option("beta", 1.0)),
                                                          scale_of(xt))
        depth = xt.shape[-1]
        return self.struct("fw_softmax_t", name, {
            "in": self.ref(xt.index), "out": self.ref(yt.index),
            "rows": f"{xt.elements // depth}u", "depth": f"{depth}u",
            "input_multiplier": str(multiplier), "input_left_shift": str(left_shift),
            "diff_min": str(diff_min), "out_dtype": _DTYPES[yt.dtype]})

    def add(self, ctx: OpContext, name: str) -> str:
        at, bt, yt = ctx.tensor_in(0), ctx.tensor_in(1), ctx.tensor_out(0)
        (m1, s1), (m2, s2), (mo, so) = add_params(scale_of(at), scale_of(bt), scale_of(yt))
        lo, hi = activation_range(ctx.option("fused_activation_function", "NONE"),
                                  scale_of(yt), zero_point_of(yt))
        fields = {"a": self.ref(at.index), "b": self.ref(bt.index), "out": self.ref(yt.index),
                  "count": f"{yt.elements}u"}
        if tuple(at.shape) == tuple(bt.shape) == tuple(yt.shape):
            fields["dims"] = "0"
        else:
            out_shape = tuple(yt.shape)
            if len(out_shape) > MAX_ADD_DIMS:
                raise CodegenError(f"{ctx.where}: broadcast over {len(out_shape)} dimensions "
                                   f"(the firmware takes {MAX_ADD_DIMS})")
            fields["dims"] = str(len(out_shape))
            fields["out_shape"] = "{" + ", ".join(f"{d}u" for d in out_shape) + "}"
            fields["a_stride"] = _broadcast_strides(at.shape, out_shape)
            fields["b_stride"] = _broadcast_strides(bt.shape, out_shape)
        fields |= {"a_offset": str(-zero_point_of(at)), "b_offset": str(-zero_point_of(bt)),
                   "output_offset": str(zero_point_of(yt)), "a_multiplier": str(m1),
                   "b_multiplier": str(m2), "output_multiplier": str(mo), "a_shift": str(s1),
                   "b_shift": str(s2), "output_shift": str(so),
                   "left_shift": str(ADD_LEFT_SHIFT_INT8), "act_min": str(lo),
                   "act_max": str(hi)}
        return self.struct("fw_add_t", name, fields)

    def quantize(self, ctx: OpContext, name: str) -> tuple[str, str]:
        xt, yt = ctx.tensor_in(0), ctx.tensor_out(0)
        fields = {"in": self.ref(xt.index), "out": self.ref(yt.index),
                  "count": f"{yt.elements}u", "in_dtype": _DTYPES[xt.dtype],
                  "out_dtype": _DTYPES[yt.dtype]}
        if ctx.op.op == "DEQUANTIZE":
            fields |= {"scale": _c_float(scale_of(xt)), "zero_point": str(zero_point_of(xt))}
            return "FW_OP_DEQUANTIZE", self.struct("fw_quant_t", name, fields)
        if xt.dtype == "float32":
            fields |= {"scale": _c_float(scale_of(yt)), "zero_point": str(zero_point_of(yt))}
            return "FW_OP_QUANTIZE", self.struct("fw_quant_t", name, fields)
        multiplier, shift = quantize_multiplier(scale_of(xt) / scale_of(yt))
        fields |= {"in_zero_point": str(zero_point_of(xt)),
                   "out_zero_point": str(zero_point_of(yt)), "multiplier": str(multiplier),
                   "shift": str(shift)}
        return "FW_OP_REQUANTIZE", self.struct("fw_quant_t", name, fields)


def _broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> str:
    """Element strides of `shape` read as `out_shape` (numpy broadcasting: dimensions
    aligned at the right, stride 0 where the input has size 1 or lacks the dimension)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    strides, step = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = 0 if shape[d] == 1 else step
        step *= shape[d]
    return "{" + ", ".join(f"{s}u" for s in strides) + "}"
