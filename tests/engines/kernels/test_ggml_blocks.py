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


# ---- the quantized-activation path ----------------------------------------------------------

def quantize_x_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [M, K] float32 per 32 values, as the C rounds it: dx = amax / 127, q = rint(x · (127 /
    amax)) (0 where amax is 0), and the sums of q per 16, all in float32 / int."""
    m = x.shape[0]
    xb = x.reshape(m, -1, 32).astype(np.float32)
    amax = np.abs(xb).max(-1)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint(xb * inv[..., None]).astype(np.int8)
    return (q.reshape(m, -1), (amax / np.float32(127)).astype(np.float32),
            q.reshape(m, -1, 16).sum(-1, dtype=np.int32))


def dyadic_blocks(qtype: QT, n: int, k: int, seed: int) -> np.ndarray:
    """[n, row_bytes] random codes whose fp16 scales (d, m, dmin) are powers of two: every
    decoded weight, and every product the quantized path forms from it, is then exact."""
    rng = np.random.default_rng(seed)
    qk, nbytes = gb.block_shape(qtype)
    raw = rng.integers(0, 256, (n, k // qk, nbytes), dtype=np.uint8)
    fields = FP16_FIELDS.get(qtype, (0, 2) if qtype in (QT.Q4_1, QT.Q5_1) else (0,))
    for at in fields:
        scale = (2.0 ** rng.integers(-9, -7, (n, k // qk))).astype(np.float16)
        raw[..., at:at + 2] = scale.view(np.uint8).reshape(n, k // qk, 2)
    return raw.reshape(n, -1)


def dyadic_x(m: int, k: int, seed: int) -> torch.Tensor:
    """x whose every block of 32 has its largest magnitude 127 · 2^-7: dx = 2^-7 and q = x ·
    2^7 exactly (integers in [-127, 127])."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-127, 128, (m, k // 32, 32))
    q[..., rng.integers(0, 32)] = 127 * rng.choice([-1, 1], (m, k // 32))
    return torch.from_numpy((q * 2.0 ** -7).astype(np.float32).reshape(m, k))


def test_the_q8_kernels_each_build_runs(build):
    """The portable build runs the scalar reference only; AVX2 builds add maddubs, and VNNI
    where the CPU has it (the fastest last)."""
    kernels = gb.q8_kernels(gb.functions(build))
    assert kernels[0] == "scalar"
    assert ("avx2" in kernels) == (build.isa != "portable")
    assert ("vnni" in kernels) == (build.isa != "portable" and {
        "avx512_vnni", "avx512vl", "avx512bw"} <= native.host_flags())


def test_x_is_quantized_as_the_numpy_reference_says(build):
    """Bit for bit: float32 amax / 127 and 127 / amax, one product, round half to even; a
    block of zeros gives codes 0 and dx 0."""
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(4)) * 3
    x[1, 32:64] = 0
    x[2, :32] = torch.arange(32) - 15.5  # halves: x · 127 / amax hits ties
    q, dx, s16 = gb.quantize_x(x, gb.functions(build))
    rq, rdx, rs16 = quantize_x_reference(x.numpy())
    assert np.array_equal(q.numpy(), rq) and np.array_equal(dx.numpy(), rdx)
    assert np.array_equal(s16.numpy(), rs16)
    assert not q[1, 32:64].any() and dx[1, 1] == 0


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_q8_integer_sums_are_exact(build, qtype):
    """With power-of-two scales in the weights and x at dx = 2^-7, every product and sum the
    quantized path forms is exact in fp32, so each kernel (scalar, AVX2, VNNI) must give the
    float64 product of x's codes with `gguf`'s weights exactly: one integer off in any block
    would show. 1-6 rows (past the 4 one pass serves), tile remainders, 1-9 blocks."""
    fns = gb.functions(build)
    qk = gb.block_shape(qtype)[0]
    for blocks, n in ((1, 5), (3, 9)) if qk == 256 else ((1, 5), (9, 7)):
        k = qk * blocks
        raw = dyadic_blocks(qtype, n, k, seed=blocks)
        w = reference(raw, qtype, n, k).double()
        for m in (1, 2, 4, 6):
            x = dyadic_x(m, k, seed=m)
            expected = (x.double() @ w.t()).float()
            assert torch.equal(x.double().float(), x)  # x is its own codes times 2^-7
            for kernel in gb.q8_kernels(fns):
                y = gb.matmul_q8(x, torch.from_numpy(raw), qtype, n, kernel=kernel, fns=fns)
                assert torch.equal(y, expected), (kernel, blocks, m)


def q8_bound(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """|y_q8 - y_fp32| <= sum over blocks of dx / 2 · sum |ŵ| (x's rounding: each code within
    half a step of x · 127 / amax) per output, [M, N]."""
    _, dx, _ = quantize_x_reference(x.numpy())
    half_step = torch.from_numpy(dx).double().repeat_interleave(32, dim=1) / 2
    return half_step @ w.abs().double().t()


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_q8_path_on_random_data(build, qtype):
    """Random codes and x: each vector kernel agrees with the scalar reference to fp32
    rounding (1e-6 of sum |dx q ŵ|), with x's codes times `gguf`'s weights in float64 too,
    and with the fp32 path within x's rounding bound (at 1.0001 of it, plus fp32 rounding)."""
    fns = gb.functions(build)
    qk = gb.block_shape(qtype)[0]
    k, n = qk * (20 if qk == 32 else 3), 11
    raw = torch.from_numpy(raw_blocks(qtype, n, k, seed=5))
    w = reference(raw.numpy(), qtype, n, k)
    for m in (1, 3, 5):
        x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
        q, dx, _ = gb.quantize_x(x, fns)
        xq = (q.double().reshape(m, -1, 32) * dx.double()[..., None]).reshape(m, k)
        exact, scale = xq @ w.double().t(), xq.abs() @ w.double().abs().t()
        y_fp32 = gb.matmul(x, raw, qtype, n, fns=fns)
        for kernel in gb.q8_kernels(fns):
            y = gb.matmul_q8(x, raw, qtype, n, kernel=kernel, fns=fns).double()
            assert float(((y - exact).abs() / scale).max()) < 1e-6, (kernel, m)
            slack = 1e-5 * (x.abs().double() @ w.abs().double().t())
            assert bool(((y - y_fp32.double()).abs() <= 1.0001 * q8_bound(x, w) + slack).all())


def test_q8_refuses_a_kernel_not_run_here():
    portable = gb.functions(native.build("portable"))
    raw = torch.from_numpy(raw_blocks(QT.Q8_0, 4, 64, seed=0))
    with pytest.raises(ValueError, match="does not run here"):
        gb.matmul_q8(torch.randn(1, 64), raw, QT.Q8_0, 4, kernel="avx2", fns=portable)
    with pytest.raises(ValueError, match="whole blocks of 32"):
        gb.quantize_x(torch.randn(1, 48), portable)


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


def test_q8_activations_are_asked_for_and_run_decode_rows_only(monkeypatch):
    """activations="q8" (or INFERLAB_GGUF_ACTIVATIONS=q8): up to Q8_ROWS rows run the
    quantized kernel (llama.cpp's numerics, within x's rounding of the fp32 path), more rows
    the fp32 kernel bit for bit; fp32 stays the default."""
    raw = raw_blocks(QT.Q5_0, 19, 640, seed=3)
    w = reference(raw, QT.Q5_0, 19, 640)
    exact = GGUFLinear(raw, QT.Q5_0, (19, 640), kernels="native")
    assert exact.activations == "fp32"
    q8 = GGUFLinear(raw, QT.Q5_0, (19, 640), kernels="native", activations="q8")
    x = torch.randn(gguf_linear.Q8_ROWS + 1, 640, generator=torch.Generator().manual_seed(0))
    one = x[:gguf_linear.Q8_ROWS]
    assert torch.equal(q8(one), gb.matmul_q8(one, q8.raw, QT.Q5_0, 19))
    assert not torch.equal(q8(one), exact(one))
    assert bool(((q8(one) - exact(one)).abs() <= 1.0001 * q8_bound(one, w) + 1e-5).all())
    assert torch.equal(q8(x), exact(x))
    monkeypatch.setenv("INFERLAB_GGUF_ACTIVATIONS", "q8")
    assert GGUFLinear(raw, QT.Q5_0, (19, 640)).activations == "q8"
    monkeypatch.setenv("INFERLAB_GGUF_ACTIVATIONS", "int4")
    with pytest.raises(ValueError, match="INFERLAB_GGUF_ACTIVATIONS"):
        GGUFLinear(raw, QT.Q5_0, (19, 640))
    with pytest.raises(ValueError, match="activations must be"):
        GGUFLinear(raw, QT.Q5_0, (19, 640), activations="bf16")


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
