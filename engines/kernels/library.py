"""The native library: every C source in this folder built into one shared object per
instruction set, with the system C compiler, into the user cache at first use, then loaded
through ctypes. Each kernel family's module (`panel`, `skinny`, `lowbit`, `paged_attention`,
`flash_attention`, `fused`, `decoder`) declares its own C functions' signatures on a build
(`NativeLibrary.functions`) and holds its fall-back to torch; this module only builds and
loads.

Which build runs is chosen by the CPU's features (`isa_for_flags`):

    avx512    -mavx512f/bw/dq/vl -mfma   vectors of 16 floats   (AVX-512 Xeons, Zen 4/5)
    avx2      -mavx2 -mfma -mf16c        vectors of 8 floats    (most x86-64 since 2013)
    portable  no ISA flags               vectors of 4 floats    (SSE2 on x86-64, NEON on Arm)

Each build is tried with OpenMP, then without; when none builds (no compiler) `library()` is
None, `BUILD_ERROR` says why and the torch path runs. `INFERLAB_KERNELS=torch` skips the
library altogether. The cache key is the sources' bytes plus the flags, so an edited kernel is
rebuilt and a concurrent build never loads half a file (written to a temporary name, then
renamed).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

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


P, I64, I32, F32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
"""The C types the kernel families' signatures are written in (a pointer, int64_t, int,
float)."""

Signatures = Mapping[str, tuple[list, object]]
"""A kernel family's C functions: name -> (argument types, result type or None)."""


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded build: the ctypes handle, its instruction set, vector width, whether it runs
    OpenMP threads, and the .so it came from."""

    cdll: ctypes.CDLL
    isa: str
    vlen: int
    openmp: bool
    path: Path
    _families: dict = field(default_factory=dict, compare=False, repr=False)

    def functions(self, family: str, signatures: Signatures) -> SimpleNamespace:
        """`signatures`' C functions of this build as attributes, declared on first use (each
        kernel family's module owns its signatures; a build declares each family once)."""
        found = self._families.get(family)
        if found is None:
            fns = {}
            for name, (argtypes, restype) in signatures.items():
                fn = getattr(self.cdll, name)
                fn.argtypes, fn.restype = argtypes, restype
                fns[name] = fn
            # stored once declared: another thread never sees a function without its types
            found = self._families[family] = SimpleNamespace(**fns)
        return found


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
    """Compile each source to an object, up to a process per core at once (ggml_blocks.c alone
    takes ~9 s of a ~17 s serial build on a 2-core EPYC), then link them into `out`."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise OSError("no C compiler (gcc or cc) on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    common = [cc, "-O3", "-fPIC", "-ffp-contract=fast", *flags]
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build-") as work:
        objects = [Path(work) / f"{src.stem}.o" for src in _sources()]
        jobs = [[*common, "-c", "-o", str(obj), str(src)]
                for src, obj in zip(_sources(), objects, strict=True)]
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            results = list(pool.map(_run, jobs))
        link = [*common, "-shared", "-o", str(tmp), *map(str, objects)]
        for cmd, done in [*zip(jobs, results, strict=True), (link, None)]:
            done = done if done is not None else _run(cmd)
            if done.returncode:
                tmp.unlink(missing_ok=True)
                raise OSError(f"{' '.join(cmd)} failed: {done.stderr.strip()[:800]}")
    os.replace(tmp, out)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


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
    cdll.il_vlen.argtypes, cdll.il_vlen.restype = [], ctypes.c_int
    return NativeLibrary(cdll, isa, int(cdll.il_vlen()), openmp, path)


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
