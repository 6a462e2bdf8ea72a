"""Microcontroller board presets (SRAM, flash, core, clock; sourced) and the fit check.

Presets are JSON files in `assets/boards/<id>.json`, each naming its vendor datasheet. The
fit check is the one formula every caller uses:

    SRAM: arena_bytes + runtime_overhead_bytes <= sram_bytes
    flash: weights_bytes + code_bytes <= flash_bytes

with the margins (what is left, negative when it does not fit). Cycle estimates are
`macs x cycles_per_mac_int8` (`BoardPreset.cycles_for`), with an op's MACs as the
interpreter counts them (`engines.mcu.op_costs.op_macs`: pooling taps and per-element
work of ADD / SOFTMAX / QUANTIZE count as MACs): an order-of-magnitude figure for plain C
kernels; each preset's `notes` states its assumption.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from inferlab.engines.presets import preset_dir

# RAM the runtime needs besides the arena (stack, protocol buffers, op data), and the flash
# its code takes: assumptions for a small bare-metal runtime, overridable per call.
DEFAULT_RUNTIME_OVERHEAD_BYTES = 8 * 1024
DEFAULT_CODE_BYTES = 32 * 1024


@dataclass(frozen=True)
class BoardPreset:
    """One board: its chip's memory and clock, the USB IDs that identify it, its source."""

    id: str
    name: str
    core: str
    clock_hz: int
    sram_bytes: int
    flash_bytes: int
    usb_ids: tuple[tuple[int, int], ...] = field(default=())  # (VID, PID) pairs
    cycles_per_mac_int8: float = 1.0
    source: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        for name in ("id", "name", "core", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"board field {name!r} must be a non-empty string")
        for name in ("clock_hz", "sram_bytes", "flash_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 2**63:
                raise ValueError(f"board {self.id}: field {name!r} must be a positive integer, "
                                 f"got {v!r}")
        if not isinstance(self.notes, str):
            raise ValueError(f"board {self.id}: field 'notes' must be text, got {self.notes!r}")
        cpm = self.cycles_per_mac_int8
        if not isinstance(cpm, (int, float)) or isinstance(cpm, bool) or \
                not 0 < cpm <= sys.float_info.max:  # NaN fails, and an int past a double
            raise ValueError(f"board {self.id}: 'cycles_per_mac_int8' must be > 0, got {cpm!r}")
        object.__setattr__(self, "cycles_per_mac_int8", float(cpm))
        object.__setattr__(self, "usb_ids", tuple((int(v), int(p)) for v, p in self.usb_ids))

    def cycles_for(self, work: int) -> int:
        """Estimated cycles for `work` MACs on this board: work x cycles_per_mac_int8."""
        return round(work * self.cycles_per_mac_int8)

    def matches_usb(self, vid: int | None, pid: int | None) -> bool:
        return (vid, pid) in self.usb_ids

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["usb_ids"] = [f"{v:04x}:{p:04x}" for v, p in self.usb_ids]
        return d

    @classmethod
    def from_dict(cls, d: Any, origin: str = "board preset") -> BoardPreset:
        if not isinstance(d, dict):
            raise ValueError(f"{origin}: expected a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"{origin}: unknown field(s) {', '.join(sorted(unknown))}")
        d = dict(d)
        try:
            d["usb_ids"] = tuple(_parse_usb_id(s) for s in d.get("usb_ids", ()))
            return cls(**d)
        except TypeError as exc:
            raise ValueError(f"{origin}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{origin}: {exc}") from None


def _parse_usb_id(s: Any) -> tuple[int, int]:
    if isinstance(s, str) and s.count(":") == 1:
        vid, pid = s.split(":")
        try:
            v, p = int(vid, 16), int(pid, 16)
        except ValueError:
            pass
        else:
            if 0 <= v <= 0xFFFF and 0 <= p <= 0xFFFF:
                return v, p
    raise ValueError(f"usb_ids entry {s!r} is not 'vvvv:pppp' (hex)")


def _boards_dir():
    return preset_dir("boards")


def list_boards() -> list[BoardPreset]:
    """Every board preset, sorted by id."""
    out = []
    for entry in sorted(_boards_dir().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            out.append(_read(entry))
    return out


def load_board(board_id: str) -> BoardPreset:
    """The preset with this id (case-insensitive); ValueError naming the known ids if none."""
    entry = _boards_dir() / f"{board_id.strip().lower()}.json"
    if not entry.is_file():
        known = ", ".join(b.id for b in list_boards())
        raise ValueError(f"unknown board {board_id!r}; known boards: {known}")
    return _read(entry)


def _read(entry) -> BoardPreset:
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"board preset {entry.name}: invalid JSON ({exc})") from None
    return BoardPreset.from_dict(data, origin=f"board preset {entry.name}")


def boards_for_usb(vid: int | None, pid: int | None) -> list[BoardPreset]:
    """Presets whose USB IDs include (vid, pid): none, one, or several candidates."""
    if vid is None or pid is None:
        return []
    return [b for b in list_boards() if b.matches_usb(vid, pid)]


# ---- the fit check ------------------------------------------------------------------------


@dataclass(frozen=True)
class FitCheck:
    """Does a model and its plan fit a board? Margins are bytes left (negative: overflow)."""

    board: str
    arena_bytes: int
    runtime_overhead_bytes: int
    sram_bytes: int
    weights_bytes: int
    code_bytes: int
    flash_bytes: int

    @property
    def sram_used_bytes(self) -> int:
        return self.arena_bytes + self.runtime_overhead_bytes

    @property
    def flash_used_bytes(self) -> int:
        return self.weights_bytes + self.code_bytes

    @property
    def sram_margin_bytes(self) -> int:
        return self.sram_bytes - self.sram_used_bytes

    @property
    def flash_margin_bytes(self) -> int:
        return self.flash_bytes - self.flash_used_bytes

    @property
    def arena_limit_bytes(self) -> int:
        """The largest arena that fits: SRAM - runtime overhead."""
        return self.sram_bytes - self.runtime_overhead_bytes

    @property
    def weights_limit_bytes(self) -> int:
        """The largest model (weights) that fits: flash - code."""
        return self.flash_bytes - self.code_bytes

    @property
    def fits_sram(self) -> bool:
        return self.sram_margin_bytes >= 0

    @property
    def fits_flash(self) -> bool:
        return self.flash_margin_bytes >= 0

    @property
    def fits(self) -> bool:
        return self.fits_sram and self.fits_flash

    def summary(self) -> str:
        """One line with the numbers, e.g. for an error message."""
        def part(kind, used, what, total, margin):
            verdict = "fits" if margin >= 0 else "does NOT fit"
            return (f"{kind} {used:,} B ({what}) of {total:,} B: {verdict}, "
                    f"margin {margin:+,} B")
        return (f"{self.board}: "
                + part("SRAM", self.sram_used_bytes,
                       f"arena {self.arena_bytes:,} + runtime {self.runtime_overhead_bytes:,}",
                       self.sram_bytes, self.sram_margin_bytes)
                + "; "
                + part("flash", self.flash_used_bytes,
                       f"weights {self.weights_bytes:,} + code {self.code_bytes:,}",
                       self.flash_bytes, self.flash_margin_bytes))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for name in ("sram_used_bytes", "flash_used_bytes", "sram_margin_bytes",
                     "flash_margin_bytes", "arena_limit_bytes", "weights_limit_bytes",
                     "fits_sram", "fits_flash", "fits"):
            d[name] = getattr(self, name)
        return d


def fit_check(plan_or_arena_bytes, weights_bytes: int, board: BoardPreset | str,
              runtime_overhead_bytes: int = DEFAULT_RUNTIME_OVERHEAD_BYTES,
              code_bytes: int = DEFAULT_CODE_BYTES) -> FitCheck:
    """Check arena + runtime overhead against SRAM and weights + code against flash.

    `plan_or_arena_bytes` is a planner `Plan` (anything with `arena_bytes`) or a byte count.
    """
    if isinstance(board, str):
        board = load_board(board)
    arena = getattr(plan_or_arena_bytes, "arena_bytes", plan_or_arena_bytes)
    for name, v in (("arena_bytes", arena), ("weights_bytes", weights_bytes),
                    ("runtime_overhead_bytes", runtime_overhead_bytes),
                    ("code_bytes", code_bytes)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    return FitCheck(board=board.id, arena_bytes=arena,
                    runtime_overhead_bytes=runtime_overhead_bytes, sram_bytes=board.sram_bytes,
                    weights_bytes=weights_bytes, code_bytes=code_bytes,
                    flash_bytes=board.flash_bytes)
