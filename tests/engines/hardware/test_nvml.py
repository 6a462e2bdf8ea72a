import math

import pytest
import torch

from inferlab.engines.hardware import nvml


def test_absent_nvml_gives_none_and_nan(monkeypatch):
    monkeypatch.setattr(nvml, "nvml", lambda: None)
    assert nvml.query("nvmlDeviceGetCount") is None
    assert nvml.driver_version() is None
    assert nvml.handle_for_cuda_index(0, "abc") is None
    assert nvml.static_facts(object()) == {}
    assert all(math.isnan(x) for x in nvml.read_gpu(None))


class _FakeNvml:
    """The few pynvml calls read_gpu makes; power is 'not supported'."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    class _Util:
        gpu = 37

    class _Memory:
        used = 3 * 2**30
        total = 80 * 2**30

    def nvmlDeviceGetUtilizationRates(self, handle):
        return self._Util()

    def nvmlDeviceGetMemoryInfo(self, handle):
        return self._Memory()

    def nvmlDeviceGetPowerUsage(self, handle):
        raise RuntimeError("not supported")

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1980


def test_a_failing_reading_is_nan_and_the_rest_are_read(monkeypatch):
    fake = _FakeNvml()
    monkeypatch.setattr(nvml, "nvml", lambda: fake)
    util, used, total, power, clock = nvml.read_gpu("handle")
    assert (util, used, total, clock) == (37.0, 3.0 * 2**30, 80.0 * 2**30, 1980.0)
    assert math.isnan(power)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_nvml_reads_the_first_gpu():
    if nvml.nvml() is None:
        pytest.skip("NVML not available")
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    handle = nvml.handle_for_cuda_index(0, uuid)
    assert handle is not None
    util, used, total, _power, _clock = nvml.read_gpu(handle)
    assert 0 <= util <= 100 and 0 < used <= total
    assert nvml.driver_version()
