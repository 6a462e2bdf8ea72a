"""Board presets (sourced JSON), the fit check's numbers, per-op work, port discovery."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from inferlab.engines.board.boards import (
    DEFAULT_CODE_BYTES,
    DEFAULT_RUNTIME_OVERHEAD_BYTES,
    BoardPreset,
    boards_for_usb,
    fit_check,
    list_boards,
    load_board,
)
from inferlab.engines.board.ports import describe_port, list_ports

KB = 1024
EXPECTED = {  # id: (core, clock_hz, sram_bytes, flash_bytes), as the datasheets state
    "samd21": ("Cortex-M0+", 48_000_000, 32 * KB, 256 * KB),
    "nrf52840": ("Cortex-M4F", 64_000_000, 256 * KB, 1024 * KB),
    "stm32f411": ("Cortex-M4F", 100_000_000, 128 * KB, 512 * KB),
    "stm32f746": ("Cortex-M7", 216_000_000, 320 * KB, 1024 * KB),
    "esp32-s3": ("Xtensa LX7 (dual core)", 240_000_000, 512 * KB, 8 * 1024 * KB),
    "rp2040": ("Cortex-M0+ (dual core)", 133_000_000, 264 * KB, 2 * 1024 * KB),
}


def test_every_preset_loads_with_its_datasheet_numbers_and_a_source():
    boards = {b.id: b for b in list_boards()}
    assert set(boards) == set(EXPECTED)
    for board_id, (core, clock, sram, flash) in EXPECTED.items():
        b = boards[board_id]
        assert (b.core, b.clock_hz, b.sram_bytes, b.flash_bytes) == (core, clock, sram, flash)
        assert re.search(r"data ?sheet|product specification", b.source, re.I)
        assert "http" in b.source and "cycles per mac" in b.notes.lower()
        assert 1 <= b.cycles_per_mac_int8 <= 20
        assert load_board(board_id.upper()) == b
        assert BoardPreset.from_dict(json.loads(json.dumps(b.to_dict()))) == b


def test_unknown_board_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown board 'uno'.*nrf52840.*samd21"):
        load_board("uno")


@pytest.mark.parametrize("patch, message", [
    ({"sram_bytes": 0}, "sram_bytes"),
    ({"clock_hz": "fast"}, "clock_hz"),
    ({"usb_ids": ["2341-804d"]}, "usb_ids"),
    ({"cycles_per_mac_int8": -1}, "cycles_per_mac_int8"),
    ({"colour": "red"}, "unknown field"),
    ({"source": ""}, "source"),
])
def test_bad_preset_fields_are_named(patch, message):
    d = load_board("samd21").to_dict() | patch
    with pytest.raises(ValueError, match=message):
        BoardPreset.from_dict(d, origin="x.json")


def test_usb_ids_identify_boards_and_shared_probes():
    assert [b.id for b in boards_for_usb(0x2E8A, 0x000A)] == ["rp2040"]
    assert [b.id for b in boards_for_usb(0x303A, 0x1001)] == ["esp32-s3"]
    assert [b.id for b in boards_for_usb(0x0483, 0x374B)] == ["stm32f411", "stm32f746"]
    assert boards_for_usb(0x1234, 0x5678) == [] and boards_for_usb(None, None) == []


def test_fit_check_numbers_and_margins():
    fc = fit_check(55_296, 300_568, "stm32f411")
    assert fc.runtime_overhead_bytes == DEFAULT_RUNTIME_OVERHEAD_BYTES
    assert fc.code_bytes == DEFAULT_CODE_BYTES
    assert fc.sram_used_bytes == 55_296 + 8_192
    assert fc.sram_margin_bytes == 131_072 - 63_488 == 67_584
    assert fc.flash_margin_bytes == 524_288 - 300_568 - 32_768 == 190_952
    assert fc.fits and fc.arena_limit_bytes == 131_072 - 8_192
    assert "margin +67,584 B" in fc.summary()

    over = fit_check(SimpleNamespace(arena_bytes=30_000), 10_000, load_board("samd21"),
                     runtime_overhead_bytes=4_096, code_bytes=16_384)
    assert over.sram_margin_bytes == 32_768 - 34_096 == -1_328
    assert not over.fits_sram and over.fits_flash and not over.fits
    assert "does NOT fit, margin -1,328 B" in over.summary()
    d = over.to_dict()
    assert d["sram_margin_bytes"] == -1_328 and d["fits"] is False

    edge = fit_check(32_768 - 4_096, 0, "samd21", runtime_overhead_bytes=4_096, code_bytes=0)
    assert edge.sram_margin_bytes == 0 and edge.fits  # exactly full fits
    with pytest.raises(ValueError, match="arena_bytes"):
        fit_check(-1, 0, "samd21")


def test_cycles_estimate_is_macs_times_cycles_per_mac():
    assert load_board("nrf52840").cycles_for(1000) == 5000
    assert load_board("stm32f746").cycles_for(3) == 8  # 7.5 rounds to even


def test_describe_port_names_known_boards():
    boards = list_boards()
    pico = SimpleNamespace(device="/dev/ttyACM0", description="Pico", vid=0x2E8A, pid=0x000A,
                           serial_number="E66", manufacturer="Raspberry Pi")
    info = describe_port(pico, boards)
    assert info.board == "rp2040" and info.usb_id == "2e8a:000a"
    nucleo = describe_port(SimpleNamespace(device="/dev/ttyACM1", description="STLink",
                                           vid=0x0483, pid=0x374B), boards)
    assert nucleo.board is None and nucleo.candidates == ("stm32f411", "stm32f746")
    uart = describe_port(SimpleNamespace(device="/dev/ttyS0", description="n/a", vid=None,
                                         pid=None), boards)
    assert uart.board is None and uart.usb_id is None and uart.to_dict()["candidates"] == []


def test_list_ports_runs_here():
    ports = list_ports()
    assert all(p.device for p in ports)
    json.dumps([p.to_dict() for p in ports])
