"""The lab runs a MoE Hugging Face folder and a MoE GGUF (Q8_0 codes, the bytes as the file
holds them), refusing a dense file by name."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.moe.session import moe_model, moe_run
from inferlab.engines.labs.moe.settings import check_moe_settings
from tests.engines.model.family_models import build_family, write_gguf


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moe-files")
    hf_dir, _f32 = build_family("qwen3_moe", folder)
    return {"hf": hf_dir, "q8_0": write_gguf(hf_dir, folder / "qwen3-moe-q8_0.gguf", q8_0=True),
            "dense": build_family("llama", folder)[0]}


@pytest.mark.parametrize("kind, fmt", [("hf", "fp32"), ("q8_0", "gguf")])
def test_a_moe_file_runs(files, kind, fmt):
    settings = check_moe_settings({"model": str(files[kind]), "batch": 6, "prompts": 6,
                                   "steps": 2, "sweep": [1]})
    info, steps, sweep = moe_run(settings)
    assert info.weight_format == fmt and info.family == "qwen3_moe"
    for r in steps:
        for counts in r.expert_counts:
            assert sum(counts) == 6 * info.top_k and len(counts) == info.n_experts
        assert r.weight_bytes_per_step == info.dense_bytes + sum(
            d * size for d, size in zip(r.distinct_experts, info.expert_bytes, strict=True))
        assert r.grouped_max_abs_diff <= 1e-4
    assert sweep[0].distinct_experts == info.top_k


def test_q8_0_experts_hold_about_a_quarter_of_fp32s_bytes(files):
    fp32 = moe_run(check_moe_settings({"model": str(files["hf"]), "steps": 1, "sweep": []}))[0]
    q8 = moe_run(check_moe_settings({"model": str(files["q8_0"]), "steps": 1, "sweep": []}))[0]
    for a, b in zip(fp32.expert_bytes, q8.expert_bytes, strict=True):
        assert b / a == pytest.approx(34 / 32 / 4)  # 32 codes and an fp16 scale per block


def test_a_dense_file_is_refused_by_name(files):
    with pytest.raises(ValueError, match="is a dense model"):
        moe_model(str(files["dense"]))
