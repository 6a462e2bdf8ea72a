"""CRC-32 of the wire protocol: the IEEE 802.3 / zlib CRC (reflected polynomial 0xEDB88320).

Parameters in the usual catalogue notation: width 32, poly 0x04C11DB7, init 0xFFFFFFFF,
refin and refout true, xorout 0xFFFFFFFF; check value ("123456789") 0xCBF43926.
`crc32` uses zlib (fast); `crc32_bitwise` is the table-free loop a C firmware can copy,
kept here so the tests prove the two agree.
"""

from __future__ import annotations

import zlib

CRC32_POLY_REFLECTED = 0xEDB88320
CRC32_CHECK = 0xCBF43926  # crc32(b"123456789")


def crc32(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32 of `data`; pass a previous result as `crc` to continue over more bytes."""
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def crc32_bitwise(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The same CRC, one bit at a time (no table): what a small firmware writes."""
    crc ^= 0xFFFFFFFF
    for byte in bytes(data):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (CRC32_POLY_REFLECTED if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
