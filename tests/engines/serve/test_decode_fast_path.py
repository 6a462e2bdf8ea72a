"""The decode fast path (`Scheduler.reserve_decodes`, the leading running decodes reserved in
one `BlockManager.append_each` call) schedules exactly what `reserve_decode` one sequence at a
time schedules: the same run with the fast path switched off is the reference."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from inferlab.engines.kv import BlockManager
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import CONTINUOUS, NO_CHUNKING, STATIC, Scheduler
from tests.engines.serve.test_scheduler import fake_token


def run(policy, kind, n_blocks, block_size, budget, requests, forks, fast: bool):
    """Every iteration's output and the finished sequences, with the fast path on or off."""
    mgr = BlockManager(n_blocks, block_size=block_size, prefix_cache=kind)
    sched = Scheduler(policy, mgr, max_num_batched_tokens=budget, max_num_seqs=8,
                      static_batch_size=min(4, budget))
    if not fast:
        sched.reserve_decodes = lambda: 0  # every running sequence through reserve_decode
    for i, (prompt, max_new) in enumerate(requests):
        sched.add(Request(f"r{i}", prompt, max_new, ignore_eos=True))
    sched.close_arrivals()
    trace, t = [], 0
    while sched.has_unfinished and t < 400:
        out = sched.schedule(float(t))
        sampled = {sid: fake_token(sched.seqs[sid]) for sid in out.sample_ids}
        fork = {}
        if policy != STATIC and t in forks:  # a sampling sequence past its prefill forks
            parents = [s for s in out.decodes if s in sampled]
            if parents:
                parent = sched.seqs[parents[0]]
                child = Request(f"{parent.seq_id}.{t}", parent.request.prompt_ids,
                                len(parent.output_ids) + 3, ignore_eos=True)
                fork = {parent.seq_id: [(child, 7)]}
        try:
            sched.update(out, sampled, float(t), forks=fork)
        except ValueError:  # a fork the scheduler refuses: nothing changed, go on without it
            sched.update(out, sampled, float(t))
        trace.append((out.decodes, out.prefills, out.preempted, out.preempted_for,
                      out.sample_ids, out.copies, out.num_batched_tokens,
                      out.decode_context_tokens, dict(out.cached_tokens or {}),
                      mgr.free_block_ids(), mgr.cached_block_ids()))
        t += 1
    trace.append([(s.seq_id, s.output_ids, s.token_times_s, s.preemptions)
                  for s in sched.finished])
    return trace


@settings(max_examples=60, deadline=None)
@given(policy=st.sampled_from([CONTINUOUS, NO_CHUNKING, STATIC]),
       kind=st.sampled_from(PREFIX_CACHES), n_blocks=st.integers(6, 14),
       block_size=st.integers(1, 4), budget=st.integers(4, 12),
       requests=st.lists(st.tuples(st.sampled_from([[1, 2, 3], [1, 2, 3, 4], [5], []]),
                                   st.integers(1, 6)), min_size=1, max_size=7),
       forks=st.sets(st.integers(0, 20), max_size=4))
def test_the_fast_path_schedules_what_reserve_decode_does(policy, kind, n_blocks, block_size,
                                                         budget, requests, forks):
    """Small pools (preemptions), prefix hits, forks (shared last blocks copied on write)."""
    requests = [((prefix + [9] * (i % 3)) or [8], max_new)
                for i, (prefix, max_new) in enumerate(requests)]
    requests = [(p, n) for p, n in requests
                if -(-(len(p) + n) // block_size) <= n_blocks and len(p) + n - 1 <= budget]
    args = (policy, kind, n_blocks, block_size, budget, requests, forks)
    assert run(*args, fast=True) == run(*args, fast=False)
