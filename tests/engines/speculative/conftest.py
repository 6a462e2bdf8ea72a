"""torch on one thread for the speculative tests (tests/torch_fixtures.py says why); the tiny
model, and SmolLM2 from the model tests' fixtures for the slow tests."""

from tests.engines.model.conftest import smollm2, smollm2_path  # noqa: F401 - fixtures
from tests.torch_fixtures import _one_torch_thread, tiny  # noqa: F401 - fixtures
