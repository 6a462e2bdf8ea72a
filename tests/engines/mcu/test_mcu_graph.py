"""engines/mcu/graph.py: .tflite import into frozen records, and named errors for bad files."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.mcu.graph import ModelError, load_model
from tests.engines.mcu.mcu_testdata import MODELS_DIR, model_paths
from tests.engines.mcu.tflite_builder import write_tflite


def tiny(**changes) -> bytes:
    """x[1,4] -> FULLY_CONNECTED(w const [4,4]) -> y[1,4]."""
    tensors = [
        dict(shape=[1, 4], name="x"),
        dict(shape=[4, 4], name="w", data=bytes(range(16))),
        dict(shape=[1, 4], name="y"),
    ]
    for index, tensor_changes in changes.get("tensors", {}).items():
        tensors[index].update(tensor_changes)
    return write_tflite(
        tensors,
        changes.get("operators", [dict(op="FULLY_CONNECTED", inputs=[0, 1, -1], outputs=[2])]),
        [0],
        [2],
        **changes.get("model", {}),
    )


def test_reads_tensors_operators_and_graph_ends():
    m = load_model(tiny())
    assert [t.name for t in m.tensors] == ["x", "w", "y"]
    assert m.tensors[0].shape == (1, 4) and m.tensors[0].dtype == "int8"
    assert m.tensors[0].nbytes == 4
    assert not m.tensors[0].is_constant and m.tensors[1].is_constant
    assert m.inputs == (0,) and m.outputs == (2,)
    (op,) = m.operators
    assert (op.op, op.inputs, op.outputs, op.is_custom) == (
        "FULLY_CONNECTED",
        (0, 1, -1),
        (2,),
        False,
    )
    assert m.subgraph_count == 1


def test_constants_are_read_only_views_of_the_file():
    m = load_model(tiny())
    assert bytes(m.constant(1)) == bytes(range(16))
    w = m.constant_array(1)
    assert w.shape == (4, 4) and w.dtype == np.int8 and not w.flags.writeable
    with pytest.raises(ValueError, match="not a constant"):
        m.constant(0)


def test_records_are_frozen():
    m = load_model(tiny())
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.tensors[0].name = "z"
    with pytest.raises(TypeError):
        m.operators[0].options["x"] = 1


def test_custom_ops_keep_their_code_name():
    ops = [dict(custom="MyOp", inputs=[0, 1], outputs=[2])]
    (op,) = load_model(tiny(operators=ops)).operators
    assert op.op == "MyOp" and op.is_custom


def test_real_models_import():
    names = {p.stem for p in model_paths()}
    assert "person_detect" in names
    m = load_model(MODELS_DIR / "person_detect.tflite")
    assert m.name == "person_detect"
    assert len(m.tensors) == 89 and len(m.operators) == 31
    assert m.operators[0].op == "DEPTHWISE_CONV_2D"
    assert dict(m.operators[0].options) == {
        "padding": "SAME",
        "stride_w": 2,
        "stride_h": 2,
        "depth_multiplier": 8,
        "fused_activation_function": "RELU6",
        "dilation_w_factor": 1,
        "dilation_h_factor": 1,
    }
    pool = next(op for op in m.operators if op.op == "AVERAGE_POOL_2D")
    assert (pool.options["filter_width"], pool.options["filter_height"]) == (3, 3)
    assert pool.options["padding"] == "VALID"
    # A per-channel quantized filter: 8 scales along dimension 3.
    w = m.tensors[m.operators[0].inputs[1]]
    assert w.is_constant and w.quantization.per_channel
    assert len(w.quantization.scale) == 8 and w.quantization.quantized_dimension == 3
    assert m.constant_array(w.index).shape == w.shape
    assert m.tensors[m.inputs[0]].shape == (1, 96, 96, 1)


def test_custom_options_are_decoded_flexbuffers():
    m = load_model(MODELS_DIR / "audio_preprocessor_int8.tflite")
    rfft = next(op for op in m.operators if op.op == "SignalRfft")
    assert rfft.is_custom and rfft.options["fft_length"] == 512


def test_reshape_options_keep_vectors():
    m = load_model(MODELS_DIR / "micro_speech_quantized.tflite")
    assert m.operators[0].op == "RESHAPE"
    assert m.operators[0].options["new_shape"] == (-1, 49, 40, 1)


# ---- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"\x00" * 7])
def test_too_short(data):
    with pytest.raises(ModelError, match="truncated file"):
        load_model(data)


def test_wrong_identifier():
    data = bytearray(tiny())
    data[4:8] = b"ONNX"
    with pytest.raises(ModelError, match="file identifier is b'ONNX', expected b'TFL3'"):
        load_model(bytes(data))


def test_not_a_flatbuffer():
    data = struct.pack("<I", 10**6) + b"TFL3" + bytes(100)
    with pytest.raises(ModelError, match="root table offset"):
        load_model(data)


def test_garbage_with_the_right_identifier():
    rng = np.random.default_rng(0)
    for _ in range(50):
        data = bytearray(rng.integers(0, 256, 400, dtype=np.uint8).tobytes())
        data[0:8] = struct.pack("<I", 16) + b"TFL3"
        with pytest.raises(ModelError):
            load_model(bytes(data))


@pytest.mark.parametrize("cut", [8, 12, 100, 0.5, 0.9, -1])
def test_truncated_model(cut):
    data = tiny()
    n = int(len(data) * cut) if isinstance(cut, float) else (cut if cut > 0 else len(data) + cut)
    with pytest.raises(ModelError):
        load_model(data[:n])


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 0.999))
def test_any_truncation_of_a_real_model_is_a_model_error(fraction):
    data = (MODELS_DIR / "micro_speech_quantized.tflite").read_bytes()
    with pytest.raises(ModelError):
        load_model(data[: int(len(data) * fraction)])


def test_tensor_without_shape():
    with pytest.raises(ModelError, match=r"tensor 2 'y' has no shape"):
        load_model(tiny(tensors={2: dict(shape=None)}))


def test_dynamic_shape():
    with pytest.raises(ModelError, match=r"tensor 0 'x' has a dynamic shape \[-1, 4\]"):
        load_model(tiny(tensors={0: dict(shape=[-1, 4])}))


def test_string_tensor_cannot_be_sized():
    with pytest.raises(ModelError, match="type string"):
        load_model(tiny(tensors={0: dict(dtype="string")}))


def test_operator_refers_to_a_missing_tensor():
    ops = [dict(op="FULLY_CONNECTED", inputs=[0, 7], outputs=[2])]
    with pytest.raises(ModelError, match="operator 0 .* refers to tensor 7"):
        load_model(tiny(operators=ops))


def test_no_subgraph():
    with pytest.raises(ModelError, match="no subgraph"):
        load_model(tiny(model=dict(subgraphs=0)))


def test_wrong_schema_version():
    with pytest.raises(ModelError, match="schema version 2"):
        load_model(tiny(model=dict(version=2)))


def test_only_subgraph_zero_is_read_but_the_count_is_kept():
    m = load_model(tiny(model=dict(subgraphs=2)))
    assert m.subgraph_count == 2 and len(m.operators) == 1


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        load_model(tmp_path / "absent.tflite")
