"""An opened GGUF file (llama.cpp's format): its metadata as checked Python values and its
tensor records, before anything is dequantized.

Nothing is trusted before it is checked: the header is read by our own walk with every count
bounded by the file's size (`gguf_header`: what `gguf.GGUFReader` gives, in a fraction of a
second where GGUFReader takes 10-20 s over Gemma 3's 262,144-token vocabulary), and every
metadata value is type- and range-checked when it is read (`GGUFFile.get`, `.size`). The file
is memory-mapped: a tensor's bytes are a view of the map until something dequantizes them.

llama.cpp's converter permutes the rows of W_q and W_k of Llama-family models so that its RoPE
can rotate adjacent pairs (x0, x1), (x2, x3), ...; `unpermute_rope_rows` undoes that, so the
weights fit the "rotate half" RoPE of `rope.py`.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFValueType
from gguf.quants import dequantize

from inferlab.engines.model.config import ConfigError, check_field, show
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_header import read_gguf_header

GGUF_MAGIC = b"GGUF"
_REQUIRED = object()
# What a metadata value must be, by the Python type it is read as.
_KINDS = {int: ("an integer", "integers"), float: ("a number", "numbers"),
          str: ("a string", "strings"), bool: ("a boolean", "booleans"), list: ("an array", "arrays")}


_OPENED: dict[tuple, GGUFFile] = {}
_OPENED_LOCK = threading.Lock()
KEEP_OPENED = 2
"""Files whose header `open_gguf` keeps (loading one file as fp32 and as codes, or a lab after a
test, reads it and maps it once)."""


def open_gguf(path: str | Path) -> GGUFFile:
    """`GGUFFile(path)`, reused while the file is unchanged (same size and modification time)
    among the last KEEP_OPENED opened in this process."""
    p = Path(path)
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    except (OSError, ValueError):
        return GGUFFile(p)  # its own message names the problem
    with _OPENED_LOCK:
        g = _OPENED.get(key)
    if g is None:
        g = GGUFFile(p)
        with _OPENED_LOCK:
            _OPENED[key] = g
            while len(_OPENED) > KEEP_OPENED:
                _OPENED.pop(next(iter(_OPENED)))
    return g


def unpermute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation.

    The converter stores each head's rows as interleaved pairs (row 2j of the head is HF row
    j, row 2j+1 is HF row j + d_head/2); this puts the two halves back one after the other.
    """
    rows, cols = w.shape
    d_half = rows // n_heads // 2
    return w.reshape(n_heads, d_half, 2, cols).transpose(1, 2).reshape(rows, cols)


def permute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The converter's permutation itself (HF layout -> GGUF layout); for writing test files."""
    rows, cols = w.shape
    d_half = rows // n_heads // 2
    return w.reshape(n_heads, 2, d_half, cols).transpose(1, 2).reshape(rows, cols)


class GGUFFile:
    """An opened GGUF: its metadata as plain Python values and its tensor records.

    `reader` is the header as read (`gguf_header.GGUFHeader`: `fields`, `tensors`, `data`,
    `data_offset`, as `gguf.GGUFReader` names them); `tensors` its tensor records by name.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        where = str(self.path)
        try:
            with open(self.path, "rb") as f:
                magic = f.read(4)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
            raise ModelLoadError(f"{where}: cannot read: {getattr(e, 'strerror', None) or e}"
                                 ) from None
        if magic != GGUF_MAGIC:
            raise ModelLoadError(f"{where}: not a GGUF file (starts with {magic!r}, "
                                 f"expected {GGUF_MAGIC!r})")
        self.reader = read_gguf_header(self.path)
        self.tensors = {t.name: t for t in self.reader.tensors}

    def get(self, key: str, default: Any = None, kind: type | None = None,
            items: type | None = None) -> Any:
        """A metadata value (str, int, float, bool or list), or `default` if absent.

        With `kind` (int, float, str, bool or list; `items` the type of a list's items) a
        present value of another type is refused; float accepts integers, and bool is never
        an int. A float must be finite.
        """
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            value = field.contents()
        except ValueError as e:  # a string not UTF-8, an array of arrays of mixed kinds
            raise ModelLoadError(f"{self.path}: unreadable metadata {key!r}: {e}") from None
        if kind is not None and not _is_kind(value, kind):
            raise ModelLoadError(f"{self.path}: metadata {key!r} must be {_KINDS[kind][0]}, got "
                                 f"{show(value)}")
        if items is not None and not all(_is_kind(v, items) for v in value):
            bad = next(v for v in value if not _is_kind(v, items))
            raise ModelLoadError(f"{self.path}: metadata {key!r} must be an array of "
                                 f"{_KINDS[items][1]}, holds {show(bad)}")
        return value

    def require(self, key: str, kind: type | None = None, items: type | None = None) -> Any:
        value = self.get(key, kind=kind, items=items)
        if value is None:
            raise ModelLoadError(f"{self.path}: missing metadata {key!r}")
        return value

    def size(self, field: str, key: str, default: Any = _REQUIRED) -> int | float:
        """Metadata `key` as ModelConfig's `field`, checked against FIELD_LIMITS."""
        value = self.get(key) if default is not _REQUIRED else self.require(key)
        if value is None:
            return default
        try:
            return check_field(field, value, key, label="metadata")
        except ConfigError as e:
            raise ModelLoadError(f"{self.path}: {e}") from None

    @property
    def architecture(self) -> str:
        return self.require("general.architecture", str)

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor `name` dequantized to fp32, in PyTorch's [out, in] orientation."""
        t = self.tensors.get(name)
        if t is None:
            raise ModelLoadError(f"{self.path}: missing tensor {name!r}")
        try:
            with np.errstate(all="ignore"):  # NaN / inf scales: refused after, by the model
                arr = dequantize(t.data, t.tensor_type)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: cannot dequantize tensor {name!r} "
                                 f"({t.tensor_type.name}): {e}") from None
        shape = tensor_shape(t)
        if arr.size != int(np.prod(shape)):
            raise ModelLoadError(f"{self.path}: tensor {name!r} holds {arr.size} values, "
                                 f"its shape {shape} needs {int(np.prod(shape))}")
        arr = np.asarray(arr, dtype=np.float32).reshape(shape)
        return torch.from_numpy(arr if arr.flags.writeable else arr.copy())


def tensor_shape(t) -> tuple[int, ...]:
    """A GGUF tensor record's shape in PyTorch's [out, in] order (GGUF lists ne0 first)."""
    return tuple(int(n) for n in reversed(t.shape))


def _is_kind(value: Any, kind: type) -> bool:
    if kind is float:
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _field_value(field) -> Any:
    """A metadata field's value: its `contents()` where it has them (a `GGUFField`), else from
    a `gguf.ReaderField`'s raw parts (gguf versions before 0.11)."""
    if hasattr(field, "contents"):
        return field.contents()
    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        if field.types[-1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [v for i in field.data for v in field.parts[i].tolist()]
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]
