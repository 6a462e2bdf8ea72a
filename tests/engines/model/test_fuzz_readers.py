"""Fuzzing the model readers with mutated files: GGUF, Hugging Face folders, config.json.

Each case writes one mutated file and runs the real reader in-process (`load_gguf`,
`load_hf_folder`, `load_hf_config` plus the kv-calc plan). Every case must end in the
reader's own error (ModelLoadError, ConfigError) or a loaded model; any other exception, or a
case that runs past the hang guard (`fuzz.HANG_S`), fails the test and names the case. The
cases are seeded: every run tries the same ones.

The GGUF cases patch every field of a small valid file in place (value types, scalar values,
string and array lengths, tensor dimensions, types and offsets), rebuild it with metadata
values of the wrong type or out of range, flip random bytes and cut it short.
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
from pathlib import Path

import pytest

from inferlab.engines.model.config import ConfigError
from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_loader import load_gguf
from inferlab.engines.model.hf_config import load_hf_config
from inferlab.engines.model.hf_loader import load_hf_folder
from inferlab.engines.roofline.memory import plan_memory
from tests.engines.model.model_files import write_tiny_hf_folder
from tests.engines.model.small_gguf import gguf_metadata, put, write_fuzz_gguf
from tests.fuzz import (
    BAD_VALUES,
    flip_bytes,
    json_paths,
    mutate_json,
    mutate_json_bytes,
    run_cases,
    truncate,
)

SEED = 20240601
# Random cases per kind. With the field-by-field patches (1,027, and 441 of the tensor infos
# of a file without llama.vocab_size) and the rebuilds (285), the GGUF test runs 3,753
# cases; the HF folder test 2,600; the config.json test 3,000.
N_GGUF_RANDOM_FLIPS = 1500
N_GGUF_DATA_FLIPS = 200
N_GGUF_CUTS = 300
N_HF_CONFIG, N_HF_GENERATION, N_HF_TOKENIZER_CONFIG = 900, 500, 200
N_HF_SAFETENSORS = 1000
N_CONFIG_JSON = 3000

# ---- GGUF ----------------------------------------------------------------------------------

def gguf_patches(data: bytes, path: Path, tensors_only: bool = False):
    """(label, bytes) for every in-place patch of every field of the header (of the tensor
    infos only, with `tensors_only`)."""
    from gguf import GGUFReader

    r = GGUFReader(path)
    huge = (len(data), len(data) * 8, 2**40, 2**63, 2**64 - 1)
    if not tensors_only:
        yield from _metadata_patches(data, r, huge)
    for t in r.tensors:
        off = t.field.offset
        ndim_off = off + 8 + len(t.name.encode())
        n_dims = len(t.shape)
        type_off = ndim_off + 4 + 8 * n_dims
        for v in (0, len(data), 2**63):
            yield f"{t.name}: name length = {v}", put(data, off, "Q", v)
        for v in (0, 1, 3, 4, 5, 2**32 - 1):
            yield f"{t.name}: n_dims = {v}", put(data, ndim_off, "I", v)
        for d in range(n_dims):
            for v in (0, 1, 3, 2**31, 2**32, 2**63, 2**64 - 1):
                yield f"{t.name}: dim {d} = {v}", put(data, ndim_off + 4 + 8 * d, "Q", v)
        for v in (0, 1, 2, 3, 6, 8, 10, 14, 16, 30, 31, 39, 99, 2**31):
            yield f"{t.name}: type = {v}", put(data, type_off, "I", v)
        for v in (1, 32, len(data), 2**63, 2**64 - 32):
            yield f"{t.name}: data offset = {v}", put(data, type_off + 4, "Q", v)


def _metadata_patches(data: bytes, r, huge: tuple):
    """Patches of the header's counts and of every metadata entry's type, value, length."""
    from gguf import GGUFValueType as V

    for off, fmt, values, what in (
        (4, "I", (0, 1, 2, 4, 2**32 - 1, 0x03000000), "version"),
        (8, "Q", (0, len(r.tensors) - 1, len(r.tensors) + 1, *huge), "tensor count"),
        (16, "Q", (0, len(r.fields) - 5, len(r.fields), *huge), "metadata count"),
    ):
        for v in values:
            yield f"{what} = {v}", put(data, off, fmt, v)
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue
        type_off = field.offset + 8 + len(name.encode())
        value_off = type_off + 4
        kind = field.types[0]
        for t in (*range(14), 99, 2**31):
            yield f"{name}: type = {t}", put(data, type_off, "I", t)
        if kind == V.UINT32:
            for v in (0, 1, 2, 7, 2**16, 2**31, 2**32 - 1):
                yield f"{name} = {v}", put(data, value_off, "I", v)
        elif kind == V.FLOAT32:
            for v in (math.nan, math.inf, -math.inf, 0.0, -1.0, 1e38, 1e-45, 0.5):
                yield f"{name} = {v}", put(data, value_off, "f", v)
        elif kind == V.BOOL:
            for v in (2, 255):
                yield f"{name} = {v}", put(data, value_off, "B", v)
        elif kind == V.STRING:
            n = len(field.parts[-1])
            for v in (0, n - 1, n + 1, *huge):
                yield f"{name}: string length = {v}", put(data, value_off, "Q", v)
            if n:
                yield f"{name}: bad UTF-8", put(data, value_off + 8, "B", 0xFF)
        elif kind == V.ARRAY:
            n = int(field.parts[4][0])
            for v in (0, 1, n - 1, n + 1, *huge):
                yield f"{name}: array length = {v}", put(data, value_off + 4, "Q", v)
            for t in (*range(14), 99):
                yield f"{name}: item type = {t}", put(data, value_off, "I", t)


def gguf_rebuilds():
    """(label, overrides) replacing each metadata value by zero, NaN, huge, or a wrong type,
    or leaving it out."""
    from gguf import GGUFValueType as V

    values = ((0, V.UINT32), (2**32 - 1, V.UINT32), (2**63, V.UINT64), (-1, V.INT32),
              (math.nan, V.FLOAT32), (math.inf, V.FLOAT32), (-1e30, V.FLOAT32),
              (1e300, V.FLOAT64), (True, V.BOOL), ("x", V.STRING), ([1, 2], V.ARRAY),
              (["a"], V.ARRAY))
    for key in ["general.architecture", *gguf_metadata()]:
        for value, vtype in values:
            yield f"rebuilt: {key} = {value!r} ({vtype.name})", {key: (value, vtype)}
        if key != "general.architecture":  # GGUFWriter always writes that one
            yield f"rebuilt without {key}", {key: None}


@pytest.fixture(scope="module")
def fuzz_gguf(tmp_path_factory):
    return write_fuzz_gguf(tmp_path_factory.mktemp("fuzz") / "base.gguf")


def write_case(path: Path, data: bytes) -> None:
    """Replace `path` (a new inode: a reader still mapping the old file keeps its bytes)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_fuzz_gguf_base_file_loads(fuzz_gguf):
    model, tok = load_gguf(fuzz_gguf)
    assert model.config.vocab_size == 32 and tok.encode("ab") == [30]


