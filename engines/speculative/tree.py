"""A token tree: several draft continuations verified together, stored as parent indices.

Node i holds `tokens[i]` and hangs below `parents[i]` (-1: below the root, the last token
already committed). Parents come before their children (parents[i] < i), so one pass over
the nodes in index order visits every node after its parent; siblings are tried in index
order. A chain of K drafts is the tree with parents (-1, 0, 1, ..., K-2).

In the verify forward (`tree_attention`) the nodes sit after the committed text in index
order; node i runs at RoPE position base + level(i) (level 0 right below the root) and
attends every committed key, its ancestors and itself, nothing else.

    root ─ 5 ─ 7          tokens  (5, 7, 9, 3)
         │   └ 9          parents (-1, 0, 0, -1)
         └ 3
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from inferlab.engines.speculative.errors import SpeculativeError

ROOT = -1


@dataclass(frozen=True)
class TokenTree:
    tokens: tuple[int, ...]
    parents: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.parents):
            raise SpeculativeError(f"tree tokens ({len(self.tokens)}) and parents "
                                   f"({len(self.parents)}) must have the same length")
        if not self.tokens:
            raise SpeculativeError("a token tree needs at least one node")
        for i, parent in enumerate(self.parents):
            if isinstance(parent, bool) or not isinstance(parent, int) or not ROOT <= parent < i:
                raise SpeculativeError(f"tree parents[{i}] must be an int in [-1, {i}) "
                                       f"(a parent before its child), got {parent!r}")
        for i, token in enumerate(self.tokens):
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise SpeculativeError(f"tree tokens[{i}] must be a token id, got {token!r}")

    @classmethod
    def chain(cls, tokens: Sequence[int]) -> TokenTree:
        """K drafts one after the other."""
        return cls(tuple(int(t) for t in tokens), tuple(range(-1, len(tokens) - 1)))

    @classmethod
    def from_paths(cls, paths: Sequence[Sequence[int]]) -> TokenTree:
        """The trie of several candidate continuations: shared prefixes become shared nodes;
        children are ordered by first appearance, so the first path's nodes are tried first."""
        tokens: list[int] = []
        parents: list[int] = []
        index: dict[tuple[int, int], int] = {}  # (parent, token) -> node
        for path in paths:
            parent = ROOT
            for token in path:
                key = (parent, int(token))
                if key not in index:
                    index[key] = len(tokens)
                    tokens.append(int(token))
                    parents.append(parent)
                parent = index[key]
        return cls(tuple(tokens), tuple(parents))

    def __len__(self) -> int:
        return len(self.tokens)

    def children(self, node: int) -> tuple[int, ...]:
        """The nodes right below `node` (ROOT for the top level), in the order they are tried."""
        return tuple(i for i, parent in enumerate(self.parents) if parent == node)

    def path(self, node: int) -> tuple[int, ...]:
        """The nodes from the top level down to `node` (empty for ROOT)."""
        out = []
        while node != ROOT:
            out.append(node)
            node = self.parents[node]
        return tuple(reversed(out))

    def depth(self) -> int:
        """The longest root-to-leaf path, in nodes."""
        return max(len(self.path(i)) for i in range(len(self)))

    def levels(self) -> tuple[int, ...]:
        """Each node's distance below the top level (0: a child of the root)."""
        out: list[int] = []
        for parent in self.parents:
            out.append(0 if parent == ROOT else out[parent] + 1)
        return tuple(out)

    def ancestor_mask(self) -> torch.Tensor:
        """bool [N, N]: row i is True at node i and at each of its ancestors."""
        n = len(self)
        mask = torch.eye(n, dtype=torch.bool)
        for i, parent in enumerate(self.parents):
            if parent != ROOT:
                mask[i] |= mask[parent]
        return mask


def tree_attention(tree: TokenTree, start: int, n_pending: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions [T], mask [T, start + T]) of one verify forward, T = n_pending + N: the
    `n_pending` committed tokens not yet run (positions start .., causal), then the tree's
    nodes in index order. With base = start + n_pending:

        pending token r:  position start + r, attends keys 0 .. start + r
        node i:           position base + level(i), attends keys 0 .. base - 1 and
                          base + j for j = i and each ancestor of i
    """
    n = len(tree)
    base = start + n_pending
    t = n_pending + n
    positions = torch.empty(t, dtype=torch.int64)
    positions[:n_pending] = torch.arange(start, base)
    positions[n_pending:] = base + torch.tensor(tree.levels(), dtype=torch.int64)
    keys = torch.arange(base + n)
    mask = torch.zeros(t, base + n, dtype=torch.bool)
    mask[:n_pending] = keys[None, :] <= positions[:n_pending, None]
    mask[n_pending:, :base] = True
    mask[n_pending:, base:] = tree.ancestor_mask()
    return positions, mask
