"""BoardLink against a virtual board on a pty and a socket: round trips, resync after
garbage, resends, timeouts, refusals, and a board that vanishes mid-run."""

from __future__ import annotations

import hashlib
import os
import threading

import numpy as np
import pytest

from inferlab.engines.board import protocol as p
from inferlab.engines.board.link import (
    BoardDisconnected,
    BoardError,
    BoardLink,
    BoardRefused,
    BoardTimeout,
)
from inferlab.engines.board.virtual_board import VirtualBoard
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.inputs import random_input
from tests.engines.board.virtual_boards import hang_guard, plus_one_interpreter, served_boards
from tests.engines.mcu.mcu_testdata import MODELS_DIR

HELLO_WORLD = MODELS_DIR / "hello_world_int8.tflite"


@pytest.fixture(autouse=True)
def _hang_guard():
    """No test here may block: fail after 20 s instead of hanging the run."""
    with hang_guard(20):
        yield


# Stands in for the arena interpreter: output bytes = input bytes + 1, resized; 1 us per op.
stub_factory = plus_one_interpreter(op_ns=lambda i: 1000)


def expected_output(model, inputs: bytes) -> bytes:
    outs, _ = stub_factory(model, None)(p.unpack_tensors(inputs, specs(model, model.inputs)))
    return p.pack_tensors(outs, specs(model, model.outputs))


def specs(model, tensors):
    return [(model.tensors[t].shape, model.tensors[t].dtype) for t in tensors]


def model_input(model, seed=0) -> bytes:
    return p.pack_tensors(random_input(model, seed), specs(model, model.inputs))


@pytest.fixture
def serve():
    with served_boards() as serve:
        yield serve


@pytest.mark.parametrize("transport", ["pty", "socket"])
def test_hello_load_run_round_trip(serve, transport):
    data = HELLO_WORLD.read_bytes()
    model = load_model(data)
    _, url = serve(VirtualBoard("nrf52840", interpreter_factory=stub_factory, max_payload=256),
                   transport)
    with BoardLink(url, timeout_s=1.0) as link:
        info = link.hello()
        assert (info.board, info.sram_bytes, info.max_payload) == ("nrf52840", 262144, 256)
        assert info.model_sha256 is None and info.can_load
        seen = []
        done = link.load(data, progress=lambda n, total: seen.append((n, total)))
        assert done.sha256 == hashlib.sha256(data).digest() and done.arena_bytes == 32
        assert seen[0] == (0, len(data)) and seen[-1] == (len(data), len(data))
        assert [n for n, _ in seen] == sorted(n for n, _ in seen)
        assert link.hello().model_sha256 == hashlib.sha256(data).hexdigest()
        x = model_input(model, seed=1)
        result = link.run(x)
        assert result.output == expected_output(model, x)
        assert result.arena_bytes == 32 and not result.cycles_measured
        assert [o.macs for o in result.ops] == [16, 256, 16]
        assert [o.time_us for o in result.ops] == [1.0, 1.0, 1.0]
        assert result.cycles == sum(o.cycles for o in result.ops) > 0
        assert link.stats.bad_frames == 0 and link.stats.resends == 0


def test_large_input_and_plan_travel_in_chunks(serve):
    """micro_speech: 1,960 input bytes and a multi-part plan through 64-byte payloads."""
    from inferlab.engines.mcu.model_planners import plan_model

    data = (MODELS_DIR / "micro_speech_quantized.tflite").read_bytes()
    model = load_model(data)
    board = VirtualBoard("stm32f411", interpreter_factory=stub_factory, max_payload=64)
    board.preload(data)
    _, url = serve(board)
    with BoardLink(url, timeout_s=1.0) as link:
        plan = plan_model(model, "linear")
        ack = link.plan(plan)
        assert ack.complete and ack.arena_bytes == plan.arena_bytes
        assert link.hello().arena_bytes == plan.arena_bytes
        x = model_input(model, seed=2)
        assert len(x) == 1960
        result = link.run(x)
        assert result.output == expected_output(model, x) and result.arena_bytes == plan.arena_bytes
        assert len(result.ops) == len(model.operators)


