"""The native CPU runtime: small C kernels where torch's CPU ops lose on inference's shapes.

Decoding multiplies a few rows of activations by every weight; torch's CPU matmul costs 2-4×
as much for 5-9 rows as for one although the weight (what the time goes to) is read the same
once, and at a batch of 32 decodes its GEMMs run ~65% of the FMA units' peak. The C sources in
this folder are built with the system compiler at first use, for the CPU's instruction set
(`library.py`: the builder and loader, nothing else). One module per kernel family owns its C
functions' signatures and its fall-back to torch; callers (engines/model, quant, kv,
attention) go through these modules and never declare a signature or pick a path themselves:

    panel.py            fp32 weights packed in panels, any row count (panel.c)
    skinny.py           fp32 and bf16 weights read in place, up to MAX_SKINNY_ROWS rows
                        (skinny.c)
    lowbit.py           INT8 (per row, per group), FP8 E4M3 and INT4 codes (skinny.c, lowbit.c)
    ggml_blocks.py      GGUF blocks (Q4_0 ... Q8_0, Q4_K ... Q6_K) read as the file stores
                        them (ggml_blocks.c)
    paged_attention.py  attention read in place through block tables (paged_attention.c)
    flash_attention.py  FlashAttention-2's tiled loop (flash_attention.c)
    fused.py            residual + RMSNorm, RoPE, SwiGLU, K/V writes (fused.c)
    decoder.py          every decoder layer of a step in one call (decoder.c)
    kv_view.py          `NativeKV`: a paged cache as these kernels read it

A new kernel goes into a C file here and a module beside it holding its `SIGNATURES`, its
entry points and what runs where the kernel does not.

Which path runs is carried by the model that uses it: `native` (the default on CPU) or
`torch` (the reference, and the fallback wherever no compiler is found). A model's layers
choose their layouts when they are built for a path, and keep it:

    model, tok = load_model("tiny", kernels="torch")      # or "native", or "auto"
    model.kernel_path                                      # "torch"

"auto" (or None) is the process default, `default_path()`: native unless
INFERLAB_KERNELS=torch, or `--kernels native|torch` on the CLI (`set_default_path`, on the main
thread before any model loads). Nothing flips it while a worker builds a model; CUDA tensors
always take torch's ops.
"""

from __future__ import annotations

import os

from inferlab.engines.kernels import library as native

KERNEL_PATHS = ("native", "torch")
KERNEL_SETTING_CHOICES = ("auto", *KERNEL_PATHS)
"""A lab's `kernels` setting: auto (the process default: native unless `--kernels torch` or
INFERLAB_KERNELS=torch), or one path for that lab's model."""
KERNEL_LABELS = {"auto": "auto", "native": "native kernels", "torch": "torch ops"}

_default: str | None = None
"""`--kernels` of the command line (None: the environment decides)."""


def default_path() -> str:
    """The process's kernel path, "native" or "torch": what "auto" means."""
    if _default is None:
        return "torch" if os.environ.get("INFERLAB_KERNELS") == "torch" else "native"
    return _default


def set_default_path(path: str) -> None:
    """The command line's `--kernels`: the process default from now on. Set once, on the main
    thread, before any model is built (a lab's model takes its own path explicitly)."""
    global _default
    _default = check_path(path)


def check_path(path: str) -> str:
    """`path` if it is one of KERNEL_PATHS, else ValueError."""
    if path not in KERNEL_PATHS:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_PATHS)}, got {path!r}")
    return path


def resolve(setting: str | None) -> str:
    """The path a model is built for from a `kernels` argument or a lab's setting: None or
    "auto" is `default_path()`, "native" or "torch" itself; ValueError otherwise."""
    if setting is None or setting == "auto":
        return default_path()
    return check_path(setting)


def native_available() -> bool:
    """Whether the native library builds and loads here (builds it on first call)."""
    return native.library() is not None


def describe(path: str | None = None) -> dict:
    """What a bench or a snapshot records: the path (default: the process's), what runs (the
    library's instruction set, or why torch runs instead) and the CPU's SIMD flags."""
    path = resolve(path)
    lib = native.library() if path == "native" else None
    flags = sorted(f for f in native.host_flags()
                   if f.startswith(("avx", "amx", "fma", "f16c", "asimd", "sve")))
    return {"kernels": path, "native_isa": lib.isa if lib else None,
            "native_openmp": lib.openmp if lib else None,
            "native_error": None if lib or path == "torch" else native.BUILD_ERROR,
            "cpu_flags": flags}
