"""Byte and FLOP/s formatting: binary and decimal units always labelled."""

from inferlab.engines.roofline.units import format_bandwidth, format_bytes, format_flops


def test_format_bytes_binary_and_decimal():
    assert format_bytes(8 * 2**30) == "8.00 GiB"
    assert format_bytes(8 * 2**30, binary=False) == "8.59 GB"
    assert format_bytes(2**30) == "1.00 GiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(80e9, binary=False) == "80.00 GB"


def test_format_bytes_negative_and_rounding_up_a_unit():
    assert format_bytes(-3 * 2**29) == "-1.50 GiB"
    assert format_bytes(2**20 - 1) == "1.00 MiB"


def test_format_flops_three_significant_digits():
    assert format_flops(95.2e9) == "95.2 GFLOP/s"
    assert format_flops(989.4e12) == "989 TFLOP/s"
    assert format_flops(1978.9e12) == "1.98 PFLOP/s"
    assert format_flops(999.97e9) == "1 TFLOP/s"
    assert format_flops(160e6) == "160 MFLOP/s"
    assert format_flops(0) == "0 FLOP/s"


def test_format_bandwidth_is_decimal():
    assert format_bandwidth(3.35e12) == "3.35 TB/s"
    assert format_bandwidth(320e6) == "320 MB/s"
