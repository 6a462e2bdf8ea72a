"""`inferlab kv-calc` on the model description: MLA, experts and sliding windows."""

from __future__ import annotations

import json

from inferlab.app.cli import main
from tests.engines.model.published_configs import DEEPSEEK_V3


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_deepseek_v3_config(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3))
    code, out, _ = run_cli(capsys, "kv-calc", "--config", str(path), "--context", "4096",
                           "--kv-dtype", "bf16", "--weight-dtype", "bf16", "--json")
    data = json.loads(out)
    assert code == 0
    # read as a dense Llama it was 1,748,992 B per token and 77 GB of weights
    assert data["kv_bytes_per_token"] == 61 * (512 + 64) * 2 == 70_272
    assert data["kv_bytes_per_request"] == 4096 * 70_272
    assert 670e9 < data["params_total"] < 672e9 and 37e9 < data["params_active_per_token"] < 38e9
    assert data["weight_bytes"] == 2 * data["params_total"]  # ~1.34 TB in bf16
    assert 1.34e12 < data["weight_bytes"] < 1.345e12
    assert data["weight_bytes_active_per_token"] == 2 * data["params_active_per_token"]
    assert data["kv_by_layer_kind"] == {"full": {"layers": 61, "kv_bytes_per_token": 70_272,
                                                 "kv_bytes_per_request": 4096 * 70_272}}
    code, text, _ = run_cli(capsys, "kv-calc", "--config", str(path), "--kv-dtype", "bf16",
                            "--weight-dtype", "bf16")
    assert code == 0 and "(MLA)" in text and "70,272 B" in text and "1.34 TB" in text
    assert "8 of 256 experts" in text


def test_existing_keys_and_a_sliding_window_preset(capsys):
    code, out, _ = run_cli(capsys, "kv-calc", "--model", "gemma-3-27b", "--context", "8192",
                           "--kv-dtype", "bf16", "--json")
    data = json.loads(out)
    assert code == 0
    for key in ("kv_bytes_total", "max_batch", "max_context", "model_config", "device",
                "decode_tokens_per_s_bound"):
        assert key in data
    assert data["kv_bytes_per_token"] == 507_904
    assert data["kv_bytes_per_request"] == 8192 * (10 * 8192 + 52 * 1024)
    assert data["kv_by_layer_kind"]["sliding"]["layers"] == 52
    assert data["params_active_per_token"] == data["params_total"]
    code, text, _ = run_cli(capsys, "kv-calc", "--model", "gemma-3-27b")
    assert "sliding  52 layers" in text and "full     10 layers" in text
