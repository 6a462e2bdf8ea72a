"""The persistent input batch gives `build_attention_metadata`'s metadata, field for field,
after any sequence of allocations, appends, forks (copy-on-write), truncations, frees and
re-allocations under the same id; and it writes a row only when that row's table changed."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from inferlab.engines.kv import BlockManager, KVOutOfMemoryError
from inferlab.engines.kv.attention_metadata import build_attention_metadata
from inferlab.engines.kv.input_batch import InputBatch

BLOCK_SIZE = 4
N_BLOCKS = 40
IDS = ["a", "b", "c", "d", "e"]


def assert_same(got, want) -> None:
    assert got.seq_ids == want.seq_ids
    assert got.query_lens == want.query_lens
    assert got.context_lens_host == want.context_lens_host
    for name in ("positions", "slot_mapping", "query_start_loc", "context_lens",
                 "block_tables"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        assert torch.equal(a, b), (name, a, b)


class InputBatchMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mgr = BlockManager(N_BLOCKS, BLOCK_SIZE, prefix_cache="hash")
        self.batch = InputBatch(self.mgr)

    @rule(seq_id=st.sampled_from(IDS), n=st.integers(1, 30), shared=st.booleans())
    def allocate(self, seq_id, n, shared):
        if seq_id in self.mgr:
            return
        prompt = ([1] * 8 if shared else []) + list(range(2, 2 + n))
        try:
            self.mgr.allocate(seq_id, prompt)
        except KVOutOfMemoryError:
            return
        self.mgr.mark_computed(seq_id, len(prompt))

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data(), n=st.integers(1, 9))
    def append(self, data, n):
        seq_id = data.draw(st.sampled_from(sorted(self.mgr.seq_ids)))
        try:
            self.mgr.append_tokens(seq_id, [5] * n)
        except KVOutOfMemoryError:
            pass

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data())
    def fork(self, data):
        parent = data.draw(st.sampled_from(sorted(self.mgr.seq_ids)))
        free = [s for s in IDS if s not in self.mgr]
        if free:
            self.mgr.fork(parent, free[0])

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data(), keep=st.floats(0.05, 1.0))
    def truncate(self, data, keep):
        seq_id = data.draw(st.sampled_from(sorted(self.mgr.seq_ids)))
        self.mgr.truncate(seq_id, max(1, int(self.mgr.num_tokens(seq_id) * keep)))

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data(), tell=st.booleans())
    def free(self, data, tell):
        seq_id = data.draw(st.sampled_from(sorted(self.mgr.seq_ids)))
        self.mgr.free(seq_id)
        if tell:
            self.batch.release(seq_id)

    @precondition(lambda self: self.mgr.seq_ids)
    @rule(data=st.data())
    def step(self, data):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.mgr.seq_ids)), min_size=1,
                                 unique=True))
        lens = [data.draw(st.integers(1, self.mgr.num_tokens(s))) for s in ids]
        starts = None
        if data.draw(st.booleans()):  # chunked: runs from a start, not the reserved end
            starts = [data.draw(st.integers(0, self.mgr.num_tokens(s) - n))
                      for s, n in zip(ids, lens, strict=True)]
        assert_same(self.batch.metadata(ids, lens, starts),
                    build_attention_metadata(self.mgr, ids, lens, query_starts=starts))

    @invariant()
    def decode_step_matches(self):
        ids = sorted(self.mgr.seq_ids)
        assert_same(self.batch.metadata(ids, [1] * len(ids)),
                    build_attention_metadata(self.mgr, ids, [1] * len(ids)))


TestInputBatch = InputBatchMachine.TestCase
TestInputBatch.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_a_decode_step_writes_only_rows_whose_table_grew():
    mgr = BlockManager(64, BLOCK_SIZE, False)
    batch = InputBatch(mgr)
    for i, s in enumerate(IDS):
        mgr.allocate(s, list(range(3 + i)))  # 3..7 tokens: 1 or 2 blocks
    batch.metadata(IDS, [1] * 5)
    assert batch.n_row_writes == 5
    batch.metadata(IDS, [1] * 5)  # nothing changed
    assert batch.n_row_writes == 5
    for s in IDS:
        mgr.append_token(s, 9)  # a: 4 tokens (same block); b: 5 (a new block); ...
    batch.metadata(IDS, [1] * 5)
    grew = sum(mgr.blocks_needed(3 + i + 1) > mgr.blocks_needed(3 + i) for i in range(5))
    assert grew >= 1
    assert batch.n_row_writes == 5 + grew


def test_an_id_freed_and_allocated_again_gets_its_new_table():
    mgr = BlockManager(16, BLOCK_SIZE, False)
    batch = InputBatch(mgr)
    mgr.allocate("x", [1, 2, 3, 4, 5])
    mgr.allocate("y", [1, 2])
    first = batch.metadata(["x"], [1]).block_tables
    mgr.free("x")
    mgr.allocate("x", [7] * 9)  # other blocks, same id, never released to the batch
    got = batch.metadata(["x", "y"], [1, 1])
    assert_same(got, build_attention_metadata(mgr, ["x", "y"], [1, 1]))
    assert not torch.equal(got.block_tables[0, :2], first[0, :2])


def test_rows_and_width_grow_past_their_first_size():
    mgr = BlockManager(2000, BLOCK_SIZE, False)
    batch = InputBatch(mgr)
    ids = [f"s{i}" for i in range(40)]
    for i, s in enumerate(ids):
        mgr.allocate(s, list(range(1 + 3 * i)))  # up to 118 tokens: 30 blocks
    assert_same(batch.metadata(ids, [1] * 40), build_attention_metadata(mgr, ids, [1] * 40))


def test_bad_requests_are_refused_as_the_reference_refuses_them():
    mgr = BlockManager(8, BLOCK_SIZE, False)
    mgr.allocate("x", [1, 2, 3])
    batch = InputBatch(mgr)
    with pytest.raises(ValueError, match="cannot run 4"):
        batch.metadata(["x"], [4])
    with pytest.raises(ValueError, match="one query length"):
        batch.metadata(["x"], [1, 1])
    with pytest.raises(KeyError):
        batch.metadata(["nobody"], [1])
