"""Test data for the MCU engine tests: the shared model folder and a small .tflite writer."""

from __future__ import annotations

import importlib
import random
import re
from pathlib import Path

import flatbuffers
import numpy as np
import pytest

# The `shared` folder lies beside the repository: <repo>/../shared/models.
MODELS_DIR = (Path(__file__).resolve().parents[3] / ".." / "shared" / "models").resolve()


def model_paths() -> list[Path]:
    return sorted(MODELS_DIR.glob("*.tflite")) if MODELS_DIR.is_dir() else []


def tflm_heads_from_sources() -> dict[str, int]:
    """model stem -> TFLM's measured head bytes, read from the table in SOURCES.md."""
    text = (MODELS_DIR / "SOURCES.md").read_text()
    section = text.split("Measured TFLM arena usage", 1)[-1]
    rows = re.findall(r"^\|\s*([A-Za-z0-9_]+)\s*\|\s*([\d,]+)\s*\|", section, re.M)
    return {stem: int(head.replace(",", "")) for stem, head in rows}


needs_models = pytest.mark.skipif(
    not model_paths(), reason=f"shared model folder {MODELS_DIR} is absent"
)


def build_tflite(
    tensors: list[dict],
    operators: list[dict],
    inputs: list[int],
    outputs: list[int],
    *,
    version: int = 3,
    subgraphs: int = 1,
    identifier: bytes = b"TFL3",
) -> bytes:
    """Write a small .tflite flatbuffer.

    tensors: dicts with shape (None: leave the field out), dtype (TensorType value, default
    int8), data (bytes for a constant), name, variable.
    operators: dicts with code (builtin code) or custom (custom code name), inputs, outputs,
    intermediates, concat_axis (writes ConcatenationOptions).
    """
    # The schema modules (not the classes the package re-exports under the same names).
    Buf, Mod, Op, Code, Sub, Ten = (
        importlib.import_module(f"tflite.{m}")
        for m in ("Buffer", "Model", "Operator", "OperatorCode", "SubGraph", "Tensor")
    )

    b = flatbuffers.Builder(1024)

    def ints(values):
        return b.CreateNumpyVector(np.asarray(values, dtype=np.int32))

    # Buffers: 0 is the empty sentinel; constants get one each.
    buffer_data = [None]
    tensor_buffer = []
    for t in tensors:
        if t.get("data") is not None:
            tensor_buffer.append(len(buffer_data))
            buffer_data.append(t["data"])
        else:
            tensor_buffer.append(0)
    buffer_offsets = []
    for data in buffer_data:
        vec = b.CreateNumpyVector(np.frombuffer(data, dtype=np.uint8)) if data else None
        Buf.Start(b)
        if vec is not None:
            Buf.AddData(b, vec)
        buffer_offsets.append(Buf.End(b))

    codes, code_index = [], {}
    for op in operators:
        key = op.get("custom") or op.get("code", 9)
        if key not in code_index:
            code_index[key] = len(codes)
            codes.append(key)
    code_offsets = []
    for key in codes:
        name = b.CreateString(key) if isinstance(key, str) else None
        Code.Start(b)
        code = 32 if isinstance(key, str) else key
        Code.AddDeprecatedBuiltinCode(b, min(code, 127))
        Code.AddBuiltinCode(b, code)
        if name is not None:
            Code.AddCustomCode(b, name)
        Code.AddVersion(b, 1)
        code_offsets.append(Code.End(b))

    tensor_offsets = []
    for i, t in enumerate(tensors):
        name = b.CreateString(t.get("name", f"t{i}"))
        shape = ints(t["shape"]) if t.get("shape") is not None else None
        Ten.Start(b)
        if shape is not None:
            Ten.AddShape(b, shape)
        Ten.AddType(b, t.get("dtype", 9))
        Ten.AddBuffer(b, tensor_buffer[i])
        Ten.AddName(b, name)
        Ten.AddIsVariable(b, bool(t.get("variable", False)))
        tensor_offsets.append(Ten.End(b))

    concat = importlib.import_module("tflite.ConcatenationOptions")
    op_offsets = []
    for op in operators:
        ins, outs = ints(op.get("inputs", [])), ints(op.get("outputs", []))
        inter = ints(op["intermediates"]) if op.get("intermediates") else None
        options = None
        if "concat_axis" in op:
            concat.Start(b)
            concat.AddAxis(b, op["concat_axis"])
            options = concat.End(b)
        Op.Start(b)
        if options is not None:
            Op.AddBuiltinOptionsType(b, 10)  # BuiltinOptions.ConcatenationOptions
            Op.AddBuiltinOptions(b, options)
        Op.AddOpcodeIndex(b, code_index[op.get("custom") or op.get("code", 9)])
        Op.AddInputs(b, ins)
        Op.AddOutputs(b, outs)
        if inter is not None:
            Op.AddIntermediates(b, inter)
        op_offsets.append(Op.End(b))

    def vector_of(offsets, start):
        start(b, len(offsets))
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    tensors_vec = vector_of(tensor_offsets, Sub.StartTensorsVector)
    ops_vec = vector_of(op_offsets, Sub.StartOperatorsVector)
    in_vec, out_vec = ints(inputs), ints(outputs)
    sub_offsets = []
    for _ in range(subgraphs):
        Sub.Start(b)
        Sub.AddTensors(b, tensors_vec)
        Sub.AddInputs(b, in_vec)
        Sub.AddOutputs(b, out_vec)
        Sub.AddOperators(b, ops_vec)
        sub_offsets.append(Sub.End(b))

    subs_vec = vector_of(sub_offsets, Mod.StartSubgraphsVector)
    codes_vec = vector_of(code_offsets, Mod.StartOperatorCodesVector)
    bufs_vec = vector_of(buffer_offsets, Mod.StartBuffersVector)
    Mod.Start(b)
    Mod.AddVersion(b, version)
    Mod.AddOperatorCodes(b, codes_vec)
    Mod.AddSubgraphs(b, subs_vec)
    Mod.AddBuffers(b, bufs_vec)
    model = Mod.End(b)
    b.Finish(model, file_identifier=identifier)
    return bytes(b.Output())


