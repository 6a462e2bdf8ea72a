"""Shared helpers of the firmware tests: tools, builds, the host port on a pty or pipes,
a ctypes view of the firmware core, TFLM references.

Missing tools are a FAILURE naming the exact install command, never a skip: CI installs
them (`make setup`), and a test run without them must say what is missing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import select
import subprocess
import time
import tty
from pathlib import Path

import numpy as np
import pytest

from inferlab.engines.board import protocol as p
from inferlab.engines.board.toolchain import ToolMissing, make_command, require_tools
from inferlab.engines.mcu.examples import example_path, examples_dir

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = examples_dir()
SHARED_MODELS = ("hello_world_int8", "micro_speech_quantized", "person_detect")


def model_path(stem: str) -> Path:
    return example_path(stem)


def need_tools(target: str) -> None:
    try:
        require_tools(target)
        if target != "host":
            from inferlab.engines.board.emulator import find_qemu

            find_qemu()
    except ToolMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def tflm_outputs(path: Path, inputs: list[list[np.ndarray]]) -> list[np.ndarray]:
    """TFLM's (the tflite-micro wheel's) first output for each input list."""
    from tflite_micro.python.tflite_micro import runtime

    ref = runtime.Interpreter.from_file(str(path), arena_size=1024 * 1024)
    out = []
    for feed in inputs:
        for k, x in enumerate(feed):
            ref.set_input(x, k)
        ref.invoke()
        out.append(ref.get_output(0))
    return out


# ---- the host port as a process ------------------------------------------------------------


class HostBoard:
    """The host-port firmware as a child process: on a pty (`url`, for BoardLink and the
    CLI) or on pipes (`send` / `frames`, byte-level tests)."""

    def __init__(self, image: Path, pty: bool = True):
        self.image = Path(image)
        if pty:
            master, slave = os.openpty()
            tty.setraw(slave)
            self.proc = subprocess.Popen([str(self.image)], stdin=master, stdout=master)
            os.close(master)
            self._slave = slave  # held open so the pty stays up between links
            self.url = os.ttyname(slave)
        else:
            self.proc = subprocess.Popen([str(self.image)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, bufsize=0)
            self._slave = None
            self.url = None
        self._decoder = p.FrameDecoder()

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def frames(self, count: int = 1, timeout_s: float = 5.0) -> list:
        """The next `count` decoded items (Frame or ProtocolError) from the board."""
        out: list = []
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while len(out) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"board sent {len(out)} of {count} frames")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    raise EOFError("board closed its output")
                out += self._decoder.feed(data)
        return out

    def request(self, command: int, payload: bytes = b"", seq: int = 1) -> p.Frame:
        self.send(p.encode_frame(p.Frame(command, seq, payload)))
        (frame,) = self.frames(1)
        return frame

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.terminate()
        self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None


def error_of(frame) -> p.ErrorReply:
    assert isinstance(frame, p.Frame) and frame.type == p.ERROR_TYPE, frame
    return p.ErrorReply.unpack(frame.payload)


# ---- the firmware core through ctypes -----------------------------------------------------


class FirmwareLib:
    """libfirmware.so: the core sources plus any number of generated models (symbols)."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        L = self.lib
        vp, u32, u64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64
        L.fw_crc32.argtypes = [u32, ctypes.c_char_p, u32]
        L.fw_crc32.restype = u32
        L.fw_cobs_encode_buffer.argtypes = [ctypes.c_char_p, u32, vp]
        L.fw_cobs_encode_buffer.restype = u32
        L.fw_cobs_decode_buffer.argtypes = [ctypes.c_char_p, u32, vp, u32]
        L.fw_cobs_decode_buffer.restype = ctypes.c_int32
        L.fw_exec_reset.argtypes = [vp]
        L.fw_exec_run.argtypes = [vp]
        L.fw_exec_run.restype = u64
        L.fw_exec_write_inputs.argtypes = [vp, u32, ctypes.c_char_p, u32]
        L.fw_exec_read_outputs.argtypes = [vp, u32, vp, u32]

    def crc32(self, data: bytes, crc: int = 0) -> int:
        return self.lib.fw_crc32(crc, data, len(data))

    def cobs_encode(self, data: bytes) -> bytes:
        out = ctypes.create_string_buffer(len(data) + len(data) // 254 + 2)
        n = self.lib.fw_cobs_encode_buffer(data, len(data), out)
        return out.raw[:n]

    def cobs_decode(self, data: bytes) -> bytes | None:
        out = ctypes.create_string_buffer(len(data) + 1)
        n = self.lib.fw_cobs_decode_buffer(data, len(data), out, len(data) + 1)
        return None if n < 0 else out.raw[:n]

    def run(self, symbol: str, input_bytes: bytes, output_bytes: int) -> bytes:
        model = ctypes.addressof(ctypes.c_char.in_dll(self.lib, symbol))
        self.lib.fw_exec_reset(model)
        self.lib.fw_exec_write_inputs(model, 0, input_bytes, len(input_bytes))
        self.lib.fw_exec_run(model)
        out = ctypes.create_string_buffer(max(1, output_bytes))
        self.lib.fw_exec_read_outputs(model, 0, out, output_bytes)
        return out.raw[:output_bytes]


def build_lib(models: dict[str, bytes], out_dir: Path) -> FirmwareLib:
    """Generate every model (symbol -> .tflite bytes) into out_dir and build the library."""
    from inferlab.engines.board.codegen import generate

    need_tools("host")
    out_dir.mkdir(parents=True, exist_ok=True)
    for symbol, data in models.items():
        generate(data, symbol=symbol).write(out_dir, stem=symbol)
    result = subprocess.run(make_command("host", out_dir, "lib"), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return FirmwareLib(out_dir / "libfirmware.so")


def sha256_hex(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
