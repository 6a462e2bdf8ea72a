"""The lazy pool: a FreeBlockQueue over a LazyBlocks range hands blocks out, takes them back
and removes them exactly as one built over every block in id order (the reference), while
making only the blocks that were asked for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kv.block_pool import EAGER_BLOCKS, BlockPool
from inferlab.engines.kv.free_queue import Block, FreeBlockQueue, LazyBlocks

OPS = st.lists(st.tuples(st.sampled_from(["pop", "append", "remove", "peek", "pop_n"]),
                         st.integers(0, 10_000)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), OPS)
def test_a_lazy_queue_behaves_as_a_queue_of_every_block(n, ops):
    lazy_blocks = LazyBlocks(n)
    lazy = FreeBlockQueue(fresh=lazy_blocks)
    eager_blocks = [Block(i) for i in range(n)]
    eager = FreeBlockQueue(eager_blocks)
    out: list[int] = []  # ids handed out, in both
    for op, k in ops:
        if op == "pop" and len(eager):
            a, b = lazy.popleft(), eager.popleft()
            assert a.block_id == b.block_id
            out.append(a.block_id)
        elif op == "append" and out:
            i = out.pop(k % len(out))
            lazy.append(lazy_blocks[i])
            eager.append(eager_blocks[i])
        elif op == "remove" and len(eager):
            ids = eager.block_ids()
            i = ids[k % len(ids)]
            lazy.remove(lazy_blocks[i])
            eager.remove(eager_blocks[i])
            out.append(i)
        elif op == "pop_n":  # popleft_n: popleft k times at once (IndexError for too many)
            k %= len(eager) + 2
            if k > len(eager):
                with pytest.raises(IndexError):
                    lazy.popleft_n(k)
                continue
            got, want = lazy.popleft_n(k), [eager.popleft() for _ in range(k)]
            assert [b.block_id for b in got] == [b.block_id for b in want]
            assert all(lazy_blocks[b.block_id] is b for b in got)
            out += [b.block_id for b in got]
        elif op == "peek" and len(eager):
            assert lazy.peek().block_id == eager.peek().block_id
        assert len(lazy) == len(eager)
        assert lazy.block_ids() == eager.block_ids()
        assert all((lazy_blocks[i] in lazy) == (eager_blocks[i] in eager) for i in range(n))


def test_a_small_pool_makes_its_blocks_when_built_and_hands_them_out_alike():
    small, big = BlockPool(EAGER_BLOCKS, 16), BlockPool(EAGER_BLOCKS + 1, 16)
    assert small.blocks.n_made == EAGER_BLOCKS and big.blocks.n_made == 0
    assert [b.block_id for b in small.blocks] == list(range(EAGER_BLOCKS))
    for pool in (small, big):
        first = [pool.allocate_block() for _ in range(3)]
        pool.release(first[1])
        assert [b.block_id for b in first] == [0, 1, 2] and pool.free_queue.peek().block_id == 3
        assert pool.n_free == len(pool.blocks) - 2


def test_a_pool_makes_only_the_blocks_it_hands_out():
    pool = BlockPool(26_674, 16)
    assert pool.blocks.n_made == 0 and pool.n_free == 26_674
    first = [pool.allocate_block() for _ in range(3)]
    assert [b.block_id for b in first] == [0, 1, 2] and pool.blocks.n_made == 3
    pool.release(first[1])
    assert pool.free_queue.peek().block_id == 3  # never-used blocks before freed ones
    assert len(list(pool.blocks)) == 26_674 and pool.blocks[-1].block_id == 26_673


def test_a_slice_makes_the_blocks_through_its_end_only():
    blocks = LazyBlocks(10)
    assert [b.block_id for b in blocks[2:5]] == [2, 3, 4] and blocks.n_made == 5
    assert [b.block_id for b in blocks[1:3]] == [1, 2] and blocks.n_made == 5
    assert blocks[3] is blocks[2:4][1] and blocks[7:7] == [] and blocks.n_made == 5
    assert [b.block_id for b in blocks[8:2:-3]] == [8, 5] and blocks.n_made == 9


def test_allocate_blocks_is_allocate_block_n_times():
    """Fresh blocks first, then freed ones in queue order, counted and reset alike."""
    pools = [BlockPool(8, 4), BlockPool(8, 4)]
    for pool in pools:
        held = [pool.allocate_block() for _ in range(5)]
        held[3].n_tokens = 2
        for block in (held[3], held[0]):
            pool.release(block)
    a, b = pools
    got, want = a.allocate_blocks(5), [b.allocate_block() for _ in range(5)]
    assert [x.block_id for x in got] == [x.block_id for x in want] == [5, 6, 7, 3, 0]
    assert all(x.ref_count == 1 and x.n_tokens == 0 for x in got)
    assert (a.n_free, a.n_block_ops) == (b.n_free, b.n_block_ops) == (0, 12)
