"""`BlockManager.try_allocate` (one prefix match where the strategy's match changes nothing)
against the reference path it replaces in the scheduler, `can_allocate` then `allocate`, on
twin managers driven by the same seeded operations: the same answers, block tables, ref
counts, free-queue order, cached blocks and evictions after every operation."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from inferlab.engines.kv import BlockManager
from inferlab.engines.kv.block_manager import PREFIX_CACHES


def _state(mgr: BlockManager):
    tree = mgr.radix.tree if mgr.radix is not None else None
    return ({s: mgr.block_table(s) for s in mgr.seq_ids}, mgr.free_block_ids(),
            mgr.cached_block_ids(), mgr.n_free_blocks,
            [mgr.ref_count(i) for i in range(mgr.n_blocks)], mgr.n_evicted_blocks,
            mgr.prefix_query_tokens, mgr.prefix_hit_tokens, mgr.take_copies(),
            None if tree is None else (tree.n_nodes, tree.query_tokens, tree.hit_tokens))


OPS = st.lists(st.tuples(st.sampled_from(["allocate", "allocate", "append", "free"]),
                         st.sampled_from([[], [1, 2, 3], [1, 2, 3, 4, 5], [6, 6, 6, 6, 6]]),
                         st.lists(st.integers(0, 2), max_size=5),
                         st.sampled_from([None, 1, 2, 3]), st.integers(0, 1000)),
               min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(PREFIX_CACHES), block_size=st.sampled_from([1, 2, 3]), ops=OPS)
def test_try_allocate_is_can_allocate_then_allocate(kind, block_size, ops):
    n_blocks = 7
    fast = BlockManager(n_blocks, block_size=block_size, prefix_cache=kind)
    ref = BlockManager(n_blocks, block_size=block_size, prefix_cache=kind)
    next_id = 0
    for op, prefix, tail, chunk, k in ops:
        live = fast.seq_ids
        if op == "allocate":
            prompt = prefix + tail
            if not prompt or -(-len(prompt) // block_size) > n_blocks:
                continue
            want = ref.allocate(next_id, prompt, chunk) if ref.can_allocate(prompt, chunk) \
                else None
            assert fast.try_allocate(next_id, prompt, chunk) == want
            if want is not None:
                for mgr in (fast, ref):
                    mgr.mark_computed(next_id, mgr.num_tokens(next_id))
            next_id += 1
        elif live and op == "append":
            sid = live[k % len(live)]
            if -(-(fast.num_tokens(sid) + 1) // block_size) > n_blocks:
                continue
            fits = ref.can_append(sid)
            assert fast.can_append(sid) == fits
            if fits:
                assert fast.append_tokens(sid, [k % 3]) == ref.append_tokens(sid, [k % 3])
                for mgr in (fast, ref):
                    mgr.mark_computed(sid, mgr.num_tokens(sid))
        elif live and op == "free":
            sid = live[k % len(live)]
            fast.free(sid)
            ref.free(sid)
        assert _state(fast) == _state(ref)
