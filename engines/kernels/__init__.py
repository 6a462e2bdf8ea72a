"""The native CPU runtime: small C kernels where torch's CPU ops lose on inference's shapes.

Decoding multiplies a few rows of activations by every weight; torch's CPU matmul costs 2-4×
as much for 5-9 rows as for one although the weight (what the time goes to) is read the same
once, and at a batch of 32 decodes its GEMMs run ~65% of the FMA units' peak. The kernels
here multiply fp32 weights packed in panels for any row count (`panel.py`: the weight
streamed once, an outer-product register tile near peak), bf16 and INT8 weights with
dot-product tiles for up to `MAX_SKINNY_ROWS` rows (`skinny.py`), run the low-bit codes
(`lowbit.c`), read the paged cache in place (`attention.py`), fuse the small ops between them
(`fused.py`) and run every layer of a decode or batched-decode step in one call
(`decoder.py`). They are built from the C sources in this
folder with the system compiler at first use (`library.py`), for the CPU's instruction set.

Which path runs is one process-wide choice, `native` (the default on CPU) or `torch` (the
reference, and the fallback wherever no compiler is found):

    from inferlab.engines import kernels
    kernels.current()              # "native" or "torch"
    with kernels.use("torch"):     # models built inside keep torch's layouts
        model = load_model(...)

`INFERLAB_KERNELS=torch` sets the default; `--kernels native|torch` on the CLI sets it for a
command. A layer decides its layout when it is built (`engines.model.linear.Linear`), so a
model built under one choice keeps it; CUDA tensors always take torch's ops.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from inferlab.engines.kernels import library as native

KERNEL_PATHS = ("native", "torch")
KERNEL_SETTING_CHOICES = ("auto", *KERNEL_PATHS)
"""A lab's `kernels` setting: auto (the process-wide choice: native unless `--kernels torch`
or INFERLAB_KERNELS=torch), or one path for that lab's model."""
KERNEL_LABELS = {"auto": "auto", "native": "native kernels", "torch": "torch ops"}


@contextmanager
def chosen(setting: str) -> Iterator[None]:
    """`use(setting)` for a lab's `kernels` setting; "auto" keeps the current choice."""
    if setting == "auto":
        yield
        return
    with use(setting):
        yield

_current: str | None = None


def current() -> str:
    """The kernel path new layers are built for: "native" or "torch"."""
    if _current is None:
        return "torch" if os.environ.get("INFERLAB_KERNELS") == "torch" else "native"
    return _current


def set_kernels(path: str) -> None:
    """Choose the kernel path for layers built from now on."""
    global _current
    if path not in KERNEL_PATHS:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_PATHS)}, got {path!r}")
    _current = path


@contextmanager
def use(path: str) -> Iterator[None]:
    """`set_kernels(path)` for the `with` block, then back to the choice before."""
    global _current
    before = _current
    set_kernels(path)
    try:
        yield
    finally:
        _current = before


def native_available() -> bool:
    """Whether the native library builds and loads here (builds it on first call)."""
    return native.library() is not None


def describe() -> dict:
    """What a bench or a snapshot records: the chosen path, what runs (the library's
    instruction set, or why torch runs instead) and the CPU's SIMD flags."""
    lib = native.library() if current() == "native" else None
    flags = sorted(f for f in native.host_flags()
                   if f.startswith(("avx", "amx", "fma", "f16c", "asimd", "sve")))
    return {"kernels": current(), "native_isa": lib.isa if lib else None,
            "native_openmp": lib.openmp if lib else None,
            "native_error": None if lib or current() == "torch" else native.BUILD_ERROR,
            "cpu_flags": flags}
