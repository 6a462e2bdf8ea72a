"""CRC-32 and COBS of the firmware core (ctypes) against the spec's vectors and Python."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from inferlab.engines.board import cobs

CRC_VECTORS = [(b"123456789", 0xCBF43926), (b"", 0), (bytes(4), 0x2144DF1C),
               (b"InferLab", 0x60EA634C)]
COBS_VECTORS = [
    (b"\x00", b"\x01\x01"),
    (b"\x00\x00", b"\x01\x01\x01"),
    (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33"),
    (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44"),
    (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01"),
    (bytes(range(1, 255)), b"\xff" + bytes(range(1, 255)) + b"\x01"),
    (bytes(range(1, 256)), b"\xff" + bytes(range(1, 255)) + b"\x02\xff"),
]


@pytest.mark.parametrize("data,crc", CRC_VECTORS)
def test_crc32_vectors(fwlib, data, crc):
    assert fwlib.crc32(data) == crc


def test_crc32_random_and_continued_equal_zlib(fwlib):
    rng = np.random.default_rng(1)
    for n in (1, 7, 255, 4108):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert fwlib.crc32(data) == zlib.crc32(data)
        cut = n // 3
        assert fwlib.crc32(data[cut:], fwlib.crc32(data[:cut])) == zlib.crc32(data)


@pytest.mark.parametrize("data,encoded", COBS_VECTORS)
def test_cobs_vectors(fwlib, data, encoded):
    assert fwlib.cobs_encode(data) == encoded
    assert fwlib.cobs_decode(encoded) == data


def test_cobs_random_round_trips_equal_python(fwlib):
    rng = np.random.default_rng(2)
    for n in (0, 1, 253, 254, 255, 508, 1000, 4108):
        for zeros in (0.0, 0.05, 0.5):
            data = rng.integers(1, 256, n, dtype=np.uint8)
            data[rng.random(n) < zeros] = 0
            data = data.tobytes()
            encoded = fwlib.cobs_encode(data)
            assert encoded == cobs.encode(data)
            assert fwlib.cobs_decode(encoded) == data


@pytest.mark.parametrize("bad", [b"", b"\x05\x11\x22", b"\x03\x11", b"\xff\x01",
                                 b"\x02\x11\x00\x01"])
def test_cobs_invalid_encodings_are_refused_like_python(fwlib, bad):
    with pytest.raises(cobs.CobsError):
        cobs.decode(bad)
    assert fwlib.cobs_decode(bad) is None
