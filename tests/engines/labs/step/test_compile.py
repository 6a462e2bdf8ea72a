"""torch.compile as an execution (slow: inductor compiles C++ on first use): its logits equal
eager's, its ops are the compiled graph's kernels and extern ops (the step seen kernel by
kernel), the bench's figures on the tiny model."""

from __future__ import annotations

import math

import pytest

from inferlab.engines.labs.step.bench import run_step_bench
from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import check_step_settings
from inferlab.engines.profile.step_ops import COMPILE_MARKERS, is_fused_kernel
from inferlab.engines.roofline.aten_costs import MATMULS

pytestmark = pytest.mark.slow


def test_compile_matches_eager_and_splits():
    settings = check_step_settings({"batch": 2, "context": 12, "repeats": 3, "threads": 1,
                                    "executions": ["eager", "compile"]})
    _info, (eager, compiled) = step_run(settings)
    assert compiled.matches and compiled.max_abs_diff <= 1e-5 * compiled.max_abs_logit
    assert compiled.compile_s is not None and compiled.compile_s > 0
    assert compiled.kernel_path == eager.kernel_path == "torch"
    s = compiled.split
    assert math.fsum([s.at_roof_s, s.inside_ops_s, s.between_ops_s]) == \
        pytest.approx(compiled.step_s, abs=1e-12)
    # kernel by kernel: no compiled region, guard or wrapper is an op; the generated kernels
    # are, timed and not costed; the graph's linears are extern matmuls, as many as eager's
    # (tiny: 4 per layer, 2 layers, and the lm_head)
    assert not any(op.name.startswith(COMPILE_MARKERS) for op in compiled.ops)
    fused = [op for op in compiled.ops if is_fused_kernel(op.name)]
    assert fused and all(not op.costed for op in fused)
    assert sum(op.name in MATMULS for op in compiled.ops) == 4 * 2 + 1
    assert sum(op.name in ("aten::linear", "aten::matmul") for op in eager.ops) == 4 * 2 + 1
    assert all(op.costed for op in compiled.ops if op.name in MATMULS)


def test_bench_figures_on_the_tiny_model():
    # the shapes of the test above: the compiled graph is the same, so inductor's cache
    # serves this compile (a cold cache: ~29 s -> ~12 s); the figures' checks hold at any shape
    out = run_step_bench({"model": "tiny", "batch": 2, "context": 12, "repeats": 3},
                         trace_bytes=2 * 10**6)
    for name in ("eager", "native", "compile"):
        assert 0 <= out[f"decode_between_ops_share_{name}"] <= 1
        assert out[f"decode_matches_eager_{name}"]
    assert out["compile_vs_eager_decode"] > 0 and out["compile_s"] > 0
    assert out["compile_fused_kernels"] > 0 and 0 < out["compile_fused_time_share"] < 1
    assert out["trace_read_mb_per_s"] > 0 and out["goals"]["trace_read_mb_per_s"] == ">= 50"
