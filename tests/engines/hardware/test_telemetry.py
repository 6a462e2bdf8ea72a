import json
import math
import threading
import time

import numpy as np
import pytest
import torch

from inferlab.engines.hardware import nvml, telemetry
from inferlab.engines.hardware.telemetry import GpuSeries, TelemetryHistory, TelemetrySampler


def test_sample_once_reads_cpu_and_ram():
    sampler = TelemetrySampler(gpus=[])
    sampler.sample_once()
    sampler.sample_once()
    history = sampler.history()
    assert len(history) == 2
    assert history.cpu_percent.shape == (2, history.cpu_cores)
    assert history.cpu_cores >= 1
    assert np.all((history.cpu_percent >= 0) & (history.cpu_percent <= 100))
    assert history.ram_total_bytes > 0
    assert np.all((history.ram_used_bytes > 0) & (history.ram_used_bytes <= history.ram_total_bytes))
    assert history.t_s[0] >= 0 and history.t_s[1] >= history.t_s[0]
    assert history.gpus == ()


def test_capacity_keeps_the_newest_samples():
    sampler = TelemetrySampler(capacity=3, gpus=[])
    for _ in range(5):
        sampler.sample_once()
    t_s = sampler.history().t_s
    assert len(t_s) == 3 and np.all(np.diff(t_s) >= 0)


def test_set_rate_clamps_to_1_to_10_hz():
    sampler = TelemetrySampler(hz=50, gpus=[])
    assert sampler.hz == 10.0
    assert sampler.set_rate(0.2) == 1.0 and sampler.hz == 1.0
    assert sampler.set_rate(4) == 4.0
    assert sampler.set_rate(1e9) == 10.0
    with pytest.raises(ValueError):
        sampler.set_rate(float("nan"))


