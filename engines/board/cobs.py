"""Consistent Overhead Byte Stuffing (Cheshire and Baker, 1999): frames with no 0x00 inside.

The encoded form replaces every zero byte by a "code" byte that says how far away the next
zero is. Data is cut into blocks of at most 254 non-zero bytes; each block is written as
(block length + 1) followed by the block. A block shorter than 254 bytes stands for the block
followed by a zero; the zero that this implies after the very last block is dropped. A full
254-byte block (code 0xFF) implies no zero. So `n` bytes encode to at most
`n + ceil(n / 254) + 1` bytes (`max_encoded_bytes`) and never contain 0x00, which is then
free to delimit frames on the wire.
"""

from __future__ import annotations


class CobsError(ValueError):
    """The bytes are not a valid COBS encoding (a zero inside, or a code past the end)."""


def max_encoded_bytes(n: int) -> int:
    """Largest COBS encoding of `n` bytes (without the 0x00 delimiter)."""
    return n + (n + 253) // 254 + (1 if n % 254 == 0 else 0) if n else 1


def encode(data: bytes | bytearray | memoryview) -> bytes:
    """COBS-encode `data`; the result has no 0x00 byte and no delimiter appended."""
    out = bytearray()
    code_at = 0
    out.append(0)  # placeholder for the first code byte
    code = 1
    for byte in bytes(data):
        if byte == 0:
            out[code_at] = code
            code_at = len(out)
            out.append(0)
            code = 1
            continue
        out.append(byte)
        code += 1
        if code == 0xFF:
            out[code_at] = code
            code_at = len(out)
            out.append(0)
            code = 1
    out[code_at] = code
    return bytes(out)


def decode(data: bytes | bytearray | memoryview) -> bytes:
    """Decode one COBS frame (delimiter already removed); `CobsError` if it is malformed."""
    data = bytes(data)
    out = bytearray()
    i, n = 0, len(data)
    if n == 0:
        raise CobsError("empty COBS frame")
    while i < n:
        code = data[i]
        if code == 0:
            raise CobsError(f"zero byte inside a COBS frame at {i}")
        end = i + code
        if end > n:
            raise CobsError(f"COBS code {code} at {i} runs past the end ({n} bytes)")
        block = data[i + 1 : end]
        if 0 in block:
            raise CobsError(f"zero byte inside a COBS frame at {i + 1 + block.index(0)}")
        out += block
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)
