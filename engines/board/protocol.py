"""InferLab board wire protocol, version 1: frames, message layouts and error codes.

PROTOCOL.md (next to this file) is the specification; this module is its Python half, used
by the host link (`link.py`) and the virtual board (`virtual_board.py`). A frame on the wire:

    COBS( header | payload | crc32 ) 0x00

    header (8 bytes, little-endian): u8 magic 0x49, u8 version 1, u8 type, u8 flags (0),
                                     u16 seq, u16 payload length (<= MAX_PAYLOAD_BYTES)
    crc32  (4 bytes, little-endian): CRC-32/IEEE over header and payload

A response carries the sequence number of its command and the type `command | 0x80`, or
`ERROR` (0xFF). Every message below is a frozen dataclass with `pack() -> bytes` and
`unpack(payload)`; a payload of the wrong size raises `ProtocolError(BAD_ARGUMENT)`. Most
messages are one fixed struct (`_FixedMessage`) or an offset and the bytes at it
(`_ChunkMessage`); those two classes hold their pack/unpack once.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from typing import ClassVar

import numpy as np

from inferlab.engines.board import cobs
from inferlab.engines.board.crc import crc32

PROTOCOL_VERSION = 1
MAGIC = 0x49  # "I"
HEADER = struct.Struct("<BBBBHH")  # magic, version, type, flags, seq, payload length
CRC_BYTES = 4
MAX_PAYLOAD_BYTES = 4096
MIN_PAYLOAD_BYTES = 64  # the smallest max_payload a board may announce
MAX_FRAME_BYTES = HEADER.size + MAX_PAYLOAD_BYTES + CRC_BYTES
MAX_ENCODED_BYTES = cobs.max_encoded_bytes(MAX_FRAME_BYTES)  # without the 0x00 delimiter
NO_SEQ = 0xFFFF  # seq of an ERROR answering a frame whose own seq could not be trusted
SHA256_BYTES = 32
MAX_NAME_BYTES = 64
MAX_ERROR_MESSAGE_BYTES = 200
ARENA_ALIGNMENT_BYTES = 16  # PLAN offsets must be multiples of this


class Command(IntEnum):
    HELLO = 0x01
    LOAD_BEGIN = 0x02
    LOAD_CHUNK = 0x03
    LOAD_END = 0x04
    PLAN = 0x05
    INPUT = 0x06
    RUN = 0x07
    READ_OUTPUT = 0x08
    READ_TIMINGS = 0x09


RESPONSE_BIT = 0x80
ERROR_TYPE = 0xFF


def response_type(command: int) -> int:
    """The type of a successful answer to `command`."""
    return command | RESPONSE_BIT


class ErrorCode(IntEnum):
    """Typed ERROR responses; `needed` / `available` carry the numbers where they apply."""

    BAD_FRAME = 1  # COBS, length or magic wrong; seq is NO_SEQ
    BAD_CRC = 2  # CRC mismatch; seq is NO_SEQ
    BAD_VERSION = 3  # needed = frame's version, available = board's version
    UNKNOWN_COMMAND = 4
    BAD_ARGUMENT = 5  # payload size or a field out of range
    TOO_LARGE = 6  # payload > max_payload, or model > flash budget: needed / available
    NO_MODEL = 7
    BAD_STATE = 8  # e.g. LOAD_CHUNK without LOAD_BEGIN, out-of-order offset (available = next)
    HASH_MISMATCH = 9
    PLAN_TOO_LARGE = 10  # arena + runtime overhead > SRAM: needed / available
    BAD_PLAN = 11  # wrong buffer count or sizes, misaligned, overlapping buffers
    BAD_MODEL = 12  # not a model this board can run (malformed file, unsupported op)
    NO_RESULT = 13  # READ_OUTPUT / READ_TIMINGS before a RUN
    RUN_FAILED = 14
    UNSUPPORTED = 15  # a known command this board does not implement (e.g. LOAD)


class HelloFlags(IntFlag):
    MODEL_LOADED = 0x01
    PLAN_READY = 0x02
    CAN_LOAD = 0x04
    CAN_PLAN = 0x08
    CYCLES_MEASURED = 0x10  # per-op cycles come from a cycle counter, not an estimate


class ResultFlags(IntFlag):
    CYCLES_MEASURED = 0x01


class ProtocolError(ValueError):
    """A frame or payload that breaks the protocol; `code` is the ErrorCode to answer with."""

    def __init__(self, code: ErrorCode, message: str, needed: int = 0, available: int = 0,
                 seq: int = NO_SEQ, command: int = 0):
        super().__init__(message)
        self.code = ErrorCode(code)
        self.needed = needed
        self.available = available
        self.seq = seq  # the frame's seq where it could be trusted (CRC good), else NO_SEQ
        self.command = command


# ---- frames -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One decoded frame: a message type, its sequence number and its payload bytes."""

    type: int
    seq: int
    payload: bytes = b""
    flags: int = 0


