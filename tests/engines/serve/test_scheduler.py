"""The batching scheduler: hand-worked schedules with exact iterations, and a state machine."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from inferlab.engines.kv import BlockManager
from inferlab.engines.model.sampler import GREEDY
from inferlab.engines.serve.request import (
    FINISHED,
    LENGTH,
    RUNNING,
    STOP,
    WAITING,
    Request,
    Sequence,
)
from inferlab.engines.serve.scheduler import (
    CONTINUOUS,
    NO_CHUNKING,
    STATIC,
    BlockCopy,
    RequestRefusedError,
    Scheduler,
    SchedulerOutput,
)


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


# ---- helpers --------------------------------------------------------------------------------


def toks(n: int, start: int = 1000) -> list[int]:
    """n distinct token ids (no accidental prefix hits)."""
    return list(range(start, start + n))


def fake_next(token_ids: list[int]) -> int:
    """The fake model: the next token is a function of the tokens so far (so a recompute
    after a preemption samples exactly what an uninterrupted run would)."""
    return 100 + (sum(token_ids) * 31 + len(token_ids)) % 50


def fake_token(seq) -> int:
    return fake_next(seq.token_ids)


def step(sched: Scheduler, now_s: float, eos_id: int | None = None) -> SchedulerOutput:
    out = sched.schedule(now_s)
    sampled = {sid: fake_token(sched.seqs[sid]) for sid in out.sample_ids}
    sched.update(out, sampled, now_s, eos_id)
    return out


def shape(out: SchedulerOutput) -> tuple:
    return out.decodes, tuple(tuple(c) for c in out.prefills), out.preempted, out.num_batched_tokens


def make(policy: str, n_blocks: int = 16, block_size: int = 4, prefix: bool = False, **kw):
    mgr = BlockManager(n_blocks, block_size=block_size, enable_prefix_caching=prefix)
    return Scheduler(policy, mgr, **kw), mgr


def run_alone(prompt: list[int], max_new: int) -> list[int]:
    sched, _ = make(CONTINUOUS, n_blocks=64)
    sched.add(Request("x", prompt, max_new))
    t = 0
    while sched.has_unfinished:
        step(sched, t)
        t += 1
    return sched.seqs["x"].output_ids


# ---- continuous (vLLM v1) ---------------------------------------------------------------------


def test_continuous_decodes_first_then_chunked_prefills():
    sched, mgr = make(CONTINUOUS, max_num_batched_tokens=8)
    sched.add(Request("a", toks(5), 3))
    sched.add(Request("b", toks(9, 2000), 2))
    # iteration 1: a's whole prompt (5), b's first chunk takes the 3 tokens left
    out = step(sched, 0.0)
    assert shape(out) == ((), (("a", 0, 5), ("b", 0, 3)), (), 8)
    assert out.sample_ids == ("a",)
    assert mgr.block_table("a") == [0, 1] and mgr.block_table("b") == [2]
    assert sched.kv_used_blocks == 3 and sched.kv_usage == 3 / 16
    # iteration 2: a decodes first, b's partial prefill continues with the other 6 (and samples)
    out = step(sched, 1.0)
    assert shape(out) == (("a",), (("b", 3, 6),), (), 7)
    assert out.sample_ids == ("a", "b")
    assert mgr.block_table("b") == [2, 3, 4]
    # iteration 3: both decode; a reaches its 3 tokens, b its 2
    out = step(sched, 2.0)
    assert shape(out) == (("a", "b"), (), (), 2)
    a, b = sched.seqs["a"], sched.seqs["b"]
    assert a.is_finished and b.is_finished and not sched.has_unfinished
    assert a.token_times_s == [0.0, 1.0, 2.0] and b.token_times_s == [1.0, 2.0]
    assert (a.first_scheduled_s, b.first_scheduled_s, b.finish_s) == (0.0, 0.0, 2.0)
    assert [s.seq_id for s in sched.finished] == ["a", "b"]
    assert mgr.n_free_blocks == 16 and sched.kv_usage == 0.0


def test_continuous_waits_for_the_partial_prefill_before_new_admissions():
    sched, _ = make(CONTINUOUS, max_num_batched_tokens=4)
    sched.add(Request("a", toks(10), 1))
    sched.add(Request("b", toks(2, 2000), 1))
    assert shape(step(sched, 0)) == ((), (("a", 0, 4),), (), 4)
    assert shape(step(sched, 1)) == ((), (("a", 4, 4),), (), 4)
    # a's last 2 tokens, then b is admitted into the 2 tokens left; both finish at once
    assert shape(step(sched, 2)) == ((), (("a", 8, 2), ("b", 0, 2)), (), 4)
    assert not sched.has_unfinished


def test_continuous_max_num_seqs_caps_the_running_set():
    sched, _ = make(CONTINUOUS, max_num_seqs=2)
    for i in range(3):
        sched.add(Request(f"r{i}", toks(2, 1000 * (i + 1)), 2))
    assert shape(step(sched, 0)) == ((), (("r0", 0, 2), ("r1", 0, 2)), (), 4)
    assert [s.seq_id for s in sched.waiting] == ["r2"]
    # r0 and r1 finish in this iteration; r2 only comes in the next
    assert shape(step(sched, 1)) == (("r0", "r1"), (), (), 2)
    assert shape(step(sched, 2)) == ((), (("r2", 0, 2),), (), 2)


def test_continuous_preempts_the_newest_and_resumes_it_with_its_outputs():
    sched, mgr = make(CONTINUOUS, n_blocks=4, block_size=2)
    sched.add(Request("a", toks(3), 4))
    sched.add(Request("b", toks(3, 2000), 4))
    assert shape(step(sched, 0)) == ((), (("a", 0, 3), ("b", 0, 3)), (), 6)
    assert shape(step(sched, 1)) == (("a", "b"), (), (), 2)
    assert mgr.n_free_blocks == 0
    b_before = list(sched.seqs["b"].output_ids)
    # a's next token needs a third block: b (the newest) is preempted by recompute
    out = step(sched, 2)
    assert shape(out) == (("a",), (), ("b",), 1)
    b = sched.seqs["b"]
    assert (b.status, b.num_computed_tokens, b.num_prefill_tokens, b.preemptions) == \
        ("preempted", 0, 5, 1)
    assert b.output_ids == b_before and "b" not in mgr
    assert [s.seq_id for s in sched.waiting] == ["b"]
    # b waits (its 5 tokens need 3 blocks, 1 is free) while a finishes
    assert shape(step(sched, 3)) == (("a",), (), (), 1)
    assert sched.seqs["a"].is_finished
    # b re-prefills prompt + its 2 outputs, samples its 3rd token, then decodes its 4th
    out = step(sched, 4)
    assert shape(out) == ((), (("b", 0, 5),), (), 5) and out.sample_ids == ("b",)
    assert shape(step(sched, 5)) == (("b",), (), (), 1)
    assert b.is_finished and b.token_times_s == [0, 1, 4, 5]
    assert b.output_ids == run_alone(toks(3, 2000), 4)
    assert sched.num_preemptions == 1 and mgr.n_free_blocks == 4


def test_continuous_a_sequence_may_preempt_itself():
    # a has room in its last block, b (the newest) needs a new one: it preempts itself
    sched, mgr = make(CONTINUOUS, n_blocks=3, block_size=2)
    sched.add(Request("a", toks(3), 3))
    sched.add(Request("b", toks(2, 2000), 3))
    assert shape(step(sched, 0)) == ((), (("a", 0, 3), ("b", 0, 2)), (), 5)
    assert mgr.n_free_blocks == 0
    out = step(sched, 1)
    assert shape(out) == (("a",), (), ("b",), 1) and out.preempted_for == ("b",)
    assert shape(step(sched, 2)) == (("a",), (), (), 1)  # b waits: needs 2 blocks, 0 free
    assert sched.seqs["a"].is_finished
    assert shape(step(sched, 3)) == ((), (("b", 0, 3),), (), 3)
    assert shape(step(sched, 4)) == (("b",), (), (), 1)
    assert sched.seqs["b"].output_ids == run_alone(toks(2, 2000), 3)


def test_two_preemptions_requeue_the_older_victim_first():
    # c needs a block; c is not the newest: e then d are preempted, d ends up in front
    sched, mgr = make(CONTINUOUS, n_blocks=4, block_size=2)
    sched.add(Request("c", toks(2), 5))  # 1 block, full
    sched.add(Request("d", toks(1, 2000), 5))  # 1 block, room for 1
    sched.add(Request("e", toks(1, 3000), 5))
    step(sched, 0)
    assert mgr.n_free_blocks == 1
    # c takes the free block; d and e fill theirs
    assert shape(step(sched, 1)) == (("c", "d", "e"), (), (), 3)
    assert mgr.n_free_blocks == 0
    # c fills its 2nd block; d and e each need a new block: e (newest) goes, then d is
    # served by e's block
    out = step(sched, 2)
    assert shape(out) == (("c", "d"), (), ("e",), 2) and out.preempted_for == ("d",)
    out = step(sched, 3)  # c needs a block now: d is the newest running
    assert shape(out) == (("c",), (), ("d",), 1) and out.preempted_for == ("c",)
    assert [s.seq_id for s in sched.waiting] == ["d", "e"]
    t = 4
    while sched.has_unfinished:
        step(sched, t)
        t += 1
    assert [s.seq_id for s in sched.finished] == ["c", "d", "e"]
    for sid, n_prompt, start in (("c", 2, 1000), ("d", 1, 2000), ("e", 1, 3000)):
        assert sched.seqs[sid].output_ids == run_alone(toks(n_prompt, start), 5)
    assert mgr.n_free_blocks == 4


def test_refused_at_submit_with_the_numbers():
    sched, _ = make(CONTINUOUS, n_blocks=4, block_size=4)
    with pytest.raises(RequestRefusedError,
                       match=r"prompt 10 \+ max_new_tokens 7 = 17 tokens needs 5 KV blocks "
                             r"of 4 tokens, but the pool has 4 blocks \(16 tokens\)"):
        sched.add(Request("big", toks(10), 7))
    assert isinstance(RequestRefusedError("x"), ValueError)
    sched.add(Request("ok", toks(10), 6))  # 16 tokens: exactly the pool
    with pytest.raises(ValueError, match="already"):
        sched.add(Request("ok", toks(1), 1))
    assert [s.seq_id for s in sched.waiting] == ["ok"]


def test_eos_finishes_unless_ignore_eos():
    sched, _ = make(CONTINUOUS)
    sched.add(Request("a", toks(3), 5))
    sched.add(Request("b", toks(3), 5, ignore_eos=True))
    eos = fake_token(sched.seqs["a"])  # both would sample this first
    step(sched, 0, eos_id=eos)
    a, b = sched.seqs["a"], sched.seqs["b"]
    assert a.is_finished and a.output_ids == [eos] and not b.is_finished
    while sched.has_unfinished:
        step(sched, 1, eos_id=eos)
    assert len(b.output_ids) == 5


def test_eos_ids_as_a_set_and_dropped_unless_kept():
    sched, _ = make(CONTINUOUS)
    sched.add(Request("a", toks(3), 5))
    sched.add(Request("b", toks(2, 2000), 2))
    eos = fake_token(sched.seqs["a"])
    assert fake_token(sched.seqs["b"]) not in (eos, 7)
    out = sched.schedule(0)
    sampled = {sid: fake_token(sched.seqs[sid]) for sid in out.sample_ids}
    done = sched.update(out, sampled, 0, {eos, 7}, keep_eos=False)
    a, b = sched.seqs["a"], sched.seqs["b"]
    # a ends before its EOS (nothing kept, no token time); b goes on to its length
    assert done == [a] and a.output_ids == [] and a.token_times_s == []
    assert a.finish_reason == STOP and a.finish_s == 0
    step(sched, 1)
    assert b.is_finished and b.finish_reason == LENGTH and len(b.output_ids) == 2


def test_update_checks_its_inputs():
    sched, _ = make(CONTINUOUS)
    sched.add(Request("a", toks(3), 2))
    out = sched.schedule(0)
    with pytest.raises(RuntimeError, match="twice"):
        sched.schedule(0)
    with pytest.raises(ValueError, match="missing"):
        sched.update(out, {}, 0)
    with pytest.raises(ValueError, match="not sampling"):
        sched.update(out, {"a": 1, "zz": 2}, 0)
    sched.update(out, {"a": 1}, 0)
    with pytest.raises(RuntimeError, match="last schedule"):
        sched.update(out, {"a": 1}, 0)


def test_prefix_hits_count_as_computed():
    sched, mgr = make(CONTINUOUS, prefix=True)
    sched.add(Request("a", toks(9), 1))
    step(sched, 0)  # a's two full blocks are cached when it finishes
    sched.add(Request("b", toks(9), 1))
    assert shape(step(sched, 1)) == ((), (("b", 8, 1),), (), 1)
    assert mgr.prefix_hit_tokens == 8


# ---- continuous-no-chunking (vLLM v0) ---------------------------------------------------------


def test_no_chunking_refuses_what_it_cannot_prefill_whole():
    sched, _ = make(NO_CHUNKING, max_num_batched_tokens=8)
    with pytest.raises(RequestRefusedError,
                       match=r"prompt of 9 tokens exceeds max_num_batched_tokens=8"):
        sched.add(Request("long", toks(9), 1))
    with pytest.raises(RequestRefusedError,
                       match=r"prompt 5 \+ up to 4 outputs = 9 tokens, which a recompute"):
        sched.add(Request("grows", toks(5), 5))
    sched.add(Request("ok", toks(5), 4))  # a recompute re-prefills at most 8 tokens
    chunked, _ = make(CONTINUOUS, max_num_batched_tokens=8)
    chunked.add(Request("long", toks(9), 1))  # the continuous policy chunks it


def test_no_chunking_iterations_are_prefill_only_or_decode_only():
    sched, _ = make(NO_CHUNKING, max_num_batched_tokens=8)
    sched.add(Request("a", toks(5), 4))
    assert shape(step(sched, 0)) == ((), (("a", 0, 5),), (), 5)
    sched.add(Request("b", toks(6, 2000), 2))
    sched.add(Request("c", toks(3, 3000), 2))
    # b fits whole; c would make 9 > 8 and is never split: it waits; a's decode waits too
    assert shape(step(sched, 1)) == ((), (("b", 0, 6),), (), 6)
    assert shape(step(sched, 2)) == ((), (("c", 0, 3),), (), 3)
    # nothing waits now: every running sequence decodes
    assert shape(step(sched, 3)) == (("a", "b", "c"), (), (), 3)
    assert sched.seqs["b"].is_finished and sched.seqs["c"].is_finished
    assert shape(step(sched, 4)) == (("a",), (), (), 1)
    assert shape(step(sched, 5)) == (("a",), (), (), 1)
    assert sched.seqs["a"].token_times_s == [0, 3, 4, 5]  # stalled behind two prefills
    assert not sched.has_unfinished


def test_no_chunking_preempts_on_decode_and_reprefills_whole():
    sched, mgr = make(NO_CHUNKING, n_blocks=3, block_size=2)
    sched.add(Request("a", toks(3), 3))
    sched.add(Request("b", toks(2, 2000), 3))
    assert shape(step(sched, 0)) == ((), (("a", 0, 3), ("b", 0, 2)), (), 5)
    assert shape(step(sched, 1)) == (("a",), (), ("b",), 1)
    assert shape(step(sched, 2)) == (("a",), (), (), 1)  # b's 3 tokens need 2 blocks, 0 free
    assert shape(step(sched, 3)) == ((), (("b", 0, 3),), (), 3)
    assert shape(step(sched, 4)) == (("b",), (), (), 1)
    assert sched.seqs["b"].output_ids == run_alone(toks(2, 2000), 3)
    assert mgr.n_free_blocks == 3


# ---- static -----------------------------------------------------------------------------------


def test_static_batch_runs_until_every_member_finishes():
    sched, mgr = make(STATIC, static_batch_size=2)
    sched.add(Request("a", toks(3), 1))
    assert step(sched, 0).is_empty  # one request waits for a second
    sched.add(Request("b", toks(4, 2000), 3))
    assert shape(step(sched, 1)) == ((), (("a", 0, 3), ("b", 0, 4)), (), 7)
    assert sched.seqs["a"].is_finished  # its slot now idles: a bubble
    sched.add(Request("c", toks(2, 3000), 1))
    sched.add(Request("d", toks(2, 4000), 1))
    assert shape(step(sched, 2)) == (("b",), (), (), 1)  # c and d may not join
    assert shape(step(sched, 3)) == (("b",), (), (), 1)
    assert sched.seqs["b"].is_finished and mgr.n_free_blocks == 16
    assert shape(step(sched, 4)) == ((), (("c", 0, 2), ("d", 0, 2)), (), 4)
    assert not sched.has_unfinished


def test_static_batch_starts_on_timeout_or_closed_arrivals():
    sched, _ = make(STATIC, static_batch_size=4, static_timeout_s=2.0)
    sched.add(Request("a", toks(3), 1, arrival_s=0.5))
    assert step(sched, 1.0).is_empty and step(sched, 2.4).is_empty
    assert shape(step(sched, 2.5)) == ((), (("a", 0, 3),), (), 3)
    sched.add(Request("b", toks(3), 1, arrival_s=3.0))
    assert step(sched, 3.0).is_empty
    sched.close_arrivals()
    assert shape(step(sched, 3.1)) == ((), (("b", 0, 3),), (), 3)
    with pytest.raises(RuntimeError, match="closed"):
        sched.add(Request("c", toks(3), 1))


def test_static_batch_takes_only_what_fits_its_whole_length():
    # a's prompt + max_new_tokens needs 3 of the 4 blocks: b (2 blocks) waits for the next batch
    sched, mgr = make(STATIC, n_blocks=4, block_size=4, static_batch_size=2)
    sched.add(Request("a", toks(4), 8))
    sched.add(Request("b", toks(4, 2000), 4))
    assert shape(step(sched, 0)) == ((), (("a", 0, 4),), (), 4)
    t = 1
    while not sched.seqs["a"].is_finished:
        out = step(sched, t)
        assert shape(out) == (("a",), (), (), 1)
        t += 1
    assert t == 8 and sched.num_preemptions == 0
    sched.close_arrivals()
    assert shape(step(sched, t)) == ((), (("b", 0, 4),), (), 4)


def test_static_checks_its_batch_size_and_prompts():
    mgr = BlockManager(16, block_size=4)
    with pytest.raises(ValueError, match="static_batch_size 9 exceeds max_num_seqs 8"):
        Scheduler(STATIC, mgr, max_num_seqs=8, static_batch_size=9)
    with pytest.raises(ValueError, match="unknown policy"):
        Scheduler("fifo", mgr)
    sched = Scheduler(STATIC, mgr, max_num_batched_tokens=8, static_batch_size=2)
    with pytest.raises(RequestRefusedError, match="prompt of 9 tokens exceeds"):
        sched.add(Request("long", toks(9), 1))


def test_a_partial_prefill_the_pool_cannot_extend_preempts_itself():
    # budget 4, blocks of 2, 4 blocks: a decodes in 2 blocks; b's second chunk finds no block
    sched, mgr = make(CONTINUOUS, n_blocks=4, block_size=2, max_num_batched_tokens=4)
    sched.add(Request("a", toks(3), 4))
    assert shape(step(sched, 0)) == ((), (("a", 0, 3),), (), 3)
    sched.add(Request("b", toks(6, 2000), 1))
    assert shape(step(sched, 1)) == (("a",), (("b", 0, 3),), (), 4)
    assert mgr.n_free_blocks == 0  # a: 2 blocks (4 tokens), b: 2 blocks (3 tokens)
    # a's 5th token needs a block: b (newest, mid-prefill) is preempted, nothing admitted
    assert shape(step(sched, 2)) == (("a",), (), ("b",), 1)
    assert sched.seqs["b"].num_prefill_tokens == 6 and sched.seqs["b"].output_ids == []
    while sched.has_unfinished:
        step(sched, 3)
    assert sched.seqs["b"].output_ids == run_alone(toks(6, 2000), 1)


# ---- forks (parallel sampling) and copy-on-write --------------------------------------------


def test_forks_share_every_block_and_copy_the_shared_last_block_on_append():
    sched, mgr = make(CONTINUOUS, n_blocks=8, block_size=4)
    prompt = toks(5)
    sched.add(Request("a", prompt, 3))
    out = sched.schedule(0)
    token = fake_token(sched.seqs["a"])
    # a's prefill ends here: its two samples a.1, a.2 draw their own first tokens
    done = sched.update(out, {"a": token}, 0,
                        forks={"a": [(Request("a.1", prompt, 3), 41), (Request("a.2", prompt, 1), 42)]})
    a, a1, a2 = (sched.seqs[s] for s in ("a", "a.1", "a.2"))
    assert done == [a2] and a2.output_ids == [42] and a2.finish_reason == LENGTH
    assert (a.output_ids, a1.output_ids) == ([token], [41])
    assert a1.parent_id == "a" and a1.num_computed_tokens == 5 and a1.token_times_s == [0]
    assert [s.seq_id for s in sched.running] == ["a", "a.1"]
    assert mgr.block_table("a") == mgr.block_table("a.1") == [0, 1]
    assert mgr.ref_count(0) == mgr.ref_count(1) == 2  # a.2's share went back when it finished
    # a appends into the shared, partly filled block 1: it gets a copy (block 2); a.1 is then
    # the only holder of block 1 and appends in place
    out = sched.schedule(1)
    assert out.decodes == ("a", "a.1") and out.copies == (BlockCopy("a", 1, 2),)
    assert mgr.block_table("a") == [0, 2] and mgr.block_table("a.1") == [0, 1]
    assert mgr.ref_count(0) == 2 and mgr.ref_count(1) == mgr.ref_count(2) == 1
    sched.update(out, {"a": 7, "a.1": 8}, 1)
    assert sched.schedule(2).copies == ()


def test_fork_between_iterations_copies_the_outputs_and_runs_after_its_siblings():
    sched, mgr = make(CONTINUOUS, n_blocks=16, block_size=4)
    sched.add(Request("a", toks(4), 6))
    sched.add(Request("b", toks(3, 2000), 6))
    step(sched, 0)
    step(sched, 1)
    a = sched.seqs["a"]
    c1 = sched.fork("a", Request("a.1", toks(4), 6))
    c2 = sched.fork("a", Request("a.2", toks(4), 6))
    assert [s.seq_id for s in sched.running] == ["a", "a.1", "a.2", "b"]
    assert c1.output_ids == a.output_ids and c1.output_ids is not a.output_ids
    assert c2.token_times_s == [0, 1] and mgr.block_table("a.2") == mgr.block_table("a")
    while sched.has_unfinished:
        step(sched, 2)
    # fake_next depends on the tokens only: every sample continues as `a` did
    assert c1.output_ids == c2.output_ids == a.output_ids == run_alone(toks(4), 6)
    assert mgr.n_free_blocks == 16


def test_fork_refuses_what_it_cannot_do():
    sched, _ = make(CONTINUOUS, n_blocks=4, block_size=4, max_num_seqs=2)
    sched.add(Request("a", toks(5), 3))
    out = sched.schedule(0)
    with pytest.raises(RuntimeError, match="after update"):
        sched.fork("a", Request("a.1", toks(5), 3))
    with pytest.raises(ValueError, match="sample nothing"):
        sched.update(out, {"a": 1}, 0, forks={"zz": []})
    with pytest.raises(ValueError, match="parent's prompt"):
        sched.update(out, {"a": 1}, 0, forks={"a": [(Request("a.1", toks(4), 3), 2)]})
    with pytest.raises(RequestRefusedError, match="a.1"):  # 5 + 20 tokens: never fits
        sched.update(out, {"a": 1}, 0, forks={"a": [(Request("a.1", toks(5), 20), 2)]})
    with pytest.raises(ValueError, match="max_num_seqs=2"):
        sched.update(out, {"a": 1}, 0, forks={"a": [(Request(f"a.{k}", toks(5), 3), 2)
                                                    for k in (1, 2)]})
    assert sched.seqs.keys() == {"a"}  # nothing half-done
    sched.update(out, {"a": 1}, 0)
    with pytest.raises(ValueError, match="already reached"):
        sched.fork("a", Request("a.1", toks(5), 1))
    with pytest.raises(ValueError, match="already added"):
        sched.fork("a", Request("a", toks(5), 3))
    with pytest.raises(ValueError, match="cannot fork 'zz'"):
        sched.fork("zz", Request("a.1", toks(5), 3))
    static, _ = make(STATIC, static_batch_size=1)
    static.add(Request("s", toks(2), 3))
    step(static, 0)
    with pytest.raises(ValueError, match="static"):
        static.fork("s", Request("s.1", toks(2), 3))


# ---- the state machine ------------------------------------------------------------------------

PREFIXES = ([], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6, 7, 8])


def expected_outputs(prompt: tuple[int, ...], max_new: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(max_new):
        tokens.append(fake_next(tokens))
    return tokens[len(prompt):]


def play(config: dict, actions: list) -> list[tuple]:
    """Replay `actions` on a fresh scheduler; the trace of every iteration."""
    sched, _ = make(config["policy"], **config["kw"])
    trace = []
    for kind, arg in actions:
        if kind == "add":
            sched.add(arg)
        elif kind == "fork":
            sched.fork(*arg)
        elif kind == "close":
            sched.close_arrivals()
        else:
            trace.append(shape(step(sched, arg)))
    trace.append(tuple((s.seq_id, tuple(s.output_ids), tuple(s.token_times_s))
                       for s in sched.finished))
    return trace


class SchedulerMachine(RuleBasedStateMachine):
    """Random arrivals and iterations on random pools, every policy; invariants each step."""

    @initialize(
        policy=st.sampled_from([CONTINUOUS, NO_CHUNKING, STATIC]),
        n_blocks=st.integers(2, 12),
        block_size=st.integers(1, 4),
        budget=st.integers(1, 16),
        max_num_seqs=st.integers(1, 6),
        batch=st.integers(1, 6),
        timeout=st.sampled_from([None, 0.0, 3.0]),
        prefix=st.booleans(),
    )
    def setup(self, policy, n_blocks, block_size, budget, max_num_seqs, batch, timeout,
              prefix):
        kw = dict(n_blocks=n_blocks, block_size=block_size, prefix=prefix,
                  max_num_batched_tokens=budget, max_num_seqs=max_num_seqs,
                  static_batch_size=min(batch, max_num_seqs, budget), static_timeout_s=timeout)
        self.config = {"policy": policy, "kw": kw}
        self.sched, self.mgr = make(policy, **kw)
        self.actions: list = []
        self.added: dict[str, Request] = {}
        self.now = 0.0
        self.seen_preempted: set[str] = set()
        self.kv: dict[int, list] = {}  # a fake K/V cache: block -> the token id in each slot

    @precondition(lambda self: not self.sched.arrivals_closed)
    @rule(prefix=st.sampled_from(PREFIXES), tail=st.lists(st.integers(0, 3), max_size=12),
          max_new=st.integers(1, 8))
    def arrive(self, prefix, tail, max_new):
        prompt = prefix + tail or [0]
        req = Request(f"r{len(self.added)}-{len(self.actions)}", prompt, max_new,
                      arrival_s=self.now, ignore_eos=True)
        sched, p, budget = self.sched, len(prompt), self.sched.max_num_batched_tokens
        refuse = (self.mgr.blocks_needed(p + max_new) > self.mgr.n_blocks
                  or (sched.policy != CONTINUOUS and p > budget)
                  or (sched.policy == NO_CHUNKING and p + max_new - 1 > budget))
        if refuse:
            with pytest.raises(RequestRefusedError, match=req.request_id):
                sched.add(req)
            return
        sched.add(req)
        self.added[req.request_id] = req
        self.actions.append(("add", req))

    @precondition(lambda self: any(not s.is_prefilling for s in self.sched.running))
    @rule(data=st.data(), extra=st.integers(0, 4))
    def fork(self, data, extra):
        sched = self.sched
        parents = [s for s in sched.running if not s.is_prefilling]
        parent = data.draw(st.sampled_from(parents))
        req = Request(f"{parent.seq_id}.{len(self.actions)}", parent.request.prompt_ids,
                      len(parent.output_ids) + 1 + extra, ignore_eos=True)
        p, n = len(req.prompt_ids), req.max_new_tokens
        if sched.policy == STATIC:
            error = "static"
        elif (self.mgr.blocks_needed(p + n) > self.mgr.n_blocks
                or (sched.policy == NO_CHUNKING and p + n - 1 > sched.max_num_batched_tokens)):
            error = req.request_id  # refused as `add` would refuse it
        elif len(sched.running) >= sched.max_num_seqs:
            error = "max_num_seqs"
        else:
            error = ""
        if error:
            with pytest.raises(ValueError, match=error):
                sched.fork(parent.seq_id, req)
            return
        table = self.mgr.block_table(parent.seq_id)
        child = sched.fork(parent.seq_id, req)
        assert child.output_ids == parent.output_ids and self.mgr.block_table(req.request_id) == table
        self.added[req.request_id] = req
        self.actions.append(("fork", (parent.seq_id, req)))

    @rule()
    def iterate(self):
        self.iterate_once()

    @rule()
    def close(self):
        self.sched.close_arrivals()
        self.actions.append(("close", None))

    def iterate_once(self) -> SchedulerOutput:
        sched = self.sched
        before = {s.seq_id: s.num_computed_tokens for s in sched.running}
        out = sched.schedule(self.now)
        assert out.num_batched_tokens == len(out.decodes) + sum(c.n_tokens for c in out.prefills)
        assert out.num_batched_tokens <= sched.max_num_batched_tokens
        assert len(sched.running) <= sched.max_num_seqs
        if sched.policy == STATIC:
            assert len(sched.running) <= sched.static_batch_size
        ids = out.seq_ids
        assert len(ids) == len(set(ids)), "a sequence scheduled twice in one iteration"
        assert not set(ids) & set(out.preempted)
        for sid in ids:
            assert sched.seqs[sid].status == RUNNING
        for sid in out.decodes:
            seq = sched.seqs[sid]
            assert not seq.is_prefilling and before[sid] == seq.num_computed_tokens
            assert self.mgr.num_tokens(sid) == seq.num_computed_tokens + 1
        for chunk in out.prefills:
            seq = sched.seqs[chunk.seq_id]
            assert chunk.start == seq.num_computed_tokens and chunk.n_tokens >= 1
            assert chunk.start + chunk.n_tokens <= seq.num_prefill_tokens
            assert self.mgr.num_tokens(chunk.seq_id) == chunk.start + chunk.n_tokens
        if sched.policy == NO_CHUNKING:
            assert not (out.prefills and out.decodes), "v0 mixes prefill and decode"
        self.seen_preempted.update(out.preempted)
        self.fake_forward(out)
        sampled = {sid: fake_token(sched.seqs[sid]) for sid in out.sample_ids}
        sched.update(out, sampled, self.now)
        self.actions.append(("step", self.now))
        self.now += 1.0
        return out

    def fake_forward(self, out: SchedulerOutput) -> None:
        """Copy the blocks as an executor must, write each computed token into its slot, and
        check every running sequence reads its own tokens back: a missed or wrong copy-on-write
        (or a shared block written twice) shows here."""
        sched, mgr, bs = self.sched, self.mgr, self.mgr.block_size
        empty = [None] * bs
        for c in out.copies:
            assert mgr.ref_count(c.dst) == 1 and c.dst in mgr.block_table(c.seq_id)
            self.kv[c.dst] = list(self.kv.get(c.src, empty))
        chunks = [(sid, sched.seqs[sid].num_computed_tokens, 1) for sid in out.decodes]
        chunks += [tuple(c) for c in out.prefills]
        for sid, start, n in chunks:
            table, tokens = mgr.block_table(sid), sched.seqs[sid].token_ids
            for pos in range(start, start + n):
                self.kv.setdefault(table[pos // bs], list(empty))[pos % bs] = tokens[pos]
        end = {sid: start + n for sid, start, n in chunks}
        for seq in sched.running:
            table, tokens = mgr.block_table(seq.seq_id), seq.token_ids
            for pos in range(end.get(seq.seq_id, seq.num_computed_tokens)):
                assert self.kv[table[pos // bs]][pos % bs] == tokens[pos], (seq.seq_id, pos)

    @invariant()
    def every_request_is_in_exactly_one_place(self):
        if not hasattr(self, "sched"):
            return
        sched = self.sched
        places = [s.seq_id for s in (*sched.waiting, *sched.running, *sched.finished)]
        assert sorted(places) == sorted(self.added)
        for seq in sched.running:
            table = self.mgr.block_table(seq.seq_id)
            assert self.mgr.num_tokens(seq.seq_id) == seq.num_computed_tokens
            assert seq.num_computed_tokens <= len(table) * self.mgr.block_size
            assert len(table) == self.mgr.blocks_needed(seq.num_computed_tokens)
        for seq in sched.waiting:
            assert seq.seq_id not in self.mgr and seq.num_computed_tokens == 0
        for seq in sched.finished:
            assert seq.seq_id not in self.mgr
            assert len(seq.output_ids) == seq.request.max_new_tokens
        assert sorted(self.mgr.seq_ids) == sorted(s.seq_id for s in sched.running)
        # at most one prefill in progress, and it is the newest running sequence
        prefilling = [s for s in sched.running if s.is_prefilling]
        assert len(prefilling) <= 1 and (not prefilling or prefilling[0] is sched.running[-1])
        if sched.policy != CONTINUOUS:
            assert not prefilling
        held = {b for s in sched.running for b in self.mgr.block_table(s.seq_id)}
        assert sched.kv_used_blocks == len(held)

    def teardown(self):
        if not hasattr(self, "sched"):
            return
        self.close()
        for _ in range(2000):
            if not self.sched.has_unfinished:
                break
            self.iterate_once()
        sched = self.sched
        assert not sched.has_unfinished, f"stuck: {sched.waiting} {sched.running}"
        for rid, req in self.added.items():
            seq = sched.seqs[rid]
            assert seq.output_ids == expected_outputs(req.prompt_ids, req.max_new_tokens)
            assert len(seq.token_times_s) == req.max_new_tokens
            assert seq.token_times_s == sorted(seq.token_times_s)
        for rid in self.seen_preempted:
            assert sched.seqs[rid].is_finished and sched.seqs[rid].preemptions >= 1
        assert self.mgr.n_free_blocks == self.mgr.n_blocks and self.mgr.seq_ids == []
        assert play(self.config, self.actions) == play(self.config, self.actions)


SchedulerMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None
)
test_scheduler_state_machine = SchedulerMachine.TestCase
