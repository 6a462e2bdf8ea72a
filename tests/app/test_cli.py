"""The command line, as users type it: exact outputs, one-line errors, files written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from inferlab.app import __version__
from inferlab.app.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"inferlab {__version__}"


def test_devices_json(capsys):
    code, out, _ = run_cli(capsys, "devices", "--json")
    data = json.loads(out)
    assert code == 0 and isinstance(data["boards"], list)  # serial ports; none on CI machines
    cpu = data["devices"][0]
    assert cpu["id"] == "cpu" and cpu["kind"] == "cpu"
    assert cpu["cores"] >= 1 and cpu["memory_bytes"] > 2**28 and cpu["name"]


def test_kv_calc_llama3_8b_example(capsys):
    code, out, _ = run_cli(capsys, "kv-calc", "--model", "llama-3-8b", "--context", "8192",
                           "--batch", "1", "--kv-dtype", "fp16", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["kv_bytes_per_token"] == 131072  # 2 × 32 layers × 8 KV heads × 128 × 2 B
    assert data["kv_bytes_total"] == 1073741824  # × 8192 tokens = 1 GiB


def test_kv_calc_from_hf_config(capsys, tmp_path):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
              "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, _ = run_cli(capsys, "kv-calc", "--config", str(path), "--context", "100",
                           "--kv-dtype", "int8", "--json")
    assert code == 0
    assert json.loads(out)["kv_bytes_per_token"] == 2 * 2 * 2 * 64 * 1


@pytest.mark.parametrize("argv, fragment", [
    (["kv-calc", "--model", "gpt-9"], "gpt-9"),
    (["kv-calc", "--config", "/nonexistent/config.json"], "config.json"),
    (["kv-calc", "--gpu", "tpu-v9"], "tpu-v9"),
    (["kv-calc", "--context", "0"], "--context"),
    (["roofline", "--device", "cuda:7", "--json"], "cuda:7"),
    (["screenshot", "--lab", "nolab", "--out", "x.png"], "nolab"),
])
def test_user_errors_are_one_line(capsys, argv, fragment):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("inferlab ")


def test_kv_calc_config_missing_field_is_named(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 256}))
    code, _, err = run_cli(capsys, "kv-calc", "--config", str(path))
    assert code == 2 and "num_hidden_layers" in err


def test_kv_calc_refuses_a_config_it_cannot_describe(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba", "hidden_size": 256}))
    code, _, err = run_cli(capsys, "kv-calc", "--config", str(path))
    assert code == 2 and "'mamba' is not supported" in err


@pytest.mark.parametrize("field, value, accepted", [
    ("hidden_size", 10**30, "an integer in [1, 262,144]"),
    ("hidden_size", 1e30, "an integer in [1, 262,144]"),
    ("num_key_value_heads", 0, "an integer in [1, 4,096]"),
    ("num_hidden_layers", 2.5, "an integer in [1, 4,096]"),
    ("rope_theta", float("nan"), "a finite number in [1, 1e+18]"),
])
def test_kv_calc_refuses_absurd_config_sizes(capsys, tmp_path, field, value, accepted):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
              "intermediate_size": 512, "vocab_size": 1000, field: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, err = run_cli(capsys, "kv-calc", "--config", str(path), "--json")
    assert code == 2 and out == ""
    assert f"{path}: field {field!r} must be {accepted}, got" in err


@pytest.mark.parametrize("argv, fragment", [
    (["--context", str(10**12)], "--context must be an integer in [1, 268,435,456]"),
    (["--batch", str(2**21)], "--batch must be an integer in [1, 1,048,576]"),
    (["--utilization", "nan"], "--utilization must be a finite number in (0, 1]"),
])
def test_kv_calc_refuses_absurd_request_sizes(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "kv-calc", *argv)
    assert code == 2 and out == "" and fragment in err


def test_roofline_quick_json(capsys):
    code, out, _ = run_cli(capsys, "roofline", "--device", "cpu", "--quick", "--json")
    data = json.loads(out)
    assert code == 0 and data["device"] == "cpu"
    fp32 = data["peak_flops"]["fp32"]
    assert fp32 > 1e8
    assert data["knee_flops_per_byte"]["fp32"] == pytest.approx(fp32 / data["bandwidth_bytes_per_s"])


@pytest.mark.slow  # a whole-window screenshot
def test_snapshot_then_screenshot_of_it(capsys, tmp_path):
    from inferlab.engines.trace.snapshot import read_snapshot

    snap = tmp_path / "s.json"
    code, _, _ = run_cli(capsys, "snapshot", "--out", str(snap))
    assert code == 0
    snapshot = read_snapshot(snap)
    assert set(snapshot.labs) == {"hardware", "roofline", "memory"}
    png = tmp_path / "roofline.png"
    code, out, _ = run_cli(capsys, "screenshot", "--lab", "roofline", "--out", str(png),
                           "--snapshot", str(snap))
    assert code == 0 and png.stat().st_size > 10_000


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_memory_live(capsys, tmp_path):
    png = tmp_path / "memory.png"
    code, _, _ = run_cli(capsys, "screenshot", "--lab", "memory", "--out", str(png))
    from PySide6.QtGui import QImage

    image = QImage(str(png))
    assert code == 0 and (image.width(), image.height()) == (1280, 800)


@pytest.mark.slow  # a subprocess start-up
def test_window_without_display_fails_fast_with_one_sentence():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    out = subprocess.run([sys.executable, "-m", "inferlab.app.cli"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no display" in lines[0]
    assert "xvfb-run" in lines[0] and "inferlab screenshot" in lines[0]


def test_display_detection():
    from inferlab.app.gui import display_available

    assert not display_available({}, "linux")
    assert display_available({"DISPLAY": ":0"}, "linux")
    assert display_available({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not display_available({"QT_QPA_PLATFORM": "xcb"}, "linux")
    assert display_available({}, "darwin")


def _subcommands(parser) -> dict:
    import argparse

    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_subcommands_help_renders(capsys):
    """argparse formats help text with %: a name holding one (the quant scheme
    unstructured-50%) crashed `run quant --help`."""
    from inferlab.app.cli import build_parser, main

    commands = _subcommands(build_parser())
    argvs = [[name, "--help"] for name in commands]
    argvs += [["run", lab, "--help"] for lab in _subcommands(commands["run"])]
    for argv in argvs:
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0, argv
        assert "usage:" in capsys.readouterr().out, argv
