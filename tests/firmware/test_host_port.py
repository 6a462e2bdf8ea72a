"""The firmware's protocol on the host port: a process speaking on pipes or a pty.

Byte-level: every malformed input (garbage, truncated frames, CRC errors, bad magic,
version or length, oversized payloads, unknown commands) is answered with the same typed
ERROR the Python virtual board sends, and the firmware keeps serving. Link-level: HELLO
reports the compiled-in model, `inferlab board run` gets TFLM's outputs, PLAN, INPUT,
RUN and READ_* behave as PROTOCOL.md says (with the documented firmware specifics).
"""

from __future__ import annotations

import json
import struct

import pytest

from inferlab.app.cli import main
from inferlab.engines.board import protocol as p
from inferlab.engines.board.link import BoardLink, BoardRefused
from inferlab.engines.board.virtual_board import VirtualBoard
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.model_planners import plan_model
from inferlab.engines.mcu.op_costs import op_macs
from tests.firmware.fwtools import HostBoard, error_of, model_path, sha256_hex, tflm_outputs

STEM = "micro_speech_quantized"
E = p.ErrorCode


@pytest.fixture(scope="module")
def image(firmware_images):
    return firmware_images(STEM, "host").image


@pytest.fixture
def pipe_board(image):
    board = HostBoard(image, pty=False)
    yield board
    board.close()


@pytest.fixture
def pty_board(image):
    board = HostBoard(image, pty=True)
    yield board
    board.close()


def raw_frame(type_=p.Command.HELLO, seq=7, payload=b"", magic=p.MAGIC, version=1,
              length=None, crc_delta=0) -> bytes:
    body = struct.pack("<BBBBHH", magic, version, type_, 0, seq,
                       len(payload) if length is None else length) + payload
    crc = (p.crc32(body) + crc_delta) & 0xFFFFFFFF
    return p.cobs.encode(body + struct.pack("<I", crc)) + b"\x00"


GOOD = p.encode_frame(p.Frame(p.Command.HELLO, 9))
BAD_INPUTS = {
    "garbage": b"\x13\x37\xff\x42\x00",
    "truncated COBS block": GOOD[:5] + b"\x00",
    "truncated at a block edge": p.cobs.encode(p.frame_bytes(p.Frame(1, 9, b"\x00\x05"))
                                              )[:-3] + b"\x00",
    "short frame": p.cobs.encode(b"\x49\x01\x01") + b"\x00",
    "CRC error": raw_frame(crc_delta=1),
    "flipped payload byte": GOOD[:-3] + bytes([GOOD[-3] ^ 0x40]) + GOOD[-2:],
    "bad magic": raw_frame(magic=0x50),
    "bad version": raw_frame(version=2, seq=321),
    "length field wrong": raw_frame(payload=b"abc", length=5),
    "payload over max_payload": raw_frame(type_=p.Command.INPUT, seq=77, payload=bytes(1500)),
    "frame over the protocol maximum": p.cobs.encode(b"\x01" * 5000) + b"\x00",
    "unknown command": raw_frame(type_=0x42, seq=11),
    "a response type": raw_frame(type_=0x81, seq=12),
}


def virtual_board_answer(data: bytes) -> p.Frame:
    vb = VirtualBoard("nrf52840", max_payload=1024)
    vb.preload(model_path(STEM).read_bytes())
    (frame,) = [f for f in p.FrameDecoder().feed(vb.feed(data))]
    return frame


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_gets_the_virtual_boards_error_and_service_goes_on(pipe_board, case):
    data = BAD_INPUTS[case]
    pipe_board.send(data)
    (got,) = pipe_board.frames(1)
    want = virtual_board_answer(data)
    g, w = error_of(got), error_of(want)
    assert (got.seq, g.code, g.command, g.needed, g.available) == (
        want.seq, w.code, w.command, w.needed, w.available), (case, g, w)
    assert g.message  # a reason, in words
    hello = pipe_board.request(p.Command.HELLO, seq=99)
    assert hello.type == p.response_type(p.Command.HELLO) and hello.seq == 99


def test_empty_frames_are_ignored(pipe_board):
    pipe_board.send(b"\x00\x00\x00" + GOOD)
    (frame,) = pipe_board.frames(1)
    assert frame.type == p.response_type(p.Command.HELLO) and frame.seq == 9


def test_many_bad_frames_in_one_burst_each_get_an_answer(pipe_board):
    burst = b"".join(BAD_INPUTS[k] for k in ("garbage", "CRC error", "bad magic")) + GOOD
    pipe_board.send(burst)
    frames = pipe_board.frames(4)
    assert [error_of(f).code for f in frames[:3]] == [E.BAD_FRAME, E.BAD_CRC, E.BAD_FRAME]
    assert frames[3].type == p.response_type(p.Command.HELLO)


