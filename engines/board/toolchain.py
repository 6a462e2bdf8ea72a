"""Building the board firmware for one model: find the tools, generate, make, measure.

`build_firmware(model, target, preset, out_dir)` compiles the model and its plan into C
(`engines.board.codegen`), writes `board_config.h`, runs `firmware/Makefile` for the target
port, and reads the image's sections with `arm-none-eabi-size -A`:

    flash = .vectors + .text + .ARM.exidx + .model + .data (its load image)
    RAM   = .stack + .data + .bss + .arena
    code  = flash - .model          runtime RAM = RAM - .arena (ARENA_SIZE)

The linker script caps flash and RAM at the board preset's sizes, so a plan that does not
fit fails the link; `FirmwareBuildError` then says so with the numbers (arena, runtime RAM,
SRAM, bytes over). An arena larger than the whole SRAM is refused before compiling.

Ports: `host` (a process on stdio; cc), `qemu-mps2-an386` (the emulated Cortex-M4) and
`nrf52840` (a real board; compiles here, flashed by the user). Missing tools raise
`ToolMissing` with the exact install command (`install_command()`).

The firmware's sources ship inside the package (`inferlab.firmware`, the repository's
`firmware/` folder), so an installed InferLab builds from any working directory; the
INFERLAB_FIRMWARE_DIR environment variable points at another copy. Nothing is written next to
them: builds go to the user's cache folder (`build_dir()`, under platformdirs'
`user_cache_dir("inferlab")`, e.g. ~/.cache/inferlab/firmware/<key> on Linux): the objects
that do not depend on the model in `obj/`, each model's sources and image in `images/`
unless an `out_dir` is given.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from platformdirs import user_cache_dir

from inferlab.engines.board import codegen
from inferlab.engines.board.boards import BoardPreset, load_board

# A real folder: `make -C` runs there (package data is installed unzipped).
FIRMWARE_DIR = Path(os.environ.get("INFERLAB_FIRMWARE_DIR")
                    or str(importlib.resources.files("inferlab.firmware"))).resolve()
TARGETS = ("host", "qemu-mps2-an386", "nrf52840")
ARM_TARGETS = ("qemu-mps2-an386", "nrf52840")
QEMU_TARGET = "qemu-mps2-an386"
QEMU_MEMORY_BYTES = 4 * 1024 * 1024  # mps2-an386: 4 MiB of code SSRAM, 4 MiB of data SSRAM
# Real-board ports build for their own chip: the preset they are tied to.
PORT_PRESETS = {"nrf52840": "nrf52840"}
APT_PACKAGES = ("qemu-system-arm", "gcc-arm-none-eabi", "libnewlib-arm-none-eabi")
HOST_PACKAGES = ("gcc", "libc6-dev")  # the host port: a C compiler and the C library headers
_OVERFLOW = re.compile(r"region [`'](RAM|FLASH)' overflowed by (\d+) bytes")


class ToolMissing(FileNotFoundError):
    """A compiler, `make` or QEMU is not installed; the message has the install command."""


class FirmwareBuildError(ValueError):
    """The firmware could not be built (does not fit, or the compiler failed)."""


def install_command(packages=APT_PACKAGES) -> str:
    """The apt line that installs `packages` (with sudo unless we are root)."""
    sudo = "" if hasattr(os, "geteuid") and os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y --no-install-recommends {' '.join(packages)}"


def find_tool(name: str, packages=APT_PACKAGES) -> str:
    """Absolute path of a program on PATH, or ToolMissing naming how to install it."""
    path = shutil.which(name)
    if path is None:
        raise ToolMissing(f"{name} is not installed (needed to build and emulate the board "
                          f"firmware); install it with: {install_command(packages)}")
    return path


def require_tools(target: str) -> dict[str, str]:
    """The tools a target's build needs, by name; ToolMissing for the first one absent."""
    tools = {"make": find_tool("make", ("make",))}
    if target == "host":
        tools["cc"] = find_tool(os.environ.get("HOST_CC", "cc"), HOST_PACKAGES)
    else:
        tools["gcc"] = find_tool("arm-none-eabi-gcc")
        tools["size"] = find_tool("arm-none-eabi-size")
    return tools


