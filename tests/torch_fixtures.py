"""Fixtures shared by the packages whose tests run torch models (imported by their conftests).

torch runs on one thread there: these machines are shared, and multi-threaded BLAS under CPU
contention turns microsecond matmuls into millisecond waits. The previous setting is
restored when the package's tests end.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="package", autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the seeded tiny model, fp32."""
    from inferlab.engines.model.tiny import tiny_model

    return tiny_model()
