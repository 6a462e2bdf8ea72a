"""ModelRunner's token-tree hooks on the tiny model: one masked forward scores every node of a
tree as a recompute of its own path would; `compact` keeps one path in the cache, moved into
place, with exact allocator counts and no prefix-cache entry for a block that held a
rejected node."""

from __future__ import annotations

import torch

from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.speculative.tree import ROOT, TokenTree, tree_attention

PROMPT = [(5 * i + 1) % 256 for i in range(9)]
TREE = TokenTree.from_paths([[30, 31, 32], [30, 33], [40, 41, 42, 43]])  # 8 nodes


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def kv_of(runner: ModelRunner, seq, n: int) -> torch.Tensor:
    slots = runner.blocks.slot_mapping(seq, range(n))
    c = runner.cache
    return c.kv.view(c.n_layers, 2, c.n_kv_heads, -1, c.d_head)[:, :, :, slots]


def tree_forward(runner: ModelRunner, n_computed: int):
    runner.append_tokens("a", list(TREE.tokens))
    base = len(PROMPT)
    positions, mask = tree_attention(TREE, n_computed, base - n_computed)
    return runner.forward_masked("a", n_computed, positions, mask, logits=len(TREE) + 1)


def test_a_masked_forward_scores_each_node_as_its_own_path(tiny):
    model, _ = tiny
    for n_computed in (0, 6):  # the prompt in the same forward, or mostly cached already
        runner = ModelRunner(model, n_blocks=8, block_size=4)
        runner.add("a", PROMPT[:n_computed] if n_computed else PROMPT)
        if n_computed:
            runner.step(["a"])
            runner.append_tokens("a", PROMPT[n_computed:])
        logits = tree_forward(runner, n_computed)
        assert logits.shape == (len(TREE) + 1, 256)
        close(logits[0], model.forward_nocache(torch.tensor(PROMPT))[0])
        for node in range(len(TREE)):
            path = [TREE.tokens[i] for i in TREE.path(node)]
            close(logits[node + 1], model.forward_nocache(torch.tensor(PROMPT + path))[0])


def test_compact_keeps_one_path_in_place_and_nothing_else(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4)
    runner.add("a", PROMPT)
    tree_forward(runner, 0)
    path = TREE.path(7)  # 40 41 42 43: nodes 4..7, each moved 4 slots down
    assert path == (4, 5, 6, 7) and TREE.parents[4] == ROOT
    base = len(PROMPT)
    released = runner.compact("a", base, [base + i for i in path])
    kept = PROMPT + [40, 41, 42, 43]
    assert runner.token_ids("a") == kept and runner.pending("a") == 0
    assert released == [4]  # 17 reserved tokens held 5 blocks; 13 hold 4
    stats = runner.blocks.stats()
    assert (stats.tokens_logical, stats.slots_filled, stats.blocks_used) == (13, 13, 4)
    ref = ModelRunner(model, n_blocks=4, block_size=4, enable_prefix_caching=False)
    ref.add(0, kept)
    ref.step([0])
    close(kv_of(runner, "a", 13), kv_of(ref, 0, 13))
    # three full blocks are cached: the prompt's two and 8 | 40 41 42 (the kept path), and a
    # prompt holding the tree's rejected first candidate finds the prompt and nothing more
    assert len(runner.blocks.cached_block_ids()) == 3
    assert runner.add("b", PROMPT + [30, 31, 32, 33, 40]) == 8
    assert runner.add("c", kept + [1]) == 12
    # the next token decodes from the compacted cache as from a recompute
    runner.append("a", 7)
    close(runner.step(["a"]), model.forward_nocache(torch.tensor(kept + [7])))


def test_compact_on_no_accepted_node_is_a_truncate(tiny):
    model, _ = tiny
    runner = ModelRunner(model, n_blocks=8, block_size=4)
    runner.add("a", PROMPT)
    tree_forward(runner, 0)
    assert runner.compact("a", len(PROMPT), []) == [4, 3]
    assert runner.token_ids("a") == PROMPT
    assert runner.blocks.stats().tokens_logical == 9
