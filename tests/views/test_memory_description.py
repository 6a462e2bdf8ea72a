"""The memory lab's view shows the model's own description: KV by layer kind where layers
are windowed, MLA beside MHA/GQA/MQA, a MoE's total, per-token and per-step weights."""

from __future__ import annotations

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.memory.session import memory_plans, model_memory, preset_target
from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.memory_view import MemoryView

TARGET = preset_target(load_hardware_preset("h100-sxm"))
BF16 = dict(MEMORY_DEFAULTS, weight_dtype="bf16", kv_dtype="bf16")


def rows(view, table="results") -> dict:
    t = getattr(view, table)
    return {t.item(r, 0).text(): tuple(t.item(r, c).text() for c in range(1, t.columnCount()))
            for r in range(t.rowCount())}


def test_sliding_layers_get_a_row_each_kind(qtbot):
    view = MemoryView()
    qtbot.addWidget(view)
    cfg = load_model_preset("gemma-3-27b")
    plan, variants = memory_plans(BF16, cfg, TARGET)
    view.draw(cfg, plan, variants, TARGET["label"])
    table = rows(view)
    assert table["   10 full layers"][1] == "81,920 B per token × 8192 tokens"
    value, formula = table["   52 sliding layers, W 1,024"]
    assert value.startswith(format_bytes(52 * 8192 * 1024))
    assert "min(8192, 1024)" in formula
    assert "26.6% of all-global" in table["KV per request"][1]
    assert "10 full, 52 sliding of 1,024 tokens" in view.model_note.text()
    assert view.variants_box.title() == "Same model with MHA vs GQA vs MQA"


def test_mla_and_experts(qtbot):
    view = MemoryView()
    qtbot.addWidget(view)
    cfg = load_model_preset("deepseek-v3")
    settings = dict(BF16, tp=8, batch=16)
    plan, variants = memory_plans(settings, cfg, TARGET)
    view.draw(cfg, plan, variants, TARGET["label"])
    table = rows(view)
    assert table["KV bytes per token (one GPU of 8)"][1] == "61 layers × (512 latent + 64 RoPE) × 2 B"
    assert plan.kv_bytes_per_token == 70_272  # the latent, whole on each of the 8 GPUs
    model = model_memory(cfg, plan)
    assert table["   read per token"][0].startswith(format_bytes(model.weight_bytes_active_per_token))
    assert "8 of 256 experts" in table["   read per token"][1]
    assert table["   read per decode step"][1].startswith(f"{model.experts_touched:.1f} of 256")
    assert "all experts" in table["Weights (one GPU of 8)"][1]
    assert view.variants_box.title() == "Same model with MLA vs MHA vs GQA vs MQA"
    assert rows(view, "variants")["MLA"][0] == "latent"
    assert "MLA (latent 512 + RoPE key 64" in view.model_note.text()
    assert "37.55 B active per token" in view.model_note.text()


def test_a_dense_model_has_no_extra_rows(qtbot):
    view = MemoryView()
    qtbot.addWidget(view)
    cfg = load_model_preset("llama-3-8b")
    plan, variants = memory_plans(dict(MEMORY_DEFAULTS), cfg, TARGET)
    view.draw(cfg, plan, variants, TARGET["label"])
    assert list(rows(view)) == [
        "KV bytes per token", "KV per request", "KV for the batch", "Weights", "Total", "Budget",
        "Fits", "Largest batch at this context", "Longest context at this batch",
        "Decode tokens/s upper bound"]
