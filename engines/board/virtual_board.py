"""A virtual board: the wire protocol served by the host, with a board preset's limits.

`VirtualBoard` is the board's logic (bytes in, bytes out: `feed`); `board_server.BoardServer`
puts one on a pty or a TCP socket. `inferlab virtual-board` runs one.

What it enforces, as a real board would: a model larger than the preset's flash minus the
runtime's code is refused at LOAD_BEGIN; an arena larger than SRAM minus the runtime's own
RAM is refused (PLAN_TOO_LARGE, with the numbers) at PLAN and at RUN. Models run on the
arena interpreter (`engines.mcu.interpreter.ArenaInterpreter`) at the active plan's
offsets. RESULT reports host-measured time per op and cycles *estimated* for the preset
(`op_costs.op_macs(...) x cycles_per_mac_int8`); the CYCLES_MEASURED flag stays clear.
A model with an operator the interpreter lacks is refused at LOAD_END (BAD_MODEL).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from inferlab.engines.board import protocol as p
from inferlab.engines.board.boards import (
    DEFAULT_CODE_BYTES,
    DEFAULT_RUNTIME_OVERHEAD_BYTES,
    BoardPreset,
    fit_check,
    load_board,
)
from inferlab.engines.mcu.graph import ModelError, load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.lifetimes import model_buffers
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.mcu.plan import Plan
from inferlab.engines.mcu.planners import PLANNERS, conflicts, lower_bound_bytes, plan_buffers

DEFAULT_MAX_PAYLOAD = 2048

# interpreter_factory(model, plan) -> runner; runner(inputs: list[np.ndarray]) ->
# (outputs: list[np.ndarray], per-op times in ns: list[int] | None).
Runner = Callable[[list], tuple[list, list | None]]


class _Refuse(Exception):
    def __init__(self, code: p.ErrorCode, message: str, needed: int = 0, available: int = 0):
        super().__init__(message)
        self.reply = (code, message, needed, available)


def arena_runner(model, plan) -> Runner:
    """Run `model` with the arena interpreter at `plan`'s offsets (the default factory)."""
    interp = ArenaInterpreter(model, plan)

    def run(inputs):
        out = interp.invoke(inputs)
        outputs = list(out) if isinstance(out, tuple) else [out]
        return outputs, [round(t * 1e9) for t in interp.last_op_times_s]

    return run


