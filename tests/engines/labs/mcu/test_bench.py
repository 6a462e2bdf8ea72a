"""`run_mcu_bench()`: every shared model keyed by stem, every column, the goals held."""

from __future__ import annotations

import math

import pytest

from inferlab.engines.labs.mcu.bench import run_mcu_bench
from tests.engines.mcu.mcu_testdata import model_paths, tflm_heads_from_sources

COLUMNS = {
    "tflm_greedy_bytes",
    "best_bytes",
    "lower_bound_bytes",
    "aliased_bytes",
    "reordered_bytes",
    "patch_based_bytes",
    "plan_ms",
    "invoke_ms",
}


@pytest.fixture(scope="module")
def bench():
    return run_mcu_bench()


def test_every_shared_model_has_every_column(bench):
    models = bench["models"]
    assert set(models) == {p.stem for p in model_paths()}
    for stem, row in models.items():
        assert COLUMNS <= set(row), stem
        assert row["plan_ms"] > 0


def test_figures_keep_their_order_and_tflms_head(bench):
    heads = tflm_heads_from_sources()
    for stem, row in bench["models"].items():
        assert row["tflm_greedy_bytes"] == heads[stem], stem
        assert row["lower_bound_bytes"] <= row["best_bytes"] <= row["tflm_greedy_bytes"]
        assert row["aliased_bytes"] <= row["best_bytes"]
        assert row["reordered_bytes"] <= row["best_bytes"]
        assert math.isfinite(row["plan_ms"]), stem  # a time was taken (the budget: bench mcu)


def test_patch_based_goal_and_applicability(bench):
    models = bench["models"]
    person = models["person_detect"]
    assert person["patch_based_bytes"] <= 55296 // 2
    assert person["patch_grid"] == [4, 4] and person["patch_stage_ops"] == [0, 7]
    assert person["patch_model_mac_overhead"] <= 0.2
    assert person["invoke_ms"] > 0 and person["patch_invoke_ms"] > 0
    for stem in ("hello_world_int8", "micro_speech_quantized", "keyword_scrambled"):
        assert models[stem]["patch_based_bytes"] is None


def test_models_the_interpreter_cannot_run_say_why(bench):
    models = bench["models"]
    for stem in ("hello_world_int8", "micro_speech_quantized", "person_detect"):
        assert models[stem]["invoke_ms"] > 0
        assert "invoke_unsupported" not in models[stem]
    assert models["keyword_scrambled"]["invoke_ms"] is None
    assert "SVDF" in models["keyword_scrambled"]["invoke_unsupported"]


def test_an_empty_folder_gives_no_models(tmp_path):
    assert run_mcu_bench(tmp_path)["models"] == {}
