"""A dynamic draft tree from an EAGLE head, built as EAGLE-2 builds one.

Each node's confidence is its path's product of draft probabilities (summed log-probs), an
estimate of the chance the target accepts the whole path:

    level 1     the top `width` tokens of the head's output at the last real pair
    level d+1   the `width` most confident nodes of level d are expanded (their pairs run
                through the head in ONE forward, each reading the real pairs, its ancestors
                and itself), each giving its top `width` children
    rerank      of every node made, the most confident are kept (a parent always scores at
                least its child, so the kept set is a tree), at most `node_budget` nodes and
                `width` leaves

The candidates are a deterministic function of the text (top-k, no sampling), so the tree
verifier treats them as certain (q one-hot): at temperature > 0 it samples from the target
and follows the branch the sample matches, which keeps the output distribution exact.
"""

from __future__ import annotations

import torch

from inferlab.engines.speculative.heads.eagle import EagleHead, HeadCache
from inferlab.engines.speculative.heads.target_head import FrozenHead

ROOT = -1


def eagle_tree(head: EagleHead, scorer: FrozenHead, embed, cache: HeadCache,
               last_out: torch.Tensor, depth: int, width: int,
               node_budget: int | None = None) -> list[tuple[int, ...]]:
    """Up to `width` candidate paths (full-vocabulary ids, most confident leaf first), each
    at most `depth` tokens, together at most `node_budget` distinct nodes (default depth ·
    width), after the head's output `last_out` [d] at the last real pair (cache position
    length - 1). The cache is left as it was."""
    budget = depth * width if node_budget is None else node_budget
    d2t = scorer.vocab.d2t
    tokens: list[int] = []
    parents: list[int] = []
    levels: list[int] = []
    conf: list[float] = []
    outs: dict[int, torch.Tensor] = {ROOT: last_out}  # a node's f̂ (its pair run)
    run_rows: dict[int, int] = {}  # node -> its row in tree_k / tree_v
    kv_dims = cache.k.shape[1:]
    tree_k = torch.zeros(0, *kv_dims)
    tree_v = torch.zeros(0, *kv_dims)

    def grow(frontier: list[int], feats: torch.Tensor) -> None:
        """Children of each node of `frontier` from its f̂ row of `feats`."""
        logp = torch.log_softmax(scorer(feats).float(), dim=-1)
        top = logp.topk(min(width, logp.shape[-1]), dim=-1)
        for row, node in enumerate(frontier):
            base = 0.0 if node == ROOT else conf[node]
            for lp, idx in zip(top.values[row].tolist(), top.indices[row].tolist(),
                               strict=True):
                tokens.append(int(d2t[idx]))
                parents.append(node)
                levels.append(1 if node == ROOT else levels[node] + 1)
                conf.append(base + lp)

    with torch.no_grad():
        grow([ROOT], last_out.view(1, -1))
        for level in range(1, depth):
            this = [i for i, lv in enumerate(levels) if lv == level]
            frontier = sorted(this, key=lambda i: (-conf[i], i))[:width]
            feats = torch.stack([outs[parents[i]] for i in frontier])
            embeds = embed(torch.tensor([tokens[i] for i in frontier]))
            mask = torch.zeros(len(frontier), len(run_rows), dtype=torch.bool)
            for q, node in enumerate(frontier):
                anc = parents[node]
                while anc != ROOT:
                    mask[q, run_rows[anc]] = True
                    anc = parents[anc]
            positions = torch.full((len(frontier),), cache.length + level - 1)
            f_hat, k, v = head.forward_tree(feats, embeds, positions, cache, tree_k, tree_v,
                                            mask)
            for q, node in enumerate(frontier):
                run_rows[node] = len(run_rows)
                outs[node] = f_hat[q]
            tree_k, tree_v = torch.cat([tree_k, k]), torch.cat([tree_v, v])
            grow(frontier, f_hat)
    return _rerank(tokens, parents, conf, budget, width)


def _rerank(tokens: list[int], parents: list[int], conf: list[float], budget: int,
            width: int) -> list[tuple[int, ...]]:
    """The kept nodes' root-to-leaf token paths, most confident leaf first."""
    kept: set[int] = set()
    has_child: set[int] = set()
    leaves = 0
    for node in sorted(range(len(tokens)), key=lambda i: (-conf[i], i)):
        if len(kept) >= budget:
            break
        parent = parents[node]
        if parent != ROOT and parent not in kept:
            continue
        new_leaf = parent == ROOT or parent in has_child
        if new_leaf and leaves >= width:
            continue
        kept.add(node)
        leaves += new_leaf
        if parent != ROOT:
            has_child.add(parent)
    ends = sorted((n for n in kept if n not in has_child), key=lambda i: (-conf[i], i))
    paths = []
    for leaf in ends:
        path = []
        node = leaf
        while node != ROOT:
            path.append(tokens[node])
            node = parents[node]
        paths.append(tuple(reversed(path)))
    return paths
