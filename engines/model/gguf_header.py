"""A GGUF file's header, read by a bounded walk: its metadata values and its tensor records.

`gguf.GGUFReader` trusts every count in the file. An array that claims 10^18 items past the
end of the file makes it loop for ever (each read past the end is empty and moves nothing
forward), and a tensor's dimensions may multiply to more bytes than the file holds. It is also
slow: it builds a memmap slice per vocabulary string in Python (10-20 s for Gemma 3's
262,144 tokens). `read_gguf_header` walks the same layout, bounding every count by the bytes
left, and raises `ModelLoadError` naming the file, the entry and the byte offset; it allocates
nothing in proportion to a count that the file's bytes do not back. Layout (GGUF v2 and v3,
little- or big-endian)::

    magic "GGUF", version u32, tensor_count u64, kv_count u64
    kv_count × (key: string, value_type u32, value)
    tensor_count × (name: string, n_dims u32, n_dims × u64, ggml_type u32, offset u64)
    padding to `general.alignment`, then the tensor data (each at data start + offset)

with string = length u64 + UTF-8 bytes and array = item_type u32, count u64, items.

As it checks, the walk records what GGUFReader gives, with the same names and meanings
(`GGUFHeader` for the reader, `GGUFField` for a metadata entry, `GGUFTensor` for a tensor):
numeric arrays and tensor bytes are views of one read-only `np.memmap` of the file, strings
are decoded when a value is asked for (`GGUFField.contents`). What GGUFReader refuses beyond
the layout (a key or tensor name that is not UTF-8, a key or a tensor name twice,
general.alignment not a UINT32, a block-quantized tensor without dimensions) is refused once
the layout has passed, so that a layout error keeps its message.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from inferlab.engines.model.errors import ModelLoadError

GGUF_VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_NESTING = 4
DEFAULT_ALIGNMENT = 32
# value type -> numpy type code of a scalar; 8 STRING and 9 ARRAY have no fixed size
SCALAR_DTYPES = {0: "u1", 1: "i1", 2: "u2", 3: "i2", 4: "u4", 5: "i4", 6: "f4", 7: "?",
                 10: "u8", 11: "i8", 12: "f8"}
SCALAR_BYTES = {t: np.dtype(code).itemsize for t, code in SCALAR_DTYPES.items()}
STRING, ARRAY, UINT32, UINT64 = 8, 9, 4, 10
_MIN_BYTES = SCALAR_BYTES | {STRING: 8, ARRAY: 12}  # the smallest encoding of one value
_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims 0, type, offset
# tensor types whose data GGUFReader gives as numbers; any other as uint8 rows of blocks
_NUMBER_DTYPES = {GGMLQuantizationType.F32: "f4", GGMLQuantizationType.F16: "f2",
                  GGMLQuantizationType.F64: "f8", GGMLQuantizationType.I8: "i1",
                  GGMLQuantizationType.I16: "i2", GGMLQuantizationType.I32: "i4",
                  GGMLQuantizationType.I64: "i8"}


@dataclass(frozen=True, eq=False)
class GGUFField:
    """A metadata entry as `gguf.ReaderField` describes it: where it starts (its key), its key,
    its value types ([ARRAY, item type] for an array, the first item's types after ARRAY for
    an array of arrays, [] for a tensor's info). `value` is raw: a Python number, bytes for a
    string, a numpy view for an array of numbers, a list of bytes for an array of strings, a
    flat list of numbers or bytes for an array of arrays; `contents()` gives the value."""

    offset: int
    name: str
    types: list[GGUFValueType]
    value: Any = None

    def contents(self) -> Any:
        """The value as GGUFReader's `contents()` gives it: a new list for an array (an array
        of arrays flattened), str for a string (UnicodeDecodeError if it is not UTF-8)."""
        v = self.value
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, bytes):
            return str(v, "utf-8")
        if not isinstance(v, list):
            return v
        strings = self.types[-1] == GGUFValueType.STRING
        if self.types[1:2] == [GGUFValueType.ARRAY] and any(
                isinstance(x, bytes) != strings for x in v):
            raise ValueError("an array of arrays mixes strings and numbers")
        return [x.decode() for x in v] if strings else list(v)


@dataclass(frozen=True, eq=False)
class GGUFTensor:
    """A tensor's record as `gguf.ReaderTensor` gives it: `shape` is GGUF's (ne0 first, a
    uint64 view of the header); `data` a read-only view of the file's map shaped in numpy's
    order (reversed `shape`): numbers for F32, F16, F64, I8-I64, else uint8 rows of blocks
    ([..., ne0 / block × block bytes]); `data_offset` its first byte in the file."""

    name: str
    tensor_type: GGMLQuantizationType
    shape: np.ndarray
    n_elements: int
    n_bytes: int
    data_offset: int
    data: np.ndarray
    field: GGUFField


@dataclass(frozen=True, eq=False)
class GGUFHeader:
    """A GGUF's header as `gguf.GGUFReader` gives it: `fields` by key (the pseudo-keys
    GGUF.version, GGUF.tensor_count and GGUF.kv_count first), `tensors` in file order, `data`
    the whole file (read-only `np.memmap`), `data_offset` where the tensor data start."""

    fields: dict[str, GGUFField]
    tensors: list[GGUFTensor]
    data: np.ndarray
    data_offset: int
    alignment: int
    endian: str  # "little" or "big", as the file is written


class _Walker:
    """Reads the header's values at a moving offset, refusing any read past the end."""

    def __init__(self, data: np.ndarray, where: str, order: str) -> None:
        self.data, self.buf, self.size = data, memoryview(data), len(data)
        self.where, self.order = where, order
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

    def numbers(self, value_type: int, n: int) -> np.ndarray:
        """`n` numbers of `value_type`: a view of the map, in the file's byte order."""
        n_bytes = n * SCALAR_BYTES[value_type]
        self.need(n_bytes, "value")  # an array's count is checked first: a scalar's bytes
        view = self.data[self.offset:self.offset + n_bytes].view(
            self.order + SCALAR_DTYPES[value_type])
        self.offset += n_bytes
        return view

    def _strings(self, n: int) -> list[bytes]:
        unpack = struct.Struct(self.order + "Q").unpack_from
        buf, offset, size = self.buf, self.offset, self.size
        out: list[bytes] = []
        append = out.append
        for i in range(n):  # the vocabulary: one tight loop, not a call per token
            if offset + 8 > size or offset + 8 + (length := unpack(buf, offset)[0]) > size:
                self.offset = offset
                self.fail(f"string {i:,} of the array ends past the end of the file")
            append(bytes(buf[offset + 8:offset + 8 + length]))
            offset += 8 + length
        self.offset = offset
        return out

    def value(self, value_type: int, depth: int = 0) -> tuple[list[int], Any]:
        """(types as GGUFReader lists them, raw value as `GGUFField.value` holds it) of the
        value at the offset; an array of arrays' value is its items' values, flattened."""
        if value_type in SCALAR_BYTES:
            return [value_type], self.numbers(value_type, 1).tolist()[0]
        if value_type == STRING:
            return [STRING], self.string("string")
        if value_type != ARRAY:
            self.fail(f"unknown value type {value_type}")
        if depth >= MAX_ARRAY_NESTING:
            self.fail(f"arrays nested more than {MAX_ARRAY_NESTING} deep")
        item_type = self.uint(4, "array item type")
        if item_type not in _MIN_BYTES:
            self.fail(f"unknown array item type {item_type}")
        n = self.count("array length", _MIN_BYTES[item_type])
        types = [ARRAY, item_type] if n else [ARRAY]
        if item_type in SCALAR_BYTES:
            return types, self.numbers(item_type, n)
        if item_type == STRING:
            return types, self._strings(n)
        items: list = []
        for i in range(n):
            item_types, item = self.value(item_type, depth + 1)
            if i == 0:
                types = [ARRAY, *item_types]
            items += item.tolist() if isinstance(item, np.ndarray) else item
        return types, items


