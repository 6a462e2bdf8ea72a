"""The 32-concurrent bench's two runners (engines/labs/batching/concurrent_bench.py) on SmolLM2,
small: our continuous engine and transformers' static batch give the same greedy tokens
(fp32, same prompts), the outputs are as long as asked. Slow: SmolLM2 in both runtimes."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.batching.concurrent_bench import (
    bench_prompts,
    run_continuous,
    run_transformers,
)

pytestmark = pytest.mark.slow


def test_continuous_engine_and_transformers_batch_agree(smollm2, hf_smollm2):
    model, tok = smollm2
    hf_model, _ = hf_smollm2
    prompts = [tok.encode_prompt(text) for text in bench_prompts(3)]
    assert len({len(p) for p in prompts}) > 1  # left padding is exercised
    ours_s, ours = run_continuous(model, prompts, 6)
    theirs_s, theirs = run_transformers(hf_model, prompts, 6, tok.eos_token_ids[0])
    assert ours_s > 0 and theirs_s > 0
    assert [len(o) for o in ours] == [len(t) for t in theirs] == [6, 6, 6]
    assert ours == theirs
