"""Which model a head belongs to: the sha256 of the model's file, or of its weights where it
has no file (the seeded tiny models). A head trained for one model is refused by another."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from inferlab.engines.model.llama import Llama

_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file (kept per path, size and mtime for the process's life)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def model_hash(target: Llama) -> str:
    """"sha256:<hex>" of the model's file (`config.source` names a file), else
    "weights:<hex>" of its shape, final norm and lm_head rows (a model built in memory)."""
    source = Path(target.config.source) if target.config.source else None
    if source is not None and source.is_file():
        return "sha256:" + file_sha256(source)
    c = target.config
    h = hashlib.sha256(repr((c.id, c.family, c.n_layers, c.d_model, c.vocab_size,
                             str(target.dtype))).encode())
    h.update(target.final_norm.float().cpu().numpy().tobytes())
    with torch.inference_mode():
        probe = torch.linspace(-1, 1, c.d_model, dtype=target.dtype, device=target.device)
        h.update(target.lm_head(probe[None]).float().cpu().numpy().tobytes())
        h.update(target.embed_rows(torch.arange(min(64, c.vocab_size), device=target.device)
                                   ).float().cpu().numpy().tobytes())
    return "weights:" + h.hexdigest()
