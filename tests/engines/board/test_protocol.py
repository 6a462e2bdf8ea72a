"""Wire protocol v1: COBS and CRC-32 vectors, frame codec, stream resync, message layouts."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.board import cobs
from inferlab.engines.board import protocol as p
from inferlab.engines.board.crc import CRC32_CHECK, crc32, crc32_bitwise

# ---- COBS ---------------------------------------------------------------------------------

COBS_VECTORS = [  # the table in PROTOCOL.md
    (b"\x00", "01 01"),
    (b"\x00\x00", "01 01 01"),
    (bytes.fromhex("11220033"), "03 11 22 02 33"),
    (bytes.fromhex("11223344"), "05 11 22 33 44"),
    (bytes.fromhex("11000000"), "02 11 01 01 01"),
    (b"", "01"),
]


@pytest.mark.parametrize("data, encoded", COBS_VECTORS)
def test_cobs_known_vectors(data, encoded):
    assert cobs.encode(data) == bytes.fromhex(encoded)
    assert cobs.decode(bytes.fromhex(encoded)) == data


def test_cobs_254_and_255_byte_runs():
    run254 = bytes(range(1, 255))
    assert cobs.encode(run254) == b"\xff" + run254 + b"\x01"
    run255 = bytes(range(1, 256))
    assert cobs.encode(run255) == b"\xff" + run255[:254] + b"\x02\xff"
    assert cobs.decode(cobs.encode(run255)) == run255
    assert cobs.decode(b"\xff" + run254) == run254  # the form without the trailing code


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=1200))
def test_cobs_round_trip_has_no_zero_and_bounded_size(data):
    enc = cobs.encode(data)
    assert 0 not in enc
    assert len(enc) <= cobs.max_encoded_bytes(len(data))
    assert cobs.decode(enc) == data


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3000))
def test_cobs_max_encoded_bytes_is_reached_by_nonzero_runs(n):
    data = bytes((i % 255) + 1 for i in range(n))
    assert len(cobs.encode(data)) == cobs.max_encoded_bytes(n)


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x05\x11\x22", b"\x02\x11\x00", b"\x03\x00\x01"])
def test_cobs_decode_rejects_malformed(bad):
    with pytest.raises(cobs.CobsError):
        cobs.decode(bad)


# ---- CRC ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data, crc", [
    (b"123456789", 0xCBF43926),
    (b"", 0x00000000),
    (b"\x00\x00\x00\x00", 0x2144DF1C),
    (b"InferLab", 0x60EA634C),
])
def test_crc32_vectors(data, crc):
    assert crc32(data) == crc
    assert crc32_bitwise(data) == crc
    assert CRC32_CHECK == crc32(b"123456789")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_crc32_bitwise_equals_zlib_and_continues(a, b):
    assert crc32_bitwise(a + b) == crc32(a + b) == crc32(b, crc32(a))


# ---- frames -------------------------------------------------------------------------------


def test_hello_frame_exact_bytes():
    wire = p.encode_frame(p.Frame(p.Command.HELLO, 5))
    assert wire == bytes.fromhex("04 49 01 01 02 05 01 01 05 8C 2E 05 09 00")
    assert p.frame_bytes(p.Frame(1, 5))[-4:] == struct.pack("<I", 0x09052E8C)


frames = st.builds(p.Frame, type=st.integers(0, 255), seq=st.integers(0, 0xFFFF),
                   payload=st.binary(max_size=p.MAX_PAYLOAD_BYTES), flags=st.integers(0, 255))


@settings(max_examples=150, deadline=None)
@given(frames)
def test_frame_round_trip(frame):
    wire = p.encode_frame(frame)
    assert wire[-1] == 0 and 0 not in wire[:-1]
    assert len(wire) <= p.MAX_ENCODED_BYTES + 1
    assert p.decode_frame(wire[:-1]) == frame


@settings(max_examples=60, deadline=None)
@given(st.lists(frames, min_size=1, max_size=5), st.binary(max_size=40), st.integers(1, 64))
def test_decoder_splits_stream_and_resyncs_after_garbage(batch, garbage, piece):
    stream = garbage + b"\x00" + b"".join(p.encode_frame(f) for f in batch)
    dec = p.FrameDecoder()
    got = []
    for i in range(0, len(stream), piece):  # arrives in arbitrary pieces
        got += dec.feed(stream[i:i + piece])
    good = [g for g in got if isinstance(g, p.Frame)]
    assert good[-len(batch):] == batch
    assert all(isinstance(g, p.ProtocolError) for g in got[:len(got) - len(batch)])


def _raw(frame):
    return bytearray(p.frame_bytes(frame))


def _reencode(raw):
    return cobs.encode(bytes(raw))


def test_decode_errors_are_typed():
    f = p.Frame(p.Command.RUN, 9, b"abc")
    raw = _raw(f)
    bad_crc = bytearray(raw)
    bad_crc[-1] ^= 0x01
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(_reencode(bad_crc))
    assert e.value.code == p.ErrorCode.BAD_CRC and e.value.seq == p.NO_SEQ

    flipped = bytearray(raw)
    flipped[8] ^= 0x40  # payload bit flip: the CRC catches it
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(_reencode(flipped))
    assert e.value.code == p.ErrorCode.BAD_CRC

    with pytest.raises(p.ProtocolError) as e:  # truncated
        p.decode_frame(p.encode_frame(f)[:6])
    assert e.value.code in (p.ErrorCode.BAD_FRAME, p.ErrorCode.BAD_CRC)

    def with_header(**kw):
        h = dict(magic=p.MAGIC, version=p.PROTOCOL_VERSION, length=3) | kw
        body = p.HEADER.pack(h["magic"], h["version"], 7, 0, 9, h["length"]) + b"abc"
        return _reencode(body + struct.pack("<I", crc32(body)))

    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(with_header(magic=0x42))
    assert e.value.code == p.ErrorCode.BAD_FRAME
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(with_header(version=2))
    assert (e.value.code, e.value.needed, e.value.available, e.value.seq) == (
        p.ErrorCode.BAD_VERSION, 2, 1, 9)
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(with_header(length=4))
    assert e.value.code == p.ErrorCode.BAD_FRAME
    with pytest.raises(p.ProtocolError) as e:
        p.decode_frame(b"\x03\x11\x22")
    assert e.value.code == p.ErrorCode.BAD_FRAME


def test_payload_over_the_protocol_maximum_is_refused():
    with pytest.raises(p.ProtocolError) as e:
        p.encode_frame(p.Frame(1, 0, bytes(p.MAX_PAYLOAD_BYTES + 1)))
    assert e.value.code == p.ErrorCode.TOO_LARGE


def test_decoder_drops_overlong_frames_once():
    dec = p.FrameDecoder(max_encoded_bytes=100)
    out = dec.feed(b"\x01" * 300)
    assert out == []
    out = dec.feed(b"\x01" * 10 + b"\x00" + p.encode_frame(p.Frame(1, 2)))
    assert len(out) == 2 and out[0].code == p.ErrorCode.BAD_FRAME and out[1] == p.Frame(1, 2)
    assert dec.feed(b"\x00\x00\x00") == []  # empty frames are ignored


# ---- messages -----------------------------------------------------------------------------

MESSAGES = [
    p.HelloInfo(1, 0x0F, 2048, 262144, 1048576, 64_000_000, 253952, 1015808, 2704, 32,
                bytes(range(32)), "nrf52840", "Nordic nRF52840 DK", "Cortex-M4F"),
    p.LoadBegin(2704, b"\xab" * 32),
    p.LoadChunk(512, b"\x00\x01\x02"),
    p.LoadAck(1024, 2704),
    p.LoadDone(2704, 32, 253952, b"\x01" * 32),
    p.PlanPart(4096, 3, 1, ((0, 16), (2048, 64))),
    p.PlanAck(3, 3, 4096, 253952, True),
    p.InputPart(4, b"\xff"),
    p.InputAck(5, 9216),
    p.RunResult(2, 55296, 31, 1, 123_456_789, 2**40),
    p.ReadOutput(0, 2044),
    p.OutputPart(0, b"\x80\x7f"),
    p.ReadTimings(4, 2),
    p.TimingsPart(4, ((1000, 5000, 1024), (2**33, 7, 0))),
    p.ErrorReply(p.ErrorCode.PLAN_TOO_LARGE, p.Command.PLAN, 48192, 32768, "arena too big"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_message_round_trip(msg):
    payload = msg.pack()
    assert len(payload) <= p.MAX_PAYLOAD_BYTES
    assert type(msg).unpack(payload) == msg


def test_fixed_layouts_match_protocol_md():
    assert p.HEADER.size == 8
    assert len(MESSAGES[0].pack()) == 64 + 3 + len("nrf52840Nordic nRF52840 DKCortex-M4F")
    assert len(p.LoadBegin(1, bytes(32)).pack()) == 36
    assert len(p.RunResult(0, 0, 0, 0, 0, 0).pack()) == 28
    assert p.OP_RECORD.size == 20 and p.PLAN_ENTRY.size == 8
    assert len(p.ErrorReply(1, 1).pack()) == 12


@pytest.mark.parametrize("cls, payload", [
    (p.LoadBegin, b"\x00" * 35),
    (p.LoadChunk, b"\x00" * 4),
    (p.PlanPart, b"\x00" * 8 + b"\x00" * 7),
    (p.ReadOutput, b"\x00" * 7),
    (p.TimingsPart, b"\x00\x00\x02\x00" + b"\x00" * 20),
    (p.HelloInfo, b"\x00" * 64 + b"\x05ab"),
])
def test_wrong_payload_sizes_are_bad_arguments(cls, payload):
    with pytest.raises(p.ProtocolError) as e:
        cls.unpack(payload)
    assert e.value.code == p.ErrorCode.BAD_ARGUMENT


def test_error_reply_message_is_bounded_and_named():
    e = p.ErrorReply(99, 1, message="x" * 1000)
    assert len(e.pack()) == 12 + p.MAX_ERROR_MESSAGE_BYTES
    assert e.code_name == "ERROR_99"
    assert p.ErrorReply(p.ErrorCode.NO_MODEL, 7).code_name == "NO_MODEL"


def test_chunk_sizes_fit_max_payload():
    for mp in (p.MIN_PAYLOAD_BYTES, 256, 2048, p.MAX_PAYLOAD_BYTES):
        assert len(p.LoadChunk(0, bytes(p.chunk_data_bytes(mp))).pack()) == mp
        n = p.plan_entries_per_frame(mp)
        assert len(p.PlanPart(0, n, 0, ((0, 0),) * n).pack()) <= mp
        n = p.op_records_per_frame(mp)
        assert len(p.TimingsPart(0, ((0, 0, 0),) * n).pack()) <= mp


def test_tensors_pack_and_unpack():
    specs = [((1, 2), "int8"), ((3,), "int32")]
    arrays = [np.array([[1, -2]], np.int8), np.array([7, 8, -9], np.int32)]
    data = p.pack_tensors(arrays, specs)
    assert len(data) == 2 + 12
    back = p.unpack_tensors(data, specs)
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(arrays, back,
                                                                             strict=True))
    with pytest.raises(ValueError, match="int8 with shape"):
        p.pack_tensors([np.zeros(2, np.float32), arrays[1]], specs)
    with pytest.raises(ValueError, match="left over"):
        p.unpack_tensors(data + b"\x00", specs)
    with pytest.raises(ValueError, match="tensors need"):
        p.unpack_tensors(data[:-1], specs)