class NoisyBoard(VirtualBoard):
    """A virtual board whose line misbehaves in one chosen way."""

    def __init__(self, mode: str, **kw):
        super().__init__("nrf52840", interpreter_factory=stub_factory, **kw)
        self.mode = mode
        self.replies = 0

    def feed(self, data: bytes) -> bytes:
        if self.mode == "silent":
            return b""
        if self.mode == "nak" and self.replies == 0 and data.strip(b"\x00"):
            self.replies += 1  # pretend the command arrived broken: ask for a resend
            return p.encode_frame(p.Frame(p.ERROR_TYPE, p.NO_SEQ, p.ErrorReply(
                p.ErrorCode.BAD_CRC, 0, message="line noise").pack()))
        out = super().feed(data)
        if not out:
            return out
        self.replies += 1
        if self.mode == "garbage":  # junk (no 0x00) before every reply
            return b"\x13\x37\xffnoise\x01\x02" + out
        if self.replies != 1:
            return out
        if self.mode == "bad_crc":
            frame = p.FrameDecoder().feed(out)[0]
            raw = bytearray(p.frame_bytes(frame))
            raw[-1] ^= 0x5A
            from inferlab.engines.board import cobs

            return b"\x00" + cobs.encode(bytes(raw)) + b"\x00"
        if self.mode == "truncate":
            return out[: len(out) // 2]
        if self.mode == "drop":
            return b""
        if self.mode == "stale":
            old = p.encode_frame(p.Frame(p.response_type(p.Command.HELLO), 0xFFF0, b"old"))
            return old + out
        return out


@pytest.mark.parametrize("mode", ["garbage", "bad_crc", "truncate", "drop", "nak", "stale"])
def test_link_resyncs_and_keeps_working(serve, mode):
    data = HELLO_WORLD.read_bytes()
    model = load_model(data)
    board = NoisyBoard(mode, max_payload=512)
    _, url = serve(board)
    with BoardLink(url, timeout_s=0.3, retries=2) as link:
        assert link.hello().board == "nrf52840"
        link.load(data)
        x = model_input(model, seed=5)
        assert link.run(x).output == expected_output(model, x)
        s = link.stats
        if mode in ("garbage", "bad_crc", "truncate"):
            assert s.bad_frames >= 1
        if mode in ("bad_crc", "truncate", "drop", "nak"):
            assert s.resends == 1
        if mode == "stale":
            assert s.stale_frames == 1 and s.resends == 0
        if mode == "garbage":
            assert s.resends == 0


def test_silent_board_times_out_after_the_retries(serve):
    _, url = serve(NoisyBoard("silent"))
    with BoardLink(url, timeout_s=0.15, retries=2) as link:
        with pytest.raises(BoardTimeout, match=r"no answer to HELLO .*3 tries of 0.15 s"):
            link.hello()
        assert link.stats.frames_sent == 3 and link.stats.frames_received == 0  # each try waited out
        assert link.stats.resends == 2
        assert isinstance(BoardTimeout("x"), (BoardError, TimeoutError, OSError))


@pytest.mark.parametrize("transport", ["pty", "socket"])
def test_board_vanishing_mid_run_raises_disconnected_quickly(serve, transport):
    data = HELLO_WORLD.read_bytes()
    model = load_model(data)
    board = VirtualBoard("nrf52840", interpreter_factory=plus_one_interpreter(lambda i: 1000, delay_s=0.6))
    board.preload(data)
    server, url = serve(board, transport)
    link = BoardLink(url, timeout_s=5.0, retries=0)
    link.hello()
    threading.Timer(0.2, server.stop).start()
    # Noticed by the read that waited for the result, not by the 10 s timeout running out.
    with pytest.raises(BoardDisconnected, match="went away during read"):
        link.run(model_input(model), timeout_s=10.0)
    assert not link.is_open
    with pytest.raises(BoardDisconnected, match="closed"):
        link.hello()
    # A new board on a new port: the host reconnects as if nothing happened.
    _, url2 = serve(VirtualBoard("nrf52840", interpreter_factory=stub_factory), transport)
    with BoardLink(url2, timeout_s=1.0) as again:
        assert again.hello().board == "nrf52840"


def test_opening_a_missing_port_is_a_clear_error(tmp_path):
    with pytest.raises(BoardDisconnected, match="cannot open"):
        BoardLink(str(tmp_path / "no-such-tty"))
    with pytest.raises(BoardDisconnected, match="cannot open"):
        BoardLink("socket://127.0.0.1:1")


def test_refusals_carry_code_and_numbers(serve):
    data = HELLO_WORLD.read_bytes()
    _, url = serve(VirtualBoard("samd21", interpreter_factory=stub_factory))
    with BoardLink(url, timeout_s=1.0) as link:
        with pytest.raises(BoardRefused, match="NO_MODEL") as e:
            link.run(b"\x00")
        assert e.value.code == p.ErrorCode.NO_MODEL
        link.load(data)
        from inferlab.engines.mcu.model_planners import plan_model

        plan = plan_model(load_model(data))
        entries = [(i * 12_000, b.size) for i, b in enumerate(plan.buffers)]
        with pytest.raises(BoardRefused, match="PLAN_TOO_LARGE") as e:
            link.plan(arena_bytes=40_000, entries=entries)
        assert (e.value.needed, e.value.available) == (40_000 + 8192, 32768)
        assert "needed 48,192, available 32,768" in str(e.value)
        with pytest.raises(BoardRefused, match="TOO_LARGE"):
            link.load(bytes(300_000))
        # The refusal came at LOAD_BEGIN, before anything was erased: the old model stays.
        assert link.hello().model_sha256 == hashlib.sha256(data).hexdigest()


def test_round_trips_over_a_pty(serve):
    _, url = serve(VirtualBoard("nrf52840", interpreter_factory=stub_factory))
    with BoardLink(url) as link:
        link.hello()
        answers = [link.hello().board for _ in range(30)]
        assert answers == ["nrf52840"] * 30  # every round trip completed, first time
        assert link.stats.frames_received == 31 and link.stats.resends == 0


def test_pty_is_raw_and_survives_host_reconnects(serve):
    server, url = serve(VirtualBoard("rp2040", interpreter_factory=stub_factory))
    import termios

    fd = os.open(url, os.O_RDWR | os.O_NOCTTY)
    try:
        lflag = termios.tcgetattr(fd)[3]
        assert not lflag & termios.ECHO and not lflag & termios.ICANON
    finally:
        os.close(fd)
    for _ in range(3):
        with BoardLink(url, timeout_s=1.0) as link:
            assert link.hello().board == "rp2040"
    assert server.running


@pytest.mark.parametrize("stem, board_id", [
    ("hello_world_int8", "nrf52840"),
    ("micro_speech_quantized", "samd21"),
    ("person_detect", "stm32f411"),
])
def test_end_to_end_equals_the_arena_interpreter(serve, stem, board_id):
    """LOAD over a pty, RUN seeded random inputs on the real arena interpreter: the board's
    output equals running the interpreter directly, bit for bit."""
    from inferlab.engines.mcu.interpreter import ArenaInterpreter
    from inferlab.engines.mcu.model_planners import plan_model
    from inferlab.engines.mcu.op_costs import op_macs

    data = (MODELS_DIR / f"{stem}.tflite").read_bytes()
    model = load_model(data)
    server, url = serve(VirtualBoard(board_id))  # the default: the real interpreter
    direct = ArenaInterpreter(model, plan_model(model, "tflm-greedy"))
    with BoardLink(url, timeout_s=2.0) as link:
        done = link.load(data)
        assert done.arena_bytes == direct.arena_bytes
        for seed in (0, 1):
            x = random_input(model, seed)
            result = link.run(p.pack_tensors(x, specs(model, model.inputs)))
            want = direct.invoke(x[0])
            got = p.unpack_tensors(result.output, specs(model, model.outputs))[0]
            assert got.dtype == want.dtype and np.array_equal(got, want)
        assert [o.macs for o in result.ops] == [op_macs(model, i)
                                                for i in range(len(model.operators))]
        assert all(o.time_us > 0 for o in result.ops)
        assert result.time_us >= sum(o.time_us for o in result.ops) * 0.99
        # The host's own plan gives the same output (linear: no reuse; person_detect's
        # linear arena, 241 KB, exceeds the F411's SRAM, so "best" there).
        other = plan_model(model, "best" if stem == "person_detect" else "linear")
        link.plan(other)
        again = link.run(p.pack_tensors(x, specs(model, model.inputs)))
        assert again.output == result.output and again.arena_bytes == other.arena_bytes
    assert server.error is None