@dataclass(frozen=True)
class FirmwareBuild:
    """One firmware image and what it costs in flash and RAM."""

    model: str
    target: str
    preset: str
    planner: str
    image: Path
    out_dir: Path
    model_sha256: str
    arena_bytes: int  # the plan's arena (ARENA_SIZE)
    weights_bytes: int  # constant tensors written to flash
    op_count: int
    sram_bytes: int  # the preset's (the link caps RAM here)
    flash_bytes_available: int
    flash_bytes: int | None = None  # image in flash (None for the host port)
    ram_bytes: int | None = None  # static RAM incl. the arena (None for the host port)
    code_bytes: int | None = None  # flash - the model section
    model_flash_bytes: int | None = None  # the .model section: weights + operator tables
    runtime_ram_bytes: int | None = None  # RAM - the arena: stack, protocol buffer, state
    stack_bytes: int | None = None
    sections: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["image"], d["out_dir"] = str(self.image), str(self.out_dir)
        return d


def board_name(target: str, preset: BoardPreset) -> str:
    if target == QEMU_TARGET:
        return f"Emulated Cortex-M4 (QEMU mps2-an386), {preset.id} memory"
    if target == "host":
        return f"InferLab host port ({preset.id} memory)"
    return preset.name


def memory_caps(target: str, preset: BoardPreset) -> tuple[int, int]:
    """(SRAM, flash) bytes the image is linked for: the preset's, within what the target
    has (QEMU's mps2-an386 has 4 MiB of each)."""
    if target == QEMU_TARGET:
        return min(preset.sram_bytes, QEMU_MEMORY_BYTES), min(preset.flash_bytes,
                                                              QEMU_MEMORY_BYTES)
    return preset.sram_bytes, preset.flash_bytes


