"""`bench runtime` on the tiny model (its figures' keys and ratios) and `--kernels` on the CLI."""

from __future__ import annotations

import json

import pytest

from inferlab.app.benches.runtime import run_runtime_bench
from inferlab.app.cli import main
from inferlab.engines import kernels


def test_runtime_bench_measures_both_paths_side_by_side():
    out = run_runtime_bench(model="tiny", repeats=1, new_tokens=16, transformers=False,
                            llama_cpp=False)
    assert out["native_isa"] and out["kernels"] == "native" and "cpu_flags" in out
    for key in ("verify_cost_ratio_k4", "verify_cost_ratio_k4_torch", "decode_tokens_per_s",
                "decode_tokens_per_s_torch", "native_vs_torch_decode",
                "decode_bandwidth_fraction", "copy_bandwidth_bytes_per_s",
                "int4_decode_tokens_per_s", "int4_decode_vs_fp32", "kv_int8_decode_vs_fp32_kv",
                "kv_fp8_decode_vs_fp32_kv",
                "input_batch_speedup", "batched_sampling_speedup", "metadata_persistent_ms",
                "read_bandwidth_bytes_per_s", "decode_read_bandwidth_fraction",
                "one_call_per_step_speedup", "int4_one_call_per_step_speedup"):
        assert out[key] > 0, key
    assert out["decode_vs_transformers"] is None  # no peer asked for
    assert out["int4_decode_vs_llama_cpp"] is None
    for kind in ("int8", "fp8"):
        assert out[f"kv_{kind}_decode_vs_fp32_kv"] == pytest.approx(
            out[f"kv_{kind}_decode_tokens_per_s"] / out["kv_fp32_decode_tokens_per_s"])
    assert out["native_vs_torch_decode"] == pytest.approx(
        out["decode_tokens_per_s"] / out["decode_tokens_per_s_torch"])
    rows = {(r["linear"], r["rows"]) for r in out["linears"]}
    assert rows == {(n, m) for n in ("qkv", "o", "gate_up", "down") for m in (1, 5, 9, 16)}
    assert all(r["native_vs_1_row"] == 1.0 for r in out["linears"] if r["rows"] == 1)


def test_kernels_option_picks_the_path_for_the_command(capsys, monkeypatch):
    monkeypatch.setattr(kernels, "_default", None)
    chosen = []
    real = kernels.set_default_path
    monkeypatch.setattr(kernels, "set_default_path", lambda p: chosen.append(p) or real(p))
    assert main(["generate", "--model", "tiny", "--prompt", "hi", "--max-tokens", "3",
                 "--kernels", "torch", "--json"]) == 0
    assert chosen == ["torch"]
    assert len(json.loads(capsys.readouterr().out)["token_ids"]) == 3
    with pytest.raises(SystemExit):
        main(["generate", "--model", "tiny", "--prompt", "hi", "--kernels", "cuda"])


@pytest.mark.slow
def test_the_llama_cpp_peer_decodes_the_shipped_gguf(smollm2_path, smollm2):
    """The peer `int4_decode_vs_llama_cpp` divides by really decodes: n tokens, greedy (the
    same tokens twice), each in the GGUF's vocabulary."""
    from inferlab.engines.model.bench import llama_cpp_runner

    _model, tok = smollm2
    run = llama_cpp_runner(smollm2_path, tok.encode_prompt("The capital of France is"), 1)
    first = run(6)
    assert len(first) == 6 and run(6) == first
    assert all(0 <= t < 49152 for t in first)


def test_every_bench_json_names_the_kernel_path_and_the_cpu(capsys, monkeypatch):
    monkeypatch.setattr(kernels, "_default", None)  # the command's choice is undone after
    assert main(["bench", "mcu", "--kernels", "torch", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)["kernels"]
    assert described["kernels"] == "torch" and described["native_isa"] is None
    assert isinstance(described["cpu_flags"], list)
