"""A `.tflite` flatbuffer as plain frozen records: tensors, operators in stored order, weights.

`load_model(path_or_bytes)` reads the file with the `tflite` package and returns a `Model`.
Only subgraph 0 is read and planned, as TFLM invokes it; the number of subgraphs is kept
so a caller can say that control-flow subgraphs were left out.

Constant tensors (non-empty buffer data) are weights: they stay "in flash" and are handed
out as read-only memoryviews into the one copy of the file's bytes, never copied.

Everything a malformed file can do (too short, wrong file identifier, offsets pointing past
the end, a tensor without a shape) raises `ModelError`, a `ValueError` naming the problem.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import flatbuffers
import numpy as np

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

# TensorType enum value -> (dtype name, bytes per element as TFLM's TfLiteTypeSizeOf says).
# int4 is stored packed in the file but TFLM sizes its arena buffers one byte per element.
_TENSOR_TYPES: dict[int, tuple[str, int | None]] = {
    0: ("float32", 4),
    1: ("float16", 2),
    2: ("int32", 4),
    3: ("uint8", 1),
    4: ("int64", 8),
    5: ("string", None),
    6: ("bool", 1),
    7: ("int16", 2),
    8: ("complex64", 8),
    9: ("int8", 1),
    10: ("float64", 8),
    11: ("complex128", 16),
    12: ("uint64", 8),
    13: ("resource", 4),
    14: ("variant", None),
    15: ("uint32", 4),
    16: ("uint16", 2),
    17: ("int4", 1),
    18: ("bfloat16", 2),
}

ELEMENT_BYTES: dict[str, int] = {n: b for n, b in _TENSOR_TYPES.values() if b is not None}

_CUSTOM_OPCODE = 32  # BuiltinOperator.CUSTOM


class ModelError(ValueError):
    """The file is not a model this lab can read; the message names the problem."""


@dataclass(frozen=True)
class Quantization:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    quantized_dimension: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1


@dataclass(frozen=True)
class Tensor:
    """One tensor of subgraph 0. `nbytes` is elements x bytes per element, unaligned."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    quantization: Quantization | None
    buffer: int
    is_constant: bool
    is_variable: bool

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class Operator:
    """One operator in stored (execution) order.

    `op` is the builtin name ("CONV_2D") or, for custom ops, the custom code
    ("SignalRfft"). `options` holds the builtin options in snake_case ("stride_w",
    "padding": "SAME", "fused_activation_function": "RELU", "filter_height", ...) or,
    for custom ops, the decoded flexbuffer map. Tensor index -1 means an omitted input.
    """

    index: int
    op: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    options: Mapping[str, object]
    is_custom: bool = False
    version: int = 1


@dataclass(frozen=True, eq=False)
class Model:
    """Subgraph 0 of a `.tflite` file. `buffers[i]` is buffer i's bytes (empty if none)."""

    name: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    buffers: tuple[memoryview, ...] = field(repr=False)
    subgraph_count: int = 1
    description: str = ""
    metadata_names: tuple[str, ...] = ()

    def constant(self, tensor: int) -> memoryview:
        """The raw bytes of a constant tensor (a view into the file, read-only)."""
        t = self.tensors[tensor]
        if not t.is_constant:
            raise ValueError(f"tensor {tensor} {t.name!r} is not a constant")
        return self.buffers[t.buffer]

    def constant_array(self, tensor: int) -> np.ndarray:
        """A constant tensor as a read-only numpy view with its dtype and shape."""
        t = self.tensors[tensor]
        if t.dtype in ("int4", "string", "resource", "variant"):
            raise ValueError(f"tensor {tensor} {t.name!r}: {t.dtype} constants are not arrays")
        data = np.frombuffer(self.constant(tensor), dtype=np.dtype(t.dtype))
        if data.size != t.elements:
            raise ModelError(
                f"tensor {tensor} {t.name!r}: buffer holds {data.size} elements, "
                f"shape {list(t.shape)} needs {t.elements}"
            )
        return data.reshape(t.shape)