@pytest.mark.slow  # a fuzz campaign: thousands of files written and read
def test_fuzz_gguf(fuzz_gguf, tmp_path):
    data = fuzz_gguf.read_bytes()
    from gguf import GGUFReader

    header_end = GGUFReader(fuzz_gguf).data_offset
    rng = random.Random(SEED)
    case_path = tmp_path / "case.gguf"

    def loading(label: str, blob: bytes):
        def call():
            write_case(case_path, blob)
            load_gguf(case_path)
        return label, call

    def rebuilt(label: str, overrides: dict):
        def call():
            write_fuzz_gguf(case_path, overrides)
            load_gguf(case_path)
        return label, call

    no_vocab = write_fuzz_gguf(tmp_path / "no-vocab.gguf", {"llama.vocab_size": None})

    def cases():
        yield from (loading(label, blob) for label, blob in gguf_patches(data, fuzz_gguf))
        yield from (loading(f"no llama.vocab_size, {label}", blob) for label, blob in
                    gguf_patches(no_vocab.read_bytes(), no_vocab, tensors_only=True))
        yield from (rebuilt(label, o) for label, o in gguf_rebuilds())
        for _ in range(N_GGUF_RANDOM_FLIPS):
            yield loading(*flip_bytes(data, rng, 0, header_end))
        for _ in range(N_GGUF_DATA_FLIPS):
            yield loading(*flip_bytes(data, rng, header_end))
        for _ in range(N_GGUF_CUTS):
            yield loading(*truncate(data, rng))

    result = run_cases(cases(), (ModelLoadError,))
    print("GGUF fuzz:", result.summary())
    result.check()
    assert result.cases >= 3000 and result.refused > result.cases // 2


# ---- Hugging Face folders --------------------------------------------------------------------

GENERATION_CONFIG = {"bos_token_id": 0, "eos_token_id": [10, 2], "do_sample": False}


@pytest.fixture(scope="module")
def hf_base(tmp_path_factory):
    folder = write_tiny_hf_folder(tmp_path_factory.mktemp("fuzz-hf") / "tiny-hf")
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    return folder


