"""The virtual board's protocol state machine, fed bytes directly (no threads, no ports)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.engines.board import protocol as p
from inferlab.engines.board.boards import load_board
from inferlab.engines.board.virtual_board import VirtualBoard
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.op_costs import op_macs
from tests.engines.board.virtual_boards import hang_guard, plus_one_interpreter
from tests.engines.mcu.mcu_testdata import MODELS_DIR

HELLO_WORLD = MODELS_DIR / "hello_world_int8.tflite"


@pytest.fixture(autouse=True)
def _hang_guard():
    """No test here may block: fail after 20 s instead of hanging the run."""
    with hang_guard(20):
        yield


# Stands in for the arena interpreter: output = input + 1 (wrapping); op i takes (i + 1) us.
stub_factory = plus_one_interpreter(op_ns=lambda i: 1000 * (i + 1))


def make_board(board="nrf52840", **kw):
    kw.setdefault("interpreter_factory", stub_factory)
    return VirtualBoard(board, **kw)


_seq = iter(range(1, 1 << 30))


def call(board, command, payload=b"", seq=None):
    seq = next(_seq) % p.NO_SEQ if seq is None else seq
    items = p.FrameDecoder().feed(board.feed(p.encode_frame(p.Frame(command, seq, payload))))
    assert len(items) == 1 and isinstance(items[0], p.Frame)
    assert items[0].seq == seq
    return items[0]


def ok(board, command, payload=b""):
    reply = call(board, command, payload)
    assert reply.type == p.response_type(command), p.ErrorReply.unpack(reply.payload)
    return reply.payload


def refused(board, command, payload=b"") -> p.ErrorReply:
    reply = call(board, command, payload)
    assert reply.type == p.ERROR_TYPE
    err = p.ErrorReply.unpack(reply.payload)
    assert err.command == command
    return err


def upload(board, data, chunk=None):
    chunk = chunk or p.chunk_data_bytes(board.max_payload)
    ok(board, p.Command.LOAD_BEGIN, p.LoadBegin(len(data), hashlib.sha256(data).digest()).pack())
    for off in range(0, len(data), chunk):
        ack = p.LoadAck.unpack(
            ok(board, p.Command.LOAD_CHUNK, p.LoadChunk(off, data[off : off + chunk]).pack())
        )
        assert ack.received_bytes == min(len(data), off + chunk)
    return p.LoadDone.unpack(ok(board, p.Command.LOAD_END))


def hello(board) -> p.HelloInfo:
    return p.HelloInfo.unpack(ok(board, p.Command.HELLO))


def test_hello_of_an_empty_board_states_the_preset():
    b = make_board("samd21", max_payload=512)
    h = hello(b)
    assert (h.protocol_version, h.board, h.sram_bytes, h.flash_bytes, h.clock_hz) == (
        1,
        "samd21",
        32768,
        262144,
        48_000_000,
    )
    assert h.max_payload == 512 and h.core == "Cortex-M0+" and "virtual" in h.name
    assert h.arena_limit_bytes == 32768 - 8192 and h.model_limit_bytes == 262144 - 32768
    assert h.flags == p.HelloFlags.CAN_LOAD | p.HelloFlags.CAN_PLAN
    assert h.model_bytes == 0 and h.model_sha256 == bytes(32) and h.arena_bytes == 0


def test_load_in_chunks_then_hello_reports_the_model():
    data = HELLO_WORLD.read_bytes()
    b = make_board(max_payload=64)
    done = upload(b, data)
    sha = hashlib.sha256(data).digest()
    assert (done.model_bytes, done.sha256, done.arena_bytes) == (len(data), sha, 32)
    h = hello(b)
    assert h.model_sha256 == sha and h.model_bytes == len(data) and h.arena_bytes == 32
    assert h.flags & p.HelloFlags.MODEL_LOADED and h.flags & p.HelloFlags.PLAN_READY
    assert p.LoadDone.unpack(ok(b, p.Command.LOAD_END)) == done  # a resent LOAD_END


def test_load_errors_are_typed():
    data = HELLO_WORLD.read_bytes()
    b = make_board(max_payload=4096)
    e = refused(b, p.Command.LOAD_CHUNK, p.LoadChunk(0, b"x").pack())
    assert e.code == p.ErrorCode.BAD_STATE
    assert refused(b, p.Command.LOAD_END).code == p.ErrorCode.BAD_STATE
    assert (
        refused(b, p.Command.LOAD_BEGIN, p.LoadBegin(0, bytes(32)).pack()).code
        == p.ErrorCode.BAD_ARGUMENT
    )
    ok(b, p.Command.LOAD_BEGIN, p.LoadBegin(len(data), hashlib.sha256(data).digest()).pack())
    ok(b, p.Command.LOAD_CHUNK, p.LoadChunk(0, data[:100]).pack())
    e = refused(b, p.Command.LOAD_CHUNK, p.LoadChunk(200, data[200:300]).pack())
    assert (e.code, e.needed, e.available) == (p.ErrorCode.BAD_STATE, 200, 100)
    ack = p.LoadAck.unpack(ok(b, p.Command.LOAD_CHUNK, p.LoadChunk(0, data[:100]).pack()))
    assert ack.received_bytes == 100  # a resent chunk is acknowledged again
    e = refused(b, p.Command.LOAD_END)
    assert (e.code, e.needed, e.available) == (p.ErrorCode.BAD_STATE, len(data), 100)
    e = refused(b, p.Command.LOAD_CHUNK, p.LoadChunk(100, bytes(len(data) - 50)).pack())
    assert (e.code, e.needed, e.available) == (p.ErrorCode.BAD_ARGUMENT, len(data) + 50, len(data))


def test_hash_mismatch_and_bad_model_are_refused_and_nothing_is_loaded():
    data = HELLO_WORLD.read_bytes()
    b = make_board()
    ok(b, p.Command.LOAD_BEGIN, p.LoadBegin(len(data), bytes(32)).pack())
    for off in range(0, len(data), 1000):
        ok(b, p.Command.LOAD_CHUNK, p.LoadChunk(off, data[off : off + 1000]).pack())
    assert refused(b, p.Command.LOAD_END).code == p.ErrorCode.HASH_MISMATCH
    assert hello(b).model_bytes == 0
    junk = b"\x01" * 64
    ok(b, p.Command.LOAD_BEGIN, p.LoadBegin(64, hashlib.sha256(junk).digest()).pack())
    ok(b, p.Command.LOAD_CHUNK, p.LoadChunk(0, junk).pack())
    e = refused(b, p.Command.LOAD_END)
    assert e.code == p.ErrorCode.BAD_MODEL and e.message
    assert hello(b).model_bytes == 0


def test_model_larger_than_flash_is_refused_with_the_numbers():
    size = (MODELS_DIR / "person_detect.tflite").stat().st_size  # 300,568 B
    b = make_board("samd21")
    e = refused(b, p.Command.LOAD_BEGIN, p.LoadBegin(size, bytes(32)).pack())
    assert (e.code, e.needed, e.available) == (p.ErrorCode.TOO_LARGE, size + 32768, 262144)
    assert "300,568" in e.message and "262,144" in e.message
    with pytest.raises(ValueError, match="flash 262,144 B"):
        make_board("samd21").preload((MODELS_DIR / "person_detect.tflite").read_bytes())


def _entries(board, offsets):
    return tuple((o, buf.size) for o, buf in zip(offsets, board.plan.buffers, strict=True))


def test_plan_bigger_than_sram_is_refused_with_the_numbers():
    b = make_board("samd21")
    b.preload(HELLO_WORLD.read_bytes())
    n = len(b.plan.buffers)
    offsets = [i * 12_000 for i in range(n)]  # 4 buffers spread over ~36 KB
    arena = offsets[-1] + b.plan.buffers[-1].size
    part = p.PlanPart(arena, n, 0, _entries(b, offsets))
    e = refused(b, p.Command.PLAN, part.pack())
    assert (e.code, e.needed, e.available) == (p.ErrorCode.PLAN_TOO_LARGE, arena + 8192, 32768)
    assert f"arena {arena:,} B" in e.message and "SRAM 32,768 B" in e.message
    assert hello(b).arena_bytes == 32  # the default plan stays active


def test_plan_accepted_in_parts_and_bad_plans_named():
    from inferlab.engines.mcu.planners import plan_buffers

    b = make_board("stm32f746", max_payload=64)
    b.preload((MODELS_DIR / "person_detect.tflite").read_bytes())
    linear = plan_buffers(b.plan.buffers, "linear")
    per = p.plan_entries_per_frame(64)
    n = len(linear.buffers)
    assert n > per  # needs several parts
    entries = _entries(b, linear.offsets)
    for first in range(0, n, per):
        ack = p.PlanAck.unpack(
            ok(
                b,
                p.Command.PLAN,
                p.PlanPart(linear.arena_bytes, n, first, entries[first : first + per]).pack(),
            )
        )
        assert ack.received_buffers == min(n, first + per)
    assert ack.complete and hello(b).arena_bytes == linear.arena_bytes

    def first_part(entries, total=n, arena=linear.arena_bytes):
        return p.PlanPart(arena, total, 0, tuple(entries[:per])).pack()

    e = refused(b, p.Command.PLAN, first_part(entries, total=n + 1))
    assert (e.code, e.needed, e.available) == (p.ErrorCode.BAD_PLAN, n + 1, n)
    e = refused(b, p.Command.PLAN, first_part(((0, 999),) + entries[1:]))
    assert e.code == p.ErrorCode.BAD_PLAN and "plan says 999" in e.message
    e = refused(b, p.Command.PLAN, first_part(((8, entries[0][1]),) + entries[1:]))
    assert e.code == p.ErrorCode.BAD_PLAN and "multiple of 16" in e.message
    e = refused(b, p.Command.PLAN, first_part(entries, arena=16))
    assert e.code == p.ErrorCode.BAD_PLAN and "past the arena" in e.message
    e = refused(b, p.Command.PLAN, p.PlanPart(linear.arena_bytes, n, per, entries[:per]).pack())
    assert e.code == p.ErrorCode.BAD_STATE  # a part out of order
    # All buffers at offset 0 (arena = the largest): overlapping live buffers.
    biggest = max(s for _, s in entries)
    zeros = tuple((0, s) for _, s in entries)
    for first in range(0, n, per):
        reply = call(
            b, p.Command.PLAN, p.PlanPart(biggest, n, first, zeros[first : first + per]).pack()
        )
    err = p.ErrorReply.unpack(reply.payload)
    assert err.code == p.ErrorCode.BAD_PLAN and "overlap" in err.message
    assert hello(b).arena_bytes == linear.arena_bytes  # the last good plan stays


def test_run_inline_and_staged_give_the_same_result_and_estimated_cycles():
    data = HELLO_WORLD.read_bytes()
    b = make_board("nrf52840", max_payload=64)
    b.preload(data)
    assert (
        refused(b, p.Command.READ_OUTPUT, p.ReadOutput(0, 1).pack()).code == p.ErrorCode.NO_RESULT
    )
    x = random_input(b.model, seed=3)
    inputs = p.pack_tensors(x, b._specs(b.model.inputs))
    res = p.RunResult.unpack(ok(b, p.Command.RUN, inputs))
    assert (res.output_bytes, res.op_count, res.arena_bytes, res.flags) == (1, 3, 32, 0)
    cpm = load_board("nrf52840").cycles_per_mac_int8
    assert res.cycles == sum(round(op_macs(b.model, i) * cpm) for i in range(3))
    out = p.OutputPart.unpack(ok(b, p.Command.READ_OUTPUT, p.ReadOutput(0, 1).pack()))
    assert out.data == bytes([(inputs[0] + 1) & 0xFF])
    t = p.TimingsPart.unpack(ok(b, p.Command.READ_TIMINGS, p.ReadTimings(0, 3).pack()))
    assert [r[0] for r in t.records] == [1000, 2000, 3000]
    assert [r[2] for r in t.records] == [16, 256, 16]
    assert (
        refused(b, p.Command.READ_TIMINGS, p.ReadTimings(2, 2).pack()).code
        == p.ErrorCode.BAD_ARGUMENT
    )
    assert (
        refused(b, p.Command.READ_OUTPUT, p.ReadOutput(0, 2).pack()).code
        == p.ErrorCode.BAD_ARGUMENT
    )
    ack = p.InputAck.unpack(ok(b, p.Command.INPUT, p.InputPart(0, inputs).pack()))
    assert (ack.end_offset, ack.input_bytes) == (1, 1)
    assert p.RunResult.unpack(ok(b, p.Command.RUN)).output_bytes == 1
    assert ok(b, p.Command.READ_OUTPUT, p.ReadOutput(0, 1).pack()) == out.pack()
    e = refused(b, p.Command.RUN, b"\x00\x00")
    assert (e.code, e.needed, e.available) == (p.ErrorCode.BAD_ARGUMENT, 2, 1)
    e = refused(b, p.Command.INPUT, p.InputPart(1, b"\x00").pack())
    assert e.code == p.ErrorCode.BAD_ARGUMENT


def test_commands_before_a_model_and_unknown_ones():
    b = make_board()
    for cmd, payload in (
        (p.Command.RUN, b""),
        (p.Command.INPUT, p.InputPart(0, b"a").pack()),
        (p.Command.PLAN, p.PlanPart(0, 0, 0, ()).pack()),
    ):
        assert refused(b, cmd, payload).code == p.ErrorCode.NO_MODEL
    reply = call(b, 0x42, b"", seq=77)
    err = p.ErrorReply.unpack(reply.payload)
    assert (reply.type, reply.seq, err.code) == (p.ERROR_TYPE, 77, p.ErrorCode.UNKNOWN_COMMAND)
    e = refused(b, p.Command.HELLO, bytes(b.max_payload + 1))
    assert (e.code, e.needed, e.available) == (
        p.ErrorCode.TOO_LARGE,
        b.max_payload + 1,
        b.max_payload,
    )
    assert refused(b, p.Command.LOAD_BEGIN, b"\x00").code == p.ErrorCode.BAD_ARGUMENT


def test_broken_frames_get_errors_without_a_sequence_and_the_board_keeps_serving():
    b = make_board()
    good = p.encode_frame(p.Frame(p.Command.HELLO, 4))
    bad_crc = bytearray(p.frame_bytes(p.Frame(p.Command.HELLO, 5)))
    bad_crc[-2] ^= 0xFF
    from inferlab.engines.board import cobs

    v2 = bytearray(p.frame_bytes(p.Frame(p.Command.HELLO, 6)))
    v2[1] = 2
    from inferlab.engines.board.crc import crc32

    v2[-4:] = crc32(bytes(v2[:-4])).to_bytes(4, "little")
    stream = (
        b"\x13\x37garbage\x00"
        + cobs.encode(bytes(bad_crc))
        + b"\x00"
        + cobs.encode(bytes(v2))
        + b"\x00"
        + good[:5]
        + b"\x00"
        + good
    )
    items = p.FrameDecoder().feed(b.feed(stream))
    kinds = [
        (f.type, f.seq, p.ErrorReply.unpack(f.payload).code if f.type == 0xFF else None)
        for f in items
    ]
    assert kinds == [
        (p.ERROR_TYPE, p.NO_SEQ, p.ErrorCode.BAD_FRAME),
        (p.ERROR_TYPE, p.NO_SEQ, p.ErrorCode.BAD_CRC),
        (p.ERROR_TYPE, 6, p.ErrorCode.BAD_VERSION),
        (p.ERROR_TYPE, p.NO_SEQ, p.ErrorCode.BAD_FRAME),  # the truncated frame
        (p.response_type(p.Command.HELLO), 4, None),
    ]


def test_a_failing_run_is_an_error_reply_not_a_crash():
    def broken(model, plan):
        def run(inputs):
            raise RuntimeError("kernel exploded")

        return run

    b = make_board(interpreter_factory=broken)
    b.preload(HELLO_WORLD.read_bytes())
    e = refused(b, p.Command.RUN, b"\x00")
    assert e.code == p.ErrorCode.RUN_FAILED and "kernel exploded" in e.message
    assert hello(b).model_bytes > 0


def test_bad_max_payload_is_refused():
    with pytest.raises(ValueError, match="max_payload"):
        VirtualBoard("nrf52840", max_payload=10)


def test_a_model_with_ops_the_interpreter_lacks_is_refused_at_load_end():
    data = (MODELS_DIR / "audio_preprocessor_int8.tflite").read_bytes()  # TFLM Signal ops
    b = VirtualBoard("nrf52840")  # the real arena interpreter
    ok(b, p.Command.LOAD_BEGIN, p.LoadBegin(len(data), hashlib.sha256(data).digest()).pack())
    for off in range(0, len(data), 2000):
        ok(b, p.Command.LOAD_CHUNK, p.LoadChunk(off, data[off : off + 2000]).pack())
    e = refused(b, p.Command.LOAD_END)
    assert e.code == p.ErrorCode.BAD_MODEL and "not supported" in e.message
    assert hello(b).model_bytes == 0
    with pytest.raises(ValueError, match="not supported"):
        VirtualBoard("nrf52840").preload(data)


_FUZZ_BOARD = make_board(max_payload=128)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.builds(lambda t, s, pl: p.encode_frame(p.Frame(t, s, pl)),
              st.integers(0, 255), st.integers(0, 0xFFFF), st.binary(max_size=160)),
), max_size=6))
def test_random_bytes_never_crash_the_board_and_it_answers_after(chunks):
    """Fuzz: any bytes (random, or well-framed random commands) get error frames or answers,
    never an exception, and a HELLO after a delimiter is still answered."""
    b = _FUZZ_BOARD
    for chunk in chunks:
        for item in p.FrameDecoder().feed(b.feed(chunk)):
            assert isinstance(item, p.Frame)
    items = p.FrameDecoder().feed(b.feed(b"\x00" + p.encode_frame(p.Frame(p.Command.HELLO, 3))))
    assert items[-1].type == p.response_type(p.Command.HELLO) and items[-1].seq == 3
