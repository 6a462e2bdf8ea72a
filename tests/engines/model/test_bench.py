"""run_model_bench's shape and arithmetic, on the tiny model (the SmolLM2 run is `make bench`)."""

import math

from inferlab.engines.model import bench


def test_decode_rate_excludes_the_first_token(monkeypatch):
    clock = iter([0.0, 1.0, 4.0])  # t(1) = 1 s, t(7) = 3 s -> 6 tokens in 2 s
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    assert bench.decode_rate(lambda n: None, 7) == 3.0


def test_tiny_run_reports_every_figure():
    # 16 tokens: t(16) - t(1) well above timing noise on a shared machine (4 read NaN)
    out = bench.run_model_bench(model="tiny", new_tokens=16, repeats=2, transformers=False)
    assert out["model"] == "tiny" and out["threads"] == 1
    assert out["transformers_tokens_per_s"] is None
    for dtype in ("fp32", "bf16"):
        assert out[f"decode_tokens_per_s_{dtype}"] > 0
        assert out[f"ratio_vs_transformers_{dtype}"] is None
        assert len(out["samples_tokens_per_s"][dtype]) == 2
    assert out["decode_tokens_per_s"] == out["decode_tokens_per_s_fp32"]
    assert not math.isnan(out["best_tokens_per_s"]["fp32"])
