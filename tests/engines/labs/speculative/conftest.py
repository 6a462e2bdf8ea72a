"""torch on one thread for the speculative tests (tests/torch_fixtures.py says why); the tiny
model (SmolLM2 for the slow tests is tests/conftest.py's)."""

from tests.torch_fixtures import _one_torch_thread, tiny  # noqa: F401 - fixtures
