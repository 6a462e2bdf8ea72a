"""Session-wide firmware builds, shared by the firmware tests (compiled once per run; the
model-independent objects are cached in the build folder, `toolchain.build_dir()`, under the
test run's own XDG_CACHE_HOME)."""

from __future__ import annotations

import pytest

from tests.firmware.fwtools import SHARED_MODELS, build_lib, model_path, need_tools
from tests.firmware.kernel_cases import all_cases


@pytest.fixture(scope="session")
def kernel_cases():
    return all_cases()


@pytest.fixture(scope="session")
def fwlib(tmp_path_factory, kernel_cases):
    """libfirmware.so holding every kernel case (symbol = case name) and the shared models
    (symbol = model stem)."""
    models = {name: data for name, data, _ in kernel_cases}
    for stem in SHARED_MODELS:
        models[stem] = model_path(stem).read_bytes()
    return build_lib(models, tmp_path_factory.mktemp("fwlib"))


@pytest.fixture(scope="session")
def firmware_images(tmp_path_factory):
    """build(stem, target, preset=None, planner=...) -> FirmwareBuild, cached per session."""
    from inferlab.engines.board.toolchain import build_firmware

    root = tmp_path_factory.mktemp("images")
    cache = {}

    def build(stem: str, target: str, preset: str | None = None,
              planner: str = "tflm-greedy"):
        key = (stem, target, preset, planner)
        if key not in cache:
            need_tools(target)
            cache[key] = build_firmware(model_path(stem), target, preset,
                                        root / "-".join(str(k) for k in key), planner=planner)
        return cache[key]

    return build
