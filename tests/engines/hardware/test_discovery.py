import json

import pytest
import torch

from inferlab.engines.hardware import discovery
from inferlab.engines.hardware.discovery import (
    DeviceInfo,
    cuda_compute_dtypes,
    device_ids,
    discover_devices,
    get_device,
    runtime_versions,
    torch_device,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cpu_comes_first_with_real_figures():
    devices = discover_devices()
    cpu = devices[0]
    assert cpu.id == "cpu" and cpu.kind == "cpu"
    assert cpu.name
    assert cpu.cores >= 1 and cpu.threads >= cpu.cores
    assert cpu.memory_bytes > 2**20
    assert cpu.freq_mhz is None or cpu.freq_mhz > 0
    assert cpu.compute_dtypes[0] == "fp32"
    assert set(cpu.compute_dtypes) <= {"fp32", "bf16", "fp16"}
    assert "arch" in cpu.details and isinstance(cpu.details["flags"], list)
    assert [d.id for d in devices] == device_ids()


def test_to_dict_is_json_with_the_fields_the_cli_prints():
    data = json.loads(json.dumps({"devices": [d.to_dict() for d in discover_devices()]}))
    for device in data["devices"]:
        assert {"id", "kind", "name", "cores", "memory_bytes"} <= set(device)
    assert data["devices"][0]["compute_dtypes"][0] == "fp32"


def test_cpu_lists_a_reduced_dtype_only_if_its_matmul_runs():
    fast, slow = discovery.cpu_dtype_support()
    assert not set(fast) & set(slow)
    for dtype in fast:
        a = torch.ones(4, 4, dtype={"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])
        assert torch.matmul(a, a)[0, 0].item() == 4.0


def test_unknown_device_names_the_available_ones():
    with pytest.raises(ValueError) as info:
        get_device("cuda:3")
    assert str(info.value).startswith("unknown device 'cuda:3'; available: cpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        torch_device("tpu")


def test_known_ids_resolve():
    assert get_device("cpu").id == "cpu"
    assert torch_device("cpu") == torch.device("cpu")
    assert torch_device(" CPU ") == torch.device("cpu")


def test_no_gpu_means_the_cpu_alone(monkeypatch):
    monkeypatch.setattr(discovery, "_cuda_device_count", lambda: 0)
    assert device_ids() == ["cpu"]
    assert [d.id for d in discover_devices()] == ["cpu"]
    with pytest.raises(ValueError, match="available: cpu$"):
        torch_device("cuda")


def test_cuda_dtypes_follow_the_capability():
    assert cuda_compute_dtypes((7, 5)) == ("fp32", "fp16")
    assert cuda_compute_dtypes((8, 0)) == ("fp32", "bf16", "fp16")
    assert cuda_compute_dtypes((9, 0)) == ("fp32", "bf16", "fp16")


def test_device_info_is_frozen():
    cpu = get_device("cpu")
    assert isinstance(cpu, DeviceInfo)
    with pytest.raises(AttributeError):
        cpu.name = "other"


def test_runtime_versions():
    versions = runtime_versions()
    assert versions["torch"] == torch.__version__
    assert versions["python"] and versions["numpy"]
    assert set(versions) >= {"python", "torch", "cuda", "cudnn", "nvidia_driver", "numpy"}
    if not torch.cuda.is_available():
        assert versions["cudnn"] is None or isinstance(versions["cudnn"], str)
    json.dumps(versions)


@pytest.mark.gpu
@needs_cuda
def test_cuda_devices_are_discovered():
    devices = discover_devices()
    gpus = [d for d in devices if d.kind == "cuda"]
    assert [d.id for d in gpus] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    gpu = get_device("cuda")
    assert gpu.id == "cuda:0" and gpu.name
    assert gpu.memory_bytes > 2**30 and gpu.cores > 0
    assert gpu.details["capability"].count(".") == 1
    assert gpu.details["cuda_version"] == torch.version.cuda
    assert "fp16" in gpu.compute_dtypes
    assert torch_device("cuda:0") == torch.device("cuda:0")
    json.dumps(gpu.to_dict())
