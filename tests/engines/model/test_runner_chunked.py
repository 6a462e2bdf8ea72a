"""ModelRunner's chunked prefill: a prompt reserved chunk by chunk, and explicit-chunk forwards."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.runner import ModelRunner

PROMPT = [(7 * i + 3) % 256 for i in range(23)]


def greedy_tail(runner: ModelRunner, sid: str, logits: torch.Tensor, n: int) -> list[int]:
    out = [int(logits[0].argmax())]
    while len(out) < n:
        runner.append(sid, out[-1])
        out.append(int(runner.step([sid])[0].argmax()))
    return out


@pytest.mark.parametrize("chunk", [1, 4, 5, 23])
def test_reserve_chunk_by_chunk_matches_the_whole_prompt(tiny, chunk):
    model, _ = tiny
    whole = ModelRunner(model, n_blocks=16, block_size=4, enable_prefix_caching=False)
    whole.add("a", PROMPT)
    ref = whole.step(["a"])
    runner = ModelRunner(model, n_blocks=16, block_size=4, enable_prefix_caching=False)
    for start in range(0, len(PROMPT), chunk):
        runner.reserve("a", PROMPT[start: start + chunk])
        assert runner.pending("a") == len(PROMPT[start: start + chunk])
        logits = runner.step(["a"])
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)
    assert greedy_tail(runner, "a", logits, 6) == greedy_tail(whole, "a", ref, 6)
    runner.free("a")
    assert runner.blocks.n_free_blocks == 16


def test_forward_runs_explicit_chunks_of_several_sequences_in_one_batch(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=32, block_size=4, enable_prefix_caching=False)
    other = [(5 * i + 1) % 256 for i in range(9)]
    runner.add("a", PROMPT)
    runner.add("b", other)
    runner.forward([("a", 0, 10)])  # the first chunk of "a"; nobody marks it computed
    logits = runner.forward([("b", 0, 9), ("a", 10, 13)])  # "b" whole, the rest of "a"
    assert runner.last_metadata.query_lens == (9, 13)
    ref = torch.cat([model.forward_nocache(torch.tensor(p)) for p in (other, PROMPT)])
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="at least one chunk"):
        runner.forward([])
