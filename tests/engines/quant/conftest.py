"""Quantizer tests run torch on one thread (shared machines); the SmolLM2 file for the
GGUF byte-exactness test."""

from __future__ import annotations

from tests.torch_fixtures import _one_torch_thread  # noqa: F401 - fixture
