"""A trace's ops on a roofline: costed from their recorded shapes by the roofline's own
functions, innermost ops only, against a roof given by hand."""

from __future__ import annotations

import json

import pytest
import torch

from inferlab.app.cli import main
from inferlab.engines.profile.chrome_trace import TraceEvent, read_chrome_trace
from inferlab.engines.profile.op_roofline import Roof, counted_once, op_points
from inferlab.engines.roofline.aten_costs import Tensor, matmul_flops_bytes

ROOF = Roof("test", {"fp32": 1e11, "bf16": 4e11}, 2e10)
FORWARDS = 3


def op(name, ts, dur, dims=None, types=None, tid=1):
    args = {} if dims is None else {"Input Dims": dims, "Input type": types}
    return TraceEvent(name, "cpu_op", ts, dur, 1, tid, args)


def test_each_piece_of_work_counts_once():
    outer = op("aten::linear", 0.0, 10.0)
    inner = op("aten::addmm", 1.0, 8.0)  # the linear gives way to its own family
    bias_copy = op("aten::copy_", 2.0, 1.0)  # part of the addmm
    after = op("aten::relu", 10.0, 2.0)  # starts as the linear ends: not inside it
    other_thread = op("aten::mm", 2.0, 1.0, tid=2)
    sdpa = op("aten::scaled_dot_product_attention", 20.0, 10.0)
    flash = op("aten::_scaled_dot_product_flash_attention_for_cpu", 21.0, 8.0)
    math_bmm = op("aten::bmm", 22.0, 1.0)  # inside the kept attention: part of it
    kept = counted_once([after, outer, other_thread, inner, bias_copy, sdpa, flash, math_bmm])
    assert sorted(e.name for e in kept) == [
        "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::addmm", "aten::mm",
        "aten::relu"]


def test_a_matmul_on_the_roof_by_hand():
    dims, types = [[16, 256], [256, 512]], ["float", "float"]
    events = [op("aten::mm", 10.0 * i, 5.0, dims, types) for i in range(4)]
    (point,) = op_points(events, ROOF)
    flops, moved = matmul_flops_bytes(Tensor([16, 256], 4), Tensor([256, 512], 4))
    assert (point.calls, point.flops, point.bytes) == (4, 4 * flops, 4 * moved)
    assert point.time_s == pytest.approx(20e-6)
    assert point.at_roof_s == pytest.approx(max(4 * flops / 1e11, 4 * moved / 2e10))
    assert point.of_roof == pytest.approx(point.at_roof_s / 20e-6)
    assert point.achieved_flops_per_s == pytest.approx(4 * flops / 20e-6)


def test_a_dtype_without_a_peak_uses_fp32s_and_says_so():
    dims = [[4, 8], [8, 8]]
    (bf16,) = op_points([op("aten::mm", 0, 1, dims, ["c10::BFloat16"] * 2)], ROOF)
    (fp16,) = op_points([op("aten::mm", 0, 1, dims, ["c10::Half"] * 2)], ROOF)
    assert (bf16.dtype, bf16.peak_dtype) == ("bf16", "bf16")
    assert (fp16.dtype, fp16.peak_dtype) == ("fp16", "fp32")


@pytest.fixture(scope="module")
def mlp_trace(tmp_path_factory) -> str:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 32))
    x = torch.randn(8, 64)
    with torch.no_grad(), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(FORWARDS):
            model(x)
    path = tmp_path_factory.mktemp("op_roofline") / "mlp.json"
    prof.export_chrome_trace(str(path))
    return str(path)


def test_a_torch_trace_gives_each_layer_once(mlp_trace):
    points = op_points(read_chrome_trace(mlp_trace).events, ROOF)
    matmuls = sorted((p for p in points if p.name == "aten::addmm"), key=lambda p: p.flops)
    assert [p.calls for p in matmuls] == [FORWARDS, FORWARDS]
    assert not any(p.name == "aten::linear" for p in points)  # its addmm counts, once
    assert not any(p.name == "aten::copy_" for p in points)  # addmm's bias copy is in it
    # addmm(bias, x, W^T): 2·m·n·k each, as the roofline's matmul cost counts them
    assert [p.flops / FORWARDS for p in matmuls] == pytest.approx(
        [matmul_flops_bytes(Tensor([8, 128], 4), Tensor([128, 32], 4), [Tensor([32], 4)])[0],
         matmul_flops_bytes(Tensor([8, 64], 4), Tensor([64, 128], 4), [Tensor([128], 4)])[0]])


def test_cli_roofline_json(mlp_trace, capsys):
    assert main(["profile", "open", mlp_trace, "--roofline", "h100-sxm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["roofline"]["roof"]["name"] == "h100-sxm"
    names = {p["name"] for p in out["roofline"]["ops"]}
    assert "aten::addmm" in names
    for p in out["roofline"]["ops"]:
        assert p["at_roof_s"] <= p["time_s"]  # nothing beats an H100's roof on this CPU