def test_load_is_unsupported_with_a_compiled_in_model(pipe_board):
    for command in (p.Command.LOAD_BEGIN, p.Command.LOAD_CHUNK, p.Command.LOAD_END):
        reply = error_of(pipe_board.request(command, bytes(36), seq=5))
        assert reply.code == E.UNSUPPORTED and reply.command == command
        assert "board build" in reply.message


@pytest.mark.parametrize("command,payload,code,needed,available", [
    (p.Command.READ_OUTPUT, b"\x00" * 6, E.NO_RESULT, 0, 0),
    (p.Command.READ_TIMINGS, b"\x00" * 4, E.NO_RESULT, 0, 0),
    (p.Command.READ_OUTPUT, b"\x00" * 5, E.BAD_ARGUMENT, 5, 6),
    (p.Command.READ_TIMINGS, b"\x00" * 3, E.BAD_ARGUMENT, 3, 4),
    (p.Command.INPUT, b"\x00" * 4, E.BAD_ARGUMENT, 4, 5),
    (p.Command.INPUT, struct.pack("<I", 1959) + b"\x01\x02", E.BAD_ARGUMENT, 1961, 1960),
    (p.Command.RUN, b"\x01" * 10, E.BAD_ARGUMENT, 10, 1960),
    (p.Command.PLAN, b"\x00" * 7, E.BAD_ARGUMENT, 7, 8),
    (p.Command.PLAN, p.PlanPart(64, 3, 0, ()).pack(), E.BAD_PLAN, 3, 5),
])
def test_refusals_carry_code_and_numbers(pipe_board, command, payload, code, needed,
                                         available):
    reply = error_of(pipe_board.request(command, payload, seq=3))
    assert (reply.code, reply.command, reply.needed, reply.available) == (
        code, command, needed, available)


def test_hello_reports_the_compiled_in_model(pty_board):
    path = model_path(STEM)
    with BoardLink(pty_board.url) as link:
        info = link.hello()
    assert info.model_sha256 == sha256_hex(path)
    assert info.model_bytes == path.stat().st_size
    assert info.arena_bytes == plan_model(load_model(path)).arena_bytes
    assert info.plan_ready and info.can_plan and info.cycles_measured and not info.can_load
    assert info.max_payload == 1024 and info.board == "nrf52840"
    assert info.clock_hz == 10**9 and "host" in info.core


