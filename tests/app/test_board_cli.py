"""`inferlab board list/info/run` and `inferlab virtual-board`, against virtual boards."""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inferlab.app.cli import main
from inferlab.engines.board.virtual_board import VirtualBoard
from inferlab.engines.mcu.graph import load_model
from tests.engines.board.virtual_boards import hang_guard, served_boards
from tests.engines.mcu.mcu_testdata import MODELS_DIR

ROOT = Path(__file__).resolve().parents[2]
HELLO_WORLD = MODELS_DIR / "hello_world_int8.tflite"


@pytest.fixture(autouse=True)
def _hang_guard():
    with hang_guard(30):
        yield


def stub_factory(model, plan):
    """Stands in for the arena interpreter: every output element = 42."""
    def run(inputs):
        outs = [np.full(model.tensors[t].shape, 42, dtype=model.tensors[t].dtype)
                for t in model.outputs]
        return outs, [500] * len(model.operators)
    return run


@pytest.fixture
def board_url():
    """`board_url(board, **VirtualBoard options) -> pty path` of a served virtual board."""
    with served_boards() as serve:

        def start(board="nrf52840", **kw):
            kw.setdefault("interpreter_factory", stub_factory)
            return serve(VirtualBoard(board, **kw))[1]

        yield start


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_board_list_json(capsys):
    code, out, _ = cli(capsys, "board", "list", "--json")
    data = json.loads(out)
    assert code == 0 and isinstance(data["ports"], list)
    ids = [b["id"] for b in data["presets"]]
    assert ids == sorted(ids) and {"samd21", "nrf52840", "stm32f746", "rp2040"} <= set(ids)
    nrf = next(b for b in data["presets"] if b["id"] == "nrf52840")
    assert nrf["sram_bytes"] == 262144 and nrf["source"]
    code, out, _ = cli(capsys, "board", "list")
    assert code == 0 and "board presets:" in out and "esp32-s3" in out


def test_board_info_json_is_the_hello_answer(capsys, board_url):
    url = board_url("samd21")
    code, out, _ = cli(capsys, "board", "info", "--port", url, "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["board"], data["sram_bytes"], data["flash_bytes"], data["clock_hz"]) == (
        "samd21", 32768, 262144, 48_000_000)
    assert data["protocol_version"] == 1 and data["port"] == url
    assert data["model_sha256"] is None and data["max_payload"] == 2048
    code, out, _ = cli(capsys, "board", "info", "--port", url)
    assert code == 0 and "Cortex-M0+" in out and "model: none" in out


def test_board_run_uploads_then_reuses_the_model(capsys, board_url, tmp_path):
    url = board_url("nrf52840", max_payload=128)
    args = ("board", "run", "--port", url, "--model", str(HELLO_WORLD), "--json")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    data = json.loads(out)
    assert data["uploaded"] is True and data["board"] == "nrf52840"
    assert data["model_sha256"] == hashlib.sha256(HELLO_WORLD.read_bytes()).hexdigest()
    assert data["output"] == [[42]] and data["output_shape"] == [1, 1]
    assert data["arena_bytes"] == 32 and data["planner"] == "board default"
    assert [o["op"] for o in data["ops"]] == ["FULLY_CONNECTED"] * 3
    assert [o["macs"] for o in data["ops"]] == [16, 256, 16]
    assert all(o["time_us"] == 0.5 and o["cycles"] > 0 for o in data["ops"])
    assert data["cycles_measured"] is False and data["round_trip_ms"] > 0

    model = load_model(HELLO_WORLD)
    x = np.array([[7]], dtype=np.int8)
    np.save(tmp_path / "in.npy", x)
    code, out, err = cli(capsys, "board", "run", "--port", url, "--model", str(HELLO_WORLD),
                         "--input", str(tmp_path / "in.npy"), "--planner", "linear",
                         "--output", str(tmp_path / "out.npy"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["uploaded"] is False and data["planner"] == "linear"
    assert data["arena_bytes"] > 32  # the linear plan reuses nothing
    assert np.load(tmp_path / "out.npy").tolist() == [[42]]
    assert model.tensors[model.inputs[0]].dtype == "int8"

    code, out, err = cli(capsys, "board", "run", "--port", url, "--model", str(HELLO_WORLD))
    assert code == 0 and "FULLY_CONNECTED" in out and "estimated" in out


def test_board_run_errors_are_one_line(capsys, board_url, tmp_path):
    url = board_url("samd21")
    np.save(tmp_path / "bad.npy", np.zeros((2, 2), np.float32))
    code, _, err = cli(capsys, "board", "run", "--port", url, "--model", str(HELLO_WORLD),
                       "--input", str(tmp_path / "bad.npy"))
    assert code == 2 and err.count("\n") == 1 and "input 0 must be int8" in err
    code, _, err = cli(capsys, "board", "run", "--port", url,
                       "--model", str(MODELS_DIR / "person_detect.tflite"))
    assert code == 2 and err.count("\n") == 1
    assert "TOO_LARGE" in err and "needed 333,336, available 262,144" in err
    code, _, err = cli(capsys, "board", "info", "--port", str(tmp_path / "nope"))
    assert code == 2 and "cannot open" in err
    code, _, err = cli(capsys, "board", "run", "--port", url, "--model",
                       str(tmp_path / "missing.tflite"))
    assert code == 2 and "missing.tflite" in err


START_HANG_GUARD_S = 120.0


@pytest.mark.slow  # a subprocess start-up
def test_virtual_board_command_prints_its_pty_and_serves(capsys):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "inferlab.app.cli", "virtual-board", "--board",
                             "stm32f411"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        # a hang guard, not a speed check: start-up under a loaded 2-core machine varies
        ready, _, _ = select.select([proc.stdout], [], [], START_HANG_GUARD_S)
        assert ready, f"virtual-board printed nothing in {START_HANG_GUARD_S:g} s"
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("/dev/")
        code, out, _ = cli(capsys, "board", "info", "--port", url, "--json")
        assert code == 0 and json.loads(out)["board"] == "stm32f411"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 0
    # gone: a clear one-line error naming the port (that it returns at all is the no-hang
    # check; how fast is not a test's business on a shared machine)
    code, _, err = cli(capsys, "board", "info", "--port", url, "--timeout", "0.2")
    assert code == 2 and url in err and len(err.strip().splitlines()) == 1


def test_virtual_board_command_rejects_bad_options(capsys):
    code, _, err = cli(capsys, "virtual-board", "--board", "uno")
    assert code == 2 and "unknown board 'uno'" in err
    code, _, err = cli(capsys, "virtual-board", "--max-payload", "8")
    assert code == 2 and "max_payload" in err


def test_board_run_output_equals_the_arena_interpreter(capsys, board_url, tmp_path):
    from inferlab.engines.mcu.interpreter import ArenaInterpreter
    from inferlab.engines.mcu.model_planners import plan_model

    path = MODELS_DIR / "micro_speech_quantized.tflite"
    model = load_model(path)
    url = board_url("nrf52840", interpreter_factory=None)  # the real interpreter
    x = np.random.default_rng(7).integers(-128, 128, size=(1, 1960), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    code, out, err = cli(capsys, "board", "run", "--port", url, "--model", str(path),
                         "--input", str(tmp_path / "x.npy"), "--json")
    assert code == 0, err
    data = json.loads(out)
    want = ArenaInterpreter(model, plan_model(model)).invoke(x)
    assert data["output"] == want.tolist() and data["output_dtype"] == "int8"
    assert [o["op"] for o in data["ops"]] == [op.op for op in model.operators]
