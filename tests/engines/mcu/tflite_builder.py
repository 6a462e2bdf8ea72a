"""The MCU tests' `.tflite` writer: a model from a plain description, written with the
`tflite` package's generated flatbuffer builder functions.

A model is a list of tensors, a list of operators and the graph's inputs and outputs
(tensor indices).

- tensor: a dict with shape (None: the field is left out), dtype (a TensorType name in
  lower case, "int8" if absent, or a TensorType number), name ("t<index>" if absent),
  variable, data (bytes or an array: a constant, in a buffer of its own) and, for a
  quantized tensor, scale (a list), zp (a list, zeros if absent) and qdim.
- operator: a dict with op (a BuiltinOperator name) or custom (a custom code name),
  inputs, outputs, intermediates, and options: the fields of the op's builtin options
  table in CamelCase ({"Padding": PADDING["SAME"], "StrideW": 2, ...}); None or absent
  writes no options table.
"""

from __future__ import annotations

import importlib

import flatbuffers
import numpy as np
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.TensorType import TensorType

# Schema enum values the tests name in their options.
PADDING = {"SAME": 0, "VALID": 1}
ACT = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

# builtin op -> its options table, for the ops the tests give options to
OPTIONS = {
    "ADD": "AddOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "SOFTMAX": "SoftmaxOptions",
}


def _schema(name: str):
    """A generated schema module (not the class the package re-exports under its name)."""
    return importlib.import_module(f"tflite.{name}")


def _dtype(dtype) -> int:
    return getattr(TensorType, dtype.upper()) if isinstance(dtype, str) else dtype


def _bytes(data) -> np.ndarray:
    if isinstance(data, bytes | bytearray):
        return np.frombuffer(data, dtype=np.uint8)
    return np.ascontiguousarray(data).view(np.uint8).ravel()


