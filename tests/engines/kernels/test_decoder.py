"""Every layer of a step in one native call (`engines.kernels.decoder`) against the same model
calling the kernels one at a time from Python (`one_call_per_step = False`): the same logits
bit for bit, since the same kernels run in the same order. Decode, K+1 verification and
mixed batches; fp32, INT8 (symmetric, affine, Q8_0's groups), FP8 E4M3 and INT4 weights,
INT4 behind AWQ's input scales; fp32, INT8 and FP8 E4M3 caches."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from inferlab.engines.kernels import fused
from inferlab.engines.model.linear import Linear
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.quant.affine import quantize_uniform
from inferlab.engines.quant.fp8 import quantize_fp8
from inferlab.engines.quant.gguf_blocks import quantize_q8_0
from inferlab.engines.quant.kv_quant import kv_quantized
from inferlab.engines.quant.lowbit_linear import (
    Fp8Linear,
    GroupInt8Linear,
    ZeroPointInt8Linear,
    lowbit_model,
)
from inferlab.engines.quant.runtime import InputScaledLinear


@pytest.fixture
def tiny():
    return tiny_model(kernels="native")[0]


def _models(tiny):
    return {"fp32": tiny, "int8": lowbit_model(tiny, 8), "int4": lowbit_model(tiny, 4, 32),
            "int4-awq": _input_scaled(lowbit_model(tiny, 4, 32)),
            "int8-affine": _each_linear(tiny, _affine), "fp8": _each_linear(tiny, _fp8),
            "q8_0": _each_linear(tiny, _q8_0)}


def _each_linear(tiny, make):
    """A copy of `tiny` whose every layer linear is `make(its fp32 linear)`."""
    model = lowbit_model(tiny, 8)  # a copy whose layers we may replace
    model.layers = [dataclasses.replace(lw, **{name: make(getattr(tl, name)) for name in
                                               ("qkv", "o", "gate_up", "down")})
                    for lw, tl in zip(model.layers, tiny.layers, strict=True)]
    return model


def _fp8(linear):
    """FP8 E4M3 codes, one scale per matrix."""
    rec = quantize_fp8(linear.weight.float(), "e4m3")
    return Fp8Linear(rec.codes, rec.scale)


def _q8_0(linear):
    """INT8 with a scale per block of 32 along the input (llama.cpp's Q8_0)."""
    rec = quantize_q8_0(linear.weight.float())
    return GroupInt8Linear(rec.q, rec.scales, 32)


def _affine(linear):
    """Affine INT8 per output row (a zero point each)."""
    rec = quantize_uniform(linear.weight.float(), bits=8, axis=0, symmetric=False)
    assert rec.zero_point.abs().sum() > 0
    return ZeroPointInt8Linear(rec.q, rec.scale, rec.zero_point)


def _input_scaled(model):
    """Every linear of `model` behind an input scale s in [0.5, 2) (AWQ at run time)."""
    g = torch.Generator().manual_seed(3)
    model.layers = [dataclasses.replace(lw, **{
        name: InputScaledLinear(getattr(lw, name),
                                0.5 + 1.5 * torch.rand(getattr(lw, name).in_features, generator=g))
        for name in ("qkv", "o", "gate_up", "down")}) for lw in model.layers]
    return model


def _script(model, one_call: bool, kv: str = "fp32"):
    """Prefill three prompts, decode them together, then verify 4 drafts on one while the
    others decode (a mixed step): every step's logits, and the model that ran (a copy reading
    an INT8 or E4M3 cache, for kv "int8" or "fp8-e4m3")."""
    model.one_call_per_step = one_call
    m = kv_quantized(model, kv) if kv != "fp32" else model
    runner = ModelRunner(m, n_blocks=64, block_size=8)
    prompts = {"a": [5, 9, 2, 7, 1, 3], "b": list(range(20, 37)), "c": [40]}
    out = []
    for sid, ids in prompts.items():
        runner.add(sid, ids)
        out.append(runner.step([sid]))
    nxt = {sid: int(out[i].argmax()) for i, sid in enumerate(prompts)}
    for _ in range(3):
        for sid in prompts:
            runner.append(sid, nxt[sid])
        logits = runner.step(list(prompts))
        out.append(logits)
        nxt = {sid: int(logits[i].argmax()) for i, sid in enumerate(prompts)}
    runner.append_tokens("a", [nxt["a"], 11, 12, 13, 14])
    runner.append("b", nxt["b"])
    runner.append("c", nxt["c"])
    out.append(runner.step(["a", "b", "c"], logits="all"))
    return out, m


@pytest.mark.parametrize("weights", ["fp32", "int8", "int8-affine", "q8_0", "fp8", "int4",
                                     "int4-awq"])
@pytest.mark.parametrize("kv", ["fp32", "int8", "fp8-e4m3"])
def test_one_call_per_step_gives_the_per_op_logits_bit_for_bit(tiny, weights, kv):
    model = _models(tiny)[weights]
    per_op, ran = _script(model, False, kv)
    assert ran._decoder is None  # the per-op path never built a plan
    one_call, ran = _script(model, True, kv)
    assert ran._decoder is not None and ran._decoder.layers is not None
    assert len(per_op) == len(one_call)
    for a, b in zip(per_op, one_call, strict=True):
        assert torch.equal(a, b)


def _count_per_op_calls(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("add_rms_norm", "rope", "silu_mul", "write_kv"):
        real = getattr(fused.Glue, name)

        def counted(self, *a, _name=name, _real=real, **k):
            calls.append(_name)
            return _real(self, *a, **k)

        monkeypatch.setattr(fused.Glue, name, counted)
    return calls


def test_a_step_in_one_call_makes_no_per_op_call(tiny, monkeypatch):
    calls = _count_per_op_calls(monkeypatch)
    model = lowbit_model(tiny, 4, 32)
    runner = ModelRunner(model, n_blocks=16, block_size=8)
    runner.add("a", [1, 2, 3])
    first = runner.step(["a"])  # a 3-token prefill: also in one call
    runner.append("a", int(first.argmax()))
    runner.step(["a"])
    assert calls == []
    model.one_call_per_step = False
    runner.append("a", 4)
    runner.step(["a"])
    assert calls.count("add_rms_norm") == 2 * model.config.n_layers


def test_a_replaced_layer_is_described_again(tiny):
    model = lowbit_model(tiny, 8)
    runner = ModelRunner(model, n_blocks=16, block_size=8)
    runner.add("a", [1, 2, 3])
    runner.step(["a"])
    plan = model._decoder
    w = model.layers[1].o.dequantize()
    model.layers[1].o = Linear(w * 2)  # an fp32 layer on the native layout
    runner.append("a", 4)
    got = runner.step(["a"])
    assert model._decoder is not plan and model._decoder.layers is not None
    model.one_call_per_step = False
    runner.truncate("a", 3)
    runner.append("a", 4)
    assert torch.equal(runner.step(["a"]), got)


def test_a_layer_off_the_native_kernels_keeps_the_per_op_path(tiny):
    model = lowbit_model(tiny, 8)
    model.layers[0].down = Linear(model.layers[0].down.dequantize(), layout="linear")
    runner = ModelRunner(model, n_blocks=16, block_size=8)
    runner.add("a", [1, 2, 3])
    got = runner.step(["a"])
    assert model._decoder.layers is None
    model.one_call_per_step = False
    runner.free("a")
    runner.add("a", [1, 2, 3])
    assert torch.equal(runner.step(["a"]), got)


class _FewRows:
    """A linear that offers the decoder its operand for at most `rows` rows (as a bf16 or
    low-bit layer does) and otherwise runs as the wrapped one."""

    def __init__(self, inner: Linear, rows: int) -> None:
        self.inner, self.rows = inner, rows

    def __call__(self, x):
        return self.inner(x)

    def native_operand(self):
        return dataclasses.replace(self.inner.native_operand(), max_rows=self.rows)


def _step_logits(model, calls, n_seqs: int):
    """The logits of one step decoding `n_seqs` one-token prompts together, for the one-call
    and the per-op path, and how many per-op RMSNorms each ran."""
    runner = ModelRunner(model, n_blocks=64, block_size=8)
    seqs = [f"s{i}" for i in range(n_seqs)]
    logits, norms = {}, {}
    for one_call in (True, False):
        model.one_call_per_step = one_call
        for sid in seqs:
            runner.add(sid, [7 + len(sid)])
        calls.clear()
        logits[one_call] = runner.step(seqs)
        norms[one_call] = calls.count("add_rms_norm")
        for sid in seqs:
            runner.free(sid)
    model.one_call_per_step = True
    return logits, norms


def test_more_rows_than_a_linear_offers_run_per_op(tiny, monkeypatch):
    """A step past the fewest rows any linear's operand offers (`max_rows`) runs the per-op
    path, and its logits are the per-op path's."""
    calls = _count_per_op_calls(monkeypatch)
    tiny.layers[1].down = _FewRows(tiny.layers[1].down, 3)
    logits, norms = _step_logits(tiny, calls, 4)
    assert tiny._decoder.max_rows == 3
    assert norms == {True: 2 * tiny.config.n_layers, False: 2 * tiny.config.n_layers}
    assert torch.equal(logits[True], logits[False])
    logits, norms = _step_logits(tiny, calls, 3)
    assert norms[True] == 0 and torch.equal(logits[True], logits[False])


def test_fp32_panels_run_a_large_batch_in_one_call(tiny, monkeypatch):
    """fp32 weights are packed in panels, which take every row count: a 40-sequence decode
    step is one call, bit for bit the per-op path's."""
    calls = _count_per_op_calls(monkeypatch)
    assert tiny.layers[0].qkv.native_operand().kind == "f32p"
    logits, norms = _step_logits(tiny, calls, 40)
    assert norms == {True: 0, False: 2 * tiny.config.n_layers}
    assert torch.equal(logits[True], logits[False])
