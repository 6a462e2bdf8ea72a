"""The memory lab's per-GPU split: with t × p > 1 the plan drawn is one GPU's (gpu_share),
its rows say so and show the split in their formulas; a t that cannot split the heads is
refused by the engine with a ValueError."""

from __future__ import annotations

import pytest

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.memory.session import memory_plans, preset_target
from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.roofline.units import format_bytes
from inferlab.views.memory_view import MemoryView

CFG = load_model_preset("llama-3-8b")
TARGET = preset_target(load_hardware_preset("h100-sxm"))


def rows(view) -> dict:
    return {view.results.item(r, 0).text(): (view.results.item(r, 1).text(),
                                             view.results.item(r, 2).text())
            for r in range(view.results.rowCount())}


def test_the_table_is_one_gpus_share(qtbot):
    view = MemoryView()
    qtbot.addWidget(view)
    whole, _ = memory_plans(dict(MEMORY_DEFAULTS), CFG, TARGET)
    split, variants = memory_plans(dict(MEMORY_DEFAULTS, tp=2, pp=2), CFG, TARGET)
    assert split.kv_bytes_per_token == whole.kv_bytes_per_token // 4  # half the heads, layers
    assert set(variants) == {"MHA", "GQA", "MQA"}
    view.draw(CFG, split, variants, TARGET["label"])
    table = rows(view)
    value, formula = table["KV bytes per token (one GPU of 4)"]
    assert value.startswith(format_bytes(split.kv_bytes_per_token))
    assert "2 × 16 layers × 4 KV heads" in formula
    assert "÷ (t × p = 4)" in table["Weights (one GPU of 4)"][1]
    assert "one GPU" in view.budget_plot.getPlotItem().titleLabel.text
    view.draw(CFG, whole, variants, TARGET["label"])
    assert "KV bytes per token" in rows(view)


def test_a_degree_that_cannot_split_the_heads_is_refused():
    with pytest.raises(ValueError, match="tp=3"):
        memory_plans(dict(MEMORY_DEFAULTS, tp=3), CFG, TARGET)