def test_cli_run_on_the_host_port_equals_tflm(pty_board, capsys):
    path = model_path(STEM)
    model = load_model(path)
    feeds = [random_input(model, seed) for seed in range(3)]
    want = tflm_outputs(path, feeds)
    for seed, w in enumerate(want):
        assert main(["board", "run", "--port", pty_board.url, "--model", str(path),
                     "--seed", str(seed), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["uploaded"] is False and out["cycles_measured"] is True
        assert out["output"] == w.reshape(out["output_shape"]).tolist()
        assert [o["op"] for o in out["ops"]] == [op.op for op in model.operators]
        assert out["ops"][2]["macs"] == 4 * 4000 and out["time_us"] > 0


def test_cli_run_with_another_model_says_to_build_firmware(pty_board, capsys):
    code = main(["board", "run", "--port", pty_board.url, "--model",
                 str(model_path("hello_world_int8"))])
    err = capsys.readouterr().err
    assert code == 2 and "takes no uploads" in err and "build its firmware" in err


def test_plan_from_the_host_is_checked_and_used(pty_board):
    path = model_path(STEM)
    model = load_model(path)
    greedy = plan_model(model)
    entries = [(o, b.size) for o, b in zip(greedy.offsets, greedy.buffers, strict=True)]
    x = random_input(model, 5)
    (want,) = tflm_outputs(path, [x])
    with BoardLink(pty_board.url) as link:
        info = link.hello()
        # the same buffers in another valid layout: reversed within the same arena
        flipped = [(greedy.arena_bytes - o - s, s) for o, s in entries]
        ack = link.plan(arena_bytes=greedy.arena_bytes, entries=flipped)
        assert ack.complete and ack.received_buffers == len(entries)
        result = link.run(x[0].tobytes())
        assert result.output == want.tobytes()
        with pytest.raises(BoardRefused) as exc:
            link.plan(arena_bytes=greedy.arena_bytes, entries=[(0, s) for _, s in entries])
        assert exc.value.code == E.BAD_PLAN and "overlap" in exc.value.board_message
        with pytest.raises(BoardRefused) as exc:
            link.plan(arena_bytes=greedy.arena_bytes, entries=[(o + 8, s) for o, s in entries])
        assert exc.value.code == E.BAD_PLAN
        too_big = info.arena_limit_bytes + 16
        with pytest.raises(BoardRefused) as exc:
            link.plan(arena_bytes=too_big, entries=entries)
        runtime = info.sram_bytes - info.arena_limit_bytes
        assert (exc.value.code, exc.value.needed, exc.value.available) == (
            E.PLAN_TOO_LARGE, too_big + runtime, info.sram_bytes)
        with pytest.raises(BoardRefused) as exc:  # a later part before the first
            link.request(p.Command.PLAN, p.PlanPart(greedy.arena_bytes, len(entries), 2,
                                                    tuple(entries[2:])).pack())
        assert exc.value.code == E.BAD_STATE
        # the refused plans left the flipped one active
        assert link.run(x[0].tobytes()).output == want.tobytes()


def test_resent_run_is_answered_again_and_consumed_input_is_refused(pty_board):
    path = model_path(STEM)
    model = load_model(path)
    plan = plan_model(model)
    x = random_input(model, 7)[0].tobytes()
    index = {b.tensor: i for i, b in enumerate(plan.buffers)}
    i_in = index[model.inputs[0]]
    shares = any(
        j != i_in and plan.offsets[j] < plan.offsets[i_in] + plan.buffers[i_in].size
        and plan.offsets[i_in] < plan.offsets[j] + plan.buffers[j].size
        for j in range(len(plan.buffers)))
    with BoardLink(pty_board.url) as link:
        link.hello()
        for offset in range(0, len(x), 1020):
            link.request(p.Command.INPUT, p.InputPart(offset, x[offset:offset + 1020]).pack())
        seq = link._seq
        first = link.request(p.Command.RUN)
        link._seq = seq  # resend the same RUN (a lost answer): the same RESULT comes back
        again = link.request(p.Command.RUN)
        assert again.payload == first.payload
        if shares:  # the arena reused the input's bytes: a new empty RUN must be refused
            with pytest.raises(BoardRefused) as exc:
                link.request(p.Command.RUN)
            assert exc.value.code == E.BAD_STATE and "INPUT" in exc.value.board_message
        out = link.request(p.Command.READ_OUTPUT, p.ReadOutput(0, 4).pack())
        (want,) = tflm_outputs(path, [random_input(model, 7)])
        assert p.OutputPart.unpack(out.payload).data == want.tobytes()


def test_timings_records_are_per_op(pty_board):
    model = load_model(model_path(STEM))
    with BoardLink(pty_board.url) as link:
        result = link.run(random_input(model, 1)[0].tobytes())
    assert len(result.ops) == len(model.operators)
    assert result.cycles_measured and result.cycles >= sum(o.cycles for o in result.ops)
    assert all(o.time_us * 1e3 == pytest.approx(o.cycles, abs=1) for o in result.ops)
    assert [o.macs for o in result.ops] == [op_macs(model, i) for i in range(len(result.ops))]


def test_random_frames_under_sanitizers(tmp_path):
    """ASan + UBSan host build: hundreds of random frames (garbage, and well-formed frames
    of every type with random payloads) never crash it; it still answers HELLO and still
    computes TFLM's output."""
    import subprocess

    import numpy as np

    from inferlab.engines.board.codegen import board_config_h, generate
    from inferlab.engines.board.toolchain import make_command
    from tests.firmware.fwtools import need_tools

    need_tools("host")
    path = model_path(STEM)
    generate(path).write(tmp_path)
    (tmp_path / "board_config.h").write_text(board_config_h("nrf52840", "sanitized", 262144,
                                                            1048576))
    result = subprocess.run(make_command("host", tmp_path, sanitize=True), capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    board = HostBoard(tmp_path / "firmware", pty=False)
    try:
        rng = np.random.default_rng(5)
        for i in range(300):
            if i % 2:
                noise = rng.integers(0, 256, int(rng.integers(1, 3000)), dtype=np.uint8)
                board.send(noise.tobytes() + b"\x00")
            else:
                payload = rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8)
                board.send(p.encode_frame(p.Frame(int(rng.integers(0, 12)), i,
                                                  payload.tobytes())))
        board.send(p.encode_frame(p.Frame(p.Command.HELLO, 5000)))
        seen = []
        while not any(isinstance(f, p.Frame) and f.seq == 5000 for f in seen):
            seen += board.frames(1, timeout_s=30)
        assert board.proc.poll() is None and len(seen) >= 300
        model = load_model(path)
        x = random_input(model, 2)
        (want,) = tflm_outputs(path, [x])
        data = x[0].tobytes()  # 1960 B: more than one payload, staged with INPUT
        for k, at in enumerate(range(0, len(data), 1000)):
            ack = board.request(p.Command.INPUT, p.InputPart(at, data[at:at + 1000]).pack(),
                                seq=5100 + k)
            assert ack.type == p.response_type(p.Command.INPUT)
        reply = board.request(p.Command.RUN, seq=6000)
        assert reply.type == p.response_type(p.Command.RUN)
        out = board.request(p.Command.READ_OUTPUT, p.ReadOutput(0, 4).pack(), seq=6001)
        assert p.OutputPart.unpack(out.payload).data == want.tobytes()
    finally:
        board.close()
