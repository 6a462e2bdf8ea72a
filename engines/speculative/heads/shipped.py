"""Where a model's trained head is found: the user cache first (the user's own training,
`inferlab train-head`), then the head shipped in assets/heads for SmolLM2-135M-Instruct, used
only when its header's model hash is the target's (a head for another model is never
offered; `head_file.load_head` refuses it by name too).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from inferlab.engines.model.llama import Llama
from inferlab.engines.speculative.heads.head_file import head_path, read_record
from inferlab.engines.speculative.heads.model_hash import model_hash

SHIPPED_HEADS = {"eagle": "smollm2-135m-instruct-eagle.safetensors"}
"""kind -> file name under assets/heads (see assets/heads/SOURCES.md)."""


def shipped_head_path(kind: str) -> Path | None:
    """The shipped head file of `kind`, where one ships."""
    name = SHIPPED_HEADS.get(kind)
    if name is None:
        return None
    path = Path(str(importlib.resources.files("inferlab.assets") / "heads" / name))
    return path if path.is_file() else None


def find_head(target: Llama, kind: str, cache_dir: Path) -> Path | None:
    """The head file of `kind` for `target`: the cached one, else the shipped one when it
    was trained for this very model; None when there is neither."""
    mh = model_hash(target)
    cached = head_path(cache_dir, mh, kind)
    if cached.is_file():
        return cached
    shipped = shipped_head_path(kind)
    if shipped is not None:
        record = read_record(shipped)
        if record is not None and record.get("model_hash") == mh:
            return shipped
    return None
