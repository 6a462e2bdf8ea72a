from tests.torch_fixtures import _one_torch_thread  # noqa: F401
