"""`GGUFLinear`: a bias-free linear layer over one GGUF tensor's raw block bytes, multiplied
from its codes, never copied and never expanded whole.

    layer = GGUFLinear.from_reader_tensor(reader.tensors[i])   # a view of the file's mmap
    y = layer(x)                                               # x [..., in] -> [..., out]

The codes are the file's bytes [out, row_bytes] exactly as GGUF stores them (Q4_0 ... Q6_K;
`engines.kernels.ggml_blocks` lists the blocks), held as a torch uint8 view of the reader's
numpy memory map: pages are read from the page cache when a product touches them and count
as file-backed memory, so a model of many GB costs its codes' page cache, not a copy.

A call runs, by the rows of x:

    up to NATIVE_ROWS fp32 rows   the native kernel (`ggml_blocks.matmul`): each block
                                  dequantized in registers and multiplied by 1-4 rows, or
                                  into L1 and multiplied by 16 rows
    more rows                     CHUNK_ROWS output rows dequantized at a time by the native
                                  decoders, then torch's matmul (a prefill: GEMM-bound)
    no library, kernels="torch",  the torch path: CHUNK_ROWS rows at a time dequantized by
    another dtype or device       `gguf.quants.dequantize` and multiplied

Every path computes in fp32 from the same dequantized weights (`gguf.quants.dequantize`'s,
bit for bit), so they differ only in summation order. One more path is there when asked for
(`activations="q8"`, or INFERLAB_GGUF_ACTIVATIONS=q8 for the process): up to Q8_ROWS rows, x
rounded per 32 values to int8 and integer dot products per block (`ggml_blocks.matmul_q8`),
llama.cpp's numerics: y then differs from the fp32 paths by x's rounding (~1e-3 of
sum |x| |ŵ|). It is faster: Gemma 3 270M's decode, 1 thread, AVX-512 EPYC, measured 0.77x
llama.cpp's tokens/s in fp32 and 0.90x in q8 in one run (its one-row products 1.4-2.2x
faster quantized: the lm_head streams at ~26 GB/s instead of ~19, Q6_K halves).
It is not the default: fp32 is what the model's checks hold to (transformers' logits, the
paths' equality to summation order, a row's result whatever its batch), and q8 changes the
model's numbers as llama.cpp's kernels do.

The layer offers what a model reads of a `Linear` (`__call__`, `weight`, `dtype`, `nbytes`,
`out_features`, `in_features`, `native_operand`), so a model can hold one wherever it holds a
`Linear`.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

from inferlab.engines.kernels import ggml_blocks, lowbit, resolve
from inferlab.engines.kernels.decoder import NativeOperand
from inferlab.engines.model.errors import ModelLoadError

NATIVE_ROWS = 2048
"""Up to this many input rows a call runs the block kernel (the codes decoded once per
`ggml_blocks.MAX_ROWS` rows); more run dequantize-then-matmul, CHUNK_ROWS output rows at a
time. Measured on Gemma 3 270M's Q8_0 262,144×640 lm_head and its Q6_K, Q5_0 and Q4_K layer
linears (AVX-512 EPYC, quiet, best of 2-5): the kernel is faster at every row count up to
2,048 — 1 thread: lm_head 1.73× at 48 rows, 1.53× at 128, 1.21× at 512; the layer linears
1.7-1.9× at 48, 1.2-1.3× at 512, 1.01-1.31× at 2,048; 2 threads alike (lm_head 2.14× at 48,
1.22× at 512; 1.00-1.22× at 2,048). It was 48 (an older kernel's crossover), which sent a
batch of 128 sequences' logits through the dequantizing path: 1.75× slower on 2 threads."""
CHUNK_ROWS = 256
"""Output rows dequantized at a time where a call does not run the block kernel."""
ACTIVATIONS = ("fp32", "q8")
"""What a layer multiplies its codes by: x as given (fp32, the default), or x rounded per 32
values to int8 up to Q8_ROWS rows (llama.cpp's way)."""
Q8_ROWS = 4
"""Up to this many rows a "q8" layer quantizes x (one pass over the codes serves 4 rows);
more rows run the fp32 kernel, which decodes each block once for up to 16 of them. Gemma 3's
decode shapes summed, 1 thread, AVX-512 EPYC, fp32 -> q8: 2 rows 22.1 -> 17.5 ms, 3 rows
25.7 -> 23.7, 4 rows 29.9 -> 29.8 (the Q8_0 lm_head 15.9 -> 16.7, the layers faster)."""


def default_activations() -> str:
    """The process's default for `GGUFLinear(activations=None)`: INFERLAB_GGUF_ACTIVATIONS
    (fp32 unless set to q8)."""
    value = os.environ.get("INFERLAB_GGUF_ACTIVATIONS", "fp32")
    if value not in ACTIVATIONS:
        raise ValueError(f"INFERLAB_GGUF_ACTIVATIONS must be one of {ACTIVATIONS}, got {value!r}")
    return value


def as_uint8_tensor(arr: np.ndarray) -> torch.Tensor:
    """A torch uint8 tensor over `arr`'s memory, without a copy (a read-only memory map too).

    torch has no read-only tensors: `torch.from_numpy` of a non-writable array shares its
    memory all the same, after a warning that writing would be undefined. Nothing here writes
    to the codes (the kernels take them as const), so the warning is silenced for this one
    call; a write to such a tensor would fault, as the map is PROT_READ."""
    arr = np.asarray(arr).view(np.uint8)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(arr)


def _as_qtype(qtype) -> GGMLQuantizationType:
    try:
        return GGMLQuantizationType(qtype)
    except ValueError:
        raise ModelLoadError(f"unknown GGML type {qtype!r}") from None


def _numpy_rows(raw: torch.Tensor | np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
    if isinstance(raw, torch.Tensor):
        raw = raw.numpy()  # shares the memory (the kernels' operand is the same bytes)
    return np.asarray(raw[rows])


def dequantize_rows(raw: torch.Tensor | np.ndarray, qtype, shape: tuple[int, int],
                    rows: slice = slice(None)) -> torch.Tensor:
    """Rows `rows` of the [out, in] tensor `shape` whose block bytes are `raw` ([out,
    row_bytes] or flat, uint8), as fp32 [len(rows), in], by `gguf.quants.dequantize` (the
    reference every path here is held to). Only those rows' bytes are read."""
    qtype = _as_qtype(qtype)
    out_features, in_features = shape
    width = ggml_blocks.row_bytes(qtype, in_features)
    raw = raw.reshape(out_features, width)
    part = _numpy_rows(raw, rows)
    with np.errstate(all="ignore"):  # a NaN or inf scale dequantizes as what it is
        w = gguf_dequantize(part, qtype)
    return torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32).reshape(-1, in_features))


