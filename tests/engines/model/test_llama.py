"""The decoder on the tiny model: paged flat-batch forward vs full recompute, RoPE, layouts."""

import math

import pytest
import torch

from inferlab.engines.kv.attention_metadata import AttentionMetadata
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.rope import RopeTables, apply_rope
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tiny import tiny_config, tiny_model, tiny_state_dict

TOL = 2e-5


def ids(text: str) -> list[int]:
    return list(text.encode())


def test_rope_matches_the_rotation_formula():
    d, theta = 8, 10000.0
    tables = RopeTables(d, 64, theta)
    x = torch.randn(5, 3, d, dtype=torch.float64)
    pos = torch.tensor([0, 1, 7, 30, 63])
    cos, sin = tables.at(pos)
    got = apply_rope(x.float(), cos, sin).double()
    # Each pair (x_i, x_{i+d/2}) turns by angle p * theta^(-2i/d).
    want = x.clone()
    for t, p in enumerate(pos.tolist()):
        for i in range(d // 2):
            a = p * theta ** (-2 * i / d)
            x1, x2 = x[t, :, i], x[t, :, i + d // 2]
            want[t, :, i] = x1 * math.cos(a) - x2 * math.sin(a)
            want[t, :, i + d // 2] = x2 * math.cos(a) + x1 * math.sin(a)
    assert (got - want).abs().max() < 1e-5


def test_rope_refuses_positions_past_the_context():
    with pytest.raises(ValueError, match="past the model's context of 16"):
        RopeTables(8, 16, 10000.0).at(torch.tensor([3, 16]))


def test_paged_prefill_logits_equal_full_recompute(tiny):
    model, _ = tiny
    prompt = torch.tensor(ids("The paged cache must not change a single logit."))
    n = len(prompt)
    cache = model.new_cache(n_blocks=16, block_size=4)
    table = [9, 2, 14, 0, 5, 7, 11, 3, 1, 6, 8, 4, 12]  # scattered physical blocks
    pos = torch.arange(n)
    slots = torch.tensor(table)[pos // 4] * 4 + pos % 4
    meta = AttentionMetadata(
        seq_ids=("s",), query_lens=(n,), context_lens_host=(n,), positions=pos,
        slot_mapping=slots, query_start_loc=torch.tensor([0, n], dtype=torch.int32),
        context_lens=torch.tensor([n], dtype=torch.int32),
        block_tables=torch.tensor([table], dtype=torch.int32))
    paged = model.forward(prompt, meta, cache, logits_index="all")
    ref = model.forward_nocache(prompt, all_logits=True)
    assert paged.shape == (n, 256)
    assert (paged - ref).abs().max() < TOL


def test_flat_batch_of_prefills_and_decodes_equals_each_sequence_alone(tiny):
    """One forward: seq A decodes 1 token, B prefills 11, C continues with 3 more (chunked)."""
    model, _ = tiny
    bs = 4
    texts = {"A": ids("abcdefghij"), "B": ids("hello world"), "C": ids("paged attention!")}
    runner = ModelRunner(model, n_blocks=32, block_size=bs, enable_prefix_caching=False)
    runner.add("A", texts["A"][:9])
    runner.step(["A"])
    runner.append("A", texts["A"][9])
    runner.add("B", texts["B"])
    runner.add("C", texts["C"])
    runner.step(["C"], max_tokens=[13])
    logits = runner.step(["A", "B", "C"])
    assert runner.last_metadata.query_lens == (1, 11, 3)
    assert runner.last_metadata.context_lens_host == (10, 11, 16)
    for row, key in enumerate("ABC"):
        alone = model.forward_nocache(torch.tensor(texts[key]))
        assert (logits[row] - alone[0]).abs().max() < TOL, key


def test_prefix_cache_hit_skips_cached_tokens_and_keeps_logits(tiny):
    model, _ = tiny
    system = ids("You are a helpful assistant. ")  # 29 tokens: 7 full blocks of 4
    runner = ModelRunner(model, n_blocks=64, block_size=4)
    assert runner.add("first", system + ids("Hi!")) == 0
    runner.step(["first"])
    n_cached = runner.add("second", system + ids("Bye."))
    assert n_cached == 28 and runner.pending("second") == 33 - 28
    logits = runner.step(["second"])
    ref = model.forward_nocache(torch.tensor(system + ids("Bye.")))
    assert (logits - ref).abs().max() < TOL


def test_chunked_prefill_shares_only_the_blocks_it_has_computed(tiny):
    """A prompt reserved whole, prefilled in chunks: a request with the same prefix arriving
    between chunks hits only the blocks whose K/V is written, and its logits stay exact."""
    model, _ = tiny
    system = ids("You are a helpful assistant. ")  # 29 tokens: 7 full blocks of 4
    runner = ModelRunner(model, n_blocks=64, block_size=4)
    assert runner.add("a", system + ids("Hi!")) == 0
    runner.step(["a"], max_tokens=[10])  # blocks 0, 1 written, block 2 half
    assert runner.add("b", system + ids("Bye.")) == 8
    logits = runner.step(["b"])
    ref = model.forward_nocache(torch.tensor(system + ids("Bye.")))
    assert (logits - ref).abs().max() < TOL
    logits = runner.step(["a"])  # the rest of a's prompt
    ref = model.forward_nocache(torch.tensor(system + ids("Hi!")))
    assert (logits - ref).abs().max() < TOL
    assert runner.add("c", system + ids("Hey")) == 28  # now every system block is written


def test_fork_then_copy_on_write_keeps_both_branches_exact(tiny):
    model, _ = tiny
    prompt = ids("fork me")  # 7 tokens: the last block of 4 is partial and shared
    runner = ModelRunner(model, n_blocks=16, block_size=4, enable_prefix_caching=False)
    runner.add("p", prompt)
    runner.step(["p"])
    runner.fork("p", "c")
    runner.append("p", ord("A"))
    runner.append("c", ord("B"))
    assert runner.blocks.block_table("p")[-1] != runner.blocks.block_table("c")[-1]
    out = runner.step(["p", "c"])
    for row, tok in enumerate("AB"):
        ref = model.forward_nocache(torch.tensor(prompt + [ord(tok)]))
        assert (out[row] - ref[0]).abs().max() < TOL


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_attention_kinds_and_tied_embeddings(n_kv_heads, tied):
    model, _ = tiny_model(n_kv_heads=n_kv_heads, tie_embeddings=tied)
    assert model.config.attention_kind == {4: "MHA", 2: "GQA", 1: "MQA"}[n_kv_heads]
    assert model.tied == tied
    assert model.n_params == model.config.n_params
    prompt = torch.tensor(ids("grouped query attention"))
    runner = ModelRunner(model, n_blocks=8, block_size=8)
    runner.add(0, prompt.tolist())
    got = runner.step([0])
    assert (got - model.forward_nocache(prompt)).abs().max() < TOL


@pytest.mark.parametrize("layout", ["linear", "transposed"])
def test_weight_layouts_give_the_same_logits(layout, tiny, monkeypatch):
    import inferlab.engines.model.linear as linear

    model, _ = tiny
    monkeypatch.setattr(linear, "default_layout", lambda *args: layout)
    other = Llama.from_state_dict(model.config, tiny_state_dict(model.config))
    assert other.layers[0].qkv.layout == layout
    prompt = torch.tensor(ids("layouts"))
    diff = other.forward_nocache(prompt, True) - model.forward_nocache(prompt, True)
    assert diff.abs().max() < TOL


def test_bf16_model_tracks_fp32(tiny):
    model, _ = tiny
    bf16, _ = tiny_model(dtype="bf16")
    assert bf16.dtype == torch.bfloat16
    norms = (2 * 2 + 1) * 64 * 4  # RMSNorm vectors stay fp32
    assert bf16.weight_bytes - norms == (model.weight_bytes - norms) // 2
    prompt = torch.tensor(ids("brain float"))
    a, b = model.forward_nocache(prompt, True), bf16.forward_nocache(prompt, True)
    assert b.dtype == torch.float32
    agree = (a.argmax(-1) == b.argmax(-1)).float().mean()
    assert agree >= 0.8


def test_state_dict_errors_name_the_tensor():
    from inferlab.engines.model.errors import ModelLoadError

    cfg = tiny_config()
    sd = tiny_state_dict(cfg)
    del sd["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ModelLoadError, match="missing tensor 'model.layers.1.mlp.up_proj.weight'"):
        Llama.from_state_dict(cfg, sd)
    sd = tiny_state_dict(cfg)
    sd["model.norm.weight"] = torch.ones(65)
    with pytest.raises(ModelLoadError,
                       match=r"'model.norm.weight' has shape \(65,\), expected \(64,\)"):
        Llama.from_state_dict(cfg, sd)


def test_rms_norm_formula_matches_torch():
    from inferlab.engines.model.llama import _rms_norm_formula

    x, w = torch.randn(3, 64), torch.randn(64)
    ref = torch.nn.functional.rms_norm(x, (64,), w, 1e-5)
    assert (_rms_norm_formula(x, (64,), w, 1e-5) - ref).abs().max() < 1e-5
