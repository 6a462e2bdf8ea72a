import json
import math

import pytest
import torch

from inferlab.engines.hardware import microbench
from inferlab.engines.hardware.discovery import get_device
from inferlab.engines.hardware.microbench import (
    Cancelled,
    MeasuredRoofs,
    measure_copy_bandwidth,
    measure_matmul_flops,
    measure_read_bandwidth,
    measure_roofs,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


def test_matmul_flops_is_a_positive_rate():
    assert _positive_finite(measure_matmul_flops("cpu", "fp32", n=64, repeats=2, warmup=0))


def test_copy_bandwidth_is_a_positive_rate():
    assert _positive_finite(measure_copy_bandwidth("cpu", nbytes=2**20, repeats=2, warmup=1))


def test_read_bandwidth_counts_the_bytes_read_once(monkeypatch):
    assert _positive_finite(measure_read_bandwidth("cpu", nbytes=2**20, repeats=2, warmup=1))
    sums = []
    monkeypatch.setattr(microbench, "median_call_s", lambda fn, *a: sums.append(fn()) or 0.5)
    assert measure_read_bandwidth("cpu", nbytes=4 * 1000 + 3) == 4 * 1000 / 0.5
    assert float(sums[0]) == 1000.0  # it summed the whole buffer of ones


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown device 'cuda:7'"):
        measure_matmul_flops("cuda:7", n=8)
    with pytest.raises(ValueError, match="compute dtype"):
        measure_matmul_flops("cpu", "int8", n=8)
    with pytest.raises(ValueError, match="n must be"):
        measure_matmul_flops("cpu", n=0)
    with pytest.raises(ValueError, match="repeats"):
        measure_copy_bandwidth("cpu", nbytes=1024, repeats=0)


def test_quick_roofs_cover_every_compute_dtype_and_report_progress():
    calls = []
    roofs = measure_roofs("cpu", quick=True, progress=lambda f, m: calls.append((f, m)))
    assert roofs.device == "cpu"
    assert tuple(roofs.peak_flops) == get_device("cpu").compute_dtypes
    assert all(_positive_finite(v) for v in roofs.peak_flops.values())
    assert _positive_finite(roofs.bw_bytes_per_s)
    sizes = microbench.roof_sizes("cpu", quick=True)
    assert (roofs.matmul_n, roofs.copy_bytes, roofs.repeats, roofs.rounds) == (
        sizes.matmul_n,
        sizes.copy_bytes,
        sizes.repeats,
        sizes.rounds,
    )
    fractions = [f for f, _ in calls]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    # every piece in every round, then the final 1.0
    assert len(calls) == sizes.rounds * (len(roofs.peak_flops) + 1) + 1
    assert all(isinstance(m, str) and m for _, m in calls)


def _roofs() -> MeasuredRoofs:
    return MeasuredRoofs("cpu", {"fp32": 1.6e11, "bf16": 4.0e11}, 2.0e10, 2048, 256 * 2**20, 5)


def test_roofs_to_dict_has_the_knees_and_round_trips():
    roofs = _roofs()
    data = json.loads(json.dumps(roofs.to_dict()))
    assert data["bandwidth_bytes_per_s"] == 2.0e10
    assert data["knee_flops_per_byte"] == {"fp32": 8.0, "bf16": 20.0}
    assert (data["matmul_n"], data["copy_bytes"], data["repeats"]) == (2048, 256 * 2**20, 5)
    assert MeasuredRoofs.from_dict(data) == roofs


def test_roofs_without_rounds_read_as_one_round():
    data = _roofs().to_dict()
    data.pop("rounds")
    assert MeasuredRoofs.from_dict(data).rounds == 1


def test_each_piece_keeps_its_best_round(monkeypatch):
    rates = iter([1.0, 3.0, 2.0])  # fp32 in rounds 1, 2, 3
    three_rounds = microbench.RoofSizes(64, 1024, repeats=1, warmup=0, rounds=3)
    monkeypatch.setattr(microbench, "roof_sizes", lambda kind, quick=False: three_rounds)
    monkeypatch.setattr(microbench, "get_device", lambda device: _cpu_with(("fp32",)))
    monkeypatch.setattr(microbench, "measure_matmul_flops", lambda *a: next(rates))
    bandwidths = iter([5.0, 4.0, 6.0])
    monkeypatch.setattr(microbench, "measure_copy_bandwidth", lambda *a: next(bandwidths))
    roofs = measure_roofs("cpu")
    assert roofs.peak_flops == {"fp32": 3.0} and roofs.bw_bytes_per_s == 6.0


def _cpu_with(dtypes):
    import dataclasses

    return dataclasses.replace(get_device("cpu"), compute_dtypes=dtypes)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("device"), "device"),
        (lambda d: d.update(peak_flops={}), "peak_flops"),
        (lambda d: d["peak_flops"].update(fp32=-1.0), "peak_flops.fp32"),
        (lambda d: d.update(bandwidth_bytes_per_s=float("nan")), "bandwidth_bytes_per_s"),
        (lambda d: d.update(matmul_n=0), "matmul_n"),
        (lambda d: d.update(copy_bytes="big"), "copy_bytes"),
        (lambda d: d.pop("repeats"), "repeats"),
    ],
)
def test_roofs_from_dict_names_the_bad_field(change, field):
    data = _roofs().to_dict()
    change(data)
    with pytest.raises(ValueError, match=f"'{field}'"):
        MeasuredRoofs.from_dict(data)


def test_should_stop_cancels_before_any_work():
    progress = []
    with pytest.raises(Cancelled):
        measure_roofs("cpu", quick=True, progress=lambda f, m: progress.append(f),
                      should_stop=lambda: True)
    assert progress == []


def test_should_stop_cancels_between_pieces():
    polls = []

    def should_stop():
        polls.append(1)
        return len(polls) > 1  # let the first piece run, stop at the next poll

    progress = []
    with pytest.raises(Cancelled):
        measure_roofs("cpu", quick=True, progress=lambda f, m: progress.append(f),
                      should_stop=should_stop)
    assert progress == [0.0]


@pytest.mark.gpu
@needs_cuda
def test_cuda_roofs_in_every_compute_dtype():
    info = get_device("cuda:0")
    roofs = measure_roofs("cuda:0", quick=True)
    assert roofs.device == "cuda:0"
    assert tuple(roofs.peak_flops) == info.compute_dtypes
    assert {"fp16"} <= set(roofs.peak_flops)
    if tuple(map(int, info.details["capability"].split("."))) >= (8, 0):
        assert "bf16" in roofs.peak_flops
    assert all(_positive_finite(v) for v in roofs.peak_flops.values())
    assert _positive_finite(roofs.bw_bytes_per_s)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_cuda_matmul_in_reduced_precision(dtype):
    if dtype not in get_device("cuda:0").compute_dtypes:
        pytest.skip(f"{dtype} has no native matmul on this GPU")
    assert _positive_finite(measure_matmul_flops("cuda:0", dtype, n=1024, repeats=3))
