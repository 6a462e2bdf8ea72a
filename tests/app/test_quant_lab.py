"""The quantization lab: `inferlab run quant` on the tiny model writes a snapshot the window
reopens read-only; the live lab draws a layer, runs schemes one by one, cancels, and its
screenshot renders."""

from __future__ import annotations

import dataclasses
import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.labs.quant.section import read_quant_section
from tests.app.lab_helpers import wait_idle


def test_run_quant_json_and_the_snapshot_reopens(capsys, tmp_path, make_window):
    snap, text = tmp_path / "quant.json", tmp_path / "eval.txt"
    text.write_text("The escapement lets the gear train advance one tooth per swing. " * 4)
    assert main(["run", "quant", "--model", "tiny", "--scheme", "int8", "--decode-tokens", "8",
                 "--eval-text", str(text), "--snapshot", str(snap), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["metrics"]
    assert out["scheme"] == "int8" and out["model"] == "tiny"
    assert out["perplexity"] > 1 and out["fp32_perplexity"] > 1
    assert out["weight_bytes"] < out["fp32_weight_bytes"]
    assert set(out["sqnr_db"]) == {f"layers.{i}.{w}" for i in range(2)
                                   for w in ("qkv", "o", "gate_up", "down")}
    assert out["decode_tokens_per_s"] > 0 and out["runs_as"] == "8 on int8 kernel"
    section = json.loads(snap.read_text())["inferlab"]["labs"]["quant"]
    assert [r["scheme"] for r in section["state"]["runs"]] == ["fp32", "int8"]
    assert section["state"]["layer"]["scheme"] == "int8"
    record = read_quant_section(section)
    assert record.model == "tiny" and [r.scheme for r in record.runs] == ["fp32", "int8"]
    assert record.layer.scheme == "int8" and record.eval_texts == {"eval.txt": out["eval_tokens"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.model = "other"

    window = make_window()
    window.open_snapshot(snap)
    lab = window.lab("quant")
    assert lab.read_only and not lab.view.run_button.isEnabled()
    assert lab.view.model_panel.table.rowCount() == 2
    assert lab.view.model_panel.table.item(1, 0).text() == "int8"
    assert lab.view.model_panel.table.item(1, 3).text() == "—"  # calibration tokens: none
    assert lab.view.tabs.currentWidget() is lab.view.model_panel
    window.show_live()
    assert not lab.read_only
    lab.show_snapshot(record)  # the record itself, as restore_labs hands it over
    assert lab.read_only and lab.view.model_panel.table.rowCount() == 2
    assert lab.view.model_panel.table.item(1, 0).text() == "int8"


@pytest.mark.parametrize("argv,message", [
    (["--scheme", "int3"], "--scheme: expected one of"),
    (["--eval-text", "/no/such/file.txt"], "--eval-text: cannot read"),
    (["--layer", "9"], "--layer: layer must be in 0..1"),
])
def test_run_quant_errors_name_the_option(capsys, tmp_path, argv, message):
    code = main(["run", "quant", "--model", "tiny", "--no-speed", *argv,
                 "--snapshot", str(tmp_path / "s.json")])
    assert code != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


def test_run_quant_scores_a_given_text(capsys, tmp_path):
    text = tmp_path / "eval.txt"
    text.write_text("tick tock " * 20, encoding="utf-8")
    assert main(["run", "quant", "--model", "tiny", "--scheme", "kv-int8", "--no-speed",
                 "--eval-text", str(text), "--snapshot", str(tmp_path / "s.json"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["metrics"]
    assert out["eval_tokens"] == 200 and out["decode_tokens_per_s"] is None
    assert out["kv_bytes_per_token"] < 512  # the tiny model's fp32 K/V: 2 layers x 2 x 2 x 16 x 4


def test_live_lab_draws_runs_and_cancels(qtbot, make_window, tmp_path):
    window = make_window()
    lab = window.lab("quant")
    lab._settings = lab._settings | {"model": "tiny", "schemes": ["int4-g128", "fp32"],
                                     "decode_tokens": 8, "layer_scheme": "q4_1"}
    window.show_lab("quant")
    qtbot.waitUntil(lambda: lab.session is not None, timeout=120000)
    wait_idle(qtbot, window, 120000)
    assert lab.layer.scheme == "q4_1" and len(lab.layer.levels) == 16
    lab.view.layer_scheme.setCurrentIndex(lab.view.layer_scheme.findData("fp8-e5m2"))
    assert lab.layer.scheme == "fp8-e5m2"
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: len(lab.runs) == 2, timeout=120000)
    wait_idle(qtbot, window, 120000)
    assert [r.scheme for r in lab.runs] == ["fp32", "int4-g128"]  # the baseline first
    table = lab.view.model_panel.table
    assert table.rowCount() == 2 and table.item(1, 8).text().endswith("×")
    assert lab.view.run_button.isEnabled() and not lab.view.cancel_button.isEnabled()
    # another perplexity window: the session scores that way, and the runs scored the old way
    # are dropped (not comparable)
    lab.view.ppl_window.setValue(64)
    assert lab.session.ppl_method() == {"ppl_convention": "sliding", "ppl_window_tokens": 64,
                                        "ppl_stride_tokens": 63}
    assert lab.runs == [] and "sliding windows of 64 tokens, stride 63" in lab.view.status.text()
    lab._settings["schemes"] = ["int8", "int8-sym", "q8_0"]
    lab.run_schemes()
    lab.cancel()
    wait_idle(qtbot, window, 120000)
    assert len(lab.runs) <= 3 and "int8-sym" not in [r.scheme for r in lab.runs]
    assert lab.view.run_button.isEnabled()
    path = window.export_snapshot(tmp_path / "live.json")
    section = json.loads(path.read_text())["inferlab"]["labs"]["quant"]
    assert section["state"]["layer"]["scheme"] == "fp8-e5m2"
    names = [e.get("name", "") for e in json.loads(path.read_text())["traceEvents"]]
    assert "Quant lab: int4-g128" in names


def test_run_quant_calibrates_on_given_texts_and_says_how_it_scored(capsys, tmp_path):
    cal = [tmp_path / "c1.txt", tmp_path / "c2.txt"]
    cal[0].write_text("The kiln fires for three days. " * 10, encoding="utf-8")
    cal[1].write_text("Split the wood, stack it dry. " * 7, encoding="utf-8")
    held = [tmp_path / "a.txt", tmp_path / "b.txt"]
    held[0].write_text("A pendulum swings and the escapement ticks. " * 3, encoding="utf-8")
    held[1].write_text("Q: where is the key? A: on the hook by the door. " * 3, encoding="utf-8")
    argv = ["run", "quant", "--model", "tiny", "--scheme", "gptq-int4-g128", "--no-speed",
            "--json", "--ppl-convention", "llama.cpp", "--ppl-window", "32"]
    for c in cal:
        argv += ["--calibration-text", str(c)]
    for h in held:
        argv += ["--eval-text", str(h)]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)["metrics"]
    # the tiny model's tokenizer is byte-level: one token per byte, counted exactly
    assert out["calibration_tokens"] == sum(len(c.read_bytes()) for c in cal)
    assert out["eval_texts"] == {h.name: len(h.read_bytes()) for h in held}
    assert (out["ppl_convention"], out["ppl_window_tokens"], out["ppl_stride_tokens"]) == (
        "llama.cpp", 32, 32)
    by_text = out["perplexity_by_text"]
    assert set(by_text) == {"a.txt", "b.txt"}
    assert out["perplexity"] == pytest.approx(sum(by_text.values()) / 2)


@pytest.mark.parametrize("argv,message", [
    (["--calibration-text", "/no/such/cal.txt"], "--calibration-text: cannot read"),
    (["--ppl-window", "wide"], "--ppl-window: expected a number of tokens or 'full'"),
    (["--ppl-convention", "llama.cpp", "--ppl-window", "512"],
     "llama.cpp's convention needs at least 2 * n_ctx = 1024 tokens"),
])
def test_run_quant_calibration_and_perplexity_errors_name_the_option(capsys, tmp_path, argv,
                                                                    message):
    text = tmp_path / "eval.txt"
    text.write_text("tick tock " * 20, encoding="utf-8")
    code = main(["run", "quant", "--model", "tiny", "--no-speed", "--eval-text", str(text),
                 *argv])
    assert code != 0
    assert message in capsys.readouterr().err
