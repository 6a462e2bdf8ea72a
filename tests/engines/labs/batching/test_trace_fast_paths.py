"""A trace's prompts as TokenIds (block chains carried, nothing checked twice) run exactly as
the same prompts given as plain tuples (every block hashed from its tokens): the same
iterations, token times, cached tokens and hit rate, under both prefix caches."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.token_ids import TokenIds
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.serve.traces.content import workload_requests
from inferlab.engines.serve.traces.stream import read_trace
from inferlab.engines.serve.workload import WorkloadRequest


def _run(settings, items):
    session = batching_session(dict(settings, requests=len(items)), items=items)
    while not session.done:
        session.step()
    records = [(r.start_s, r.end_s, r.prefills, r.decodes, r.kv_used_blocks,
                r.evicted_blocks) for r in session.records]
    return records, session.outputs(), session.prefix_hit_rate()


@pytest.mark.parametrize("prefix_cache", ["hash", "radix"])
def test_token_ids_prompts_run_as_plain_tuples_do(tmp_path, prefix_cache):
    path = tmp_path / "mooncake.jsonl"
    write_mooncake_jsonl(path, 6.0, seed=3, prefixes=4, conversations=8)
    settings = dict(BATCHING_DEFAULTS, clock="simulated", prefix_cache=prefix_cache,
                    max_num_batched_tokens=1024)
    vocab = load_model_preset(settings["model_config"]).vocab_size
    fast = workload_requests([r for r in read_trace(path, window=(0.0, 6.0))
                              if r.input_tokens and r.output_tokens], vocab)
    assert len(fast) >= 20 and all(type(w.prompt_token_ids) is TokenIds for w in fast)
    plain = [WorkloadRequest(w.arrival_s, w.prompt_tokens, w.output_tokens,
                             prompt_token_ids=tuple(w.prompt_token_ids)) for w in fast]
    want = _run(settings, plain)
    assert want[2] > 0.1  # the trace shares prefixes
    # all carried, and every other one carried: a carried chain that differed from the
    # tokens' own would miss the blocks a plain prompt registered, and the reverse
    mixed = [f if i % 2 else p for i, (f, p) in enumerate(zip(fast, plain, strict=True))]
    for items in (fast, mixed):
        got = _run(settings, items)
        assert got[0] == want[0]
        assert got[1] == want[1]
        assert got[2] == want[2]
