"""`bench quant` on the tiny model: every figure the issue names, per scheme and in one run."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.quant.bench import run_quant_bench


@pytest.mark.slow  # a whole bench (every scheme quantized, scored, decoded): 10 s here
def test_bench_figures_on_the_tiny_model():
    out = run_quant_bench("tiny", ["int4-g128", "awq-int4-g128", "kv-fp8"], decode_tokens=6,
                          rounds=1, rss=False, eval_text="Clocks count swings. " * 20)
    assert out["model"] == "tiny" and out["fp32_decode_tokens_per_s"] > 0
    table = out["schemes"]
    assert list(table) == ["fp32", "int4-g128", "awq-int4-g128", "kv-fp8"]
    for d in table.values():
        for key in ("perplexity", "weight_bytes", "kv_bytes_per_token", "decode_tokens_per_s",
                    "quantize_seconds", "speedup_vs_fp32"):
            assert d[key] > 0 or key == "quantize_seconds", key
    assert table["fp32"]["speedup_vs_fp32"] == 1.0
    rtn, awq, fp32 = (table[n]["perplexity"] for n in ("int4-g128", "awq-int4-g128", "fp32"))
    assert table["awq-int4-g128"]["recovered"] == pytest.approx((rtn - awq) / (rtn - fp32))
    assert table["kv-fp8"]["kv_bytes_per_token"] < table["fp32"]["kv_bytes_per_token"] / 3
    assert set(out["int8_lm_head_decode"]) == {"int8-sym+int8-lm_head",
                                               "int4-g128+int8-lm_head"}


@pytest.mark.slow  # a whole bench with the GPTQ variants: 14 s here
def test_bench_scores_every_held_out_text_and_the_gptq_variants():
    texts = {"prose": "Clocks count swings of a pendulum. " * 12,
             "dialogue": "A: Is the kiln hot? B: Not yet, give it an hour. " * 8}
    out = run_quant_bench("tiny", ["int4-g128", "gptq-int4-g128"], decode_tokens=4, rounds=1,
                          rss=False, eval_text=texts, gptq_damp=[0.01, 0.1])
    assert out["eval_texts"] == {k: len(v.encode()) for k, v in texts.items()}  # byte tokens
    assert (out["ppl_convention"], out["ppl_window_tokens"], out["ppl_stride_tokens"]) == (
        "sliding", 1024, 1023)
    table = out["schemes"]
    fp32, rtn, gptq = (table[n]["perplexity_by_text"] for n in ("fp32", "int4-g128",
                                                               "gptq-int4-g128"))
    assert set(gptq) == set(texts)
    assert table["gptq-int4-g128"]["perplexity"] == pytest.approx(sum(gptq.values()) / 2)
    by_text = {k: (rtn[k] - gptq[k]) / (rtn[k] - fp32[k]) for k in texts}
    assert table["gptq-int4-g128"]["recovered_by_text"] == pytest.approx(by_text)
    assert table["gptq-int4-g128"]["recovered"] == pytest.approx(sum(by_text.values()) / 2)
    assert table["gptq-int4-g128"]["calibration_tokens"] == out["calibration_tokens"] > 32_000
    assert table["int4-g128"]["calibration_tokens"] == 0
    variants = out["gptq_variants"]
    assert [(v["act_order"], v["damp"]) for v in variants.values()] == [
        (True, 0.01), (False, 0.01), (True, 0.1), (False, 0.1)]
    default = variants["act-order, damp 0.01"]  # the default scheme, quantized again
    assert default["perplexity_by_text"] == pytest.approx(gptq)
    assert all(v["quantize_seconds"] > 0 for v in variants.values())


def test_quantization_runs_on_its_own_thread_count(monkeypatch):
    """Decode and scoring on `threads`, the schemes' quantization on `quantize_threads` (the
    JSON says both), and the caller's thread count is back afterwards."""
    import torch

    from inferlab.engines.labs.quant import evaluation

    seen = {}
    real_prepare, real_score = evaluation.prepare, evaluation.score

    def prepare(*a, **k):
        seen.setdefault("prepare", torch.get_num_threads())
        return real_prepare(*a, **k)

    def score(*a, **k):
        seen.setdefault("score", torch.get_num_threads())
        return real_score(*a, **k)

    monkeypatch.setattr(evaluation, "prepare", prepare)
    monkeypatch.setattr(evaluation, "score", score)
    before = torch.get_num_threads()
    out = run_quant_bench("tiny", ["int4-g128"], decode_tokens=2, rounds=1, rss=False,
                          threads=1, quantize_threads=2, eval_text="Clocks count. " * 20)
    assert (out["threads"], out["quantize_threads"]) == (1, 2)
    assert seen == {"prepare": 2, "score": 1}
    assert torch.get_num_threads() == before
