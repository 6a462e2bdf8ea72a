"""ModelConfig: presets, exact parameter counts, Hugging Face config import, errors."""

import json
from dataclasses import replace

import pytest

from inferlab.engines.model.config import (
    ConfigError,
    ModelConfig,
    list_model_presets,
    load_model_preset,
)
from inferlab.engines.model.hf_config import load_hf_config, model_config_from_hf

REQUIRED_PRESETS = {"llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b", "smollm2-135m",
                    "falcon-7b"}

# A trimmed copy of Meta-Llama-3-8B's config.json (no head_dim field).
LLAMA3_8B_HF = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rope_theta": 500000.0,
    "tie_word_embeddings": False, "vocab_size": 128256, "torch_dtype": "bfloat16",
}


def test_required_presets_are_shipped():
    assert REQUIRED_PRESETS <= set(list_model_presets())


@pytest.mark.parametrize("preset_id", list_model_presets())
def test_every_preset_loads_with_a_source(preset_id):
    cfg = load_model_preset(preset_id)
    assert cfg.id == preset_id
    assert cfg.source.strip()
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_llama_3_8b_preset_numbers():
    cfg = load_model_preset("llama-3-8b")
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_ff,
            cfg.vocab_size, cfg.rope_theta) == (32, 4096, 32, 8, 128, 14336, 128256, 500000.0)
    assert cfg.attention_kind == "GQA" and cfg.group_size == 4


def test_smollm2_135m_exact_parameter_count():
    cfg = load_model_preset("smollm2-135m")
    assert cfg.tie_embeddings and cfg.attention_kind == "GQA"
    # embeddings 49152·576                        =  28,311,552 (tied: no separate lm_head)
    # per layer: q 576·576 = 331,776; k, v 576·192 = 110,592 each; o 331,776
    #            gate, up, down 3·576·1536 = 2,654,208; two RMSNorms 1,152
    #            → 3,540,096; × 30 layers           = 106,202,880
    # final norm                                  =         576
    # total                                       = 134,515,008
    assert cfg.n_params == 134_515_008


def test_llama_3_8b_exact_parameter_count():
    # emb 128256·4096 = 525,336,576, twice (untied lm_head);
    # per layer 4096·(4096+1024+1024+4096) + 3·4096·14336 + 2·4096 = 218,112,000; × 32;
    # + final norm 4096 → 8,030,261,248 (the "8B").
    assert load_model_preset("llama-3-8b").n_params == 8_030_261_248


def test_falcon_7b_is_mqa_with_a_gelu_mlp_and_says_so():
    cfg = load_model_preset("falcon-7b")
    assert cfg.attention_kind == "MQA" and cfg.mlp_kind == "gelu"
    assert cfg.d_ff == 4 * cfg.d_model == 18176
    assert "approximate" in cfg.notes
    # emb 65024·4544 = 295,469,056 (tied); per layer 4544·(4544+64+64+4544)
    # + 2·4544·18176 + 2·4544 = 207,070,080; × 32 + 4544 → 6,921,716,160
    assert cfg.n_params == 6_921_716_160


def test_attention_kind():
    base = load_model_preset("llama-3-8b")
    assert replace(base, n_kv_heads=32).attention_kind == "MHA"
    assert replace(base, n_kv_heads=1).attention_kind == "MQA"


def test_unknown_preset_lists_the_known_ids():
    with pytest.raises(ConfigError) as e:
        load_model_preset("gpt-5")
    assert "gpt-5" in str(e.value) and "llama-3-8b" in str(e.value)


def test_hf_import_without_head_dim():
    cfg = model_config_from_hf(LLAMA3_8B_HF, id="l3", source="x/config.json")
    assert cfg == ModelConfig(
        id="l3", name="l3", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128,
        d_ff=14336, vocab_size=128256, rope_theta=500000.0, tie_embeddings=False,
        max_position=8192, source="x/config.json")
    assert cfg.n_params == load_model_preset("llama-3-8b").n_params


def test_hf_import_with_explicit_head_dim():
    # Qwen3-style: head_dim 128 although hidden_size / heads = 2560 / 32 = 80.
    d = dict(LLAMA3_8B_HF, hidden_size=2560, head_dim=128, tie_word_embeddings=True)
    cfg = model_config_from_hf(d)
    assert cfg.d_head == 128 and cfg.tie_embeddings


def test_hf_import_defaults_kv_heads_to_attention_heads():
    d = {k: v for k, v in LLAMA3_8B_HF.items() if k != "num_key_value_heads"}
    assert model_config_from_hf(d).attention_kind == "MHA"


def test_hf_import_falcon_style_names():
    falcon = {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 32,
              "multi_query": True, "vocab_size": 65024, "parallel_attn": True}
    cfg = model_config_from_hf(falcon, id="falcon-7b")
    preset = load_model_preset("falcon-7b")
    assert (cfg.n_kv_heads, cfg.d_head, cfg.d_ff, cfg.mlp_kind, cfg.tie_embeddings) == (
        1, 64, 18176, "gelu", True)
    assert cfg.n_params == preset.n_params


def test_hf_import_reads_rope_parameters():
    d = {k: v for k, v in LLAMA3_8B_HF.items() if k != "rope_theta"}
    d["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}
    assert model_config_from_hf(d).rope_theta == 1e6


def test_hf_missing_field_names_the_field_and_file(tmp_path):
    d = {k: v for k, v in LLAMA3_8B_HF.items() if k != "intermediate_size"}
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError) as e:
        load_hf_config(path)
    assert "intermediate_size" in str(e.value) and str(path) in str(e.value)


def test_load_hf_config_takes_the_folder_name_as_id(tmp_path):
    path = tmp_path / "Meta-Llama-3-8B" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA3_8B_HF))
    cfg = load_hf_config(path)
    assert cfg.id == "Meta-Llama-3-8B" and cfg.source == str(path)


def test_bad_json_and_non_object_are_config_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_hf_config(bad)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_hf_config(listed)
    with pytest.raises(ConfigError, match="cannot read"):
        load_hf_config(tmp_path / "missing.json")


def test_invalid_values_name_the_field():
    d = dict(LLAMA3_8B_HF, num_key_value_heads=5)  # 5 does not divide 32
    with pytest.raises(ConfigError, match="n_kv_heads"):
        model_config_from_hf(d)
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        model_config_from_hf(dict(LLAMA3_8B_HF, num_hidden_layers="32"))
    with pytest.raises(ConfigError, match="vocab_size"):
        model_config_from_hf(dict(LLAMA3_8B_HF, vocab_size=0))


def test_from_dict_rejects_missing_and_unknown_fields():
    d = load_model_preset("smollm2-135m").to_dict()
    with pytest.raises(ConfigError, match="'d_ff'"):
        ModelConfig.from_dict({k: v for k, v in d.items() if k != "d_ff"}, "preset.json")
    with pytest.raises(ConfigError, match="'dff'"):
        ModelConfig.from_dict(dict(d, dff=3), "preset.json")
    with pytest.raises(ConfigError, match="'tie_embeddings' must be bool"):
        ModelConfig.from_dict(dict(d, tie_embeddings=1), "preset.json")
