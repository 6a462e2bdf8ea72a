"""A bounded walk over a GGUF header, done before the `gguf` package parses it.

`gguf.GGUFReader` trusts every count in the file. An array that claims 10^18 items past the
end of the file makes it loop for ever (each read past the end is empty and moves nothing
forward), and a tensor's dimensions may multiply to more bytes than the file holds.
`check_gguf_header` walks the same layout, bounding every count by the bytes left, and raises
`ModelLoadError` naming the file, the entry and the byte offset; it allocates nothing in
proportion to a count. Layout (GGUF v2 and v3, little- or big-endian)::

    magic "GGUF", version u32, tensor_count u64, kv_count u64
    kv_count × (key: string, value_type u32, value)
    tensor_count × (name: string, n_dims u32, n_dims × u64, ggml_type u32, offset u64)
    padding to `general.alignment`, then the tensor data (each at data start + offset)

with string = length u64 + UTF-8 bytes and array = item_type u32, count u64, items.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from inferlab.engines.model.errors import ModelLoadError

GGUF_VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_NESTING = 4
DEFAULT_ALIGNMENT = 32
# value type -> byte size of a scalar; 8 STRING and 9 ARRAY have no fixed size
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4
_MIN_BYTES = SCALAR_BYTES | {STRING: 8, ARRAY: 12}  # the smallest encoding of one value
_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims 0, type, offset


class _Walker:
    """Reads the header's integers at a moving offset, refusing any read past the end."""

    def __init__(self, buf, size: int, where: str, order: str) -> None:
        self.buf, self.size, self.where, self.order = buf, size, where, order
        self.offset = 0
        self.entry = "the header"

    def fail(self, problem: str) -> None:
        raise ModelLoadError(f"{self.where}: truncated or corrupt GGUF header: {self.entry} "
                             f"at byte {self.offset}: {problem}")

    @property
    def left(self) -> int:
        return self.size - self.offset

    def need(self, n_bytes: int, what: str) -> None:
        if n_bytes > self.left:
            self.fail(f"{what} needs {n_bytes:,} bytes but the file has {self.left:,} left "
                      f"({self.size:,} bytes in all)")

    def uint(self, n_bytes: int, what: str) -> int:
        self.need(n_bytes, what)
        fmt = self.order + {4: "I", 8: "Q"}[n_bytes]
        (value,) = struct.unpack_from(fmt, self.buf, self.offset)
        self.offset += n_bytes
        return value

    def count(self, what: str, min_item_bytes: int) -> int:
        """A u64 count whose items, each at least `min_item_bytes`, must fit in the file."""
        n = self.uint(8, what)
        if n * min_item_bytes > self.left:
            self.fail(f"{what} is {n:,}, more than the {self.left:,} bytes left can hold")
        return n

    def string(self, what: str) -> bytes:
        n = self.count(f"{what} length", 1)
        raw = bytes(self.buf[self.offset:self.offset + n])
        self.offset += n
        return raw

    def _skip_strings(self, n: int) -> None:
        unpack = struct.Struct(self.order + "Q").unpack_from
        buf, offset, size = self.buf, self.offset, self.size
        for i in range(n):
            if offset + 8 > size or offset + 8 + unpack(buf, offset)[0] > size:
                self.offset = offset
                self.fail(f"string {i:,} of the array ends past the end of the file")
            offset += 8 + unpack(buf, offset)[0]
        self.offset = offset

    def skip_value(self, value_type: int, depth: int = 0) -> int | None:
        """Step over one value; return it if it is a UINT32 (for general.alignment)."""
        if value_type in SCALAR_BYTES:
            if value_type == UINT32:
                return self.uint(4, "value")
            self.need(SCALAR_BYTES[value_type], "value")
            self.offset += SCALAR_BYTES[value_type]
        elif value_type == STRING:
            self.string("string")
        elif value_type == ARRAY:
            if depth >= MAX_ARRAY_NESTING:
                self.fail(f"arrays nested more than {MAX_ARRAY_NESTING} deep")
            item_type = self.uint(4, "array item type")
            if item_type not in _MIN_BYTES:
                self.fail(f"unknown array item type {item_type}")
            n = self.count("array length", _MIN_BYTES[item_type])
            if item_type in SCALAR_BYTES:
                self.offset += n * SCALAR_BYTES[item_type]
            elif item_type == STRING:  # the vocabulary: one tight loop, not a call per token
                self._skip_strings(n)
            else:
                for _ in range(n):
                    self.skip_value(item_type, depth + 1)
        else:
            self.fail(f"unknown value type {value_type}")
        return None


def check_gguf_header(path: Path) -> None:
    """Raise ModelLoadError unless `path`'s header, walked with every count bounded by the
    file's size, is well formed and every tensor's data lies inside the file."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < 24:
                raise ModelLoadError(f"{where}: truncated GGUF file ({size} bytes, the header "
                                     "alone needs 24)")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _walk(buf, size, where)
    except OSError as e:
        raise ModelLoadError(f"{where}: cannot read: {e.strerror or e}") from None


def _walk(buf, size: int, where: str) -> None:
    (version,) = struct.unpack_from("<I", buf, 4)
    order = ">" if version & 0xFFFF == 0 else "<"  # as GGUFReader: a byte-swapped file
    w = _Walker(buf, size, where, order)
    w.offset = 4
    version = w.uint(4, "version")
    if version not in GGUF_VERSIONS:
        w.fail(f"version {version} is not supported (GGUF {GGUF_VERSIONS})")
    n_tensors = w.count("tensor count", _MIN_TENSOR_INFO_BYTES)
    n_kv = w.count("metadata count", _MIN_KV_BYTES)
    alignment = DEFAULT_ALIGNMENT
    for i in range(n_kv):
        w.entry = f"metadata entry {i}"
        key = w.string("key").decode("utf-8", errors="replace")
        w.entry = f"metadata {key[:80]!r}"
        value = w.skip_value(w.uint(4, "value type"))
        if key == "general.alignment" and value is not None:
            alignment = value
    if alignment < 1 or alignment & (alignment - 1):
        w.fail(f"general.alignment {alignment} is not a power of two")
    tensors = []
    for i in range(n_tensors):
        w.entry = f"tensor info {i}"
        name = w.string("name").decode("utf-8", errors="replace")
        w.entry = f"tensor {name[:80]!r}"
        n_dims = w.uint(4, "dimension count")
        if n_dims > MAX_DIMS:
            w.fail(f"{n_dims} dimensions (GGUF tensors have at most {MAX_DIMS})")
        dims = [w.uint(8, "dimension") for _ in range(n_dims)]
        raw_type = w.uint(4, "type")
        try:
            block, type_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(raw_type)]
        except (ValueError, KeyError):
            w.fail(f"unknown tensor type {raw_type}")
        n_values = 1
        for d in dims:
            n_values *= d
        if dims and dims[0] % block:
            w.fail(f"first dimension {dims[0]} is not a multiple of the type's block of {block}")
        tensors.append((w.entry, n_values // block * type_bytes, w.uint(8, "data offset")))
    data_start = -(-w.offset // alignment) * alignment
    for entry, n_bytes, offset in tensors:
        end = data_start + offset + n_bytes
        if end > size:
            raise ModelLoadError(f"{where}: truncated: {entry} ends at byte {end:,} but the "
                                 f"file has {size:,} bytes")
