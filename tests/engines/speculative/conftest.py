"""torch on one thread for the speculative tests (tests/torch_fixtures.py says why)."""

from tests.torch_fixtures import _one_torch_thread  # noqa: F401 - fixture
