"""engines/mcu/lifetimes.py: TFLM's lifetimes, what is planned, scratch buffers, and the order."""

from __future__ import annotations

import pytest

from inferlab.engines.mcu.graph import ModelError, load_model
from inferlab.engines.mcu.lifetimes import (
    Buffer,
    align_up,
    model_buffers,
    scratch_buffers,
    tensor_buffers,
    tensor_lifetimes,
)
from tests.engines.mcu.mcu_testdata import MODELS_DIR
from tests.engines.mcu.tflite_builder import write_tflite


def test_align_up():
    assert [align_up(n) for n in (0, 1, 15, 16, 17, 1960)] == [0, 16, 16, 16, 32, 1968]


def test_overlap_is_inclusive():
    a = Buffer(16, 0, 2, 0, "a")
    assert a.overlaps_in_time(Buffer(16, 2, 3, 1, "b"))
    assert not a.overlaps_in_time(Buffer(16, 3, 4, 2, "c"))


def chain_model() -> bytes:
    """in(0) -ADD-> t1 -ADD-> t2 -ADD-> out(3); t1 is also a graph output; w is constant;
    v is a variable; z has zero elements; u is never created nor used."""
    tensors = [
        dict(shape=[1, 20], name="in"),
        dict(shape=[1, 20], name="t1"),
        dict(shape=[1, 33], name="t2"),
        dict(shape=[1, 20], name="out"),
        dict(shape=[1, 20], name="w", data=bytes(20)),
        dict(shape=[1, 20], name="v", variable=True),
        dict(shape=[0], name="z"),
        dict(shape=[2, 2], name="u"),
    ]
    ops = [
        dict(op="ADD", inputs=[0, 4], outputs=[1]),
        dict(op="ADD", inputs=[1, 5], outputs=[2]),
        dict(op="ADD", inputs=[2, 6], outputs=[3]),
    ]
    return write_tflite(tensors, ops, [0], [3, 1])


def test_lifetimes_follow_tflm():
    m = load_model(chain_model())
    life = tensor_lifetimes(m)
    assert life[0] == (0, 1)  # graph input: created at step 0, read by op 0 at step 1
    assert life[1] == (1, 3)  # written at step 1 (op 0), a graph output: to the end (3 ops)
    assert life[2] == (2, 3)  # written at 2, read at 3
    assert life[3] == (3, 3)  # the last op's output, a graph output
    assert life[4] == (-1, 1)  # constant: read at 1, never created (not planned anyway)
    assert life[7] == (-1, -1)  # untouched


def test_planned_buffers_skip_constants_variables_and_empty_tensors():
    m = load_model(chain_model())
    bufs = tensor_buffers(m)
    assert [(b.tensor, b.size, b.first, b.last) for b in bufs] == [
        (0, 32, 0, 1),
        (1, 32, 1, 3),
        (2, 48, 2, 3),
        (3, 32, 3, 3),
        (7, 16, -1, -1),  # TFLM plans it too: no data, not a variable, non-zero size
    ]
    assert bufs[0].name == "in"
    assert scratch_buffers(m) == []


def test_micro_speech_lifetimes():
    m = load_model(MODELS_DIR / "micro_speech_quantized.tflite")
    bufs = model_buffers(m)
    assert [(b.name, b.size, b.first, b.last) for b in bufs] == [
        ("Relu", 4000, 2, 3),
        ("Reshape_1", 1968, 0, 1),
        ("Reshape_2", 1968, 1, 2),
        ("add_1", 16, 3, 4),
        ("labels_softmax", 16, 4, 4),
    ]


def test_svdf_scratch_buffers():
    m = load_model(MODELS_DIR / "keyword_scrambled.tflite")
    scratch = scratch_buffers(m)
    # int8 SVDF: batch x num_filters x 4 and batch x num_units x 4 bytes (rank 1), at the
    # SVDF's own step only; seven SVDFs.
    assert [(b.size, b.first, b.last) for b in scratch] == [
        (size, step, step)
        for step, size in [(2, 256), (4, 256), (6, 256), (8, 256), (10, 128), (11, 128), (12, 128)]
        for _ in range(2)
    ]
    assert scratch[0].tensor is None and scratch[0].name == "SVDF#1 scratch 0"
    # Scratch buffers follow the tensors, in request order.
    bufs = model_buffers(m)
    assert bufs[-len(scratch) :] == scratch


@pytest.mark.parametrize(
    "stem, per_buffer",
    [("mnist_lstm_trained_lstm_int8", 48), ("dtln_noise_suppression", 256)],
)
def test_lstm_scratch_buffers(stem, per_buffer):
    # Four buffers of batch x state_dimension x 2 bytes (int16 cell state): 1x20x2 -> 48
    # after alignment, 1x128x2 = 256.
    m = load_model(MODELS_DIR / f"{stem}.tflite")
    lstm_steps = [i + 1 for i, op in enumerate(m.operators) if op.op.endswith("SEQUENCE_LSTM")]
    scratch = scratch_buffers(m)
    assert [(b.size, b.first) for b in scratch] == [
        (per_buffer, step) for step in lstm_steps for _ in range(4)
    ]


def test_rfft_scratch_buffer():
    m = load_model(MODELS_DIR / "audio_preprocessor_int8.tflite")
    (scratch,) = scratch_buffers(m)
    step = 1 + next(i for i, op in enumerate(m.operators) if op.op == "SignalRfft")
    assert (scratch.size, scratch.first, scratch.last) == (512 * 2, step, step)


def test_unsizable_scratch_is_a_model_error():
    tensors = [dict(shape=[4], name="x"), dict(shape=[], name="wf", data=b"\0"), dict(shape=[1])]
    data = write_tflite(tensors, [dict(op="SVDF", inputs=[0, 1], outputs=[2])], [0], [2])
    with pytest.raises(ModelError, match=r"operator 0 \(SVDF\): cannot size"):
        scratch_buffers(load_model(data))