class GGUFLinear:
    """y = x · ŵᵀ with ŵ [out, in] the GGUF tensor whose raw block bytes are `raw` (uint8,
    [out, row_bytes] or flat, held as given: a view stays a view) of type `qtype` (a
    `GGMLQuantizationType` or its id). `kernels` ("native", "torch"; None or "auto": the
    process default) is the path it runs, as for `Linear`; `activations` ("fp32", "q8"; None:
    `default_activations()`) whether decode rows are quantized (native path only)."""

    __slots__ = ("raw", "qtype", "out_features", "in_features", "kernel_path", "activations")

    def __init__(self, raw: torch.Tensor | np.ndarray, qtype, shape: tuple[int, int],
                 kernels: str | None = None, activations: str | None = None) -> None:
        self.qtype = _as_qtype(qtype)
        self.out_features, self.in_features = (int(s) for s in shape)
        width = ggml_blocks.row_bytes(self.qtype, self.in_features)
        if isinstance(raw, np.ndarray):
            raw = as_uint8_tensor(raw)
        if raw.dtype != torch.uint8 or not raw.is_contiguous():
            raise ModelLoadError(f"raw must be contiguous uint8 block bytes, got {raw.dtype}"
                             f"{'' if raw.is_contiguous() else ' (not contiguous)'}")
        if raw.numel() != self.out_features * width:
            raise ModelLoadError(f"{raw.numel()} bytes do not hold a [{self.out_features}, "
                             f"{self.in_features}] {self.qtype.name} tensor "
                             f"({self.out_features} rows of {width} bytes)")
        self.raw = raw.view(self.out_features, width)
        self.kernel_path = resolve(kernels)
        self.activations = default_activations() if activations is None else activations
        if self.activations not in ACTIVATIONS:
            raise ValueError(f"activations must be one of {ACTIVATIONS}, got {activations!r}")

    @classmethod
    def from_reader_tensor(cls, tensor, kernels: str | None = None) -> GGUFLinear:
        """The layer over a `gguf.GGUFReader` tensor record's bytes (a view of its memory
        map). GGUF lists a shape ne0 (in) first; the layer is [out, in]."""
        in_features, *rest = (int(n) for n in tensor.shape)
        out_features = int(np.prod(rest)) if rest else 1
        return cls(tensor.data, tensor.tensor_type, (out_features, in_features), kernels)

    # ---- what a model reads of a linear ------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        """fp32: what `weight` holds and the products compute in (the codes are `qtype`)."""
        return torch.float32

    @property
    def nbytes(self) -> int:
        """Bytes of the codes (blocks with their scales), as the file stores them."""
        return self.raw.numel()

    @property
    def weight(self) -> torch.Tensor:
        """The whole weight dequantized to fp32 [out, in] (a new tensor, for inspection)."""
        return self.dequantize()

    def native_operand(self) -> NativeOperand | None:
        """None: the one-call decoder (`engines.kernels.decoder`) does not read GGUF blocks;
        a model holding this layer runs its steps per op."""
        return None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x has {x.shape[-1]} features, the layer takes {self.in_features}")
        rows = x.reshape(-1, self.in_features)
        y = None
        if self._native() and 0 < rows.shape[0] <= NATIVE_ROWS:
            if self.activations == "q8" and rows.shape[0] <= Q8_ROWS:
                y = ggml_blocks.matmul_q8(rows, self.raw, self.qtype, self.out_features)
            else:
                y = ggml_blocks.matmul(rows, self.raw, self.qtype, self.out_features)
        if y is None:
            y = self._by_rows(rows)
        return y.reshape(*x.shape[:-1], self.out_features)

    # ---- dequantized rows --------------------------------------------------------------------

    def dequantize(self, rows: slice = slice(None)) -> torch.Tensor:
        """fp32 weight rows (all by default): the native decoders where they run (bit for bit
        `gguf.quants.dequantize`'s values), else `gguf.quants.dequantize` itself."""
        a, b, step = rows.indices(self.out_features)
        if step == 1 and self._native():
            w = ggml_blocks.dequantize(self.raw[a:b], self.qtype, max(b - a, 0),
                                       self.in_features)
            if w is not None:
                return w
        return dequantize_rows(self.raw, self.qtype, (self.out_features, self.in_features),
                               rows)

    def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` dequantized (the layer read as an embedding table): only their bytes."""
        ids = torch.as_tensor(ids)
        picked = self.raw[ids.reshape(-1).long()]  # the selected rows' bytes (small copy)
        flat = None
        if self._native():
            flat = ggml_blocks.dequantize(picked.contiguous(), self.qtype, picked.shape[0],
                                          self.in_features)
        if flat is None:
            flat = dequantize_rows(picked, self.qtype, (picked.shape[0], self.in_features))
        return flat.reshape(*ids.shape, self.in_features)

    def _native(self) -> bool:
        return self.kernel_path == "native" and ggml_blocks.available() and \
            self.qtype in ggml_blocks.COVERED

    def _by_rows(self, x: torch.Tensor) -> torch.Tensor:
        """x [M, in] · ŵᵀ with CHUNK_ROWS rows of the weight dequantized at a time (the
        low-bit layers' torch path, `lowbit.torch_path`)."""
        return lowbit.torch_path(self, x, CHUNK_ROWS)
