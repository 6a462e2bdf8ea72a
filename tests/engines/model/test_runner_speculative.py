"""ModelRunner made ready for speculative decoding: logits for every query position, several
tokens appended at once, and truncation, each checked against a recompute (forward_nocache)."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.runner import ModelRunner

PROMPT = [(7 * i + 3) % 256 for i in range(11)]
DRAFTS = [40, 41, 42, 43, 44]


def recompute(model, tokens) -> torch.Tensor:
    return model.forward_nocache(torch.tensor(tokens), all_logits=True)


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_a_step_returns_every_query_positions_logits(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT)
    all_rows = runner.step(["a"], logits="all")
    close(all_rows, recompute(model, PROMPT))
    runner.append_tokens("a", DRAFTS)
    rows = runner.step(["a"], logits=[3])  # the last three of the five
    close(rows, recompute(model, PROMPT + DRAFTS)[-3:])


def test_the_k_drafts_are_scored_in_one_forward_of_k_plus_1_positions(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT[:-1])
    runner.step(["a"])
    assert runner.append_tokens("a", [PROMPT[-1], *DRAFTS]) == []
    rows = runner.step(["a"], logits=[len(DRAFTS) + 1])
    assert runner.last_metadata.query_lens == (6,)
    close(rows, recompute(model, PROMPT + DRAFTS)[len(PROMPT) - 1:])


def test_several_sequences_get_their_rows_in_batch_order(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=16, block_size=4, enable_prefix_caching=False)
    other = [5, 6, 7, 8, 9]
    runner.add("a", PROMPT)
    runner.add("b", other)
    rows = runner.step(["a", "b"], logits=[2, 3])
    ref = torch.cat([recompute(model, PROMPT)[-2:], recompute(model, other)[-3:]])
    close(rows, ref)


def test_truncate_rolls_back_and_the_rewritten_slots_match_a_recompute(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT)
    runner.step(["a"])
    runner.append_tokens("a", DRAFTS)
    runner.step(["a"], logits="all")
    assert runner.blocks.block_table("a") == [0, 1, 2, 3]
    assert runner.truncate("a", 12) == [3]  # one draft kept
    assert runner.pending("a") == 0
    assert runner.token_ids("a") == PROMPT + DRAFTS[:1]
    runner.append_tokens("a", [7, 8])
    assert runner.pending("a") == 2
    rows = runner.step(["a"], logits="all")
    close(rows, recompute(model, PROMPT + DRAFTS[:1] + [7, 8])[-2:])


def test_truncate_below_the_computed_count_rewinds_it(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT)
    runner.step(["a"])
    runner.truncate("a", 4)
    assert runner.pending("a") == 0 and runner.blocks.block_table("a") == [0]
    runner.append_tokens("a", [1, 2, 3])
    close(runner.step(["a"]), recompute(model, PROMPT[:4] + [1, 2, 3])[-1:])


def test_appending_drafts_to_a_forked_sequence_reports_and_performs_the_copy(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=16, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT)  # 11 tokens: block 2 is partial
    runner.step(["a"])
    runner.fork("a", "b")
    assert runner.append_tokens("b", DRAFTS) == [(2, 3)]
    assert runner.blocks.block_table("b") == [0, 1, 3, 4]
    close(runner.step(["b"], logits="all"), recompute(model, PROMPT + DRAFTS)[-5:])
    assert runner.append("a", 9) is None  # block 2 is a's alone now
    close(runner.step(["a"]), recompute(model, PROMPT + [9])[-1:])


def test_a_later_prompt_never_hits_kv_of_rejected_drafts(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=16, block_size=4)  # prefix caching on
    prompt = PROMPT[:8]  # two full blocks
    runner.add("a", prompt)
    runner.step(["a"])
    runner.append_tokens("a", DRAFTS)  # fills block 2 with drafts; the step registers it
    runner.step(["a"], logits="all")
    runner.truncate("a", 9)  # one draft kept
    runner.append_tokens("a", [70, 71, 72])  # block 2's slots rewritten with other tokens
    runner.step(["a"], logits="all")
    # "b" holds the rejected drafts after the prompt: only the prompt's blocks are hits
    assert runner.add("b", prompt + DRAFTS) == 8
    close(runner.step(["b"], logits="all"), recompute(model, prompt + DRAFTS)[8:])
    # and the continuation that was accepted is a hit, with the right K/V
    assert runner.add("c", prompt + [DRAFTS[0], 70, 71, 72, 5]) == 12
    close(runner.step(["c"]), recompute(model, prompt + [DRAFTS[0], 70, 71, 72, 5])[-1:])


@pytest.mark.parametrize("logits, match", [
    ("first", "logits must be 'last', 'all'"),
    ([1, 1], "one count per chunk"),
    ([0], r"chunk 0 must be in \[1, 11\]"),
    ([12], r"chunk 0 must be in \[1, 11\]"),
    ([True], "chunk 0 must be"),
])
def test_a_bad_logits_choice_is_refused_before_anything_runs(tiny, logits, match):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4, enable_prefix_caching=False)
    runner.add("a", PROMPT)
    with pytest.raises(ValueError, match=match):
        runner.step(["a"], logits=logits)
    assert runner.pending("a") == len(PROMPT)
