"""Every model preset's parameter counts against its publisher's stated totals.

The publishers round (671B, "1T"), count the vision encoder of a multimodal checkpoint, or
leave the embedding out of "active"; each case is named below and in the preset's notes.
"""

from __future__ import annotations

import pytest

from inferlab.engines.model.config import load_model_preset

# preset: (stated total, stated active per token, relative tolerance, why the tolerance)
PUBLISHED = {
    "deepseek-v3": (671e9, 37e9, 0.02, "ours 671.03B / 37.55B; 37B is rounded"),
    "kimi-k2": (1e12, 32e9, 0.03, "ours 1,026.4B / 32.86B; '1T' and '32B' are rounded"),
    "qwen3-235b-a22b": (235e9, 22e9, 0.01, "ours 235.09B / 22.19B"),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, 0.02, "ours 30.53B / 3.35B"),
    "gpt-oss-120b": (116.83e9, 5.13e9, 0.002, "active without the embedding, as OpenAI counts"),
    "gpt-oss-20b": (20.91e9, 3.61e9, 0.002, "active without the embedding, as OpenAI counts"),
    "llama-4-scout": (109e9, 17e9, 0.015, "ours 107.77B / 17.17B: the text decoder only"),
    "mixtral-8x7b": (46.7e9, 12.9e9, 0.002, "ours 46.70B / 12.88B"),
    "gemma-3-27b": (27e9, 27e9, 0.001, "ours 27.01B: the text decoder only"),
    "qwen3-8b": (8.2e9, 8.2e9, 0.002, "ours 8.19B"),
    "llama-3.1-8b": (8.0e9, 8.0e9, 0.004, "ours 8.03B"),
}
EMBEDDING_NOT_ACTIVE = {"gpt-oss-120b", "gpt-oss-20b"}


@pytest.mark.parametrize("preset_id", sorted(PUBLISHED))
def test_parameter_counts_match_the_publisher(preset_id):
    total, active, tolerance, _why = PUBLISHED[preset_id]
    cfg = load_model_preset(preset_id)
    ours_active = cfg.n_params_active
    if preset_id in EMBEDDING_NOT_ACTIVE:
        ours_active -= cfg.vocab_size * cfg.d_model
    assert cfg.n_params == pytest.approx(total, rel=tolerance)
    assert ours_active == pytest.approx(active, rel=tolerance)
    assert cfg.source.startswith("https://huggingface.co/") and "config.json" in cfg.source
    assert cfg.n_params_active <= cfg.n_params
    assert cfg.is_moe == (cfg.n_params_active < cfg.n_params)


def test_the_descriptions_that_matter_for_memory():
    assert load_model_preset("deepseek-v3").is_mla and load_model_preset("kimi-k2").is_mla
    oss = load_model_preset("gpt-oss-120b")
    assert oss.sliding_window == 128 and oss.layer_types[:2] == ("sliding", "full")
    scout = load_model_preset("llama-4-scout")
    assert scout.sliding_window == 8192 and scout.layer_types[:4] == ("chunked",) * 3 + ("full",)
    assert [load_model_preset(i).dense_layers for i in ("deepseek-v3", "kimi-k2")] == [
        (0, 1, 2), (0,)]
    for approximate in ("gpt-oss-120b", "gpt-oss-20b", "llama-4-scout"):
        assert load_model_preset(approximate).notes.startswith(
            ("Approximate", "Text decoder only"))
