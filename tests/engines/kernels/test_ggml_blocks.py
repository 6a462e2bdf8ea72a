"""Products over GGUF blocks (engines/kernels/ggml_blocks.c) and `GGUFLinear` against
`gguf.quants.dequantize` + matmul, on every instruction set this CPU runs: every covered type,
1 to 40 input rows, every tile remainder of output rows; the scalar reference, the torch path
and `INFERLAB_KERNELS=torch` against the kernel; a real SmolLM2 tensor read in place from the
file's memory map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.quants import dequantize, quantize
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kernels import ggml_blocks as gb
from inferlab.engines.kernels import library as native
from inferlab.engines.model import gguf_linear
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_linear import GGUFLinear, as_uint8_tensor, dequantize_rows
from inferlab.engines.model.llama import held_bytes, held_params
from inferlab.engines.model.registry import smollm2_gguf_path
from tests.engines.kernels.tolerance import dot_err

TYPES = sorted(gb.COVERED)
GGUF_QUANTIZES = (QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0)
"""The covered types `gguf.quants.quantize` writes; the K-quants it only reads."""
FP16_FIELDS = {QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}
"""Where a K-quant block keeps its fp16 scales (d, dmin; Q6_K: d at the end)."""


def raw_blocks(qtype: QT, n: int, k: int, seed: int) -> np.ndarray:
    """[n, row_bytes] block bytes of `qtype`: quantized by `gguf` where it can, else random
    bytes with finite fp16 scales in [1e-3, 5e-2] (every code, 6-bit scale and min drawn)."""
    rng = np.random.default_rng(seed)
    if qtype in GGUF_QUANTIZES:
        return quantize(rng.standard_normal((n, k)).astype(np.float32), qtype)
    qk, nbytes = gb.block_shape(qtype)
    raw = rng.integers(0, 256, (n, k // qk, nbytes), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        scale = rng.uniform(1e-3, 5e-2, (n, k // qk)).astype(np.float16)
        raw[..., at:at + 2] = scale.view(np.uint8).reshape(n, k // qk, 2)
    return raw.reshape(n, -1)


def reference(raw: np.ndarray, qtype: QT, n: int, k: int) -> torch.Tensor:
    return torch.from_numpy(dequantize(raw, qtype).reshape(n, k).copy())


def in_features(qtype: QT, blocks: int) -> int:
    return gb.block_shape(qtype)[0] * blocks


def test_covered_types_are_ggmls_ids():
    assert [t.name for t in TYPES] == ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K",
                                       "Q6_K"]
    assert {t: gb.block_shape(t) for t in TYPES} == {
        QT.Q4_0: (32, 18), QT.Q4_1: (32, 20), QT.Q5_0: (32, 22), QT.Q5_1: (32, 24),
        QT.Q8_0: (32, 34), QT.Q4_K: (256, 144), QT.Q5_K: (256, 176), QT.Q6_K: (256, 210)}


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_kernel_matches_dequantize_then_matmul(build, qtype):
    """M = 1, 2, 3, 5, 8, 16 (and past the 16 rows a decoded chunk serves), odd out sizes;
    rows of 21 blocks of 32 (two chunks of 256 and a short one) or 3 super-blocks."""
    fns = gb.functions(build)
    k = in_features(qtype, 21 if gb.block_shape(qtype)[0] == 32 else 3)
    gen = torch.Generator().manual_seed(int(qtype))
    for n in (1, 5, 7, 37):
        raw = raw_blocks(qtype, n, k, seed=n)
        w = reference(raw, qtype, n, k)
        for m in (1, 2, 3, 5, 8, 16, 17, 40):
            x = torch.randn(m, k, generator=gen)
            y = gb.matmul(x, torch.from_numpy(raw), qtype, n, fns=fns)
            assert y.shape == (m, n)
            assert dot_err(y, x, w) < 1e-5, (n, m)


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_scalar_reference_equals_the_vector_path(build, qtype):
    """Both decoders give `gguf`'s weights bit for bit (d · s · u is exact in fp32; one
    rounding after, in the same order), and both products agree to fp32 rounding."""
    fns = gb.functions(build)
    n, k = 13, in_features(qtype, 9 if gb.block_shape(qtype)[0] == 32 else 2)
    raw = torch.from_numpy(raw_blocks(qtype, n, k, seed=7))
    w = reference(raw.numpy(), qtype, n, k)
    assert torch.equal(gb.dequantize(raw, qtype, n, k, fns=fns), w)
    assert torch.equal(gb.dequantize(raw, qtype, n, k, reference=True, fns=fns), w)
    x = torch.randn(6, k, generator=torch.Generator().manual_seed(1))
    fast = gb.matmul(x, raw, qtype, n, fns=fns)
    slow = gb.matmul(x, raw, qtype, n, reference=True, fns=fns)
    assert dot_err(fast, x, w) < 1e-5 and dot_err(slow, x, w) < 1e-5


@settings(max_examples=40, deadline=None)
@given(qtype=st.sampled_from(TYPES), m=st.integers(1, 40), n=st.integers(1, 41),
       blocks=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_any_shape_matches_dequantize_then_matmul(build, qtype, m, n, blocks, seed):
    if gb.block_shape(qtype)[0] == 256:
        blocks = 1 + blocks % 4
    k = in_features(qtype, blocks)
    raw = raw_blocks(qtype, n, k, seed)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(seed))
    y = gb.matmul(x, torch.from_numpy(raw), qtype, n, fns=gb.functions(build))
    assert dot_err(y, x, reference(raw, qtype, n, k)) < 1e-5


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_the_register_path_equals_the_buffered_path_bit_for_bit(build, qtype):
    """Up to REGISTER_ROWS input rows the weights are decoded into registers, past it into an
    L1 buffer: the same decoded weights multiplied in the same order, so each row of a
    9-row call (buffered) equals that row in a 1-4-row call (registers) exactly, for tiles
    of 4 output rows and the 1-3 rows left over (N = 11), on rows of 1 to 3 blocks."""
    fns = gb.functions(build)
    qk = gb.block_shape(qtype)[0]
    for blocks in (1, 3) if qk == 256 else (1, 9):
        k = qk * blocks
        raw = torch.from_numpy(raw_blocks(qtype, 11, k, seed=blocks))
        x = torch.randn(9, k, generator=torch.Generator().manual_seed(blocks))
        batch = gb.matmul(x, raw, qtype, 11, fns=fns)
        for m in range(1, gb.REGISTER_ROWS + 1):
            for at in range(0, 9 - m + 1, m):
                assert torch.equal(gb.matmul(x[at:at + m], raw, qtype, 11, fns=fns),
                                   batch[at:at + m]), (blocks, m, at)


def test_the_kernel_refuses_what_it_does_not_cover():
    x = torch.randn(1, 64)
    assert gb.matmul(x, torch.zeros(2, 64 * 2, dtype=torch.uint8), QT.BF16, 2) is None
    assert gb.matmul(x.double(), torch.zeros(2, 68, dtype=torch.uint8), QT.Q8_0, 2) is None
    with pytest.raises(ValueError, match="do not hold"):
        gb.matmul(x, torch.zeros(2, 60, dtype=torch.uint8), QT.Q8_0, 2)
    with pytest.raises(ValueError, match="whole blocks"):
        gb.row_bytes(QT.Q4_K, 640)


# ---- GGUFLinear ---------------------------------------------------------------------------

def _layer(qtype: QT, n: int, k: int, seed: int = 0, kernels: str | None = None):
    raw = raw_blocks(qtype, n, k, seed)
    return GGUFLinear(raw, qtype, (n, k), kernels=kernels), reference(raw, qtype, n, k)


@pytest.mark.parametrize("qtype", [QT.Q5_0, QT.Q4_K, QT.Q6_K, QT.Q8_0], ids=lambda t: t.name)
def test_the_torch_path_equals_the_native_path(qtype, monkeypatch):
    """The kernel (up to NATIVE_ROWS rows), native dequantize-then-matmul (more rows) and the
    torch path (`gguf.quants.dequantize`, CHUNK_ROWS rows at a time) agree; a small
    CHUNK_ROWS makes the chunks' edges fall inside the weight."""
    monkeypatch.setattr(gguf_linear, "CHUNK_ROWS", 7)
    k = in_features(qtype, 10 if gb.block_shape(qtype)[0] == 32 else 2)
    native_layer, w = _layer(qtype, 29, k, kernels="native")
    torch_layer = GGUFLinear(native_layer.raw, qtype, (29, k), kernels="torch")
    gen = torch.Generator().manual_seed(2)
    for m in (1, 5, gguf_linear.NATIVE_ROWS, gguf_linear.NATIVE_ROWS + 3):
        x = torch.randn(m, k, generator=gen)
        a, b = native_layer(x), torch_layer(x)
        assert dot_err(a, x, w) < 1e-5 and dot_err(b, x, w) < 1e-5
        scale = x.abs() @ w.abs().t()  # the size fp32 rounding works at, per output
        assert float(((a - b).abs() / scale).max()) < 1e-5
    assert torch.equal(native_layer.weight, w) and torch.equal(torch_layer.weight, w)


