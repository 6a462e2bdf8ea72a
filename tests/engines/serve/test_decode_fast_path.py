"""The decode fast path (`Scheduler.reserve_decodes`, the leading running decodes reserved in
one `BlockManager.append_each` call; after a step that kept every running sequence, the same
decodes again without looking at each; `update`'s loops, one of which need not look for a
finish by length) schedules exactly what `reserve_decode` one sequence at a time schedules
and `reference_update` does: the same run with the fast paths switched off is the
reference."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection
from functools import partial

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from inferlab.engines.kv import BlockManager
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.serve.forks import check_update_forks
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import (
    CONTINUOUS,
    NO_CHUNKING,
    STATIC,
    SampledTokens,
    Scheduler,
)
from tests.engines.serve.test_scheduler import fake_token


def reference_update(sched, output, sampled, now_s, eos_id=None, *, keep_eos=True,
                     forks=None):
    """`Scheduler.update` one sequence at a time: each chunk and decode marked computed on
    its own, each sampled token through `_sampled` (which appends it, or finishes)."""
    assert output is sched._pending
    if set(sampled) != set(output.sample_ids):
        raise ValueError("sampled tokens do not match the batch")
    forks = forks or {}
    check_update_forks(sched, output.sample_ids, forks)
    if eos_id is None:
        stop_ids = ()
    else:
        stop_ids = frozenset(eos_id) if isinstance(eos_id, Collection) else (eos_id,)
    sched._pending = None
    for chunk in output.prefills:
        seq = sched.seqs[chunk.seq_id]
        seq.num_computed_tokens += chunk.n_tokens
        sched.blocks.mark_computed(chunk.seq_id, seq.num_computed_tokens)
    for sid in output.decodes:
        seq = sched.seqs[sid]
        seq.num_computed_tokens += 1
        sched.blocks.mark_computed(sid, seq.num_computed_tokens)
    done = []
    for sid in output.sample_ids:
        for child, token in forks.get(sid, ()):
            sched._sampled(sched.fork(sid, child), token, now_s, stop_ids, keep_eos, done)
        sched._sampled(sched.seqs[sid], int(sampled[sid]), now_s, stop_ids, keep_eos, done)
    return done


def run(policy, kind, n_blocks, block_size, budget, requests, forks, fast: bool,
        eos_id=None, keep_eos=True, arrivals=(), tokens="dict"):
    """Every iteration's output and the finished sequences, with the fast path on or off.
    Request i arrives at step `arrivals[i]` (0 when not given); with `eos_id` the odd ones
    stop at it, the even ones ignore it."""
    mgr = BlockManager(n_blocks, block_size=block_size, prefix_cache=kind)
    sched = Scheduler(policy, mgr, max_num_batched_tokens=budget, max_num_seqs=8,
                      static_batch_size=min(4, budget))
    if not fast:
        sched.reserve_decodes = lambda: 0  # every running sequence through reserve_decode
        sched.update = partial(reference_update, sched)
    pending = [(arrivals[i] if i < len(arrivals) else 0,
                Request(f"r{i}", prompt, max_new, ignore_eos=eos_id is None or i % 2 == 0))
               for i, (prompt, max_new) in enumerate(requests)]
    trace, t = [], 0
    while (pending or sched.has_unfinished) and t < 400:
        for _, request in [p for p in pending if p[0] <= t]:
            sched.add(request)
        pending = [p for p in pending if p[0] > t]
        if not pending and not sched.arrivals_closed:
            sched.close_arrivals()
        out = sched.schedule(float(t))
        sampled = {sid: fake_token(sched.seqs[sid]) for sid in out.sample_ids}
        if tokens == "numpy":  # a sampler's numpy integers: the outputs are python ints anyway
            sampled = {sid: np.int64(token) for sid, token in sampled.items()}
        elif tokens == "executor" and fast:  # as the executors hand them over
            sampled = SampledTokens(out.sample_ids, list(sampled.values()))
        fork = {}
        if policy != STATIC and t in forks:  # a sampling sequence past its prefill forks
            parents = [s for s in out.decodes if s in sampled]
            if parents:
                parent = sched.seqs[parents[0]]
                child = Request(f"{parent.seq_id}.{t}", parent.request.prompt_ids,
                                len(parent.output_ids) + 3, ignore_eos=True)
                fork = {parent.seq_id: [(child, 7)]}
        try:
            sched.update(out, sampled, float(t), eos_id, keep_eos=keep_eos, forks=fork)
        except ValueError:  # a fork the scheduler refuses: nothing changed, go on without it
            sched.update(out, sampled, float(t), eos_id, keep_eos=keep_eos)
        trace.append((out.decodes, out.prefills, out.preempted, out.preempted_for,
                      out.sample_ids, out.copies, out.num_batched_tokens,
                      out.decode_context_tokens, dict(out.cached_tokens or {}),
                      mgr.free_block_ids(), mgr.cached_block_ids()))
        t += 1
    trace.append([(s.seq_id, s.output_ids, s.token_times_s, s.preemptions, s.finish_reason,
                   s.finish_s) for s in sched.finished])
    assert all(type(t) is int for s in sched.seqs.values() for t in s.output_ids)
    return trace


@settings(max_examples=60, deadline=None)
@given(policy=st.sampled_from([CONTINUOUS, NO_CHUNKING, STATIC]),
       kind=st.sampled_from(PREFIX_CACHES), n_blocks=st.integers(6, 14),
       block_size=st.integers(1, 4), budget=st.integers(4, 12),
       requests=st.lists(st.tuples(st.sampled_from([[1, 2, 3], [1, 2, 3, 4], [5], []]),
                                   st.integers(1, 6)), min_size=1, max_size=7),
       forks=st.sets(st.integers(0, 20), max_size=4),
       eos=st.sampled_from([None, 100, 117, (103, 140)]), keep_eos=st.booleans(),
       arrivals=st.lists(st.integers(0, 12), max_size=7),
       tokens=st.sampled_from(["dict", "numpy", "executor"]))
def test_the_fast_path_schedules_what_reserve_decode_does(policy, kind, n_blocks, block_size,
                                                         budget, requests, forks, eos,
                                                         keep_eos, arrivals, tokens):
    """Small pools (preemptions), prefix hits, forks (shared last blocks copied on write),
    arrivals that join running batches, EOS (kept or not, ignored by some)."""
    requests = [((prefix + [9] * (i % 3)) or [8], max_new)
                for i, (prefix, max_new) in enumerate(requests)]
    requests = [(p, n) for p, n in requests
                if -(-(len(p) + n) // block_size) <= n_blocks and len(p) + n - 1 <= budget]
    args = (policy, kind, n_blocks, block_size, budget, requests, forks)
    kw = dict(eos_id=eos, keep_eos=keep_eos, arrivals=arrivals, tokens=tokens)
    assert run(*args, fast=True, **kw) == run(*args, fast=False, **kw)


def test_a_steady_batch_is_reserved_without_looking_at_each_sequence():
    """After a step that kept every running sequence, the next reserves the same decodes from
    what that step left (`Steady`), not from the sequences: a sequence whose last output was
    changed behind the scheduler's back would show it (this is what the fast path skips)."""
    mgr = BlockManager(64, block_size=4, prefix_cache="none")
    sched = Scheduler(CONTINUOUS, mgr, max_num_batched_tokens=64, max_num_seqs=8)
    for i in range(3):
        sched.add(Request(f"r{i}", [1, 2, 3], 20, ignore_eos=True))
    for t in range(3):
        out = sched.schedule(float(t))
        sched.update(out, {sid: 50 + t for sid in out.sample_ids}, float(t))
    assert sched._steady is not None and sched._steady.tokens == [52, 52, 52]
    sched.running_seqs[1].output_ids[-1] = 99  # not what a scheduler would ever see
    sched.schedule(3.0)
    assert mgr.token_ids("r1")[-1] == 52
    # anything that changes the running queue drops it: a fork, an arrival that is admitted
    sched.update(sched._pending, {sid: 7 for sid in sched._pending.sample_ids}, 3.0)
    sched.fork("r0", Request("r0.1", [1, 2, 3], 20, ignore_eos=True))
    out = sched.schedule(4.0)
    assert out.decodes == ("r0", "r0.1", "r1", "r2") and mgr.token_ids("r0.1")[-1] == 7


