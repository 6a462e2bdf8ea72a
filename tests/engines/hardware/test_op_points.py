import json

import pytest
import torch

from inferlab.engines.hardware import op_points
from inferlab.engines.hardware.cancel import Cancelled
from inferlab.engines.hardware.microbench import MeasuredPoint, measure_op_points
from inferlab.engines.hardware.op_points import PointSizes
from inferlab.engines.roofline.costs import matmul_cost

TINY = PointSizes(square_n=(16, 32), skinny_m=(1, 4), weight_kn=64, repeats=2, warmup=1)


@pytest.fixture
def tiny_sizes(monkeypatch):
    monkeypatch.setattr(op_points, "point_sizes", lambda kind, quick=False: TINY)


def test_points_take_flops_and_bytes_from_matmul_cost(tiny_sizes):
    points = measure_op_points("cpu", "fp32", quick=True)
    shapes = [(16, 16, 16), (32, 32, 32), (1, 64, 64), (4, 64, 64), (1, 64, 64), (4, 64, 64)]
    assert len(points) == len(shapes)
    for point, (m, n, k) in zip(points, shapes, strict=True):
        cost = matmul_cost(m, n, k, "fp32")
        assert point.flops == cost.flops and point.bytes_moved == cost.bytes_moved
        assert point.seconds > 0
    assert [p.name for p in points] == [
        "matmul 16x16x16 fp32",
        "matmul 32x32x32 fp32",
        "skinny M=1 K=64 N=64 fp32",
        "skinny M=4 K=64 N=64 fp32",
        "skinny M=1 K=64 N=64 fp32 native kernels",  # the same products on engines/kernels
        "skinny M=4 K=64 N=64 fp32 native kernels",
    ]


def test_without_the_native_library_only_torch_is_timed(tiny_sizes, monkeypatch):
    monkeypatch.setattr(op_points.kernels, "native_available", lambda: False)
    names = [p.name for p in measure_op_points("cpu", "fp32", quick=True)]
    assert not any(n.endswith(op_points.NATIVE_SUFFIX) for n in names) and len(names) == 4


def test_quick_cpu_sizes_run_for_real_in_bf16():
    if "bf16" not in op_points.get_device("cpu").compute_dtypes:
        pytest.skip("no native bf16 matmul on this CPU")
    progress = []
    points = measure_op_points("cpu", "bf16", quick=True, progress=lambda f, m: progress.append(f))
    sizes = op_points.point_sizes("cpu", quick=True)
    torch_points = [p for p in points if not p.name.endswith(op_points.NATIVE_SUFFIX)]
    assert len(torch_points) == len(sizes.square_n) + len(sizes.skinny_m)
    assert progress[0] == 0.0 and progress[-1] == 1.0 and progress == sorted(progress)
    for point in points:
        assert point.achieved_flops_per_s > 0
    kn = sizes.weight_kn
    assert torch_points[-1].flops == matmul_cost(sizes.skinny_m[-1], kn, kn, "bf16").flops


def test_a_dtype_without_a_kernel_is_refused():
    with pytest.raises(ValueError, match="not a compute dtype of cpu"):
        measure_op_points("cpu", "int8", quick=True)


def test_should_stop_cancels(tiny_sizes):
    with pytest.raises(Cancelled):
        measure_op_points("cpu", quick=True, should_stop=lambda: True)


def test_point_properties_and_round_trip():
    point = MeasuredPoint("matmul 2x2x2 fp32", flops=16.0, bytes_moved=48.0, seconds=2.0)
    assert point.achieved_flops_per_s == 8.0
    assert point.intensity == pytest.approx(1 / 3)
    data = json.loads(json.dumps(point.to_dict()))
    assert data["achieved_flops_per_s"] == 8.0
    assert MeasuredPoint.from_dict(data) == point


@pytest.mark.parametrize("field", ["name", "flops", "bytes_moved", "seconds"])
def test_point_from_dict_names_the_bad_field(field):
    data = MeasuredPoint("x", 1.0, 1.0, 1.0).to_dict()
    data[field] = None
    with pytest.raises(ValueError, match=f"'{field}'"):
        MeasuredPoint.from_dict(data)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_points_in_half_precision():
    points = measure_op_points("cuda:0", "fp16", quick=True)
    assert points and all(p.seconds > 0 for p in points)
