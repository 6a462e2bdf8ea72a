"""The board side of the MCU lab: what it takes to run a planned model on a microcontroller.

- `boards`: board presets (SRAM, flash, clock, cycles per MAC) and `fit_check`.
- `protocol`, `cobs`, `crc`: the serial wire protocol (PROTOCOL.md), COBS frames, CRC-32.
- `link`: the host end of the protocol over any pyserial URL; `ports`: serial port discovery.
- `virtual_board`: the protocol served by the host, within a preset's limits;
  `board_server`: one served on a pty or a TCP socket.
- `codegen`, `toolchain`, `emulator`: the C firmware for one model, its build, QEMU.

It imports the arena side (`engines.mcu`), never the reverse.
"""