def test_a_scheduler_output_is_the_frozen_record_its_fields_make():
    """`schedule` sets the output's fields at once: the same record the dataclass's __init__
    makes, equal, hashable and frozen."""
    mgr = BlockManager(16, block_size=4, prefix_cache="none")
    sched = Scheduler(CONTINUOUS, mgr, max_num_batched_tokens=64)
    sched.add(Request("a", [1, 2, 3, 4, 5], 4))
    out = sched.schedule(0.0)
    again = dataclasses.replace(out)
    assert out == again and hash(out) == hash(again) and repr(out) == repr(again)
    assert vars(out) == vars(again) and list(vars(out)) == list(vars(again))
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.now_s = 1.0


def test_update_takes_one_python_int_per_sampling_sequence():
    """Tokens missing, extra or under other ids are refused before anything changes; any
    integer (or a whole float) becomes a python int."""
    mgr = BlockManager(16, block_size=4, prefix_cache="none")
    sched = Scheduler(CONTINUOUS, mgr, max_num_batched_tokens=64)
    for sid in "ab":
        sched.add(Request(sid, [1, 2, 3], 4))
    out = sched.schedule(0.0)
    for bad, message in (({"a": 1}, r"missing \['b'\], not sampling this iteration \[\]"),
                         ({"a": 1, "b": 1, "x": 1}, r"missing \[\], .* \['x'\]"),
                         ({"a": 1, "x": 1}, r"missing \['b'\], .* \['x'\]")):
        with pytest.raises(ValueError, match=message):
            sched.update(out, bad, 0.0)
    assert [s.num_computed_tokens for s in sched.running] == [0, 0]
    sched.update(out, {"b": np.int32(6), "a": 5.0}, 0.0)
    assert [s.output_ids for s in sched.running] == [[5], [6]]
    assert all(type(s.output_ids[0]) is int for s in sched.running)


