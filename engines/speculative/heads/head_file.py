"""A trained head on disk: one safetensors file (its tensors, the draft vocabulary's ids
`d2t` among them) whose header carries a small JSON record:

    {"format": "inferlab.draft-head/1", "model_hash": "sha256:…", "kind": "eagle"|"medusa",
     "dims": {…HeadDims}, "vocab_size": V, "draft_vocab_size": N,
     "tensors_sha256": "…", "training": {…seed, steps, curve…}}

Reading refuses, naming the file and what is wrong: a file that is not a head (unreadable,
truncated, another format), a head for another model (its `model_hash` is not the
target's), a head of other dimensions, or tensors whose bytes do not hash to
`tensors_sha256` (corrupted after it was written). Kept by default at
<user cache>/inferlab/heads/<model hash>/<kind>.safetensors.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from inferlab.engines.model.llama import Llama
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.dims import KINDS, HeadDims
from inferlab.engines.speculative.heads.draft_vocab import DraftVocab
from inferlab.engines.speculative.heads.eagle import EagleHead
from inferlab.engines.speculative.heads.medusa import MedusaHeads
from inferlab.engines.speculative.heads.model_hash import model_hash

HEAD_FORMAT = "inferlab.draft-head/1"


@dataclass(frozen=True, eq=False)
class TrainedHead:
    """A head ready to draft for the target it was trained on."""

    kind: str
    dims: HeadDims
    module: torch.nn.Module
    vocab: DraftVocab
    model_hash: str
    training: dict


def head_path(cache_dir: Path, model_hash_: str, kind: str) -> Path:
    return cache_dir / "heads" / model_hash_.replace(":", "-") / f"{kind}.safetensors"


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


OPTIONAL_TENSORS = ("constant_mask", "constant_value")
"""An EAGLE head's constant dimensions: absent from files written before them (none held)."""


def new_module(dims: HeadDims, seed: int = 0) -> torch.nn.Module:
    return EagleHead(dims, seed) if dims.kind == "eagle" else MedusaHeads(dims, seed)


def save_head(path: Path, head: TrainedHead, dtype: torch.dtype | None = None) -> Path:
    """Write `head` (atomically: a temporary file, then rename); returns `path`. `dtype`
    (e.g. torch.float16 for a shipped head, half the bytes): its floating tensors stored so,
    read back into the fp32 module by `load_head`."""
    tensors = {k: v.detach().to(dtype or v.dtype).contiguous() if v.is_floating_point()
               else v.detach().contiguous() for k, v in head.module.state_dict().items()}
    tensors["d2t"] = head.vocab.d2t.contiguous()
    record = {"format": HEAD_FORMAT, "model_hash": head.model_hash, "kind": head.kind,
              "dims": head.dims.to_dict(), "vocab_size": head.vocab.vocab_size,
              "draft_vocab_size": head.vocab.size, "tensors_sha256": tensors_sha256(tensors),
              "training": head.training}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata={"inferlab": json.dumps(record)})
    tmp.replace(path)
    return path


def _header(path: Path) -> dict:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n < 1 << 24:
            raise ValueError("no safetensors header")
        meta = json.loads(f.read(n)).get("__metadata__") or {}
    return json.loads(meta["inferlab"])


def read_record(path: Path) -> dict | None:
    """The JSON record of a head file's header, or None where it does not read as one."""
    try:
        record = _header(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return record if isinstance(record, dict) else None


def load_head(path: Path, target: Llama) -> TrainedHead:
    """The head in `path` for `target` (SpeculativeError naming the file otherwise)."""
    where = f"draft head {path}"
    try:
        record = _header(path)
        tensors = load_file(str(path))
    except FileNotFoundError:
        raise SpeculativeError(f"{where}: no such file (train one: inferlab train-head)"
                               ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, SafetensorError) as e:
        raise SpeculativeError(f"{where}: not a readable head file ({e})") from None
    if not isinstance(record, dict) or record.get("format") != HEAD_FORMAT:
        raise SpeculativeError(f"{where}: not a {HEAD_FORMAT} file")
    ours = model_hash(target)
    if record.get("model_hash") != ours:
        raise SpeculativeError(f"{where} was trained for another model ({record.get('model_hash')}"
                               f"), not {target.config.id} ({ours})")
    kind = record.get("kind")
    if kind not in KINDS:
        raise SpeculativeError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    try:
        dims = HeadDims(**record["dims"])
    except (TypeError, KeyError) as e:
        raise SpeculativeError(f"{where}: its dims do not read ({e})") from None
    if dims != HeadDims.of(target, kind, dims.n_medusa):
        raise SpeculativeError(f"{where}: its dims {dims} do not fit {target.config.id}")
    if tensors_sha256(tensors) != record.get("tensors_sha256"):
        raise SpeculativeError(f"{where} is corrupted: its tensors do not match the checksum "
                               "in its header")
    d2t = tensors.pop("d2t", None)
    if d2t is None:
        raise SpeculativeError(f"{where}: no draft vocabulary (tensor 'd2t')")
    vocab = DraftVocab(d2t, target.config.vocab_size)
    module = new_module(dims)
    expected = module.state_dict()
    for name in OPTIONAL_TENSORS:  # a head file from before them: the module's defaults
        if name in expected and name not in tensors:
            tensors[name] = expected[name]
    for name, t in expected.items():
        if name not in tensors or tensors[name].shape != t.shape:
            got = tuple(tensors[name].shape) if name in tensors else "missing"
            raise SpeculativeError(f"{where}: tensor {name!r} is {got}, expected "
                                   f"{tuple(t.shape)}")
    module.load_state_dict(tensors)
    module.eval()
    return TrainedHead(kind, dims, module, vocab, ours, dict(record.get("training") or {}))