def test_turned_off_by_the_environment_runs_the_torch_path(monkeypatch):
    monkeypatch.setattr(native, "_TRIED", False)
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "BUILD_ERROR", None)
    monkeypatch.setenv("INFERLAB_KERNELS", "torch")
    assert not gb.available() and "INFERLAB_KERNELS=torch" in native.BUILD_ERROR
    layer, w = _layer(QT.Q4_K, 9, 512)
    assert layer.kernel_path == "torch"
    x = torch.randn(3, 512)
    assert gb.matmul(x, layer.raw, layer.qtype, 9) is None
    assert dot_err(layer(x), x, w) < 1e-5
    native_layer = GGUFLinear(layer.raw, QT.Q4_K, (9, 512), kernels="native")  # asked, absent
    assert dot_err(native_layer(x), x, w) < 1e-5


def test_a_layer_reads_like_a_linear():
    layer, w = _layer(QT.Q5_0, 11, 96)
    assert (layer.out_features, layer.in_features, layer.dtype) == (11, 96, torch.float32)
    assert layer.nbytes == held_bytes(layer) == 11 * 3 * 22
    assert held_params(layer) == 11 * 96 and layer.native_operand() is None
    x = torch.randn(2, 3, 96)
    assert layer(x).shape == (2, 3, 11)
    assert dot_err(layer(x), x, w) < 1e-5
    ids = torch.tensor([[4, 0], [10, 4]])
    assert torch.equal(layer[ids], w[ids])
    assert torch.equal(layer.dequantize(slice(3, 8)), w[3:8])
    assert torch.equal(dequantize_rows(layer.raw, QT.Q5_0, (11, 96), slice(2, 5)), w[2:5])
    with pytest.raises(ValueError, match="features"):
        layer(torch.randn(1, 64))
    with pytest.raises(ModelLoadError, match="do not hold"):
        GGUFLinear(layer.raw[:5], QT.Q5_0, (11, 96))
    with pytest.raises(ModelLoadError, match="unknown GGML type"):
        GGUFLinear(layer.raw, 99, (11, 96))