def test_sampled_tokens_are_taken_as_they_are_for_their_own_batch_only():
    """An executor's SampledTokens (read-only; a copy is a plain dict) hand update their
    tokens for the output they were made from; for another output they are a dict like any."""
    mgr = BlockManager(16, block_size=4, prefix_cache="none")
    sched = Scheduler(CONTINUOUS, mgr, max_num_batched_tokens=64)
    for sid in "ab":
        sched.add(Request(sid, [1, 2, 3], 4))
    out = sched.schedule(0.0)
    mine = SampledTokens(out.sample_ids, [5, 6])
    assert mine == {"a": 5, "b": 6} and type(copy.copy(mine)) is dict
    for change in (lambda d: d.update(a=1), lambda d: d.pop("a"), lambda d: d.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change(mine)
    with pytest.raises(TypeError):
        mine["a"] = 1
    sched.update(out, mine, 0.0)
    out = sched.schedule(1.0)
    other = SampledTokens(tuple(list(out.sample_ids)), [np.int64(7), 8])  # equal, not its own
    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        sched.update(out, SampledTokens(("a", "x"), [7, 8]), 1.0)
    sched.update(out, other, 1.0)
    assert [s.output_ids for s in sched.running] == [[5, 7], [6, 8]]
    assert all(type(t) is int for s in sched.running for t in s.output_ids)


@pytest.mark.parametrize("policy", [CONTINUOUS, NO_CHUNKING, STATIC])
def test_a_steady_step_the_pool_cannot_serve_whole_preempts_as_one_by_one(policy):
    """Two sequences decode steadily, nothing waits, and both start a block when one block is
    free: the first takes it, the policy goes on from there (the second preempts itself, or
    the static batch, whose blocks were counted at its start, never gets there)."""
    requests = [([1, 2, 3], 6), ([4, 5, 6], 6)]
    n_blocks = 5 if policy != STATIC else 8
    args = (policy, "none", n_blocks, 2, 12, requests, set())
    fast, slow = run(*args, fast=True), run(*args, fast=False)
    assert fast == slow
    assert any(step[2] for step in fast[:-1]) == (policy != STATIC)  # preempted