def read_gguf_header(path: Path) -> GGUFHeader:
    """`path`'s header, walked with every count bounded by the file's size; ModelLoadError
    unless it is well formed, GGUFReader would read it, and every tensor's data lies inside
    the file. The magic ("GGUF") is the caller's to check."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < 24:
                raise ModelLoadError(f"{where}: truncated GGUF file ({size} bytes, the header "
                                     "alone needs 24)")
            data = np.memmap(f, mode="r")
    except OSError as e:
        raise ModelLoadError(f"{where}: cannot read: {e.strerror or e}") from None
    return _walk(data, where)


class _TensorInfo(NamedTuple):
    at: int  # where its info starts
    entry: str  # its name in messages
    name: bytes
    dims: np.ndarray  # ne0 first, a view of the map
    qtype: GGMLQuantizationType
    n_values: int
    n_bytes: int
    offset: int  # from the start of the data


def _walk(data: np.ndarray, where: str) -> GGUFHeader:
    (version,) = struct.unpack_from("<I", data, 4)
    order = ">" if version & 0xFFFF == 0 else "<"  # as GGUFReader: a byte-swapped file
    w = _Walker(data, where, order)
    w.offset = 4
    version = w.uint(4, "version")
    if version not in GGUF_VERSIONS:
        w.fail(f"version {version} is not supported (GGUF {GGUF_VERSIONS})")
    n_tensors = w.count("tensor count", _MIN_TENSOR_INFO_BYTES)
    n_kv = w.count("metadata count", _MIN_KV_BYTES)
    entries = [(4, b"GGUF.version", [UINT32], version),
               (8, b"GGUF.tensor_count", [UINT64], n_tensors),
               (16, b"GGUF.kv_count", [UINT64], n_kv)]
    alignment = DEFAULT_ALIGNMENT
    for i in range(n_kv):
        at = w.offset
        w.entry = f"metadata entry {i}"
        key = w.string("key")
        w.entry = f"metadata {key.decode('utf-8', errors='replace')[:80]!r}"
        types, value = w.value(w.uint(4, "value type"))
        if key == b"general.alignment" and types == [UINT32]:
            alignment = value
        entries.append((at, key, types, value))
    if alignment < 1 or alignment & (alignment - 1):
        w.fail(f"general.alignment {alignment} is not a power of two")
    infos = [_tensor_info(w, i) for i in range(n_tensors)]
    data_start = -(-w.offset // alignment) * alignment
    for t in infos:
        end = data_start + t.offset + t.n_bytes
        if end > w.size:
            raise ModelLoadError(f"{where}: truncated: {t.entry} ends at byte {end:,} but the "
                                 f"file has {w.size:,} bytes")
    # the layout holds; now what GGUFReader refuses beyond it
    fields: dict[str, GGUFField] = {}
    for at, raw_key, types, value in entries:
        key = _utf8(raw_key, where, at, "metadata key")
        if key in fields:
            _refuse(where, at, f"metadata {key[:80]!r} appears twice")
        fields[key] = GGUFField(at, key, [GGUFValueType(t) for t in types], value)
    align = fields.get("general.alignment")
    if align is not None and align.types != [GGUFValueType.UINT32]:
        _refuse(where, align.offset, "metadata 'general.alignment' must be a UINT32, is "
                f"{'/'.join(t.name for t in align.types) or 'an empty array'}")
    tensors: dict[str, GGUFTensor] = {}
    for t in infos:
        name = _utf8(t.name, where, t.at, "tensor name")
        if name in tensors:
            _refuse(where, t.at, f"tensor {name[:80]!r} appears twice")
        tensors[name] = _tensor(data, where, name, t, data_start, order)
    return GGUFHeader(fields, list(tensors.values()), data, data_start, alignment,
                      "big" if order == ">" else "little")


def _tensor_info(w: _Walker, i: int) -> _TensorInfo:
    """Tensor info `i` at the walker's offset, its data's size checked against its type."""
    at = w.offset
    w.entry = f"tensor info {i}"
    name = w.string("name")
    w.entry = f"tensor {name.decode('utf-8', errors='replace')[:80]!r}"
    n_dims = w.uint(4, "dimension count")
    if n_dims > MAX_DIMS:
        w.fail(f"{n_dims} dimensions (GGUF tensors have at most {MAX_DIMS})")
    dims_at = w.offset
    dims = [w.uint(8, "dimension") for _ in range(n_dims)]
    raw_type = w.uint(4, "type")
    try:
        qtype = GGMLQuantizationType(raw_type)
        block, type_bytes = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        w.fail(f"unknown tensor type {raw_type}")
    n_values = math.prod(dims)
    if dims and dims[0] % block:
        w.fail(f"first dimension {dims[0]} is not a multiple of the type's block of {block}")
    offset = w.uint(8, "data offset")
    return _TensorInfo(at, w.entry, name, w.data[dims_at:dims_at + 8 * n_dims].view(
        w.order + "u8"), qtype, n_values, n_values * type_bytes // block, offset)


def _tensor(data: np.ndarray, where: str, name: str, t: _TensorInfo, data_start: int,
            order: str) -> GGUFTensor:
    """The record of a tensor whose bytes lie inside the file."""
    shape = tuple(reversed(t.dims.tolist()))  # numpy's order: ne0 last
    code = _NUMBER_DTYPES.get(t.qtype)
    if code is None:  # rows of blocks: ne0 / block blocks of type_bytes each
        if not shape:
            _refuse(where, t.at, f"tensor {name[:80]!r} of type {t.qtype.name} has no "
                    "dimensions (a block-quantized tensor needs at least one)")
        block, type_bytes = GGML_QUANT_SIZES[t.qtype]
        shape = (*shape[:-1], shape[-1] // block * type_bytes)
        dtype = np.dtype(np.uint8)
    else:
        dtype = np.dtype(order + code)
    start = data_start + t.offset
    try:
        view = data[start:start + t.n_bytes].view(dtype).reshape(shape)
    except (ValueError, OverflowError) as e:  # a dimension past numpy's (with another 0)
        _refuse(where, t.at, f"tensor {name[:80]!r} of shape {shape} cannot be viewed: {e}")
    return GGUFTensor(name, t.qtype, t.dims, t.n_values, t.n_bytes, start, view,
                      GGUFField(t.at, name, []))


def _utf8(raw: bytes, where: str, at: int, what: str) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as e:
        _refuse(where, at, f"{what} {raw[:80]!r} is not UTF-8 ({e.reason} at byte {e.start})")


def _refuse(where: str, at: int, problem: str) -> None:
    raise ModelLoadError(f"{where}: corrupt GGUF header at byte {at}: {problem}")