class VirtualBoard:
    """The protocol state machine of one board: `feed(bytes) -> bytes` to answer."""

    def __init__(self, board: BoardPreset | str = "nrf52840", *,
                 max_payload: int = DEFAULT_MAX_PAYLOAD,
                 runtime_overhead_bytes: int = DEFAULT_RUNTIME_OVERHEAD_BYTES,
                 code_bytes: int = DEFAULT_CODE_BYTES, planner: str = "tflm-greedy",
                 interpreter_factory: Callable | None = None):
        self.board = load_board(board) if isinstance(board, str) else board
        if not p.MIN_PAYLOAD_BYTES <= max_payload <= p.MAX_PAYLOAD_BYTES:
            raise ValueError(f"max_payload must be in {p.MIN_PAYLOAD_BYTES}.."
                             f"{p.MAX_PAYLOAD_BYTES}, got {max_payload}")
        if planner not in PLANNERS:
            raise ValueError(f"unknown planner {planner!r}; expected one of "
                             f"{', '.join(PLANNERS)}")
        self.max_payload = max_payload
        self.runtime_overhead_bytes = runtime_overhead_bytes
        self.code_bytes = code_bytes
        self.planner = planner
        self.interpreter_factory = interpreter_factory or arena_runner
        limits = fit_check(0, 0, self.board, runtime_overhead_bytes, code_bytes)
        self.arena_limit_bytes = max(0, limits.arena_limit_bytes)
        self.model_limit_bytes = max(0, limits.weights_limit_bytes)
        self._decoder = p.FrameDecoder()
        self.frames_handled = 0
        self._upload: tuple[int, bytes, bytearray, int] | None = None  # total, sha, data, got
        self._clear_model()

    # ---- model state --------------------------------------------------------------------

    def _clear_model(self) -> None:
        self.model = None
        self.model_bytes = b""
        self.model_sha256 = b""
        self.plan = None
        self._buffers: tuple = ()
        self._plan_part: tuple[int, list[tuple[int, int]]] | None = None
        self._runner = None
        self._input = bytearray()
        self._result: tuple[bytes, list[tuple[int, int, int]]] | None = None

    def preload(self, model_bytes: bytes) -> None:
        """Hold a model from the start, as a firmware with a compiled-in model does.

        Raises ValueError with the numbers when it does not fit the board.
        """
        model_bytes = bytes(model_bytes)
        if len(model_bytes) > self.model_limit_bytes:
            raise ValueError(self._flash_message(len(model_bytes)))
        try:
            self._install(model_bytes)
        except _Refuse as refusal:
            raise ValueError(str(refusal)) from None
        if self.plan.arena_bytes > self.arena_limit_bytes:
            raise ValueError(self._sram_message(self.plan.arena_bytes))

    def _install(self, model_bytes: bytes) -> None:
        self._clear_model()
        try:
            model = load_model(model_bytes)
            buffers = tuple(model_buffers(model))
            plan = plan_buffers(buffers, self.planner)
        except (ModelError, ValueError) as exc:
            raise _Refuse(p.ErrorCode.BAD_MODEL, str(exc)) from None
        try:  # build the runner now: a model the board cannot run is refused at once
            runner = self.interpreter_factory(model, plan)
        except (ValueError, NotImplementedError, KeyError) as exc:
            raise _Refuse(p.ErrorCode.BAD_MODEL, str(exc)) from None
        self.model, self.model_bytes = model, model_bytes
        self.model_sha256 = hashlib.sha256(model_bytes).digest()
        self._buffers, self.plan, self._runner = buffers, plan, runner
        self._input = bytearray(self._input_bytes())

    def _specs(self, tensors) -> list[tuple[tuple[int, ...], str]]:
        return [(self.model.tensors[t].shape, self.model.tensors[t].dtype) for t in tensors]

    def _input_bytes(self) -> int:
        return sum(self.model.tensors[t].nbytes for t in self.model.inputs)

    def _flash_message(self, nbytes: int) -> str:
        fc = fit_check(0, nbytes, self.board, self.runtime_overhead_bytes, self.code_bytes)
        return (f"model {nbytes:,} B + code {self.code_bytes:,} B = {fc.flash_used_bytes:,} B "
                f"> flash {self.board.flash_bytes:,} B on {self.board.id}")

    def _sram_message(self, arena: int) -> str:
        fc = fit_check(arena, 0, self.board, self.runtime_overhead_bytes, self.code_bytes)
        return (f"arena {arena:,} B + runtime {self.runtime_overhead_bytes:,} B = "
                f"{fc.sram_used_bytes:,} B > SRAM {self.board.sram_bytes:,} B on "
                f"{self.board.id} (arena limit {self.arena_limit_bytes:,} B)")

    def _refuse_sram(self, arena: int):
        return _Refuse(p.ErrorCode.PLAN_TOO_LARGE, self._sram_message(arena),
                       arena + self.runtime_overhead_bytes, self.board.sram_bytes)

    # ---- bytes in, bytes out ------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        """Take bytes from the line; return the bytes to send back (possibly none)."""
        out = bytearray()
        for item in self._decoder.feed(data):
            if isinstance(item, p.ProtocolError):
                reply = p.Frame(p.ERROR_TYPE, item.seq, p.ErrorReply(
                    item.code, item.command, item.needed, item.available, str(item)).pack())
            else:
                reply = self.handle(item)
            out += b"\x00" + p.encode_frame(reply)  # a lone 0x00 first: the host resyncs
        return bytes(out)

    def handle(self, frame: p.Frame) -> p.Frame:
        """Answer one decoded command frame."""
        self.frames_handled += 1
        try:
            if len(frame.payload) > self.max_payload:
                raise _Refuse(p.ErrorCode.TOO_LARGE, f"payload of {len(frame.payload)} B > "
                              f"max payload {self.max_payload} B", len(frame.payload),
                              self.max_payload)
            try:
                command = p.Command(frame.type)
            except ValueError:
                raise _Refuse(p.ErrorCode.UNKNOWN_COMMAND,
                              f"unknown command {frame.type:#04x}") from None
            handler = getattr(self, f"_on_{command.name.lower()}")
            payload = handler(frame.payload)
            return p.Frame(p.response_type(frame.type), frame.seq, payload)
        except _Refuse as refusal:
            code, message, needed, available = refusal.reply
        except p.ProtocolError as exc:
            code, message, needed, available = exc.code, str(exc), exc.needed, exc.available
        except Exception as exc:  # noqa: BLE001 - a board answers, it does not crash
            code, message, needed, available = (p.ErrorCode.RUN_FAILED,
                                                f"{type(exc).__name__}: {exc}", 0, 0)
        return p.Frame(p.ERROR_TYPE, frame.seq,
                       p.ErrorReply(code, frame.type, needed, available, message).pack())

    # ---- commands -----------------------------------------------------------------------

    def hello_info(self) -> p.HelloInfo:
        flags = p.HelloFlags.CAN_LOAD | p.HelloFlags.CAN_PLAN
        if self.model is not None:
            flags |= p.HelloFlags.MODEL_LOADED
            if self.plan is not None:
                flags |= p.HelloFlags.PLAN_READY
        return p.HelloInfo(
            protocol_version=p.PROTOCOL_VERSION, flags=int(flags), max_payload=self.max_payload,
            sram_bytes=self.board.sram_bytes, flash_bytes=self.board.flash_bytes,
            clock_hz=self.board.clock_hz, arena_limit_bytes=self.arena_limit_bytes,
            model_limit_bytes=self.model_limit_bytes, model_bytes=len(self.model_bytes),
            arena_bytes=self.plan.arena_bytes if self.plan is not None else 0,
            model_sha256=self.model_sha256 or bytes(p.SHA256_BYTES), board=self.board.id,
            name=f"{self.board.name} (virtual)", core=self.board.core)

    def _on_hello(self, payload: bytes) -> bytes:
        return self.hello_info().pack()

    def _on_load_begin(self, payload: bytes) -> bytes:
        begin = p.LoadBegin.unpack(payload)
        if begin.total_bytes == 0:
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, "model of 0 bytes")
        if begin.total_bytes > self.model_limit_bytes:
            raise _Refuse(p.ErrorCode.TOO_LARGE, self._flash_message(begin.total_bytes),
                          begin.total_bytes + self.code_bytes, self.board.flash_bytes)
        self._clear_model()  # the old model's flash is erased for the new one
        self._upload = (begin.total_bytes, begin.sha256, bytearray(begin.total_bytes), 0)
        return p.LoadAck(0, begin.total_bytes).pack()

    def _on_load_chunk(self, payload: bytes) -> bytes:
        chunk = p.LoadChunk.unpack(payload)
        if self._upload is None:
            raise _Refuse(p.ErrorCode.BAD_STATE, "LOAD_CHUNK without LOAD_BEGIN")
        total, sha, data, got = self._upload
        end = chunk.offset + len(chunk.data)
        if chunk.offset > got:
            raise _Refuse(p.ErrorCode.BAD_STATE, f"chunk at {chunk.offset}, expected {got}",
                          chunk.offset, got)
        if end > total:
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, f"chunk ends at {end}, model is {total} B",
                          end, total)
        data[chunk.offset:end] = chunk.data
        got = max(got, end)
        self._upload = (total, sha, data, got)
        return p.LoadAck(got, total).pack()

    def _on_load_end(self, payload: bytes) -> bytes:
        if payload:
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, "LOAD_END takes no payload")
        if self._upload is None:
            if self.model is not None:  # a resent LOAD_END after success: answer again
                return self._load_done()
            raise _Refuse(p.ErrorCode.BAD_STATE, "LOAD_END without LOAD_BEGIN")
        total, sha, data, got = self._upload
        if got < total:
            raise _Refuse(p.ErrorCode.BAD_STATE, f"upload has {got} of {total} B", total, got)
        self._upload = None
        digest = hashlib.sha256(data).digest()
        if digest != sha:
            raise _Refuse(p.ErrorCode.HASH_MISMATCH, f"received bytes hash to "
                          f"{digest.hex()[:16]}..., LOAD_BEGIN said {sha.hex()[:16]}...")
        self._install(bytes(data))
        return self._load_done()

    def _load_done(self) -> bytes:
        return p.LoadDone(len(self.model_bytes), self.plan.arena_bytes, self.arena_limit_bytes,
                          self.model_sha256).pack()

    def _need_model(self) -> None:
        if self.model is None:
            raise _Refuse(p.ErrorCode.NO_MODEL, "no model loaded")

    def _on_plan(self, payload: bytes) -> bytes:
        self._need_model()
        part = p.PlanPart.unpack(payload)
        n = len(self._buffers)
        if part.total_buffers != n:
            raise _Refuse(p.ErrorCode.BAD_PLAN, f"plan has {part.total_buffers} buffers, the "
                          f"model needs {n}", part.total_buffers, n)
        if part.arena_bytes > self.arena_limit_bytes:
            self._plan_part = None
            raise self._refuse_sram(part.arena_bytes)
        if part.first_buffer == 0 or self._plan_part is None:
            if part.first_buffer != 0:
                raise _Refuse(p.ErrorCode.BAD_STATE, "first PLAN part must start at buffer 0",
                              part.first_buffer, 0)
            self._plan_part = (part.arena_bytes, [])
        arena, entries = self._plan_part
        if part.first_buffer != len(entries) or part.arena_bytes != arena:
            raise _Refuse(p.ErrorCode.BAD_STATE, f"PLAN part starts at buffer "
                          f"{part.first_buffer}, expected {len(entries)}",
                          part.first_buffer, len(entries))
        for i, (offset, size) in enumerate(part.entries, start=part.first_buffer):
            if i >= n:
                raise _Refuse(p.ErrorCode.BAD_PLAN, f"entry {i} past the {n} buffers", i + 1, n)
            want = self._buffers[i].size
            if size != want:
                raise _Refuse(p.ErrorCode.BAD_PLAN, f"buffer {i} ({self._buffers[i].name}) is "
                              f"{want} B, plan says {size} B", size, want)
            if offset % p.ARENA_ALIGNMENT_BYTES:
                raise _Refuse(p.ErrorCode.BAD_PLAN, f"buffer {i} offset {offset} is not a "
                              f"multiple of {p.ARENA_ALIGNMENT_BYTES}", offset, 0)
            if offset + size > arena:
                raise _Refuse(p.ErrorCode.BAD_PLAN, f"buffer {i} ends at {offset + size}, past "
                              f"the arena of {arena} B", offset + size, arena)
        entries += part.entries
        complete = len(entries) == n
        if complete:
            self._activate_plan(arena, [o for o, _ in entries])
        return p.PlanAck(len(entries), n, arena, self.arena_limit_bytes, complete).pack()

    def _activate_plan(self, arena: int, offsets: list[int]) -> None:
        self._plan_part = None
        clash = conflicts(self._buffers, offsets)
        if clash:
            i, j = clash[0]
            raise _Refuse(p.ErrorCode.BAD_PLAN, f"buffers {i} ({self._buffers[i].name}) and "
                          f"{j} ({self._buffers[j].name}) overlap in memory while both live",
                          i, j)
        self.plan = Plan(planner="host", buffers=self._buffers, offsets=tuple(offsets),
                         arena_bytes=arena, lower_bound_bytes=lower_bound_bytes(self._buffers))
        self._runner = None
        self._result = None

    def _on_input(self, payload: bytes) -> bytes:
        self._need_model()
        part = p.InputPart.unpack(payload)
        end = part.offset + len(part.data)
        if end > len(self._input):
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, f"input bytes end at {end}, the model "
                          f"takes {len(self._input)}", end, len(self._input))
        self._input[part.offset:end] = part.data
        return p.InputAck(end, len(self._input)).pack()

    def _on_run(self, payload: bytes) -> bytes:
        self._need_model()
        if payload:
            if len(payload) != len(self._input):
                raise _Refuse(p.ErrorCode.BAD_ARGUMENT, f"RUN carries {len(payload)} input "
                              f"bytes, the model takes {len(self._input)}",
                              len(payload), len(self._input))
            self._input[:] = payload
        if self.plan.arena_bytes > self.arena_limit_bytes:
            raise self._refuse_sram(self.plan.arena_bytes)
        if self._runner is None:
            try:
                self._runner = self.interpreter_factory(self.model, self.plan)
            except (ValueError, NotImplementedError, KeyError) as exc:
                raise _Refuse(p.ErrorCode.BAD_MODEL, str(exc)) from None
        inputs = p.unpack_tensors(bytes(self._input), self._specs(self.model.inputs))
        t0 = time.perf_counter_ns()
        outputs, op_ns = self._runner(inputs)
        total_ns = time.perf_counter_ns() - t0
        output = p.pack_tensors(outputs, self._specs(self.model.outputs))
        ops = self.model.operators
        if op_ns is None or len(op_ns) != len(ops):
            op_ns = [0] * len(ops)
        macs = [op_macs(self.model, i) for i in range(len(ops))]
        records = [(int(ns), self.board.cycles_for(m), m)
                   for ns, m in zip(op_ns, macs, strict=True)]
        self._result = (output, records)
        return p.RunResult(len(output), self.plan.arena_bytes, len(records), 0, total_ns,
                           sum(r[1] for r in records)).pack()

    def _on_read_output(self, payload: bytes) -> bytes:
        req = p.ReadOutput.unpack(payload)
        if self._result is None:
            raise _Refuse(p.ErrorCode.NO_RESULT, "no RUN result to read")
        output = self._result[0]
        end = req.offset + req.length
        if end > len(output) or req.length > p.chunk_data_bytes(self.max_payload):
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, f"output bytes {req.offset}..{end} asked, "
                          f"output is {len(output)} B", end, len(output))
        return p.OutputPart(req.offset, output[req.offset:end]).pack()

    def _on_read_timings(self, payload: bytes) -> bytes:
        req = p.ReadTimings.unpack(payload)
        if self._result is None:
            raise _Refuse(p.ErrorCode.NO_RESULT, "no RUN result to read")
        records = self._result[1]
        end = req.first_op + req.count
        if end > len(records) or req.count > p.op_records_per_frame(self.max_payload):
            raise _Refuse(p.ErrorCode.BAD_ARGUMENT, f"op records {req.first_op}..{end} asked, "
                          f"{len(records)} ops", end, len(records))
        return p.TimingsPart(req.first_op, tuple(records[req.first_op:end])).pack()