def random_graph(seed: int, n_ops: int | None = None) -> bytes:
    """A random branchy float graph TFLM can run: CONCATENATION, ADD and SLICE on 1-D
    tensors of assorted sizes, one input, the last tensor (and sometimes an earlier one,
    whose lifetime then runs to the end) as outputs."""
    rng = random.Random(seed)
    n_ops = n_ops if n_ops is not None else rng.randint(2, 14)
    tensors: list[dict] = [dict(shape=[rng.randint(1, 24)], dtype=FLOAT32)]
    ops: list[dict] = []

    def new(shape, **kw) -> int:
        tensors.append(dict(shape=shape, **kw))
        return len(tensors) - 1

    for _ in range(n_ops):
        recent = [t for t in range(len(tensors)) if "data" not in tensors[t]][-4:]
        kind = rng.choice(("concat", "add", "slice"))
        if kind == "concat":
            ins = rng.sample(recent, rng.randint(1, min(3, len(recent))))
            length = sum(tensors[t]["shape"][0] for t in ins)
            ops.append(dict(code=CONCATENATION, inputs=ins, concat_axis=0))
        elif kind == "add":
            x = rng.choice(recent)
            length = tensors[x]["shape"][0]
            ops.append(dict(code=ADD, inputs=[x, x]))
        else:
            x = rng.choice(recent)
            n = tensors[x]["shape"][0]
            length = rng.randint(1, n)
            begin = new([1], dtype=INT32, data=np.int32([rng.randint(0, n - length)]).tobytes())
            size = new([1], dtype=INT32, data=np.int32([length]).tobytes())
            ops.append(dict(code=SLICE, inputs=[x, begin, size]))
        ops[-1]["outputs"] = [new([length], dtype=FLOAT32)]
    outputs = [len(tensors) - 1]
    earlier = [t for t in range(1, len(tensors) - 1) if "data" not in tensors[t]]
    if earlier and rng.random() < 0.5:
        outputs.append(rng.choice(earlier))
    return build_tflite(tensors, ops, [0], outputs)


FLOAT32, INT32 = 0, 2  # TensorType
ADD, CONCATENATION, SLICE = 0, 2, 65  # BuiltinOperator