def safetensors_header(blob: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack_from("<Q", blob)
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def with_header(header: bytes, body: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header + body


def safetensors_cases(blob: bytes, rng: random.Random, n: int):
    """(label, bytes) mutations of a safetensors file's header: its JSON (generic and
    safetensors-specific values), its length prefix, byte flips in it, cuts."""
    header, body = safetensors_header(blob)
    names = [k for k in header if k != "__metadata__"]
    raw = json.dumps(header).encode()
    header_len = 8 + len(raw)
    dtypes = ("F16", "BF16", "F64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "I64",
              "C64", "X", "")
    for _ in range(n):
        r = rng.random()
        name = rng.choice(names)
        info = header[name]
        if r < 0.3:
            label, text = mutate_json(header, rng)
            yield f"safetensors header {label}", with_header(text, body)
        elif r < 0.55:
            a, b = info["data_offsets"]
            field, value = rng.choice((
                ("dtype", rng.choice(dtypes)),
                ("shape", rng.choice(([], [0], [10**12, 10**12], [-1, 64], [2**63],
                                      info["shape"][::-1], [*info["shape"], 1], [2**64]))),
                ("data_offsets", rng.choice(([0, 0], [0, 2**62], [b, a], [a, b + 4],
                                             [-1, b], [a, len(body) + 1], [a]))),
                ("shape", rng.choice(BAD_VALUES)),
                ("dtype", rng.choice(BAD_VALUES)),
            ))
            changed = dict(header, **{name: dict(info, **{field: value})})
            text = json.dumps(changed).encode()
            yield f"safetensors {name}.{field} = {str(value)[:30]}", with_header(text, body)
        elif r < 0.65:
            length = rng.choice((0, 1, len(raw) - 1, len(raw) + 1, len(blob), 2**40, 2**63,
                                 2**64 - 1))
            yield f"safetensors header length = {length}", with_header(raw, body, length)
        elif r < 0.9:
            yield flip_bytes(blob, rng, 0, header_len)
        else:
            yield truncate(blob, rng)


@pytest.mark.slow  # a fuzz campaign: thousands of files written and read
def test_fuzz_hf_folder(hf_base, tmp_path):
    import shutil

    folder = tmp_path / "case-hf"
    shutil.copytree(hf_base, folder)
    originals = {name: (hf_base / name).read_bytes() for name in
                 ("config.json", "generation_config.json", "tokenizer_config.json",
                  "model.safetensors")}
    rng = random.Random(SEED + 1)
    config = json.loads(originals["config.json"])
    tokenizer_config = json.loads(originals["tokenizer_config.json"])

    def loading(file: str, label: str, blob: bytes):
        def call():
            target = folder / file
            write_case(target, blob)
            try:
                load_hf_folder(folder)
            finally:
                write_case(target, originals[file])
        return f"{file}: {label}", call

    def cases():
        for _ in range(N_HF_CONFIG):
            yield loading("config.json", *mutate_json_bytes(config, rng))
        for _ in range(N_HF_GENERATION):
            yield loading("generation_config.json", *mutate_json_bytes(GENERATION_CONFIG, rng))
        for _ in range(N_HF_TOKENIZER_CONFIG):
            yield loading("tokenizer_config.json", *mutate_json_bytes(tokenizer_config, rng))
        for label, blob in safetensors_cases(originals["model.safetensors"], rng,
                                             N_HF_SAFETENSORS):
            yield loading("model.safetensors", label, blob)

    result = run_cases(cases(), (ModelLoadError,))
    print("HF folder fuzz:", result.summary())
    result.check()
    assert result.cases == (N_HF_CONFIG + N_HF_GENERATION + N_HF_TOKENIZER_CONFIG
                            + N_HF_SAFETENSORS)
    assert result.refused > result.cases // 2


# ---- config.json for kv-calc -----------------------------------------------------------------

CONFIGS = (
    {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
     "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
     "num_hidden_layers": 32, "num_key_value_heads": 8, "rope_theta": 500000.0,
     "tie_word_embeddings": False, "vocab_size": 128256, "rms_norm_eps": 1e-5},
    {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 32,
     "multi_query": True, "vocab_size": 65024},
    {"model_type": "gemma3", "text_config": {"hidden_size": 2560, "num_hidden_layers": 34,
                                             "num_attention_heads": 8, "head_dim": 256,
                                             "intermediate_size": 10240, "vocab_size": 262208,
                                             "rope_parameters": {"rope_theta": 1e6}}},
)


@pytest.mark.slow  # a fuzz campaign: thousands of files written and read
def test_fuzz_config_json(tmp_path):
    rng = random.Random(SEED + 2)
    path = tmp_path / "config.json"
    paths = [json_paths(c) for c in CONFIGS]

    def kv_calc(blob: bytes):
        def call():
            path.write_bytes(blob)
            cfg = load_hf_config(path)
            plan = plan_memory(cfg, context=8192, batch=4, device_memory_bytes=80 * 10**9,
                               bw_bytes_per_s=3.35e12)
            json.dumps(plan.to_dict() | {"model_config": cfg.to_dict()}, allow_nan=False)
        return call

    def cases():
        for i in range(N_CONFIG_JSON):
            k = i % len(CONFIGS)
            label, blob = mutate_json_bytes(CONFIGS[k], rng, paths[k])
            yield f"config {k}: {label}", kv_calc(blob)

    result = run_cases(cases(), (ConfigError,))
    print("config.json fuzz:", result.summary())
    result.check()
    assert result.cases == N_CONFIG_JSON and result.refused > result.cases // 4
