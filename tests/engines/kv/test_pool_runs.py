"""The pool's run methods and the index's one-entry-per-hash layout against the references
they replace, on seeded random operations:

- `BlockPool.allocate_blocks` / `release_blocks` / `touch_all` on one pool, `allocate_block` /
  `release` / `touch` one block at a time on its twin: the same block ids handed out, ref
  counts, free-queue order, evictions and counters after every operation;
- `PrefixCacheIndex` (`register_run`, `register`, `find_run`, `evict_all`) against a plain
  index written here (hash -> list of blocks, vLLM's layout), with hashes drawn from a tiny
  range so that collisions are common: the same entries, content ids and hits.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from inferlab.engines.kv.block_hashes import ROOT_CONTENT_ID, PrefixCacheIndex
from inferlab.engines.kv.block_pool import BlockPool


class ListIndex:
    """The reference: every block registered under a hash in a list, looked up in order."""

    def __init__(self) -> None:
        self.by_hash: dict[int, list] = {}
        self.next_id = ROOT_CONTENT_ID + 1

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_hash.values())

    def __iter__(self):
        for blocks in self.by_hash.values():
            yield from blocks

    def lookup(self, block_hash, parent, key):
        for block in self.by_hash.get(block_hash, []):
            if block.parent_content_id == parent and block.token_ids == key:
                return block
        return None

    def register(self, block, block_hash, parent, key) -> int:
        existing = self.lookup(block_hash, parent, key)
        if existing is not None:
            return existing.content_id
        block.block_hash, block.content_id = block_hash, self.next_id
        block.parent_content_id, block.token_ids = parent, key
        self.next_id += 1
        self.by_hash.setdefault(block_hash, []).append(block)
        return block.content_id

    def evict(self, block) -> None:
        self.by_hash[block.block_hash].remove(block)
        if not self.by_hash[block.block_hash]:
            del self.by_hash[block.block_hash]
        block.block_hash, block.content_id, block.parent_content_id = None, 0, 0
        block.token_ids = None


def _pool_state(pool: BlockPool):
    return (pool.free_queue.block_ids(), len(pool.free_queue),
            [(b.block_id, b.ref_count, b.n_tokens, b.block_hash, b.content_id,
              b.parent_content_id, b.token_ids) for b in pool.blocks],
            pool.n_cached_free, pool.n_evictions, pool.n_block_ops, len(pool.cache),
            sorted(b.block_id for b in pool.cache))


OPS = st.lists(st.tuples(st.sampled_from(["allocate", "release", "touch", "register"]),
                         st.integers(0, 6), st.lists(st.integers(0, 10**6), max_size=8)),
               min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(n_blocks=st.sampled_from([4, 9, 1500]), ops=OPS)
def test_the_run_methods_are_the_one_block_methods_in_order(n_blocks, ops):
    """The big pool (above EAGER_BLOCKS) makes its blocks lazily: its fresh range is taken
    and, by a touch of a block in it, linked."""
    fast_index, ref_index = PrefixCacheIndex(), ListIndex()
    fast, ref = BlockPool(n_blocks, 2, fast_index), BlockPool(n_blocks, 2, ref_index)
    held: list[int] = []  # one entry per reference, block ids
    parent = {"fast": ROOT_CONTENT_ID, "ref": ROOT_CONTENT_ID}
    for op, n, picks in ops:
        if op == "allocate":
            n = min(n, fast.n_free)
            got = fast.allocate_blocks(n, 2)
            want = [ref.allocate_block() for _ in range(n)]
            for block in want:
                block.n_tokens = 2
            assert [b.block_id for b in got] == [b.block_id for b in want]
            held += [b.block_id for b in got]
        elif op == "release" and held:
            chosen = sorted({p % len(held) for p in picks}, reverse=True)
            ids = [held.pop(i) for i in chosen]
            fast.release_blocks([fast.blocks[i] for i in ids])
            for i in ids:
                ref.release(ref.blocks[i])
        elif op == "touch":
            ids = [p % min(n_blocks, 12) for p in picks]  # free (cached or not) and held
            fast.touch_all([fast.blocks[i] for i in ids])
            for i in ids:
                ref.touch(ref.blocks[i])
            held += ids
        elif op == "register" and held:
            # a run of held blocks, hashes 0..3 (collisions), keys 0..2: repeats are found
            ids = [held[p % len(held)] for p in picks]
            ids = list(dict.fromkeys(i for i in ids if fast.blocks[i].block_hash is None))
            hashes = [p % 4 for p in picks[: len(ids)]]
            keys = [(p % 3,) for p in picks[: len(ids)]]
            start = parent["fast"] if n % 2 else ROOT_CONTENT_ID
            ref_start = parent["ref"] if n % 2 else ROOT_CONTENT_ID
            if n % 3 == 0:  # one by one through `register`
                got = start
                for i, h, k in zip(ids, hashes, keys, strict=True):
                    got = fast_index.register(fast.blocks[i], h, got, k)
            else:
                got = fast_index.register_run([fast.blocks[i] for i in ids], hashes, keys, 0,
                                              len(ids), start)
            want = ref_start
            for i, h, k in zip(ids, hashes, keys, strict=True):
                want = ref_index.register(ref.blocks[i], h, want, k)
            assert got == want
            parent["fast"], parent["ref"] = got, want
        assert _pool_state(fast) == _pool_state(ref)
        # find_run: the longest run of a chain of hashes / keys from the root
        hashes = [p % 4 for p in picks]
        keys = [(p % 3,) for p in picks]
        for n_find in (len(picks), len(picks) // 2):
            got = fast_index.find_run(hashes, keys, n_find)
            want, at = [], ROOT_CONTENT_ID
            for h, k in zip(hashes[:n_find], keys[:n_find], strict=True):
                block = ref_index.lookup(h, at, k)
                if block is None:
                    break
                want.append(block)
                at = block.content_id
            assert [b.block_id for b in got] == [b.block_id for b in want]
