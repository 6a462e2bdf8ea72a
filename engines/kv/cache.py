"""`PagedKVCache`: the K/V tensors of every layer, laid out by physical block.

Per layer, `k[layer]` and `v[layer]` have shape [n_kv_heads, n_blocks, block_size, d_head]
(head-major); a token's K/V lives at flat slot `block_id * block_size + offset` of every head,
the slot a `BlockManager`'s `slot_mapping` names. Head-major because attention reads one head's
keys as a [keys, d_head] matrix: gathering a sequence's blocks from one head's pool yields
exactly that, contiguous, with no transpose (`gather`). All layers sit in one allocation so a
copy-on-write copies a block in every layer and head with one indexing op.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from inferlab.engines.dtypes import torch_dtype
from inferlab.engines.kernels.kv_view import NativeKV
from inferlab.engines.kv.block_pool import DEFAULT_BLOCK_SIZE, blocks_for_budget


def kv_bytes_per_slot(n_layers: int, n_kv_heads: int, d_head: int, bytes_per_element: float) -> int:
    """K and V of one token over all layers:

        bytes_per_slot = 2 * n_layers * n_kv_heads * d_head * bytes_per_element
    """
    return int(2 * n_layers * n_kv_heads * d_head * bytes_per_element)


def kv_bytes_per_block(
    n_layers: int, block_size: int, n_kv_heads: int, d_head: int, bytes_per_element: float
) -> int:
    """bytes_per_block = block_size * bytes_per_slot
    = 2 * n_layers * block_size * n_kv_heads * d_head * bytes_per_element."""
    return block_size * kv_bytes_per_slot(n_layers, n_kv_heads, d_head, bytes_per_element)


def _as_torch_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    return torch_dtype(dtype)


class PagedKVCache:
    """K/V storage for `n_blocks` blocks of `block_size` tokens in each of `n_layers` layers.

    Fresh storage is zero, so never-written slots that attention masks out stay finite.
    """

    def __init__(
        self,
        n_layers: int,
        n_blocks: int,
        block_size: int = DEFAULT_BLOCK_SIZE,
        n_kv_heads: int = 1,
        d_head: int = 64,
        dtype: torch.dtype | str = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        for name, value in (
            ("n_layers", n_layers),
            ("n_blocks", n_blocks),
            ("block_size", block_size),
            ("n_kv_heads", n_kv_heads),
            ("d_head", d_head),
        ):
            if value < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        self.n_layers = n_layers
        self.n_blocks = n_blocks
        self.block_size = block_size
        self.n_kv_heads = n_kv_heads
        self.d_head = d_head
        self.dtype = _as_torch_dtype(dtype)
        self.device = torch.device(device)
        self.kv = torch.zeros(
            (n_layers, 2, n_kv_heads, n_blocks, block_size, d_head),
            dtype=self.dtype,
            device=self.device,
        )
        """[n_layers, 2 (K, V), n_kv_heads, n_blocks, block_size, d_head]: all of it."""
        self.k = [self.kv[i, 0] for i in range(n_layers)]
        self.v = [self.kv[i, 1] for i in range(n_layers)]
        self._gather_kv: torch.Tensor | None = None  # gather()'s workspace, reused
        self._native: list = []  # native_view()'s record, once made

    def native_view(self) -> NativeKV | None:
        """The store as the native kernels read it: fp32 values (kind "f32"), or None where
        they read no store of this dtype (bf16, fp16: torch's attention and `write` run)."""
        if self.kv.dtype != torch.float32:
            return None
        if not self._native:
            self._native.append(NativeKV("f32", self.kv, None, self.dtype, self.device))
        return self._native[0]

    @classmethod
    def from_budget(
        cls,
        budget_bytes: int,
        n_layers: int,
        block_size: int = DEFAULT_BLOCK_SIZE,
        n_kv_heads: int = 1,
        d_head: int = 64,
        dtype: torch.dtype | str = torch.float32,
        device: torch.device | str = "cpu",
    ) -> PagedKVCache:
        """As many blocks as `budget_bytes` holds (`blocks_for_budget`)."""
        dt = _as_torch_dtype(dtype)
        per_block = kv_bytes_per_block(
            n_layers, block_size, n_kv_heads, d_head, torch.empty((), dtype=dt).element_size()
        )
        n_blocks = blocks_for_budget(budget_bytes, per_block)
        if n_blocks < 1:
            raise ValueError(
                f"a KV budget of {budget_bytes} bytes holds no block of {per_block} bytes"
            )
        return cls(n_layers, n_blocks, block_size, n_kv_heads, d_head, dt, device)

    @property
    def bytes_per_slot(self) -> int:
        return kv_bytes_per_slot(
            self.n_layers, self.n_kv_heads, self.d_head, self.kv.element_size()
        )

    @property
    def bytes_per_block(self) -> int:
        return self.block_size * self.bytes_per_slot

    @property
    def total_bytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store new tokens' K/V ([n_tokens, n_kv_heads, d_head]) at flat `slots` [n_tokens]."""
        slots = slots.to(device=self.device, dtype=torch.int64)
        k_store, v_store = self.slot_stores(layer)
        k_store.index_copy_(1, slots, k.to(self.dtype).transpose(0, 1))
        v_store.index_copy_(1, slots, v.to(self.dtype).transpose(0, 1))

    def slot_stores(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer `layer`'s K and V as [n_kv_heads, n_slots, d_head] views (flat slots)."""
        shape = (self.n_kv_heads, self.n_blocks * self.block_size, self.d_head)
        return self.k[layer].view(shape), self.v[layer].view(shape)

    def copy_blocks(self, pairs: Iterable[tuple[int, int]],
                    layers: Sequence[int] | None = None) -> None:
        """Copy whole blocks src -> dst in every layer (or only `layers`: one layer group's,
        whose blocks are its own) and head (copy-on-write after a fork).

        No dst may also be a src in the same call (a CoW dst is always a fresh block).
        """
        pairs = list(pairs)
        if not pairs:
            return
        src = torch.tensor([p[0] for p in pairs], dtype=torch.int64, device=self.device)
        dst = torch.tensor([p[1] for p in pairs], dtype=torch.int64, device=self.device)
        if layers is None:
            self.kv.index_copy_(3, dst, self.kv.index_select(3, src))
            return
        for layer in layers:  # [2, n_kv_heads, n_blocks, block_size, d_head]
            self.kv[layer].index_copy_(2, dst, self.kv[layer].index_select(2, src))

    def copy_slots(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy single tokens' K/V from flat slots `src` to `dst` ([n] int each), in every layer
        and head: a token tree's accepted nodes moved to the positions they end up at.

        The sources are read before any destination is written, so the two may overlap.
        """
        src = torch.as_tensor(src, dtype=torch.int64).to(self.device)
        dst = torch.as_tensor(dst, dtype=torch.int64).to(self.device)
        if src.shape != dst.shape or src.dim() != 1:
            raise ValueError(f"src and dst must be two 1-d slot lists of one length, got "
                             f"{tuple(src.shape)} and {tuple(dst.shape)}")
        flat = self.kv.view(self.n_layers, 2, self.n_kv_heads, -1, self.d_head)
        flat.index_copy_(3, dst, flat.index_select(3, src))

    def block_rows(self, block_ids: torch.Tensor) -> torch.Tensor:
        """Where the K and V of `block_ids` ([n] int) lie in one layer, for `gather`.

        A layer viewed as rows of one block of one head, [2 * n_kv_heads * n_blocks,
        block_size * d_head], holds block b's K of head h at row h * n_blocks + b and its V at
        (n_kv_heads + h) * n_blocks + b. Returns those rows, int64 [2 * n_kv_heads * n], all K
        then all V, each head's n blocks in order. The same rows serve every layer: a plan
        computes them once per step.
        """
        ids = block_ids.reshape(-1).to(device=self.device, dtype=torch.int64)
        first = torch.arange(2 * self.n_kv_heads, device=self.device) * self.n_blocks
        return (first[:, None] + ids[None, :]).reshape(-1)

    def gather(self, layer: int, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the blocks whose `block_rows` are `rows`: two [n_kv_heads, n, block_size,
        d_head], so each head's n blocks of keys are one contiguous [n * block_size, d_head].

        One `index_select` copies whole blocks (parallel over rows on CPU) into a workspace
        the next `gather` overwrites (reused, so repeated gathers touch no fresh memory);
        use the results first.
        """
        n_rows = rows.numel()
        row = self.block_size * self.d_head
        if self._gather_kv is None or self._gather_kv.numel() < n_rows * row:
            self._gather_kv = torch.empty(n_rows * row, dtype=self.dtype, device=self.device)
        flat = self.kv[layer].view(-1, row)
        out = self._gather_kv[: n_rows * row].view(n_rows, row)
        torch.index_select(flat, 0, rows, out=out)
        kv = out.view(2, self.n_kv_heads, -1, self.block_size, self.d_head)
        return kv[0], kv[1]


KV_QUANT_DTYPES = {"int8": (torch.int8, 127.0), "fp8-e4m3": (torch.float8_e4m3fn, 448.0)}
"""Quantized K/V storage: code dtype and the largest code magnitude (INT8 127, E4M3 448)."""
KV_SCALE_BYTES = 4
"""One fp32 scale per token per head, for K and for V."""


def quantized_kv_bytes_per_slot(n_layers: int, n_kv_heads: int, d_head: int,
                                code_bytes: float = 1, scale_bytes: int = KV_SCALE_BYTES) -> int:
    """K and V of one token over all layers when stored as codes plus a per-head scale:

        bytes_per_slot = 2 * n_layers * n_kv_heads * (d_head * code_bytes + scale_bytes)

    (SmolLM2, d_head 64, INT8: 68 bytes per head and token against fp32's 256: 0.27x.)
    """
    return int(2 * n_layers * n_kv_heads * (d_head * code_bytes + scale_bytes))


class QuantizedPagedKVCache(PagedKVCache):
    """A `PagedKVCache` that stores K/V as INT8 or FP8 E4M3 codes with one fp32 scale per
    token per head, and hands out dequantized K/V (in `dtype`) from `gather`:

        s = max|x| / q_max over the head's d_head values (1 where they are all 0)
        INT8: c = clamp(round(x / s), -127, 127)    E4M3: c = fp8(x / s)    x̂ = s c

    Block layout, slot mapping, `block_rows` and copy-on-write are the parent's; only the
    element type and the scales differ. `dtype` stays the compute dtype attention sees.
    """

    def __init__(self, n_layers: int, n_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE,
                 n_kv_heads: int = 1, d_head: int = 64, dtype: torch.dtype | str = torch.float32,
                 device: torch.device | str = "cpu", kv_dtype: str = "int8") -> None:
        if kv_dtype not in KV_QUANT_DTYPES:
            raise ValueError(f"kv_dtype must be one of {', '.join(KV_QUANT_DTYPES)}, got "
                             f"{kv_dtype!r}")
        self.kv_dtype = kv_dtype
        self.code_dtype, self.q_max = KV_QUANT_DTYPES[kv_dtype]
        compute = _as_torch_dtype(dtype)
        super().__init__(n_layers, n_blocks, block_size, n_kv_heads, d_head, self.code_dtype,
                         device)
        self.dtype = compute
        self.scales = torch.ones((n_layers, 2, n_kv_heads, n_blocks, block_size),
                                 dtype=torch.float32, device=self.device)
        """[n_layers, 2, n_kv_heads, n_blocks, block_size]: s of every stored token and head."""
        self._gather_scales: torch.Tensor | None = None

    def native_view(self) -> NativeKV:
        """The codes (kind `kv_dtype`: "int8" or "fp8-e4m3") with their per-token scales, as
        the native kernels read them."""
        if not self._native:
            self._native.append(NativeKV(self.kv_dtype, self.kv, self.scales, self.dtype,
                                         self.device))
        return self._native[0]

    @property
    def bytes_per_slot(self) -> int:
        return quantized_kv_bytes_per_slot(self.n_layers, self.n_kv_heads, self.d_head,
                                           self.kv.element_size())

    @property
    def total_bytes(self) -> int:
        return self.kv.numel() * self.kv.element_size() + self.scales.numel() * KV_SCALE_BYTES

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [..., d_head] -> (codes, scales [...])."""
        x = x.to(torch.float32)
        amax = x.abs().amax(dim=-1)
        s = torch.where(amax > 0, amax / self.q_max, torch.ones_like(amax))
        y = x / s[..., None]
        if self.code_dtype == torch.int8:
            return torch.round(y).clamp(-127, 127).to(torch.int8), s
        return y.clamp(-self.q_max, self.q_max).to(self.code_dtype), s

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        slots = slots.to(device=self.device, dtype=torch.int64)
        stores, scale_stores = self.code_stores(layer)
        for x, store, scale_store in zip((k, v), stores, scale_stores, strict=True):
            codes, s = self.quantize(x.transpose(0, 1))  # [Hkv, T, D], [Hkv, T]
            # index_copy_ has no fp8 kernel: copy the codes' bytes
            store.view(torch.uint8).index_copy_(1, slots, codes.view(torch.uint8))
            scale_store.index_copy_(1, slots, s)

    def code_stores(self, layer: int) -> tuple[tuple[torch.Tensor, torch.Tensor],
                                                 tuple[torch.Tensor, torch.Tensor]]:
        """Layer `layer`'s ((K codes, V codes) [n_kv_heads, n_slots, d_head],
        (K scales, V scales) [n_kv_heads, n_slots]) as views over flat slots."""
        n_slots = self.n_blocks * self.block_size
        codes = self.kv[layer].view(2, self.n_kv_heads, n_slots, self.d_head)
        scales = self.scales[layer].view(2, self.n_kv_heads, n_slots)
        return (codes[0], codes[1]), (scales[0], scales[1])

    def copy_blocks(self, pairs: Iterable[tuple[int, int]],
                    layers: Sequence[int] | None = None) -> None:
        pairs = list(pairs)
        if not pairs:
            return
        src = torch.tensor([p[0] for p in pairs], dtype=torch.int64, device=self.device)
        dst = torch.tensor([p[1] for p in pairs], dtype=torch.int64, device=self.device)
        codes = self.kv.view(torch.uint8)
        if layers is None:
            codes.index_copy_(3, dst, codes.index_select(3, src))
            self.scales.index_copy_(3, dst, self.scales.index_select(3, src))
            return
        for layer in layers:
            codes[layer].index_copy_(2, dst, codes[layer].index_select(2, src))
            self.scales[layer].index_copy_(2, dst, self.scales[layer].index_select(2, src))

    def copy_slots(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """As `PagedKVCache.copy_slots`: the codes' bytes and the scales."""
        src = torch.as_tensor(src, dtype=torch.int64).to(self.device)
        dst = torch.as_tensor(dst, dtype=torch.int64).to(self.device)
        if src.shape != dst.shape or src.dim() != 1:
            raise ValueError(f"src and dst must be two 1-d slot lists of one length, got "
                             f"{tuple(src.shape)} and {tuple(dst.shape)}")
        codes = self.kv.view(torch.uint8).view(self.n_layers, 2, self.n_kv_heads, -1,
                                               self.d_head)
        codes.index_copy_(3, dst, codes.index_select(3, src))
        scales = self.scales.view(self.n_layers, 2, self.n_kv_heads, -1)
        scales.index_copy_(3, dst, scales.index_select(3, src))

    def gather(self, layer: int, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """As `PagedKVCache.gather`, dequantized to `dtype`: x̂ = s c per token and head."""
        n_rows = rows.numel()
        row = self.block_size * self.d_head
        codes = torch.index_select(self.kv[layer].view(torch.uint8).view(-1, row), 0, rows)
        s = torch.index_select(self.scales[layer].view(-1, self.block_size), 0, rows)
        codes = codes.view(self.code_dtype).view(n_rows, self.block_size, self.d_head)
        if self._gather_kv is None or self._gather_kv.numel() < n_rows * row:
            self._gather_kv = torch.empty(n_rows * row, dtype=self.dtype, device=self.device)
        out = self._gather_kv[: n_rows * row].view(n_rows, self.block_size, self.d_head)
        torch.mul(codes.to(torch.float32), s[..., None], out=out) if self.dtype == torch.float32 \
            else out.copy_(codes.to(torch.float32) * s[..., None])
        kv = out.view(2, self.n_kv_heads, -1, self.block_size, self.d_head)
        return kv[0], kv[1]
