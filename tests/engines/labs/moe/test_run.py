"""`inferlab run moe` prints the issue's keys, and the formulas substitute the run's numbers
(DeepSeek-V3's MLA: 70,272 B per token in BF16 against 4,997,120 B as MHA)."""

from __future__ import annotations

import argparse

import pytest

from inferlab.engines.labs.moe.formulas import crossing_batch, linears_cost, moe_formulas
from inferlab.engines.labs.moe.run import add_arguments, run
from inferlab.engines.labs.moe.section import read_moe_section
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.trace.recorder import TraceRecorder


def _args(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_run_prints_the_issues_keys():
    section, summary = run(_args("--batch", "4", "--prompts", "4", "--steps", "2", "--sweep",
                                 "none", "--no-roof"), TraceRecorder())
    assert set(summary["distinct_experts_per_layer"]) == {"measured", "formula"}
    assert set(summary["distinct_experts_per_layer"]["measured"]) == {"0", "1"}
    for key in ("weight_bytes_per_step", "imbalance_max_over_mean", "grouped_s", "per_token_s",
                "expert_counts", "tokens_per_s"):
        assert key in summary, key
    assert summary["batch"] == 4 and summary["sweep"] == []
    assert read_moe_section(section).roof is None


@pytest.mark.parametrize("argv, message", [
    (("--batch", "0"), "--batch: expected an integer in 1..256"),
    (("--sweep", "1,x"), "--sweep: expected batches"),
    (("--model", "tiny"), "tiny is a dense model"),
])
def test_bad_options_are_named(argv, message):
    with pytest.raises(ValueError, match=message):
        run(_args(*argv, "--no-roof"), TraceRecorder())


def test_formulas_substitute_the_runs_numbers(section):
    f = dict(moe_formulas(read_moe_section(section)))
    m = section["metrics"]
    distinct = f["distinct experts per MoE layer = E · (1 − (1 − k/E)^B) (uniform routing)"]
    assert distinct.startswith(f"8 · (1 − (1 − 2/8)^8) = "
                               f"{m['distinct_experts_per_layer']['formula']:.3f}")
    read = f["weights read per step = dense part + Σ MoE layers distinct experts × expert bytes"]
    assert f"{m['weight_bytes_per_step']['measured']:,.0f} B" in read
    mla = next(v for k, v in f.items() if k.startswith("MLA KV per token"))
    assert mla == "(512 + 64) × 61 × 2 B = 70,272 B (68.62 KiB)"
    mha = next(v for k, v in f.items() if k.startswith("MHA KV per token"))
    assert mha == "2 × 128 × 160 × 61 × 2 B = 4,997,120 B (4.77 MiB); MHA / MLA = 71.1×"
    ridges = [v for k, v in f.items() if k.startswith("decode linears' intensity")]
    assert len(ridges) == 3  # the measured roof, and the preset for the run's model and V3's


def test_the_crossing_batch_is_where_the_intensity_reaches_the_ridge():
    cfg = load_model_preset("deepseek-v3")
    b = crossing_batch(cfg, "bf16", "bf16", 295.0)
    assert linears_cost(cfg, b, "bf16", "bf16").intensity >= 295.0
    assert linears_cost(cfg, b - 1, "bf16", "bf16").intensity < 295.0
    assert b > 1000  # a dense model of the same active weights would need B ≈ 295
