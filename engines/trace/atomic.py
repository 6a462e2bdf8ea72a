"""Atomic file replacement: readers see the old file or the whole new one, never a half.

The text goes to a temporary file in the target's directory (same filesystem, so the final
rename is atomic), is flushed and fsynced, then `os.replace`s the target. On any error,
including one raised by the chunk generator halfway, the temporary file is removed and the
old target is left as it was.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from pathlib import Path


def atomic_write_text(path: str | os.PathLike, chunks: Iterable[str]) -> None:
    """Write the concatenated `chunks` (UTF-8) to `path`, atomically."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # honours the umask
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable where the OS allows fsync on a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows: directories cannot be opened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
