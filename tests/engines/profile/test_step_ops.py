"""A profiled step's ops: FLOPs and bytes from shapes against the closed forms and against
torch.profiler's own counts; the native decoder's kernels timed and costed; the lm_head span."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inferlab.engines.kernels.decoder import FINAL_KIND, TIMING_KINDS, recording_timings
from inferlab.engines.model.registry import load_model
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.profile.native_calls import spanned_model
from inferlab.engines.profile.native_ops import NATIVE_LANE
from inferlab.engines.profile.step_profiler import profile_step


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_matmul_and_attention_flops_equal_closed_forms_and_torch():
    x, w, b = torch.randn(8, 64), torch.randn(96, 64), torch.randn(96)
    q, k, v = torch.randn(2, 4, 5, 16), torch.randn(2, 4, 7, 16), torch.randn(2, 4, 7, 8)
    a, c = torch.randn(3, 5, 6), torch.randn(3, 6, 2)

    def step():
        F.linear(x, w, b)
        F.scaled_dot_product_attention(q, k, v)
        torch.bmm(a, c)

    cfg = load_model("tiny")[0].config
    ops = {op.name: op for op in profile_step(step, cfg, repeats=1).ops}
    lin, att, bmm = ops["aten::linear"], ops["aten::scaled_dot_product_attention"], \
        ops["aten::bmm"]
    assert lin.flops == 2 * 8 * 96 * 64
    assert lin.bytes == 4 * (8 * 64 + 96 * 64 + 96 + 8 * 96)
    assert att.flops == 2 * 2 * 4 * 5 * 7 * (16 + 8)
    assert att.bytes == 4 * (2 * 4 * 5 * 16 + 2 * 4 * 7 * 16 + 2 * 4 * 7 * 8 + 2 * 4 * 5 * 8)
    assert bmm.flops == 2 * 3 * 5 * 2 * 6
    # torch.profiler counts the innermost addmm and the bmm the same (its SDPA here runs the
    # math path, whose scaling and softmax ops it counts too)
    assert lin.profiler_flops == lin.flops and bmm.profiler_flops == bmm.flops


def test_top_level_ops_do_not_nest():
    m, _ = load_model("tiny", kernels="torch")
    r = ModelRunner(m, n_blocks=8)
    r.add(0, list(range(20)))
    step = profile_step(lambda: r.forward([(0, 0, 20)]), m.config, repeats=3)
    ops = sorted(step.ops, key=lambda op: op.start_s)
    for a, b in zip(ops, ops[1:], strict=False):
        assert a.end_s <= b.start_s + 1e-9
    # 4 linears per layer + the lm_head (F.linear, or torch.matmul on a transposed weight)
    assert sum(op.name in ("aten::linear", "aten::matmul") for op in ops) == 4 * 2 + 1
    assert 0 < sum(op.dur_s for op in ops) <= step.step_s


def test_native_decoder_kernels_timed_and_costed():
    m, _ = load_model("tiny", kernels="native")
    cfg = m.config
    model = spanned_model(m)
    r = ModelRunner(model, n_blocks=8)
    for i in range(3):
        r.add(i, list(range(10 + i, 20 + i)))
    r.forward([(i, 0, 9) for i in range(3)])
    step = profile_step(lambda: r.forward([(i, 9, 1) for i in range(3)]), cfg, repeats=3)
    native = [op for op in step.ops if op.lane == NATIVE_LANE]
    assert [(op.name, op.layer) for op in native] == [
        (f"native::{kind}", layer) for layer in range(cfg.n_layers) for kind in TIMING_KINDS
    ] + [(f"native::{FINAL_KIND}", cfg.n_layers)]
    by = {(op.name, op.layer): op for op in native}
    d, h, hkv, dh, t = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, 3
    qkv_out = (h + 2 * hkv) * dh
    qkv = by[("native::qkv", 0)]
    assert qkv.flops == 2 * t * qkv_out * d
    assert qkv.bytes == 4 * (t * d + qkv_out * d + t * qkv_out)  # fp32 panels: no padding here
    att = by[("native::attention", 1)]
    assert att.flops == 3 * 2 * h * 1 * 10 * 2 * dh  # 3 sequences, 1 query over 10 keys
    assert att.bytes == 3 * 4 * (h * dh + 2 * hkv * 10 * dh + h * dh)
    head = [op for op in step.ops if op.name == "native::lm_head"]
    assert len(head) == 1 and head[0].flops == 2 * t * cfg.vocab_size * d
    assert all(op.dur_s >= 0 for op in native)
    for a, b in zip(native, native[1:], strict=False):
        assert a.end_s <= b.start_s + 1e-9


def test_timings_are_off_unless_recorded():
    m, _ = load_model("tiny", kernels="native")
    r = ModelRunner(m, n_blocks=8)
    r.add(0, list(range(10)))
    r.forward([(0, 0, 9)])
    with recording_timings() as sink:
        inside = r.forward([(0, 9, 1)])
    outside = r.forward([(0, 9, 1)])
    assert len(sink) == 1 and torch.equal(inside, outside)  # the same step, timed or not
    with recording_timings() as again:
        pass
    assert again == [] and len(sink) == 1