def build_firmware(model: str | os.PathLike | bytes, target: str = QEMU_TARGET,
                   preset: str | BoardPreset | None = None,
                   out_dir: str | os.PathLike | None = None, *, planner: str = "tflm-greedy",
                   plan=None, jobs: int = 2, name: str | None = None) -> FirmwareBuild:
    """Generate, compile and link the firmware for `model` into `out_dir`."""
    if target not in TARGETS:
        raise FirmwareBuildError(f"unknown target {target!r}; targets: {', '.join(TARGETS)}")
    if preset is None:
        preset = PORT_PRESETS.get(target, "nrf52840")
    board = load_board(preset) if isinstance(preset, str) else preset
    if target in PORT_PRESETS and board.id != PORT_PRESETS[target]:
        raise FirmwareBuildError(f"the {target} port runs on the {PORT_PRESETS[target]} board; "
                                 f"preset {board.id!r} does not apply (use --target "
                                 f"{QEMU_TARGET} to emulate other memory sizes)")
    gen = codegen.generate(model, planner=planner, plan=plan)
    label = name or gen.name
    planner_name = gen.plan.planner
    sram, flash = memory_caps(target, board)
    arena = max(16, gen.arena_bytes)
    if arena > sram:
        raise FirmwareBuildError(
            f"{label} does not fit {board.id}: the {planner_name} plan's arena alone is "
            f"{gen.arena_bytes:,} B, more than the {sram:,} B of SRAM (the runtime needs "
            f"about 3 KB more); try --planner best or a board with more SRAM")
    if gen.weights_bytes > flash:
        raise FirmwareBuildError(
            f"{label} does not fit {board.id}: its weights alone are {gen.weights_bytes:,} B, "
            f"more than the {flash:,} B of flash")
    tools = require_tools(target)
    out = Path(out_dir) if out_dir is not None else default_out_dir(label, target, board.id)
    out = out.resolve()
    gen.write(out)
    codegen.write_if_changed(out / "board_config.h", codegen.board_config_h(
        board.id, board_name(target, board), sram, flash))
    cmd = make_command(target, out, jobs=jobs, make=tools["make"])
    env = dict(os.environ)
    if target == "host":
        env["HOST_CC"] = tools["cc"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise _build_error(result.stdout + result.stderr, label, board, planner_name, arena,
                           gen.weights_bytes, sram, flash)
    image = out / ("firmware" if target == "host" else "firmware.elf")
    fields = dict(model=label, target=target, preset=board.id, planner=planner_name,
                  image=image, out_dir=out, model_sha256=gen.sha256,
                  arena_bytes=gen.arena_bytes, weights_bytes=gen.weights_bytes,
                  op_count=gen.op_count, sram_bytes=sram, flash_bytes_available=flash)
    if target == "host":
        return FirmwareBuild(**fields)
    sections = section_sizes(image, tools["size"])
    flash_used = sum(sections.get(s, 0) for s in (".vectors", ".text", ".ARM.exidx",
                                                    ".model", ".data"))
    ram_used = sum(sections.get(s, 0) for s in (".stack", ".data", ".bss", ".arena"))
    return FirmwareBuild(
        **fields, flash_bytes=flash_used, ram_bytes=ram_used,
        code_bytes=flash_used - sections.get(".model", 0),
        model_flash_bytes=sections.get(".model", 0),
        runtime_ram_bytes=ram_used - sections.get(".arena", 0),
        stack_bytes=sections.get(".stack", 0), sections=sections)


def build_dir() -> Path:
    """Where builds of this copy of the firmware go: user_cache_dir("inferlab")/firmware/KEY.

    KEY is a hash of the sources' folder: make decides what to rebuild from timestamps, which
    holds within one copy of the sources, so two copies (a clone and an installed InferLab)
    never share objects."""
    key = hashlib.sha256(str(FIRMWARE_DIR).encode()).hexdigest()[:12]
    return Path(user_cache_dir("inferlab")) / "firmware" / key


def make_command(target: str, model_dir: str | os.PathLike, *goals: str, jobs: int = 2,
                 make: str = "make", sanitize: bool = False) -> list[str]:
    """The `make` command line that builds `goals` (default: the image) of the firmware for
    `target` with the model in `model_dir`, objects kept in `build_dir()/obj`."""
    return [make, "-C", str(FIRMWARE_DIR), f"TARGET={target}", f"MODEL_DIR={model_dir}",
            f"BUILD_DIR={build_dir() / 'obj'}", *(["SANITIZE=1"] if sanitize else []),
            *goals, f"-j{max(1, jobs)}"]


def default_out_dir(model_name: str, target: str, preset_id: str) -> Path:
    """A model's build folder when none is given: build_dir()/images/MODEL-TARGET-PRESET."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_name) or "model"
    return build_dir() / "images" / f"{safe}-{target}-{preset_id}"


def section_sizes(image: Path, size_tool: str | None = None) -> dict[str, int]:
    """Allocated section sizes of an ELF image, from `arm-none-eabi-size -A -d`."""
    size_tool = size_tool or find_tool("arm-none-eabi-size")
    text = subprocess.run([size_tool, "-A", "-d", str(image)], capture_output=True,
                          text=True, check=True).stdout
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(".") and parts[1].isdigit():
            if not parts[0].startswith((".debug", ".comment", ".ARM.attributes")):
                out[parts[0]] = int(parts[1])
    return out


def _build_error(log: str, label: str, board: BoardPreset, planner: str, arena: int,
                 weights: int, sram: int, flash: int) -> FirmwareBuildError:
    over = {region: int(n) for region, n in _OVERFLOW.findall(log)}
    if "RAM" in over:
        needed = sram + over["RAM"]
        return FirmwareBuildError(
            f"{label} does not fit {board.id}: the firmware needs {needed:,} B of RAM "
            f"(arena {arena:,} B from the {planner} plan + runtime {needed - arena:,} B) but "
            f"the board has {sram:,} B of SRAM: {over['RAM']:,} B over. Try --planner best "
            f"or a board with more SRAM.")
    if "FLASH" in over:
        needed = flash + over["FLASH"]
        return FirmwareBuildError(
            f"{label} does not fit {board.id}: the image needs {needed:,} B of flash "
            f"(weights {weights:,} B + code and tables {needed - weights:,} B) but the board "
            f"has {flash:,} B: {over['FLASH']:,} B over.")
    tail = "\n".join(log.strip().splitlines()[-20:])
    return FirmwareBuildError(f"firmware build failed for {label}:\n{tail}")


# ---- TFLM's own figures, for comparison --------------------------------------------------


def tflm_head_tail(model_path: str | os.PathLike) -> tuple[int, int] | None:
    """TFLM's measured (head, tail) bytes for this model from the SOURCES.md beside it (the
    shipped examples' table, assets/tflite/SOURCES.md), or None when there is none."""
    path = Path(model_path)
    sources = path.parent / "SOURCES.md"
    try:
        text = sources.read_text(encoding="utf-8")
    except OSError:
        return None
    section = text.split("Measured TFLM arena usage", 1)[-1]
    for stem, head, tail in re.findall(
            r"^\|\s*([A-Za-z0-9_]+)\s*\|\s*([\d,]+)\s*\|\s*([\d,]+)\s*\|", section, re.M):
        if stem == path.stem:
            return int(head.replace(",", "")), int(tail.replace(",", ""))
    return None
