"""Every instruction set this CPU runs, as a fixture: each kernel test runs on each build."""

from __future__ import annotations

import pytest

from inferlab.engines.kernels import library as native


def runnable_isas() -> list[str]:
    """The builds this CPU executes (portable always; avx2, avx512 by its flags)."""
    flags = native.host_flags()
    return [isa for isa, needs in native.ISA_NEEDS.items() if needs <= flags]


@pytest.fixture(scope="module", params=runnable_isas())
def build(request):
    """The native library built for one instruction set (module-scoped: built once)."""
    return native.build(request.param)