def test_start_samples_on_a_thread_and_stop_joins_it():
    sampler = TelemetrySampler(hz=10, gpus=[])
    sampler.start()
    sampler.start()  # a second start is a no-op
    assert sampler.running
    deadline = time.monotonic() + 30.0  # a hang guard, not a speed bound (a shared machine)
    while len(sampler.history()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.set_rate(1)  # wakes the thread, which then waits a second
    sampler.stop()
    assert not sampler.running
    assert not any(t.name == "inferlab-telemetry" and t.is_alive() for t in threading.enumerate())
    count = len(sampler.history())
    assert count >= 2
    time.sleep(0.15)
    assert len(sampler.history()) == count  # nothing sampled after stop


def test_restart_after_stop():
    sampler = TelemetrySampler(hz=10, gpus=[])
    sampler.start()
    sampler.stop()
    sampler.start()
    assert sampler.running
    sampler.stop()
    assert not sampler.running


def test_gpu_without_nvml_is_a_nan_column(monkeypatch):
    monkeypatch.setattr(nvml, "nvml", lambda: None)
    sampler = TelemetrySampler(gpus=["cuda:0"])
    sampler.sample_once()
    (gpu,) = sampler.history().gpus
    assert gpu.id == "cuda:0"
    assert all(math.isnan(getattr(gpu, name)[0]) for name in telemetry.GPU_SERIES)


def test_gpu_readings_land_in_their_series(monkeypatch):
    readings = iter([(10.0, 1e9, 8e9, 50.0, 1500.0), (20.0, 2e9, 8e9, math.nan, 1600.0)])
    monkeypatch.setattr(telemetry, "_handle", lambda gpu_id: "handle")
    monkeypatch.setattr(nvml, "read_gpu", lambda handle: next(readings))
    sampler = TelemetrySampler(gpus=["cuda:0"])
    sampler.sample_once()
    sampler.sample_once()
    (gpu,) = sampler.history().gpus
    assert gpu.util_percent.tolist() == [10.0, 20.0]
    assert gpu.mem_used_bytes.tolist() == [1e9, 2e9]
    assert gpu.mem_total_bytes.tolist() == [8e9, 8e9]
    assert gpu.power_w[0] == 50.0 and math.isnan(gpu.power_w[1])
    assert gpu.sm_clock_mhz.tolist() == [1500.0, 1600.0]


def test_bad_gpu_id_is_refused():
    with pytest.raises(ValueError, match="cuda:0"):
        TelemetrySampler(gpus=["gpu0"])


def _history() -> TelemetryHistory:
    gpu = GpuSeries(
        "cuda:0",
        util_percent=[10.0, np.nan, 30.0],
        mem_used_bytes=[1.0, 2.0, 3.0],
        mem_total_bytes=[8.0, 8.0, 8.0],
        power_w=[np.nan, np.nan, np.nan],
        sm_clock_mhz=[1.0, 2.0, 3.0],
    )
    return TelemetryHistory(
        t_s=[0.0, 0.5, 1.0],
        cpu_percent=[[1.0, 2.0], [3.0, np.nan], [5.0, 6.0]],
        ram_used_bytes=[100.0, 200.0, 300.0],
        ram_total_bytes=1000,
        gpus=(gpu,),
    )


def test_history_round_trips_through_json():
    history = _history()
    data = json.loads(json.dumps(history.to_dict(), allow_nan=False))
    back = TelemetryHistory.from_dict(data)
    np.testing.assert_array_equal(back.t_s, history.t_s)
    np.testing.assert_array_equal(back.cpu_percent, history.cpu_percent)  # NaN == NaN here
    np.testing.assert_array_equal(back.ram_used_bytes, history.ram_used_bytes)
    assert back.ram_total_bytes == 1000
    assert back.gpu_ids == ("cuda:0",)
    for name in telemetry.GPU_SERIES:
        np.testing.assert_array_equal(getattr(back.gpus[0], name), getattr(history.gpus[0], name))


def test_empty_history_round_trips_with_its_core_count():
    sampler = TelemetrySampler(gpus=[])
    history = sampler.history()
    back = TelemetryHistory.from_dict(json.loads(json.dumps(history.to_dict())))
    assert len(back) == 0 and back.cpu_cores == history.cpu_cores


def test_history_arrays_are_read_only():
    history = _history()
    with pytest.raises(ValueError):
        history.t_s[0] = 5.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(cpu_percent=[[1.0, 2.0], [3.0, 4.0]]), "cpu_percent"),
        (lambda d: d.update(cpu_percent=[1.0, 2.0, 3.0]), "cpu_percent"),
        (lambda d: d.update(cpu_cores=3), "cpu_percent"),
        (lambda d: d.update(ram_used_bytes=[1.0]), "ram_used_bytes"),
        (lambda d: d.update(t_s=[[0.0], [1.0], [2.0]]), "t_s"),
        (lambda d: d.update(t_s="soon"), "t_s"),
        (lambda d: d.update(ram_total_bytes=-1), "ram_total_bytes"),
        (lambda d: d.pop("ram_used_bytes"), "ram_used_bytes"),
        (lambda d: d["gpus"][0].update(power_w=[1.0]), "gpus[cuda:0].power_w"),
        (lambda d: d["gpus"][0].update(util_percent=["x", 1, 2]), "gpus[cuda:0].util_percent"),
    ],
)
def test_from_dict_names_the_field_that_does_not_fit(change, field):
    data = _history().to_dict()
    change(data)
    with pytest.raises(ValueError, match=f"'{field}'".replace("[", r"\[").replace("]", r"\]")):
        TelemetryHistory.from_dict(data)


def test_gpu_series_must_match_the_sample_count():
    gpu = GpuSeries("cuda:0", [1.0], [1.0], [1.0], [1.0], [1.0])
    with pytest.raises(ValueError, match=r"gpus\[cuda:0\]"):
        TelemetryHistory([0.0, 1.0], [[1.0], [2.0]], [1.0, 2.0], 10, gpus=(gpu,))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_nvml_telemetry_on_the_gpu():
    if nvml.nvml() is None:
        pytest.skip("NVML not available")
    sampler = TelemetrySampler()
    sampler.sample_once()
    history = sampler.history()
    assert history.gpu_ids[0] == "cuda:0"
    gpu = history.gpus[0]
    assert 0 <= gpu.util_percent[0] <= 100
    assert 0 < gpu.mem_used_bytes[0] <= gpu.mem_total_bytes[0]
    assert gpu.sm_clock_mhz[0] > 0