def write_tflite(
    tensors: list[dict],
    operators: list[dict],
    inputs,
    outputs,
    *,
    description: str | None = None,
    version: int = 3,
    subgraphs: int = 1,
    identifier: bytes = b"TFL3",
) -> bytes:
    """The `.tflite` bytes of the model described (see the module docstring); subgraphs
    copies of the one subgraph."""
    Buffer, Model, Operator, OperatorCode, QP, SubGraph, Tensor = map(
        _schema,
        ("Buffer", "Model", "Operator", "OperatorCode", "QuantizationParameters", "SubGraph",
         "Tensor"),
    )  # fmt: skip
    b = flatbuffers.Builder(1024)

    def ints(values, dtype=np.int32):
        return b.CreateNumpyVector(np.asarray(values, dtype=dtype))

    def vector(offsets, start):
        start(b, len(offsets))
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    # Buffers: 0 is the empty sentinel; each constant gets one of its own.
    Buffer.Start(b)
    buffer_offsets, tensor_buffer = [Buffer.End(b)], []
    for t in tensors:
        if t.get("data") is None:
            tensor_buffer.append(0)
            continue
        raw = _bytes(t["data"])
        data = b.CreateNumpyVector(raw) if raw.size else None
        Buffer.Start(b)
        if data is not None:
            Buffer.AddData(b, data)
        tensor_buffer.append(len(buffer_offsets))
        buffer_offsets.append(Buffer.End(b))

    tensor_offsets = []
    for i, t in enumerate(tensors):
        name = b.CreateString(t.get("name", f"t{i}"))
        shape = ints(t["shape"]) if t.get("shape") is not None else None
        quant = None
        if "scale" in t:
            scale = ints(t["scale"], np.float32)
            zp = ints(t.get("zp", [0] * len(t["scale"])), np.int64)
            QP.Start(b)
            QP.AddScale(b, scale)
            QP.AddZeroPoint(b, zp)
            QP.AddQuantizedDimension(b, t.get("qdim", 0))
            quant = QP.End(b)
        Tensor.Start(b)
        if shape is not None:
            Tensor.AddShape(b, shape)
        Tensor.AddType(b, _dtype(t.get("dtype", "int8")))
        Tensor.AddBuffer(b, tensor_buffer[i])
        Tensor.AddName(b, name)
        if quant is not None:
            Tensor.AddQuantization(b, quant)
        Tensor.AddIsVariable(b, bool(t.get("variable", False)))
        tensor_offsets.append(Tensor.End(b))

    codes: list[tuple[str, bool]] = []  # (op or custom code name, custom), in order of use
    op_offsets = []
    for op in operators:
        key = (op["custom"], True) if "custom" in op else (op["op"], False)
        if key not in codes:
            codes.append(key)
        opts, options = None, op.get("options")
        table = None if "custom" in op else OPTIONS.get(op["op"])
        if options is not None and table is not None:
            mod = _schema(table)
            mod.Start(b)
            for field, value in options.items():
                getattr(mod, f"Add{field}")(b, value)
            opts = mod.End(b)
        elif options:
            raise ValueError(f"no options table known for {key[0]}: {options}")
        ins, outs = ints(op.get("inputs", [])), ints(op.get("outputs", []))
        inter = ints(op["intermediates"]) if op.get("intermediates") else None
        Operator.Start(b)
        Operator.AddOpcodeIndex(b, codes.index(key))
        Operator.AddInputs(b, ins)
        Operator.AddOutputs(b, outs)
        if opts is not None:
            Operator.AddBuiltinOptionsType(b, getattr(BuiltinOptions, table))
            Operator.AddBuiltinOptions(b, opts)
        if inter is not None:
            Operator.AddIntermediates(b, inter)
        op_offsets.append(Operator.End(b))

    sg_tensors = vector(tensor_offsets, SubGraph.StartTensorsVector)
    sg_ops = vector(op_offsets, SubGraph.StartOperatorsVector)
    sg_in, sg_out = ints(inputs), ints(outputs)
    subgraph_offsets = []
    for _ in range(subgraphs):
        SubGraph.Start(b)
        SubGraph.AddTensors(b, sg_tensors)
        SubGraph.AddInputs(b, sg_in)
        SubGraph.AddOutputs(b, sg_out)
        SubGraph.AddOperators(b, sg_ops)
        subgraph_offsets.append(SubGraph.End(b))

    code_offsets = []
    for key, custom in codes:
        code = BuiltinOperator.CUSTOM if custom else getattr(BuiltinOperator, key)
        name = b.CreateString(key) if custom else None
        OperatorCode.Start(b)
        OperatorCode.AddDeprecatedBuiltinCode(b, min(code, 127))
        OperatorCode.AddBuiltinCode(b, code)
        if name is not None:
            OperatorCode.AddCustomCode(b, name)
        OperatorCode.AddVersion(b, 1)
        code_offsets.append(OperatorCode.End(b))

    codes_vec = vector(code_offsets, Model.StartOperatorCodesVector)
    subgraphs_vec = vector(subgraph_offsets, Model.StartSubgraphsVector)
    buffers_vec = vector(buffer_offsets, Model.StartBuffersVector)
    desc = b.CreateString(description) if description is not None else None
    Model.Start(b)
    Model.AddVersion(b, version)
    Model.AddOperatorCodes(b, codes_vec)
    Model.AddSubgraphs(b, subgraphs_vec)
    Model.AddBuffers(b, buffers_vec)
    if desc is not None:
        Model.AddDescription(b, desc)
    b.Finish(Model.End(b), file_identifier=identifier)
    return bytes(b.Output())


def one_op_model(tensors: list[dict], op: str, options: dict, inputs, outputs) -> bytes:
    """A model of one builtin operator; its inputs that are not constants (nor -1, an
    absent optional input) are the graph's inputs."""
    graph_inputs = [i for i in inputs if i >= 0 and tensors[i].get("data") is None]
    operator = {"op": op, "inputs": inputs, "outputs": outputs, "options": options}
    return write_tflite(tensors, [operator], graph_inputs, outputs,
                        description="inferlab kernel test")  # fmt: skip
