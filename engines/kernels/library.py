"""The native library: every C source in this folder built into one shared object per
instruction set, with the system C compiler, into the user cache at first use, then loaded
through ctypes.

Which build runs is chosen by the CPU's features (`isa_for_flags`):

    avx512    -mavx512f/bw/dq/vl -mfma   vectors of 16 floats   (AVX-512 Xeons, Zen 4/5)
    avx2      -mavx2 -mfma -mf16c        vectors of 8 floats    (most x86-64 since 2013)
    portable  no ISA flags               vectors of 4 floats    (SSE2 on x86-64, NEON on Arm)

Each build is tried with OpenMP, then without; when none builds (no compiler) `library()` is
None, `BUILD_ERROR` says why and the torch path runs. `INFERLAB_KERNELS=torch` (or
`engines.kernels.use("torch")`) skips the library altogether. The cache key is the sources'
bytes plus the flags, so an edited kernel is rebuilt and a concurrent build never loads half a
file (written to a temporary name, then renamed).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import platformdirs

ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "avx512": ("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma",
               "-mf16c", "-DIL_VLEN=16", "-DIL_MR=4"),
    "avx2": ("-mavx2", "-mfma", "-mf16c", "-DIL_VLEN=8", "-DIL_MR=3",
             "-DIL_I4_MR=2"),
    "portable": ("-DIL_VLEN=4", "-DIL_MR=2"),
}
"""Compiler flags per build: the ISA and the register tile that fits it (IL_MR input rows ×
4 weight rows of accumulators: 16 of 32 zmm registers; 12 of 16 ymm, where 3 rows run a
5-token verification in 2 passes over each weight tile instead of 3, measured 1.48 -> 1.28-1.32
times one token on SmolLM2, 1 thread; the INT4 kernel's group sums keep 2 on AVX2)."""

ISA_NEEDS: dict[str, frozenset[str]] = {
    "avx512": frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma"}),
    "avx2": frozenset({"avx2", "fma", "f16c"}),
    "portable": frozenset(),
}
"""The /proc/cpuinfo flags each build needs."""

SOURCES_DIR = Path(__file__).parent


def isa_for_flags(flags: set[str] | frozenset[str]) -> str:
    """The fastest build this CPU runs: avx512, avx2 or portable."""
    for isa in ("avx512", "avx2"):
        if ISA_NEEDS[isa] <= flags:
            return isa
    return "portable"


def host_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """Every flag of this CPU's first "flags" (x86) or "Features" (Arm) line; none where
    the file is missing. (Read here, not through engines.hardware, which sits above.)"""
    try:
        lines = Path(cpuinfo).read_text(errors="replace").splitlines()
    except OSError:
        return frozenset()
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded build: the ctypes handle, its instruction set, vector width, whether it runs
    OpenMP threads, and the .so it came from."""

    cdll: ctypes.CDLL
    isa: str
    vlen: int
    openmp: bool
    path: Path


_LIB: NativeLibrary | None = None
_TRIED = False
BUILD_ERROR: str | None = None
"""Why no native library is in use (None while one is, or before one was tried)."""


def _sources() -> list[Path]:
    return sorted(SOURCES_DIR.glob("*.c"))


def cache_dir() -> Path:
    """Where builds go: platformdirs' user cache (~/.cache/inferlab/kernels on Linux)."""
    return Path(platformdirs.user_cache_dir("inferlab")) / "kernels"


def _compile(out: Path, flags: list[str]) -> None:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise OSError("no C compiler (gcc or cc) on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-O3", "-shared", "-fPIC", "-ffp-contract=fast", *flags, "-o", str(tmp),
           *map(str, _sources())]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode:
        tmp.unlink(missing_ok=True)
        raise OSError(f"{' '.join(cmd)} failed: {done.stderr.strip()[:800]}")
    os.replace(tmp, out)


def build(isa: str, openmp: bool = True) -> NativeLibrary:
    """Build (or find in the cache) and load the library for `isa`; raises OSError."""
    flags = [*ISA_FLAGS[isa], *(["-fopenmp"] if openmp else [])]
    digest = hashlib.sha256(" ".join(flags).encode())
    for src in [*_sources(), *sorted(SOURCES_DIR.glob("*.h"))]:
        digest.update(src.name.encode() + src.read_bytes())
    path = cache_dir() / f"inferlab-{isa}{'-omp' if openmp else ''}-{digest.hexdigest()[:16]}.so"
    if not path.exists():
        _compile(path, flags)
    cdll = ctypes.CDLL(str(path))
    _declare(cdll)
    return NativeLibrary(cdll, isa, int(cdll.il_vlen()), openmp, path)


def _declare(lib: ctypes.CDLL) -> None:
    p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.il_vlen.restype = i32
    for name in ("il_skinny_f32", "il_skinny_bf16"):
        fn = getattr(lib, name)
        fn.argtypes = [p, p, p, i64, i64, i64, i32]
        fn.restype = None
    f32 = ctypes.c_float
    lib.il_paged_attention_f32.argtypes = [p, p, p, p, p, p, i64, i64, i64, i64, i64, i64, i64,
                                           f32, i32]
    lib.il_paged_attention_f32.restype = None
    lib.il_paged_attention_i8.argtypes = [p, p, p, p, p, p, p, i64, i64, i64, i64, i64, i64,
                                          i64, f32, i32]
    lib.il_paged_attention_i8.restype = None
    lib.il_paged_attention_fp8.argtypes = lib.il_paged_attention_i8.argtypes
    lib.il_paged_attention_fp8.restype = None
    f32p = ctypes.c_float
    lib.il_add_rms_norm.argtypes = [p, p, p, p, i64, i64, f32p]
    lib.il_rope.argtypes = [p, p, p, i64, i64, i64, i64]
    lib.il_silu_mul.argtypes = [p, p, i64, i64]
    lib.il_write_kv.argtypes = [p, p, i64, p, p, p, i64, i64, i64, i64]
    lib.il_write_kv_i8.argtypes = [p, p, i64, p, p, p, p, p, i64, i64, i64, i64]
    lib.il_write_kv_fp8.argtypes = lib.il_write_kv_i8.argtypes
    for name in ("il_add_rms_norm", "il_rope", "il_silu_mul", "il_write_kv", "il_write_kv_i8",
                 "il_write_kv_fp8"):
        getattr(lib, name).restype = None
    lib.il_panel_width.restype = i32
    lib.il_panel_pack_f32.argtypes = [p, p, i64, i64]
    lib.il_panel_pack_f32.restype = None
    lib.il_panel_f32.argtypes = [p, p, p, i64, i64, i64, i32]
    lib.il_panel_f32.restype = None
    lib.il_skinny_i8.argtypes = [p, p, p, p, i64, i64, i64, i32]
    lib.il_skinny_i8.restype = None
    lib.il_skinny_i8g.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, i32]
    lib.il_skinny_i8g.restype = None
    lib.il_skinny_fp8.argtypes = [p, p, p, p, i64, i64, i64, i32]
    lib.il_skinny_fp8.restype = None
    lib.il_zero_point_sub.argtypes = [p, p, p, i64, i64, i64]
    lib.il_zero_point_sub.restype = None
    lib.il_int4_lanes.restype = i32
    lib.il_lowbit_int4.argtypes = [p, p, p, p, p, i64, i64, i64, i64, i64, i32]
    lib.il_lowbit_int4.restype = None
    lib.il_decoder_scratch.argtypes = [p]
    lib.il_decoder_scratch.restype = i64
    lib.il_decoder_layers.argtypes = [p, p, p, i64, p, p, p, p, p, p, i64, i64, i32, p, p, i64,
                                      i64, p, i32]
    lib.il_decoder_layers.restype = None


def library() -> NativeLibrary | None:
    """The native library for this CPU (built on first use), or None when it cannot be built
    here (`BUILD_ERROR` says why) or `INFERLAB_KERNELS=torch` turned it off."""
    global _LIB, _TRIED, BUILD_ERROR
    if _TRIED:
        return _LIB
    _TRIED = True
    if os.environ.get("INFERLAB_KERNELS", "native") == "torch":
        BUILD_ERROR = "turned off by INFERLAB_KERNELS=torch"
        return None
    isa = os.environ.get("INFERLAB_KERNELS_ISA") or isa_for_flags(host_flags())
    if isa not in ISA_FLAGS:
        BUILD_ERROR = f"unknown INFERLAB_KERNELS_ISA {isa!r}; expected one of {list(ISA_FLAGS)}"
        return None
    errors = []
    for openmp in (True, False):
        try:
            _LIB, BUILD_ERROR = build(isa, openmp), None
            return _LIB
        except (OSError, subprocess.SubprocessError, AttributeError) as e:
            errors.append(str(e))
    BUILD_ERROR = "; ".join(errors)
    return None
