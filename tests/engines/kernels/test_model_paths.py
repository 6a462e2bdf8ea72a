"""Whole models on the native kernels against the same models on torch's ops: the same greedy
tokens, alone and in a continuous batch with chunked prefill, preemption and prefix hits."""

from __future__ import annotations

import pytest

from inferlab.engines import kernels
from inferlab.engines.model.generate import generate
from tests.engines.serve.test_engine import make_requests, model_engine, outputs


def _both(load):
    with kernels.use("native"):
        native = load()
    with kernels.use("torch"):
        reference = load()
    assert native.layers[0].qkv.layout == "native"
    assert reference.layers[0].qkv.layout != "native"
    return native, reference


@pytest.fixture(scope="module")
def tiny_pair():
    from inferlab.engines.model.tiny import tiny_model

    return _both(lambda: tiny_model()[0])


def test_tiny_greedy_tokens_alone(tiny_pair):
    native, reference = tiny_pair
    prompts = [[(5 * i + 3 * j) % 256 for j in range(4 + 7 * i)] for i in range(4)]
    with kernels.use("native"):
        fast = generate(native, prompts, max_new_tokens=48)
    with kernels.use("torch"):
        slow = generate(reference, prompts, max_new_tokens=48)
    assert [g.token_ids for g in fast.generations] == [g.token_ids for g in slow.generations]


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_tiny_greedy_tokens_on_an_int8_kv_cache(tiny_pair, kv_dtype):
    """The INT8 (or E4M3) cache: quantized on write and read in the attention kernel (native)
    against quantize-in-torch, gather and dequantize, SDPA (torch)."""
    from inferlab.engines.quant.kv_quant import kv_quantized

    native, reference = tiny_pair
    prompts = [[(3 * i + 5 * j) % 256 for j in range(5 + 9 * i)] for i in range(3)]
    with kernels.use("native"):
        fast = generate(kv_quantized(native, kv_dtype), prompts, max_new_tokens=40)
    with kernels.use("torch"):
        slow = generate(kv_quantized(reference, kv_dtype), prompts, max_new_tokens=40)
    assert [g.token_ids for g in fast.generations] == [g.token_ids for g in slow.generations]


def test_tiny_in_a_continuous_batch_with_preemption_and_prefix_hits(tiny_pair):
    native, reference = tiny_pair
    got = {}
    for path, model in (("native", native), ("torch", reference)):
        with kernels.use(path):
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
    with kernels.use("torch"):
        reference, _ = load_gguf(smollm2_path, "fp32", "cpu", id="smollm2-135m")
    assert reference.layers[0].qkv.layout != "native"
    prompts = [tok.encode_prompt(t) for t in bench_prompts(3)]
    with kernels.use("native"):
        alone = [list(generate(native, [p], max_new_tokens=16).generations[0].token_ids)
                 for p in prompts]
        _, batched = run_continuous(native, prompts, 16)
    with kernels.use("torch"):
        _, expected = run_continuous(reference, prompts, 16)
    assert alone == expected
    assert batched == expected


def test_the_lab_model_cache_keeps_one_model_per_kernel_path():
    from inferlab.engines.model.cache import load_lab_model

    with kernels.use("native"):
        native, _ = load_lab_model("tiny")
        assert load_lab_model("tiny")[0] is native  # cached
    with kernels.use("torch"):
        reference, _ = load_lab_model("tiny")
    assert reference is not native
    assert native.layers[0].qkv.layout == "native"
    assert reference.layers[0].qkv.layout != "native" and reference.glue is None


@pytest.mark.parametrize("setting, under, want", [("native", "torch", "native"),
                                                  ("torch", "native", "torch"),
                                                  ("auto", "torch", "torch"),
                                                  ("auto", "native", "native")])
def test_a_labs_kernels_setting_picks_its_models_path(setting, under, want):
    from inferlab.engines.labs.kv.session import kv_lab_model
    from inferlab.engines.labs.kv.settings import KV_DEFAULTS

    with kernels.use(under):
        model, _ = kv_lab_model(dict(KV_DEFAULTS, model="tiny", kernels=setting))
    assert model.kernel_path == want
    assert (model.layers[0].qkv.layout == "native") == (want == "native")
    assert (model.glue is not None) == (want == "native")


@pytest.mark.parametrize("setting", ["native", "torch"])
def test_the_batching_labs_wall_clock_runs_on_its_kernels_setting(setting):
    from inferlab.engines.labs.batching.section import BATCHING_DEFAULTS, BatchingSession

    session = BatchingSession(dict(BATCHING_DEFAULTS, clock="wall", model="tiny", requests=3,
                                   kernels=setting))
    assert session.model.kernel_path == setting
    while not session.done:
        session.step()
    assert session.step_index > 0


def test_the_speculative_labs_target_runs_on_its_kernels_setting():
    from inferlab.engines.labs.speculative.session import SpeculativeSession
    from inferlab.engines.labs.speculative.settings import speculative_defaults

    with kernels.use("native"):
        session = SpeculativeSession(dict(speculative_defaults(), model="tiny", drafter="ngram",
                                          kernels="torch", max_tokens=8))
    assert session.decoder.target.kernel_path == "torch"


def test_the_quant_labs_fp32_model_runs_on_its_kernels_setting():
    from inferlab.engines.labs.quant.session import QuantSession

    with kernels.use("native"):
        session = QuantSession.open("tiny", kernel_setting="torch")
    assert session.model.kernel_path == "torch"
