"""Head files: read back as written; a head for another model, or a damaged file, refused by
name."""

from __future__ import annotations

import json
import random

import pytest
import torch

from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.head_file import head_path, load_head, save_head
from inferlab.engines.speculative.heads.model_hash import model_hash
from inferlab.engines.speculative.heads.train import TrainSettings, fit
from tests.engines.speculative.heads.helpers import tiny_sequences
from tests.fuzz import flip_bytes, run_cases, truncate

FAST = dict(epochs=1, window_tokens=32, batch_windows=4, draft_vocab_size=100, eval_k=2)
SEED = 20261207
N_CASES = 300


@pytest.fixture(scope="module")
def heads(tiny):
    model, tok = tiny
    seqs = tiny_sequences(model, tok, ("The ferry", "Bread and"))
    return {kind: fit(model, seqs, seqs[:1], TrainSettings(kind=kind, n_medusa=2, **FAST))
            for kind in ("eagle", "medusa")}


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_round_trip(tiny, heads, tmp_path, kind):
    head = heads[kind]
    path = save_head(head_path(tmp_path, head.model_hash, kind), head)
    assert path.parent.name == head.model_hash.replace(":", "-")
    back = load_head(path, tiny[0])
    assert back.kind == kind and back.dims == head.dims
    assert torch.equal(back.vocab.d2t, head.vocab.d2t)
    for name, t in head.module.state_dict().items():
        assert torch.equal(back.module.state_dict()[name], t), name
    assert back.training["curve"] == head.training["curve"]


def test_another_models_head_refused_by_name(heads, tmp_path):
    path = save_head(tmp_path / "eagle.safetensors", heads["eagle"])
    other, _ = tiny_model(seed=1)  # same shapes, other weights
    assert model_hash(other) != heads["eagle"].model_hash
    with pytest.raises(SpeculativeError, match=r"eagle.safetensors was trained for another model"):
        load_head(path, other)


def test_corrupted_tensor_bytes_refused(tiny, heads, tmp_path):
    path = save_head(tmp_path / "eagle.safetensors", heads["eagle"])
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x40  # a bit of the last tensor's data
    path.write_bytes(bytes(raw))
    with pytest.raises(SpeculativeError, match=r"eagle.safetensors is corrupted"):
        load_head(path, tiny[0])


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "missing"])
def test_unreadable_files_refused_by_name(tiny, heads, tmp_path, damage):
    path = save_head(tmp_path / "h.safetensors", heads["medusa"])
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a head file at all" * 10)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    with pytest.raises(SpeculativeError, match=r"draft head .*h\.safetensors"):
        load_head(path, tiny[0])


def test_other_shape_refused(heads, tmp_path):
    path = save_head(tmp_path / "eagle.safetensors", heads["eagle"])
    wider, _ = tiny_model(d_ff=256)
    with pytest.raises(SpeculativeError, match="eagle.safetensors"):
        load_head(path, wider)


def test_fuzz_head_file_reader(tiny, heads, tmp_path):
    # seeded damage anywhere in a real head file: the reader refuses it by name, or reads back
    # exactly the head that was written, never a different one
    head = heads["eagle"]
    good = save_head(tmp_path / "good.safetensors", head).read_bytes()
    header_end = 8 + int.from_bytes(good[:8], "little")
    rng = random.Random(SEED)
    path = tmp_path / "case.safetensors"

    def reading(blob: bytes):
        def call():
            path.write_bytes(blob)
            back = load_head(path, tiny[0])
            for name, t in head.module.state_dict().items():
                assert torch.equal(back.module.state_dict()[name], t), name
        return call

    cases = []
    for i in range(N_CASES):
        if i % 3 == 0:
            label, blob = truncate(good, rng)
        elif i % 3 == 1:  # the length and the JSON header, where a parser can go wrong
            label, blob = flip_bytes(good, rng, 0, header_end)
        else:
            label, blob = flip_bytes(good, rng, header_end)
        cases.append((label, reading(blob)))
    result = run_cases(cases, allowed=(SpeculativeError,))
    result.check()
    assert result.refused > N_CASES // 2, result.summary()


def test_a_file_from_before_constant_dims_reads_with_none_held(tiny, heads, tmp_path):
    """An EAGLE head file written before the constant dimensions (no such tensors) reads back
    with none held: it drafts as it did."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from inferlab.engines.speculative.heads.head_file import tensors_sha256

    head = heads["eagle"]
    path = save_head(tmp_path / "eagle.safetensors", head)
    tensors = load_file(str(path))
    with safe_open(str(path), "pt") as f:
        record = json.loads(f.metadata()["inferlab"])
    for name in ("constant_mask", "constant_value"):
        del tensors[name]
    record["tensors_sha256"] = tensors_sha256(tensors)
    old = tmp_path / "old.safetensors"
    save_file(tensors, str(old), metadata={"inferlab": json.dumps(record)})
    back = load_head(old, tiny[0])
    assert not back.module.constant_mask.any() and not back.module.constant_value.any()
    for name, t in head.module.state_dict().items():
        if not name.startswith("constant_"):
            assert torch.equal(back.module.state_dict()[name], t), name