def load_model(source: str | os.PathLike | bytes | bytearray | memoryview) -> Model:
    """Read a `.tflite` model from a path or from its bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    else:
        with open(source, "rb") as f:
            data = f.read()
        name = os.path.splitext(os.path.basename(os.fspath(source)))[0]
    _check_header(data)
    try:
        return _read_model(data, name)
    except ModelError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:
        raise ModelError(
            f"{name}: truncated or corrupt flatbuffer ({len(data)} bytes): {exc}"
        ) from exc


def _check_header(data: bytes) -> None:
    if len(data) < 8:
        raise ModelError(f"truncated file: {len(data)} bytes, a .tflite file has at least 8")
    ident = data[4:8]
    if ident != FILE_IDENTIFIER:
        raise ModelError(
            f"not a TFLite model: file identifier is {ident!r}, expected {FILE_IDENTIFIER!r}"
        )
    (root,) = struct.unpack_from("<I", data, 0)
    if root < 8 or root + 4 > len(data):
        raise ModelError(
            f"not a valid flatbuffer: root table offset {root} lies outside the "
            f"{len(data)}-byte file (truncated?)"
        )


def _read_model(data: bytes, name: str) -> Model:
    # here, not at the top: the tflite reader is 187 generated modules (~33 ms), paid when a
    # model is read rather than by every command at start-up
    from tflite.Model import Model as FbModel

    fb = FbModel.GetRootAs(data, 0)
    version = fb.Version()
    if version != SCHEMA_VERSION:
        raise ModelError(f"schema version {version}, this reader supports {SCHEMA_VERSION}")
    if fb.SubgraphsLength() < 1:
        raise ModelError("model has no subgraph: nothing to plan")
    buffers = tuple(_read_buffer(fb, i, data) for i in range(fb.BuffersLength()))
    opcodes = [_read_opcode(fb.OperatorCodes(i)) for i in range(fb.OperatorCodesLength())]

    sg = fb.Subgraphs(0)
    if sg is None:
        raise ModelError("subgraph 0 is missing")
    tensors = tuple(_read_tensor(sg.Tensors(i), i, buffers) for i in range(sg.TensorsLength()))
    n = len(tensors)
    inputs = _index_vector(sg.InputsAsNumpy() if not sg.InputsIsNone() else (), n, "graph input")
    outputs = _index_vector(
        sg.OutputsAsNumpy() if not sg.OutputsIsNone() else (), n, "graph output"
    )
    operators = tuple(
        _read_operator(sg.Operators(i), i, opcodes, n, data) for i in range(sg.OperatorsLength())
    )
    meta = tuple(_checked_string(fb.Metadata(i), 0) for i in range(fb.MetadataLength()))
    return Model(
        name=name,
        tensors=tensors,
        operators=operators,
        inputs=inputs,
        outputs=outputs,
        buffers=buffers,
        subgraph_count=fb.SubgraphsLength(),
        description=_checked_string(fb, 3),
        metadata_names=meta,
    )


def _read_buffer(fb, i: int, data: bytes) -> memoryview:
    b = fb.Buffers(i)
    if b is None:
        return memoryview(b"")
    offset, size = b.Offset(), b.Size()
    if offset > 1:  # data stored after the flatbuffer (models over 2 GB)
        if offset + size > len(data):
            raise ModelError(
                f"buffer {i}: data at bytes {offset}..{offset + size} lies past the end "
                f"of the {len(data)}-byte file (truncated?)"
            )
        return memoryview(data)[offset : offset + size]
    if b.DataIsNone() or b.DataLength() == 0:
        return memoryview(b"")
    return memoryview(b.DataAsNumpy())


def _read_opcode(oc) -> tuple[str, bool, int]:
    code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
    if code == _CUSTOM_OPCODE:
        return _checked_string(oc, 1) or "CUSTOM", True, oc.Version()
    return _enum_names("BuiltinOperator").get(code, f"BUILTIN_{code}"), False, oc.Version()


def _read_tensor(t, i: int, buffers: tuple[memoryview, ...]) -> Tensor:
    name = _checked_string(t, 3)
    label = f"tensor {i} {name!r}"
    if t.ShapeIsNone():
        raise ModelError(f"{label} has no shape; every tensor needs one to be planned")
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    if any(d < 0 for d in shape):
        raise ModelError(f"{label} has a dynamic shape {list(shape)}; TFLM plans static shapes")
    dtype, size = _TENSOR_TYPES.get(t.Type(), (f"type{t.Type()}", None))
    if size is None:
        raise ModelError(f"{label} has type {dtype}, which TFLM cannot size")
    buffer = t.Buffer()
    if not 0 <= buffer < max(len(buffers), 1):
        raise ModelError(f"{label} points at buffer {buffer}; the model has {len(buffers)}")
    elements = int(np.prod(shape, dtype=np.int64)) if shape else 1
    constant = buffer < len(buffers) and len(buffers[buffer]) > 0
    return Tensor(
        index=i,
        name=name,
        shape=shape,
        dtype=dtype,
        nbytes=elements * size,
        quantization=_read_quantization(t.Quantization()),
        buffer=buffer,
        is_constant=constant,
        is_variable=bool(t.IsVariable()),
    )


def _read_quantization(q) -> Quantization | None:
    if q is None or q.ScaleIsNone() or q.ScaleLength() == 0:
        return None
    scale = tuple(float(s) for s in q.ScaleAsNumpy())
    zp = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,)
    return Quantization(scale, zp, int(q.QuantizedDimension()))


def _read_operator(op, i: int, opcodes, n_tensors: int, data: bytes) -> Operator:
    idx = op.OpcodeIndex()
    if not 0 <= idx < len(opcodes):
        raise ModelError(f"operator {i} uses opcode {idx}; the model has {len(opcodes)}")
    name, custom, version = opcodes[idx]
    where = f"operator {i} ({name})"
    inputs = _index_vector(_ints(op, "Inputs"), n_tensors, f"{where} input", optional=True)
    outputs = _index_vector(_ints(op, "Outputs"), n_tensors, f"{where} output")
    inter = _index_vector(_ints(op, "Intermediates"), n_tensors, f"{where} intermediate")
    if custom:
        options = _custom_options(op, data, where)
    else:
        options = _builtin_options(op)
    return Operator(
        index=i,
        op=name,
        inputs=inputs,
        outputs=outputs,
        intermediates=inter,
        options=MappingProxyType(options),
        is_custom=custom,
        version=version,
    )


def _ints(obj, field_name: str):
    if getattr(obj, f"{field_name}IsNone")():
        return ()
    return getattr(obj, f"{field_name}AsNumpy")()


def _index_vector(values, n: int, what: str, optional: bool = False) -> tuple[int, ...]:
    out = tuple(int(v) for v in values)
    for v in out:
        if not (0 <= v < n or (optional and v == -1)):
            raise ModelError(f"{what} refers to tensor {v}; subgraph 0 has {n} tensors")
    return out


def _custom_options(op, data: bytes, where: str) -> dict:
    offset, size = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
    if offset > 1:
        if offset + size > len(data):
            raise ModelError(f"{where}: custom options lie past the end of the file")
        raw = bytes(data[offset : offset + size])
    elif op.CustomOptionsIsNone():
        return {}
    else:
        raw = bytes(op.CustomOptionsAsNumpy())
    if not raw:
        return {}
    if op.CustomOptionsFormat() == 0:  # FLEXBUFFERS
        try:
            from flatbuffers import flexbuffers  # here: only a custom op's options need it

            decoded = flexbuffers.Loads(raw)
        except Exception:  # an op-specific encoding: keep the bytes
            decoded = None
        if isinstance(decoded, dict):
            return {str(k): v for k, v in decoded.items()}
    return {"raw": raw}


# ---- builtin options, read generically from the generated flatbuffer classes ------------

_ENUM_FIELDS = {
    "Padding": "Padding",
    "FusedActivationFunction": "ActivationFunctionType",
    "WeightsFormat": "FullyConnectedOptionsWeightsFormat",
    "KernelType": "LSTMKernelType",
    "Mode": "MirrorPadMode",
    "CombinerType": "CombinerType",
}
_DTYPE_FIELDS = {"QuantizedBiasType", "InDataType", "OutDataType", "OutputType", "IdxOutType"}
_SKIP_SUFFIXES = ("AsNumpy", "Length", "IsNone")


def _builtin_options(op) -> dict:
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return {}
    class_name = _enum_names("BuiltinOptions").get(kind)
    table = op.BuiltinOptions()
    if class_name is None or table is None:
        return {}
    cls, fields = _option_fields(class_name)
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out: dict[str, object] = {}
    for attr, fn, params in fields:
        if params == 1:
            value = fn(obj)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif not isinstance(value, (int, float, bool)):
                continue  # nested tables: not needed by any MCU kernel
            value = _decode_enum(attr, value)
        else:
            if getattr(obj, f"{attr}IsNone")():
                continue
            length = getattr(obj, f"{attr}Length")()
            value = tuple(_plain(fn(obj, j)) for j in range(length))
        out[_snake(attr)] = value
    return out


@functools.cache
def _option_fields(class_name: str):
    """The generated options class and its readable fields: (name, function, arity)."""
    cls = getattr(importlib.import_module(f"tflite.{class_name}"), class_name)
    fields = []
    for attr, fn in vars(cls).items():
        if attr.startswith("_") or attr == "Init" or not inspect.isfunction(fn):
            continue
        if attr.endswith(_SKIP_SUFFIXES):
            continue
        params = len(inspect.signature(fn).parameters)
        if params == 1 or (params == 2 and hasattr(cls, f"{attr}Length")):
            fields.append((attr, fn, params))
    return cls, tuple(fields)


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _decode_enum(attr: str, value):
    if attr in _DTYPE_FIELDS:
        if attr == "QuantizedBiasType" and value == 0:
            return None  # the schema default: "not set"
        return _TENSOR_TYPES.get(value, (value, None))[0]
    enum_name = _ENUM_FIELDS.get(attr)
    if enum_name is None:
        return value
    return _enum_names(enum_name).get(value, value)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@functools.cache
def _enum_names(module: str) -> dict[int, str]:
    """Value -> name of one of the schema's enums (BuiltinOperator, Padding, ...)."""
    cls = getattr(importlib.import_module(f"tflite.{module}"), module)
    return {v: k for k, v in vars(cls).items() if isinstance(v, int)}


def _checked_string(obj, field_id: int) -> str:
    """A string field, read with a bounds check (the generated reader would silently
    return a shortened string from a truncated file)."""
    if obj is None:
        return ""
    tab = obj._tab
    slot = tab.Offset(4 + 2 * field_id)
    if not slot:
        return ""
    at = slot + tab.Pos
    at += flatbuffers.encode.Get(flatbuffers.packer.uoffset, tab.Bytes, at)
    length = flatbuffers.encode.Get(flatbuffers.packer.uoffset, tab.Bytes, at)
    start = at + 4
    if start + length > len(tab.Bytes):
        raise ModelError(
            f"truncated file: a {length}-byte string at byte {start} runs past the end "
            f"({len(tab.Bytes)} bytes)"
        )
    return bytes(tab.Bytes[start : start + length]).decode("utf-8", "replace")