def test_a_batch_equals_its_rows_alone():
    """Row r of a 9-row call is the 1-row call of row r: tiles of rows change nothing."""
    layer, _ = _layer(QT.Q4_K, 70, 512)
    x = torch.randn(9, 512)
    alone = torch.cat([layer(x[r:r + 1]) for r in range(9)])
    assert torch.allclose(layer(x), alone, rtol=1e-6, atol=1e-6)


# ---- a real file, read in place -----------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2() -> GGUFReader:
    try:
        return GGUFReader(smollm2_gguf_path())
    except ValueError as e:
        pytest.skip(str(e))


def _tensor(reader: GGUFReader, name: str):
    return next(t for t in reader.tensors if t.name == name)


@pytest.mark.parametrize("name", ["token_embd.weight", "blk.0.ffn_gate.weight",
                                  "blk.0.ffn_down.weight"])
def test_smollm2_tensors_read_in_place(smollm2, name):
    """SmolLM2's Q8_0 embedding (also its output head) and Q4_1 linears, from the file."""
    t = _tensor(smollm2, name)
    layer = GGUFLinear.from_reader_tensor(t)
    assert layer.qtype in (QT.Q8_0, QT.Q4_1)
    w = torch.from_numpy(dequantize(t.data, t.tensor_type))
    assert w.shape == (layer.out_features, layer.in_features)
    x = torch.randn(5, layer.in_features, generator=torch.Generator().manual_seed(0))
    assert dot_err(layer(x), x, w) < 1e-5
    assert dot_err(layer(x[:1]), x[:1], w) < 1e-5
    ids = torch.tensor([0, 17, layer.out_features - 1])
    assert torch.equal(layer[ids], w[ids])


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_the_codes_are_the_files_memory_map_not_a_copy():
    """The layer's codes lie inside the reader's memory map, and a product over the 30 MB
    embedding grows the process's anonymous memory by far less than the codes: their pages
    are the file's (RssFile grows instead, by what the product read)."""
    reader = GGUFReader(smollm2_gguf_path())  # a mapping of our own: its pages start unread
    t = _tensor(reader, "token_embd.weight")
    start, size = reader.data.ctypes.data, reader.data.nbytes
    anon0, file0 = _status_kib("RssAnon"), _status_kib("RssFile")
    layer = GGUFLinear.from_reader_tensor(t)
    at = layer.raw.untyped_storage().data_ptr()
    assert at == layer.raw.data_ptr() == t.data.ctypes.data
    assert start <= at and at + layer.nbytes <= start + size
    x = torch.randn(1, layer.in_features)
    layer(x)
    anon_kib = _status_kib("RssAnon") - anon0
    file_kib = _status_kib("RssFile") - file0
    assert anon_kib * 1024 < layer.nbytes / 4, anon_kib
    assert file_kib * 1024 > layer.nbytes * 0.9, file_kib
    assert as_uint8_tensor(t.data).data_ptr() == at  # the helper itself never copies