def frame_bytes(frame: Frame) -> bytes:
    """The frame before COBS: header, payload, CRC-32."""
    if len(frame.payload) > MAX_PAYLOAD_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"payload of {len(frame.payload)} bytes exceeds "
                            f"the protocol maximum {MAX_PAYLOAD_BYTES}",
                            len(frame.payload), MAX_PAYLOAD_BYTES)
    raw = HEADER.pack(MAGIC, PROTOCOL_VERSION, frame.type, frame.flags, frame.seq & 0xFFFF,
                      len(frame.payload)) + bytes(frame.payload)
    return raw + struct.pack("<I", crc32(raw))


def encode_frame(frame: Frame) -> bytes:
    """The frame as it goes on the wire: COBS-encoded, followed by the 0x00 delimiter."""
    return cobs.encode(frame_bytes(frame)) + b"\x00"


def decode_frame(encoded: bytes | bytearray | memoryview) -> Frame:
    """Decode one frame (COBS bytes between delimiters); `ProtocolError` says what is wrong.

    Checks in order: COBS, size, CRC (BAD_CRC), magic, version (BAD_VERSION), length.
    """
    try:
        raw = cobs.decode(encoded)
    except cobs.CobsError as exc:
        raise ProtocolError(ErrorCode.BAD_FRAME, f"bad COBS: {exc}") from None
    if len(raw) < HEADER.size + CRC_BYTES:
        raise ProtocolError(ErrorCode.BAD_FRAME, f"frame of {len(raw)} bytes is shorter than "
                            f"header + CRC ({HEADER.size + CRC_BYTES})")
    if len(raw) > MAX_FRAME_BYTES:
        raise ProtocolError(ErrorCode.BAD_FRAME, f"frame of {len(raw)} bytes exceeds "
                            f"{MAX_FRAME_BYTES}")
    body, (crc,) = raw[:-CRC_BYTES], struct.unpack("<I", raw[-CRC_BYTES:])
    if crc32(body) != crc:
        raise ProtocolError(ErrorCode.BAD_CRC, f"CRC mismatch: frame says {crc:#010x}, "
                            f"bytes give {crc32(body):#010x}")
    magic, version, type_, flags, seq, length = HEADER.unpack_from(body)
    if magic != MAGIC:
        raise ProtocolError(ErrorCode.BAD_FRAME, f"bad magic {magic:#04x} (expected {MAGIC:#04x})")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(ErrorCode.BAD_VERSION, f"protocol version {version}, this side "
                            f"speaks {PROTOCOL_VERSION}", version, PROTOCOL_VERSION,
                            seq=seq, command=type_)
    if length != len(body) - HEADER.size:
        raise ProtocolError(ErrorCode.BAD_FRAME, f"header says {length} payload bytes, frame "
                            f"holds {len(body) - HEADER.size}")
    return Frame(type=type_, seq=seq, payload=bytes(body[HEADER.size:]), flags=flags)


