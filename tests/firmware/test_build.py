"""Building the firmware: what an image costs, and plans that do not fit.

Goals (issue 5): on person_detect the RAM beyond the arena is at most 4 KB, the whole
image's RAM at most 0.75 x TFLM's head + tail (SOURCES.md), and flash within 10 % of
weights + code. A plan larger than the preset's RAM fails the build with the numbers.
"""

from __future__ import annotations

import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.board.boards import BoardPreset
from inferlab.engines.board.toolchain import FirmwareBuildError, build_firmware, tflm_head_tail
from tests.firmware.fwtools import SHARED_MODELS, model_path, need_tools


@pytest.mark.parametrize("stem", SHARED_MODELS)
def test_memory_goals(firmware_images, stem):
    b = firmware_images(stem, "qemu-mps2-an386")
    head, tail = tflm_head_tail(model_path(stem))
    assert b.sections[".arena"] == max(16, b.arena_bytes)
    assert b.runtime_ram_bytes <= 4096, b.sections
    assert b.ram_bytes == b.arena_bytes + b.runtime_ram_bytes or b.arena_bytes < 16
    if stem == "person_detect":
        assert b.arena_bytes == head  # the same greedy plan as TFLM's head
        assert b.ram_bytes <= 0.75 * (head + tail)
    assert b.flash_bytes <= 1.10 * (b.weights_bytes + b.code_bytes)
    assert b.model_flash_bytes >= b.weights_bytes


def test_nrf52840_port_compiles_for_the_real_board(firmware_images):
    b = firmware_images("person_detect", "nrf52840")
    assert b.image.is_file() and b.preset == "nrf52840"
    assert b.runtime_ram_bytes <= 4096 and b.flash_bytes < 1 << 20


def test_plan_larger_than_the_presets_ram_fails_before_compiling(tmp_path):
    with pytest.raises(FirmwareBuildError) as exc:
        build_firmware(model_path("person_detect"), "qemu-mps2-an386", "samd21", tmp_path)
    msg = str(exc.value)
    assert "55,296 B" in msg and "32,768 B" in msg and "samd21" in msg


@pytest.mark.slow  # an arm-none-eabi build
def test_plan_that_fits_only_without_the_runtime_fails_at_link_time(tmp_path):
    need_tools("qemu-mps2-an386")
    tight = BoardPreset(id="tight", name="55 KiB board", core="Cortex-M4", clock_hz=64_000_000,
                        sram_bytes=56 * 1024, flash_bytes=1 << 20, source="test")
    with pytest.raises(FirmwareBuildError) as exc:
        build_firmware(model_path("person_detect"), "qemu-mps2-an386", tight, tmp_path)
    msg = str(exc.value)
    assert "arena 55,296 B" in msg and "57,344 B of SRAM" in msg and "B over" in msg


@pytest.mark.slow  # an arm-none-eabi build
def test_board_build_cli_prints_flash_ram_and_tflm(tmp_path, capsys):
    need_tools("qemu-mps2-an386")
    path = model_path("micro_speech_quantized")
    assert main(["board", "build", "--model", str(path), "--target", "qemu-mps2-an386",
                 "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("flash_bytes", "ram_bytes", "arena_bytes", "weights_bytes"):
        assert isinstance(data[key], int) and data[key] > 0
    assert data["arena_bytes"] == 5968 and data["tflm_head_bytes"] == 5968
    assert data["tflm_tail_bytes"] == 1616
    assert main(["board", "build", "--model", str(path), "--target", "qemu-mps2-an386",
                 "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "flash" in text and "RAM" in text and "arena 5,968 B" in text and "TFLM" in text
    code = main(["board", "build", "--model", str(model_path("person_detect")), "--target",
                 "host", "--preset", "samd21", "--out", str(tmp_path / "x")])
    assert code == 2 and "32,768 B" in capsys.readouterr().err
