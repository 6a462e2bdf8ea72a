"""The batching scheduler: hand-worked schedules with exact iterations, and a state machine."""

from __future__ import annotations

import pytest

from inferlab.engines.model.sampler import GREEDY
from inferlab.engines.serve.request import FINISHED, WAITING, Request, Sequence


def test_request_is_frozen_and_checked():
    req = Request("a", [1, 2, 3], max_new_tokens=4)
    assert req.prompt_ids == (1, 2, 3) and req.sampling is GREEDY and not req.ignore_eos
    with pytest.raises(AttributeError):
        req.max_new_tokens = 5
    with pytest.raises(ValueError, match="empty prompt"):
        Request("b", [], 4)
    with pytest.raises(ValueError, match="max_new_tokens"):
        Request("c", [1], 0)


def test_sequence_counts_prompt_outputs_and_prefill():
    seq = Sequence(Request("a", [1, 2, 3, 4, 5], 3))
    assert (seq.seq_id, seq.status, seq.num_prompt_tokens, seq.num_tokens) == ("a", WAITING, 5, 5)
    assert seq.num_remaining_prefill_tokens == 5 and seq.is_prefilling
    seq.num_computed_tokens = 5
    seq.output_ids.append(9)
    assert seq.num_tokens == 6 and seq.token_ids == [1, 2, 3, 4, 5, 9]
    assert seq.num_remaining_prefill_tokens == 0 and not seq.is_prefilling
    assert not seq.is_finished
    seq.status = FINISHED
    assert seq.is_finished