class FrameDecoder:
    """Splits a byte stream at 0x00 delimiters into frames, resynchronising after garbage.

    `feed(data)` returns, in order, a `Frame` for each good frame and a `ProtocolError` for
    each bad one. Empty frames (0x00 0x00) are skipped. Bytes beyond MAX_ENCODED_BYTES without
    a delimiter are dropped up to the next 0x00 and reported once as BAD_FRAME.
    """

    def __init__(self, max_encoded_bytes: int = MAX_ENCODED_BYTES):
        self.max_encoded_bytes = max_encoded_bytes
        self._buf = bytearray()
        self._overflow = False

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | ProtocolError]:
        out: list[Frame | ProtocolError] = []
        for part_index, part in enumerate(bytes(data).split(b"\x00")):
            if part_index > 0:  # a delimiter came before this part: finish the pending frame
                self._finish(out)
            if self._overflow:
                continue
            self._buf += part
            if len(self._buf) > self.max_encoded_bytes:
                self._buf.clear()
                self._overflow = True
        return out

    def _finish(self, out: list) -> None:
        if self._overflow:
            out.append(ProtocolError(ErrorCode.BAD_FRAME, f"frame longer than "
                                     f"{self.max_encoded_bytes} bytes dropped"))
        elif self._buf:
            try:
                out.append(decode_frame(self._buf))
            except ProtocolError as exc:
                out.append(exc)
        self._buf.clear()
        self._overflow = False


# ---- messages -----------------------------------------------------------------------------


def _need(payload: bytes, n: int, what: str, exact: bool = True) -> None:
    if (len(payload) != n) if exact else (len(payload) < n):
        raise ProtocolError(ErrorCode.BAD_ARGUMENT, f"{what} payload is {len(payload)} bytes, "
                            f"expected {'' if exact else 'at least '}{n}")


def _pack_str(s: str) -> bytes:
    data = s.encode("utf-8")[:MAX_NAME_BYTES]
    return bytes([len(data)]) + data


def _unpack_str(payload: bytes, at: int, what: str) -> tuple[str, int]:
    if at >= len(payload) or at + 1 + payload[at] > len(payload):
        raise ProtocolError(ErrorCode.BAD_ARGUMENT, f"HELLO field {what!r} runs past the payload")
    n = payload[at]
    return payload[at + 1 : at + 1 + n].decode("utf-8", "replace"), at + 1 + n


