"""The host end of the board wire protocol (PROTOCOL.md) over any pyserial URL.

`BoardLink(url)` opens a real port (`/dev/ttyACM0`, `COM3`), `socket://host:port` or the
virtual board's pty, then speaks request/response with sequence numbers:

- every read has a deadline: a board that stays silent raises `BoardTimeout` after
  `1 + retries` tries of `timeout_s` each (commands are idempotent, so resending is safe);
- garbage and broken frames are skipped up to the next 0x00 (counted in `stats`); an ERROR
  from the board saying it got a corrupted frame makes the link resend at once;
- a port that vanishes (unplugged board, closed pty or socket) raises `BoardDisconnected`
  on the next read or write, and the link is closed;
- a typed refusal from the board raises `BoardRefused` with its code and numbers.

All errors are `BoardError`, an `OSError`, so callers can report them in one line.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import serial

from inferlab.engines.board import protocol as p

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_RUN_TIMEOUT_S = 60.0
_POLL_S = 0.02  # the port's read timeout: how often a waiting read looks at its deadline


class BoardError(OSError):
    """Anything that went wrong talking to a board; the message says what and where."""

    def __init__(self, message: str):
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class BoardTimeout(BoardError, TimeoutError):
    """The board did not answer in time (after the retries)."""


class BoardDisconnected(BoardError, ConnectionError):
    """The port could not be opened or went away (board unplugged, pty or socket closed)."""


class BoardRefused(BoardError):
    """The board answered with a typed ERROR; `code`, `needed`, `available` carry it."""

    def __init__(self, reply: p.ErrorReply, command: str):
        self.code = reply.code
        self.code_name = reply.code_name
        self.needed = reply.needed
        self.available = reply.available
        self.board_message = reply.message
        numbers = (f" (needed {reply.needed:,}, available {reply.available:,})"
                   if reply.needed or reply.available else "")
        super().__init__(f"board refused {command}: {reply.code_name}"
                         f"{': ' + reply.message if reply.message else ''}{numbers}")


@dataclass(frozen=True)
class BoardInfo:
    """The HELLO answer, in host terms."""

    protocol_version: int
    board: str
    name: str
    core: str
    sram_bytes: int
    flash_bytes: int
    clock_hz: int
    max_payload: int
    arena_limit_bytes: int
    model_limit_bytes: int
    model_bytes: int
    arena_bytes: int
    model_sha256: str | None  # hex, None when no model is loaded
    can_load: bool
    can_plan: bool
    plan_ready: bool
    cycles_measured: bool

    @classmethod
    def from_hello(cls, h: p.HelloInfo) -> BoardInfo:
        f = p.HelloFlags(h.flags)
        loaded = bool(f & p.HelloFlags.MODEL_LOADED)
        return cls(
            protocol_version=h.protocol_version, board=h.board, name=h.name, core=h.core,
            sram_bytes=h.sram_bytes, flash_bytes=h.flash_bytes, clock_hz=h.clock_hz,
            max_payload=h.max_payload, arena_limit_bytes=h.arena_limit_bytes,
            model_limit_bytes=h.model_limit_bytes, model_bytes=h.model_bytes,
            arena_bytes=h.arena_bytes, model_sha256=h.model_sha256.hex() if loaded else None,
            can_load=bool(f & p.HelloFlags.CAN_LOAD), can_plan=bool(f & p.HelloFlags.CAN_PLAN),
            plan_ready=bool(f & p.HelloFlags.PLAN_READY),
            cycles_measured=bool(f & p.HelloFlags.CYCLES_MEASURED),
        )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OpTiming:
    index: int
    time_us: float
    cycles: int
    macs: int


@dataclass(frozen=True)
class BoardResult:
    """One RUN: the output bytes (graph outputs concatenated), totals and per-op records."""

    output: bytes
    arena_bytes: int
    time_us: float
    cycles: int
    cycles_measured: bool
    ops: tuple[OpTiming, ...]
    round_trip_s: float  # from sending RUN to the last record read back

    def to_dict(self) -> dict:
        return {
            "arena_bytes": self.arena_bytes, "time_us": self.time_us, "cycles": self.cycles,
            "cycles_measured": self.cycles_measured, "round_trip_ms": self.round_trip_s * 1e3,
            "ops": [{"index": o.index, "time_us": o.time_us, "cycles": o.cycles,
                     "macs": o.macs} for o in self.ops],
        }


@dataclass
class LinkStats:
    frames_sent: int = 0
    frames_received: int = 0
    bad_frames: int = 0  # garbage, bad CRC, truncated: skipped
    stale_frames: int = 0  # answers to an earlier sequence number
    resends: int = 0
    errors: deque = field(default_factory=lambda: deque(maxlen=50))  # the latest few


class BoardLink:
    """One open connection to a board. Use as a context manager, or call `close()`."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = 2,
                 baudrate: int = 115200, run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S):
        if timeout_s <= 0 or retries < 0:
            raise ValueError("timeout_s must be > 0 and retries >= 0")
        self.url = url
        self.timeout_s = float(timeout_s)
        self.run_timeout_s = float(run_timeout_s)
        self.retries = int(retries)
        self.stats = LinkStats()
        self.info: BoardInfo | None = None
        self._decoder = p.FrameDecoder()
        self._pending: list = []
        # A random first seq: a stale answer left on the line by an earlier session is not
        # mistaken for this one's.
        self._seq = random.randrange(p.NO_SEQ)
        self._flush_next = True  # send a lone 0x00 first: ends any partial frame on the board
        try:
            self._port = serial.serial_for_url(url, baudrate=baudrate, timeout=_POLL_S,
                                               write_timeout=self.timeout_s)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise BoardDisconnected(f"cannot open {url}: {exc}") from None
        try:
            self._port.reset_input_buffer()
        except Exception:  # noqa: BLE001 - not every transport supports it
            pass

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._port is not None

    def close(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            try:
                port.close()
            except Exception:  # noqa: BLE001 - closing a vanished port may fail; it is closed
                pass

    def __enter__(self) -> BoardLink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- commands -----------------------------------------------------------------------

    def hello(self) -> BoardInfo:
        """Ask the board who it is; also remembered as `self.info`."""
        reply = self.request(p.Command.HELLO)
        info = BoardInfo.from_hello(p.HelloInfo.unpack(reply.payload))
        if info.protocol_version != p.PROTOCOL_VERSION:
            raise BoardError(f"{self.url} speaks protocol {info.protocol_version}, "
                             f"this host speaks {p.PROTOCOL_VERSION}")
        if not p.MIN_PAYLOAD_BYTES <= info.max_payload <= p.MAX_PAYLOAD_BYTES:
            raise BoardError(f"{self.url} announces max payload {info.max_payload}, outside "
                             f"{p.MIN_PAYLOAD_BYTES}..{p.MAX_PAYLOAD_BYTES}")
        self.info = info
        return info

    def load(self, model: bytes, progress: Callable[[int, int], None] | None = None
             ) -> p.LoadDone:
        """Upload a .tflite model in chunks; the board verifies its SHA-256 at the end."""
        info = self.info or self.hello()
        model = bytes(model)
        digest = hashlib.sha256(model).digest()
        ack = p.LoadAck.unpack(self.request(
            p.Command.LOAD_BEGIN, p.LoadBegin(len(model), digest).pack()).payload)
        chunk = p.chunk_data_bytes(info.max_payload)
        offset = ack.received_bytes
        if progress:
            progress(offset, len(model))
        while offset < len(model):
            part = p.LoadChunk(offset, model[offset:offset + chunk]).pack()
            ack = p.LoadAck.unpack(self.request(p.Command.LOAD_CHUNK, part).payload)
            if ack.received_bytes <= offset:
                raise BoardError(f"board did not advance past byte {offset} of the upload")
            offset = ack.received_bytes
            if progress:
                progress(offset, len(model))
        done = p.LoadDone.unpack(self.request(p.Command.LOAD_END).payload)
        if done.sha256 != digest or done.model_bytes != len(model):
            raise BoardError("board reports another model after the upload "
                             f"({done.model_bytes} B, sha256 {done.sha256.hex()[:16]}...)")
        self.info = None  # stale: the board now holds another model
        return done

    def plan(self, plan=None, *, arena_bytes: int | None = None,
             entries: list[tuple[int, int]] | None = None) -> p.PlanAck:
        """Send a plan: a planner `Plan` (offsets, buffers' sizes, arena_bytes) or raw
        `arena_bytes` and (offset, size) `entries` in the canonical buffer order."""
        if plan is not None:
            arena_bytes = plan.arena_bytes
            entries = [(int(o), int(b.size)) for o, b in zip(plan.offsets, plan.buffers, strict=True)]
        if arena_bytes is None or entries is None:
            raise ValueError("plan() needs a Plan, or arena_bytes and entries")
        info = self.info or self.hello()
        per = p.plan_entries_per_frame(info.max_payload)
        total = len(entries)
        first = 0
        ack = None
        while True:
            part = p.PlanPart(arena_bytes, total, first, tuple(entries[first:first + per]))
            ack = p.PlanAck.unpack(self.request(p.Command.PLAN, part.pack()).payload)
            first += per
            if first >= total:
                break
        if not ack.complete:
            raise BoardError(f"board holds {ack.received_buffers} of {total} plan entries "
                             "after the last part")
        return ack

    def run(self, inputs: bytes, timeout_s: float | None = None) -> BoardResult:
        """Run one inference on `inputs` (graph inputs' bytes, concatenated)."""
        info = self.info or self.hello()
        inputs = bytes(inputs)
        t0 = time.perf_counter()
        chunk = p.chunk_data_bytes(info.max_payload)
        if len(inputs) <= info.max_payload:
            payload = inputs
        else:
            for offset in range(0, len(inputs), chunk):
                self.request(p.Command.INPUT, p.InputPart(offset, inputs[offset:offset + chunk])
                             .pack())
            payload = b""
        res = p.RunResult.unpack(self.request(
            p.Command.RUN, payload, timeout_s=timeout_s or self.run_timeout_s).payload)
        output = bytearray()
        while len(output) < res.output_bytes:
            n = min(chunk, res.output_bytes - len(output))
            part = p.OutputPart.unpack(self.request(
                p.Command.READ_OUTPUT, p.ReadOutput(len(output), n).pack()).payload)
            if part.offset != len(output) or not part.data:
                raise BoardError(f"board sent output bytes at {part.offset}, asked for "
                                 f"{len(output)}")
            output += part.data[:n]
        records: list[tuple[int, int, int]] = []
        per = p.op_records_per_frame(info.max_payload)
        while len(records) < res.op_count:
            n = min(per, res.op_count - len(records))
            part = p.TimingsPart.unpack(self.request(
                p.Command.READ_TIMINGS, p.ReadTimings(len(records), n).pack()).payload)
            if part.first_op != len(records) or not part.records:
                raise BoardError(f"board sent timings from op {part.first_op}, asked for "
                                 f"{len(records)}")
            records += part.records[:n]
        round_trip_s = time.perf_counter() - t0
        return BoardResult(
            output=bytes(output), arena_bytes=res.arena_bytes, time_us=res.time_ns / 1e3,
            cycles=res.cycles,
            cycles_measured=bool(res.flags & p.ResultFlags.CYCLES_MEASURED),
            ops=tuple(OpTiming(i, t / 1e3, c, m) for i, (t, c, m) in enumerate(records)),
            round_trip_s=round_trip_s,
        )

    # ---- request / response -------------------------------------------------------------

    def request(self, command: int, payload: bytes = b"", timeout_s: float | None = None
                ) -> p.Frame:
        """Send one command and return its answer frame; raise on ERROR, timeout, hang-up."""
        if self._port is None:
            raise BoardDisconnected(f"{self.url}: link is closed")
        name = _command_name(command)
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        seq = self._seq
        self._seq = (self._seq + 1) % p.NO_SEQ  # NO_SEQ itself is never used by the host
        wire = p.encode_frame(p.Frame(command, seq, payload))
        attempts = 1 + self.retries
        for attempt in range(attempts):
            if attempt:
                self.stats.resends += 1
            self._write((b"\x00" if self._flush_next or attempt else b"") + wire)
            self._flush_next = False
            deadline = time.monotonic() + timeout_s
            while True:
                item = self._next_item(deadline)
                if item is None:  # deadline passed: resend
                    break
                if isinstance(item, p.ProtocolError):
                    self.stats.bad_frames += 1
                    self.stats.errors.append(str(item))
                    continue
                self.stats.frames_received += 1
                if item.type == p.ERROR_TYPE:
                    reply = _error_reply(item)
                    if item.seq == p.NO_SEQ and reply.code in (p.ErrorCode.BAD_FRAME,
                                                               p.ErrorCode.BAD_CRC):
                        # The board saw a broken frame, maybe ours: resend now if we may.
                        self.stats.errors.append(f"board: {reply.code_name} {reply.message}")
                        if attempt + 1 < attempts:
                            break
                        continue
                    if item.seq != seq:
                        self.stats.stale_frames += 1
                        continue
                    raise BoardRefused(reply, name)
                if item.seq != seq:
                    self.stats.stale_frames += 1
                    continue
                if item.type != p.response_type(command):
                    raise BoardError(f"board answered {name} with type {item.type:#04x}")
                return item
        raise BoardTimeout(f"no answer to {name} from {self.url} "
                           f"({attempts} tries of {timeout_s:g} s)")

    def _write(self, data: bytes) -> None:
        try:
            self._port.write(data)
            self._port.flush()
            self.stats.frames_sent += 1
        except Exception as exc:  # noqa: BLE001 - pyserial raises several types
            self._fail(exc, "write")

    def _next_item(self, deadline: float):
        """The next decoded frame or ProtocolError, or None once `deadline` passes."""
        while not self._pending:
            if time.monotonic() >= deadline:
                return None
            try:
                waiting = self._port.in_waiting
                data = self._port.read(max(1, min(waiting, 65536)))
            except Exception as exc:  # noqa: BLE001
                self._fail(exc, "read")
            if data:
                self._pending.extend(self._decoder.feed(data))
        return self._pending.pop(0)

    def _fail(self, exc: BaseException, what: str):
        self.close()
        if isinstance(exc, serial.SerialTimeoutException):
            raise BoardTimeout(f"{what} to {self.url} timed out ({exc})") from None
        raise BoardDisconnected(f"{self.url} went away during {what}: {exc}") from None


def _command_name(command: int) -> str:
    try:
        return p.Command(command).name
    except ValueError:
        return f"command {command:#04x}"


def _error_reply(frame: p.Frame) -> p.ErrorReply:
    try:
        return p.ErrorReply.unpack(frame.payload)
    except p.ProtocolError:
        return p.ErrorReply(0, 0, message=f"malformed ERROR payload {frame.payload[:16].hex()}")
