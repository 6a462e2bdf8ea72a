"""Whole models on the native kernels against the same models on torch's ops: the same greedy
tokens, alone and in a continuous batch with chunked prefill, preemption and prefix hits."""

from __future__ import annotations

import pytest

from inferlab.engines import kernels
from inferlab.engines.labs.batching.session import BatchingSession
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.labs.kv.session import kv_lab_model
from inferlab.engines.labs.kv.settings import KV_DEFAULTS
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.labs.speculative.session import SpeculativeSession
from inferlab.engines.labs.speculative.settings import speculative_defaults
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.generate import generate
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.kv_quant import kv_quantized
from tests.engines.serve.test_engine import make_requests, model_engine, outputs


def _both(load):
    native, reference = load("native"), load("torch")
    assert native.layers[0].qkv.layout == "native" and native.kernel_path == "native"
    assert reference.layers[0].qkv.layout != "native" and reference.kernel_path == "torch"
    return native, reference


@pytest.fixture(scope="module")
def tiny_pair():
    return _both(lambda path: tiny_model(kernels=path)[0])


def test_tiny_greedy_tokens_alone(tiny_pair):
    native, reference = tiny_pair
    prompts = [[(5 * i + 3 * j) % 256 for j in range(4 + 7 * i)] for i in range(4)]
    fast = generate(native, prompts, max_new_tokens=48)
    slow = generate(reference, prompts, max_new_tokens=48)
    assert [g.token_ids for g in fast.generations] == [g.token_ids for g in slow.generations]


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_tiny_greedy_tokens_on_an_int8_kv_cache(tiny_pair, kv_dtype):
    """The INT8 (or E4M3) cache: quantized on write and read in the attention kernel (native)
    against quantize-in-torch, gather and dequantize, SDPA (torch)."""
    native, reference = tiny_pair
    prompts = [[(3 * i + 5 * j) % 256 for j in range(5 + 9 * i)] for i in range(3)]
    fast = generate(kv_quantized(native, kv_dtype), prompts, max_new_tokens=40)
    slow = generate(kv_quantized(reference, kv_dtype), prompts, max_new_tokens=40)
    assert [g.token_ids for g in fast.generations] == [g.token_ids for g in slow.generations]


def test_tiny_in_a_continuous_batch_with_preemption_and_prefix_hits(tiny_pair):
    native, reference = tiny_pair
    got = {}
    for path, model in (("native", native), ("torch", reference)):
        engine, runner = model_engine(model, make_requests(), n_blocks=12, budget=8,
                                      prefix=True)
        records = engine.run()
        assert sum(len(r.preempted) for r in records) > 0
        assert runner.blocks.prefix_hit_tokens > 0
        assert runner.blocks.n_free_blocks == runner.blocks.n_blocks  # the pool is whole
        got[path] = outputs(engine)
    assert got["native"] == got["torch"]


def test_smollm2_greedy_tokens_alone_and_batched(smollm2, smollm2_path):
    """The session's SmolLM2 (native, the default path) against a second load on torch's
    ops: 3 prompts, 16 tokens each, alone and in a continuous batch (each token a step
    through every kernel of both paths; more tokens repeat the same steps)."""
    from inferlab.engines.labs.batching.concurrent_bench import bench_prompts, run_continuous
    from inferlab.engines.model.gguf_loader import load_gguf

    native, tok = smollm2
    assert native.layers[0].qkv.layout == "native"
    reference, _ = load_gguf(smollm2_path, "fp32", "cpu", id="smollm2-135m", kernels="torch")
    assert reference.layers[0].qkv.layout != "native"
    prompts = [tok.encode_prompt(t) for t in bench_prompts(3)]
    alone = [list(generate(native, [p], max_new_tokens=16).generations[0].token_ids)
             for p in prompts]
    _, batched = run_continuous(native, prompts, 16)
    _, expected = run_continuous(reference, prompts, 16)
    assert alone == expected
    assert batched == expected


def test_the_lab_model_cache_keeps_one_model_per_kernel_path(monkeypatch):
    native, _ = load_lab_model("tiny", kernels="native")
    assert load_lab_model("tiny", kernels="native")[0] is native  # cached
    reference, _ = load_lab_model("tiny", kernels="torch")
    assert reference is not native
    assert native.layers[0].qkv.layout == "native"
    assert reference.layers[0].qkv.layout != "native" and reference.glue is None
    monkeypatch.setattr(kernels, "_default", "torch")  # `--kernels torch`: what auto means
    assert load_lab_model("tiny")[0] is reference


@pytest.mark.parametrize("setting, default, want", [("native", "torch", "native"),
                                                    ("torch", "native", "torch"),
                                                    ("auto", "torch", "torch"),
                                                    ("auto", "native", "native")])
def test_a_labs_kernels_setting_picks_its_models_path(monkeypatch, setting, default, want):
    monkeypatch.setattr(kernels, "_default", default)  # the command line's `--kernels`
    model, _ = kv_lab_model(dict(KV_DEFAULTS, model="tiny", kernels=setting))
    assert model.kernel_path == want
    assert (model.layers[0].qkv.layout == "native") == (want == "native")
    assert (model.glue is not None) == (want == "native")


@pytest.mark.parametrize("setting", ["native", "torch"])
def test_the_batching_labs_wall_clock_runs_on_its_kernels_setting(setting):
    session = BatchingSession(dict(BATCHING_DEFAULTS, clock="wall", model="tiny", requests=3,
                                   kernels=setting))
    assert session.model.kernel_path == setting
    while not session.done:
        session.step()
    assert session.step_index > 0


@pytest.mark.parametrize("drafter", ["ngram", "tiny", "layerskip:1"])
def test_the_speculative_labs_target_and_draft_run_on_its_kernels_setting(drafter):
    session = SpeculativeSession(dict(speculative_defaults(), model="tiny", drafter=drafter,
                                      kernels="torch", max_tokens=8))
    assert session.decoder.target.kernel_path == "torch"
    draft = getattr(session.decoder.drafter, "model", None)
    assert draft is None or (draft.kernel_path == "torch" and draft.glue is None)


def test_the_quant_labs_fp32_model_runs_on_its_kernels_setting():
    session = QuantSession.open("tiny", kernel_setting="torch")
    assert session.model.kernel_path == "torch"