class _FixedMessage:
    """A message that is exactly one struct `_S`: the dataclass fields, in declaration order.

    A payload of any other size is refused with BAD_ARGUMENT naming `_NAME`.
    """

    _S: ClassVar[struct.Struct]
    _NAME: ClassVar[str]  # the message's name in PROTOCOL.md

    def pack(self) -> bytes:
        return self._S.pack(*(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def unpack(cls, payload: bytes):
        _need(payload, cls._S.size, cls._NAME)
        return cls(*cls._S.unpack(payload))


@dataclass(frozen=True)
class _ChunkMessage:
    """A u32 offset and the bytes at it; `_MIN_DATA_BYTES` is the least data a payload holds."""

    _S: ClassVar[struct.Struct] = struct.Struct("<I")
    _NAME: ClassVar[str]
    _MIN_DATA_BYTES: ClassVar[int] = 1

    offset: int
    data: bytes

    def pack(self) -> bytes:
        return self._S.pack(self.offset) + bytes(self.data)

    @classmethod
    def unpack(cls, payload: bytes):
        _need(payload, cls._S.size + cls._MIN_DATA_BYTES, cls._NAME, exact=False)
        return cls(cls._S.unpack_from(payload)[0], bytes(payload[cls._S.size:]))


@dataclass(frozen=True)
class HelloInfo:
    """Answer to HELLO: who the board is, its memory, and the model it holds (if any)."""

    _S = struct.Struct("<BBHIIIIIII32s")

    protocol_version: int
    flags: int
    max_payload: int
    sram_bytes: int
    flash_bytes: int
    clock_hz: int
    arena_limit_bytes: int  # SRAM an arena may use: SRAM - the runtime's own RAM
    model_limit_bytes: int  # flash a model may use: flash - code
    model_bytes: int  # 0 when no model is loaded
    arena_bytes: int  # the active plan's arena, 0 when none
    model_sha256: bytes  # 32 zero bytes when no model is loaded
    board: str  # preset id, e.g. "nrf52840"
    name: str
    core: str

    def pack(self) -> bytes:
        return (self._S.pack(self.protocol_version, self.flags, self.max_payload,
                             self.sram_bytes, self.flash_bytes, self.clock_hz,
                             self.arena_limit_bytes, self.model_limit_bytes, self.model_bytes,
                             self.arena_bytes, self.model_sha256)
                + _pack_str(self.board) + _pack_str(self.name) + _pack_str(self.core))

    @classmethod
    def unpack(cls, payload: bytes) -> HelloInfo:
        _need(payload, cls._S.size, "HELLO", exact=False)
        fields = cls._S.unpack_from(payload)
        at = cls._S.size
        board, at = _unpack_str(payload, at, "board")
        name, at = _unpack_str(payload, at, "name")
        core, at = _unpack_str(payload, at, "core")
        return cls(*fields, board=board, name=name, core=core)


@dataclass(frozen=True)
class LoadBegin(_FixedMessage):
    """Start an upload: the model's total size and SHA-256; resets any earlier upload."""

    _S = struct.Struct("<I32s")
    _NAME = "LOAD_BEGIN"
    total_bytes: int
    sha256: bytes


@dataclass(frozen=True)
class LoadChunk(_ChunkMessage):
    """Model bytes at `offset`; offset must be the bytes received so far (or a resend)."""

    _NAME = "LOAD_CHUNK"


@dataclass(frozen=True)
class LoadAck(_FixedMessage):
    """Answer to LOAD_BEGIN and LOAD_CHUNK: contiguous bytes received of the total."""

    _S = struct.Struct("<II")
    _NAME = "LOAD_ACK"
    received_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class LoadDone(_FixedMessage):
    """Answer to LOAD_END: the hash verified; the board's own default plan and its limit."""

    _S = struct.Struct("<III32s")
    _NAME = "LOAD_DONE"
    model_bytes: int
    arena_bytes: int  # the board's default plan for this model
    arena_limit_bytes: int
    sha256: bytes


PLAN_ENTRY = struct.Struct("<II")  # offset, size


@dataclass(frozen=True)
class PlanPart:
    """Arena offsets (and sizes) for buffers first..first+len(entries)-1 of `total_buffers`.

    Buffers are numbered in the canonical order both ends derive from the model (planned
    tensors by tensor index, then kernel scratch buffers in request order).
    """

    _S = struct.Struct("<IHH")
    arena_bytes: int
    total_buffers: int
    first_buffer: int
    entries: tuple[tuple[int, int], ...]  # (offset, size)

    def pack(self) -> bytes:
        return self._S.pack(self.arena_bytes, self.total_buffers, self.first_buffer) + b"".join(
            PLAN_ENTRY.pack(o, s) for o, s in self.entries)

    @classmethod
    def unpack(cls, payload: bytes) -> PlanPart:
        _need(payload, cls._S.size, "PLAN", exact=False)
        if (len(payload) - cls._S.size) % PLAN_ENTRY.size:
            raise ProtocolError(ErrorCode.BAD_ARGUMENT, "PLAN entries are not whole "
                                f"{PLAN_ENTRY.size}-byte (offset, size) pairs")
        arena, total, first = cls._S.unpack_from(payload)
        entries = tuple(PLAN_ENTRY.iter_unpack(payload[cls._S.size:]))
        return cls(arena, total, first, entries)


@dataclass(frozen=True)
class PlanAck(_FixedMessage):
    """Answer to PLAN: buffers received so far; `complete` once the plan is active."""

    _S = struct.Struct("<HHII?")  # "?": one byte, packs 0/1, any non-zero byte reads True
    _NAME = "PLAN_ACK"
    received_buffers: int
    total_buffers: int
    arena_bytes: int
    arena_limit_bytes: int
    complete: bool


@dataclass(frozen=True)
class InputPart(_ChunkMessage):
    """Input bytes at `offset` of the concatenated graph inputs (staged for the next RUN)."""

    _NAME = "INPUT"


@dataclass(frozen=True)
class InputAck(_FixedMessage):
    _S = struct.Struct("<II")
    _NAME = "INPUT_ACK"
    end_offset: int
    input_bytes: int


@dataclass(frozen=True)
class RunResult(_FixedMessage):
    """Answer to RUN: totals; the output and per-op records are read with READ_* commands."""

    _S = struct.Struct("<IIHHQQ")
    _NAME = "RESULT"
    output_bytes: int
    arena_bytes: int
    op_count: int
    flags: int  # ResultFlags
    time_ns: int
    cycles: int


@dataclass(frozen=True)
class ReadOutput(_FixedMessage):
    _S = struct.Struct("<IH")
    _NAME = "READ_OUTPUT"
    offset: int
    length: int


@dataclass(frozen=True)
class OutputPart(_ChunkMessage):
    """Answer to READ_OUTPUT: output bytes at `offset`, as many as asked (which may be none)."""

    _NAME = "OUTPUT"
    _MIN_DATA_BYTES = 0


@dataclass(frozen=True)
class ReadTimings(_FixedMessage):
    _S = struct.Struct("<HH")
    _NAME = "READ_TIMINGS"
    first_op: int
    count: int


OP_RECORD = struct.Struct("<QQI")  # time_ns, cycles, macs


@dataclass(frozen=True)
class TimingsPart:
    """Per-op records for ops first_op..: (time_ns, cycles, macs) each."""

    _S = struct.Struct("<HH")
    first_op: int
    records: tuple[tuple[int, int, int], ...]

    def pack(self) -> bytes:
        return self._S.pack(self.first_op, len(self.records)) + b"".join(
            OP_RECORD.pack(*r) for r in self.records)

    @classmethod
    def unpack(cls, payload: bytes) -> TimingsPart:
        _need(payload, cls._S.size, "TIMINGS", exact=False)
        first, count = cls._S.unpack_from(payload)
        _need(payload, cls._S.size + count * OP_RECORD.size, "TIMINGS")
        return cls(first, tuple(OP_RECORD.iter_unpack(payload[cls._S.size:])))


@dataclass(frozen=True)
class ErrorReply:
    """A typed refusal: the code, the command type it answers, the numbers, a message."""

    _S = struct.Struct("<HBBII")
    code: int
    command: int
    needed: int = 0
    available: int = 0
    message: str = ""

    def pack(self) -> bytes:
        text = self.message.encode("utf-8")[:MAX_ERROR_MESSAGE_BYTES]
        return self._S.pack(self.code, self.command & 0xFF, 0,
                            min(self.needed, 0xFFFFFFFF), min(self.available, 0xFFFFFFFF)) + text

    @classmethod
    def unpack(cls, payload: bytes) -> ErrorReply:
        _need(payload, cls._S.size, "ERROR", exact=False)
        code, command, _, needed, available = cls._S.unpack_from(payload)
        return cls(code, command, needed, available,
                   payload[cls._S.size:].decode("utf-8", "replace"))

    @property
    def code_name(self) -> str:
        try:
            return ErrorCode(self.code).name
        except ValueError:
            return f"ERROR_{self.code}"


# Largest payloads per message given a board's max_payload (what the host may put in one).
def chunk_data_bytes(max_payload: int) -> int:
    """Data bytes per LOAD_CHUNK / INPUT / OUTPUT frame (a 4-byte offset comes first)."""
    return max_payload - 4


def plan_entries_per_frame(max_payload: int) -> int:
    return (max_payload - PlanPart._S.size) // PLAN_ENTRY.size


def op_records_per_frame(max_payload: int) -> int:
    return (max_payload - TimingsPart._S.size) // OP_RECORD.size


# ---- tensors on the wire -------------------------------------------------------------------


def pack_tensors(arrays, specs) -> bytes:
    """Concatenate arrays as the graph's tensors `specs` ((shape, dtype) each) expect them.

    Each array must have the tensor's dtype and element count (its shape may differ).
    """
    arrays = list(arrays)
    if len(arrays) != len(specs):
        raise ValueError(f"model takes {len(specs)} input tensor(s), got {len(arrays)}")
    parts = []
    for i, (arr, (shape, dtype)) in enumerate(zip(arrays, specs, strict=True)):
        arr = np.asarray(arr)
        want = int(np.prod(shape, dtype=np.int64))
        if arr.dtype != np.dtype(dtype) or arr.size != want:
            raise ValueError(f"input {i} must be {dtype} with shape {list(shape)} "
                             f"({want} elements), got {arr.dtype} {list(arr.shape)}")
        parts.append(np.ascontiguousarray(arr).tobytes())
    return b"".join(parts)


def unpack_tensors(data: bytes, specs) -> list[np.ndarray]:
    """Split concatenated tensor bytes into arrays of the given (shape, dtype) specs."""
    out, at = [], 0
    for shape, dtype in specs:
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if at + n > len(data):
            raise ValueError(f"tensor bytes end at {len(data)}, tensors need {at + n}")
        out.append(np.frombuffer(data, dtype=dt, count=n // dt.itemsize, offset=at)
                   .reshape(shape).copy())
        at += n
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes left over after the tensors")
    return out
