"""aten_op_cost: closed forms by hand, the roofline lab's matmul_cost, and torch.profiler's
own FLOPs for the ops of a small MLP, a batched matmul and attention recorded with shapes."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.profile.chrome_trace import read_chrome_trace
from inferlab.engines.roofline.aten_costs import aten_op_cost
from inferlab.engines.roofline.layer_costs import matmul_cost


def test_matmuls_by_hand():
    mm = aten_op_cost("aten::mm", [[8, 64], [64, 128]], ["float", "float"])
    assert (mm.flops, mm.bytes_moved) == (2 * 8 * 128 * 64, (8 * 64 + 64 * 128 + 8 * 128) * 4)
    lab = matmul_cost(8, 128, 64, "fp32")
    assert (mm.flops, mm.bytes_moved) == (lab.flops, lab.bytes_moved)  # the roofline lab's
    addmm = aten_op_cost("aten::addmm", [[128], [8, 64], [64, 128], [], []],
                         ["float", "float", "float", "Scalar", "Scalar"])
    assert (addmm.flops, addmm.bytes_moved) == (mm.flops, mm.bytes_moved + 128 * 4)
    bmm = aten_op_cost("aten::bmm", [[3, 4, 5], [3, 5, 6]], ["c10::BFloat16"] * 2)
    assert (bmm.flops, bmm.bytes_moved) == (2 * 3 * 4 * 6 * 5, (60 + 90 + 72) * 2)
    baddbmm = aten_op_cost("aten::baddbmm", [[3, 4, 6], [3, 4, 5], [3, 5, 6], [], []],
                           ["float", "float", "float", "Scalar", "Scalar"])
    assert (baddbmm.flops, baddbmm.bytes_moved) == (bmm.flops, (72 + 60 + 90 + 72) * 4)
    # matmul broadcasts the batch dims and takes 1-D operands
    matmul = aten_op_cost("aten::matmul", [[7, 1, 3, 4], [5, 4, 2]], ["float", "float"])
    assert matmul.flops == 2 * 35 * 3 * 2 * 4
    assert matmul.bytes_moved == (7 * 12 + 5 * 8 + 35 * 6) * 4
    vec = aten_op_cost("aten::matmul", [[4], [4, 2]], ["float", "float"])
    assert (vec.flops, vec.bytes_moved) == (2 * 2 * 4, (4 + 8 + 2) * 4)
    linear = aten_op_cost("aten::linear", [[2, 8, 64], [128, 64], [128]], ["c10::Half"] * 3)
    assert linear.flops == 2 * 16 * 128 * 64
    assert linear.bytes_moved == (16 * 64 + 128 * 64 + 128 + 16 * 128) * 2
    assert aten_op_cost("aten::mm", [[8, 64], [32, 128]], ["float", "float"]) is None


def test_attention_by_hand():
    # Q[B,H,L,E] K[B,Hkv,S,E] V[B,Hkv,S,Ev]
    cost = aten_op_cost("aten::scaled_dot_product_attention",
                        [[2, 4, 16, 32], [2, 4, 24, 32], [2, 4, 24, 8], [], [], []],
                        ["float", "float", "float", "", "double", "bool"])
    assert cost.flops == 2 * 2 * 4 * 16 * 24 * (32 + 8)
    assert cost.bytes_moved == (2 * 4 * 16 * 32 + 2 * 4 * 24 * 32 + 2 * 4 * 24 * 8
                                + 2 * 4 * 16 * 8) * 4


def test_elementwise_by_hand():
    add = aten_op_cost("aten::add", [[8, 32], [32], []], ["float", "float", "Scalar"])
    assert (add.flops, add.bytes_moved) == (256, (256 + 32 + 256) * 4)
    mul = aten_op_cost("aten::mul", [[8, 32], []], ["c10::BFloat16", "long int"])  # 0-d tensor
    assert (mul.flops, mul.bytes_moved) == (256, 256 * 2 + 8 + 256 * 2)
    silu = aten_op_cost("aten::silu", [[4, 5]], ["float"])
    assert (silu.flops, silu.bytes_moved) == (20, 2 * 20 * 4)
    copy = aten_op_cost("aten::copy_", [[4, 5], [4, 5], []], ["c10::Half", "float", "bool"])
    assert (copy.flops, copy.bytes_moved) == (0, 20 * 2 + 20 * 4)
    assert aten_op_cost("aten::view", [[4, 5], []], ["float", "ScalarList"]) is None
    assert aten_op_cost("aten::add", [[4, 5], [3]], ["float", "float"]) is None


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(),
                                torch.nn.Linear(128, 32))
    x = torch.randn(8, 64)
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    q, k, v = torch.randn(2, 4, 16, 32), torch.randn(2, 4, 24, 32), torch.randn(2, 4, 24, 8)
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.no_grad(), torch.profiler.profile(activities=cpu, record_shapes=True,
                                                 with_flops=True) as prof:
        y = model(x)
        _ = y * y + y
        torch.bmm(a, b)
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    path = tmp_path_factory.mktemp("aten_costs") / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, read_chrome_trace(path)


def test_mlp_trace_ops_cost_their_closed_form(profiled):
    _, trace = profiled
    ops = [e for e in trace.events if e.cat == "cpu_op"]
    costs = {}
    for e in ops:
        cost = aten_op_cost(e.name, e.args.get("Input Dims", []), e.args.get("Input type", []))
        if cost is not None:
            costs.setdefault(e.name, []).append(cost.flops)
    assert sorted(costs["aten::addmm"]) == [2 * 8 * 32 * 128, 2 * 8 * 128 * 64]
    assert sorted(costs["aten::linear"]) == sorted(costs["aten::addmm"])
    assert costs["aten::silu"] == [8 * 128]
    assert costs["aten::mul"][0] == costs["aten::add"][0] == 8 * 32
    assert 2 * 3 * 4 * 6 * 5 in costs["aten::bmm"]
    assert costs["aten::scaled_dot_product_attention"] == [2 * 2 * 4 * 16 * 24 * (32 + 8)]


def test_flops_equal_torch_profilers_own_where_it_reports_them(profiled):
    # torch 2.13 on the CPU puts no "flops" in the exported trace; key_averages has them
    prof, trace = profiled
    own = {}
    for row in prof.key_averages(group_by_input_shape=True):
        if row.flops:
            own[(row.key, str(row.input_shapes))] = row.flops / row.count
    assert {name for name, _ in own} >= {"aten::addmm", "aten::bmm", "aten::mul"}
    checked = 0
    for e in trace.events:
        key = (e.name, str(e.args.get("Input Dims")))
        if e.cat == "cpu_op" and key in own:
            cost = aten_op_cost(e.name, e.args["Input Dims"], e.args["Input type"])
            assert cost is not None and cost.flops == own[key], key
            checked += 1
    assert checked >= 4
