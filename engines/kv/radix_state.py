"""`RadixTreeState`: the radix prefix tree at one instant, for the tree view and snapshots.

One row per node but the root, parents before children: where its tokens start in the prompt
(`start`), how many it holds, its lock count, whether eviction may take it (unlocked leaf),
how often a match passed it, its first cache slot, and its tokens (for the view's hover).
`icicle_rows` lays the tree out as an icicle chart: x = token position, each leaf a row, a
parent spanning the rows of its leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.fields import read_int_array

MAX_NODES = 1_000_000
MAX_TREE_TOKENS = 50_000_000


@dataclass(frozen=True)
class RadixTreeState:
    node_id: tuple[int, ...]
    parent: tuple[int, ...]
    """The parent's index in these rows, -1 for the root."""
    start: tuple[int, ...]
    n_tokens: tuple[int, ...]
    lock_ref: tuple[int, ...]
    evictable: tuple[bool, ...]
    hit_count: tuple[int, ...]
    first_slot: tuple[int, ...]
    tokens: tuple[tuple[int, ...], ...]

    @property
    def n_nodes(self) -> int:
        return len(self.node_id)

    @property
    def n_cached_tokens(self) -> int:
        return sum(self.n_tokens)

    def to_dict(self) -> dict:
        return {"node_id": list(self.node_id), "parent": list(self.parent),
                "start": list(self.start), "n_tokens": list(self.n_tokens),
                "lock_ref": list(self.lock_ref), "evictable": [int(e) for e in self.evictable],
                "hit_count": list(self.hit_count), "first_slot": list(self.first_slot),
                "tokens": [list(t) for t in self.tokens]}


def radix_tree_state(tree) -> RadixTreeState:
    """The rows of a `RadixCache` (parents first)."""
    index: dict[int, int] = {}
    rows: list[tuple] = []
    stack = [(child, 0, -1) for child in tree.root.children.values()]
    while stack:
        node, start, parent = stack.pop()
        index[id(node)] = len(rows)
        rows.append((node.node_id, parent, start, len(node.key), node.lock_ref,
                     node.is_leaf and node.lock_ref == 0, node.hit_count, node.value[0],
                     tuple(node.key)))
        here = len(rows) - 1
        for child in sorted(node.children.values(), key=lambda c: c.node_id, reverse=True):
            stack.append((child, start + len(node.key), here))
    columns = list(zip(*rows, strict=True)) if rows else [()] * 9
    return RadixTreeState(*(tuple(c) for c in columns))


def icicle_rows(state: RadixTreeState) -> tuple[list[float], list[float]]:
    """(y, height) per node: each leaf one unit high, in row order (depth-first from
    `radix_tree_state`), a parent spanning its children's rows."""
    n = state.n_nodes
    has_child = [False] * n
    for p in state.parent:
        if p >= 0:
            has_child[p] = True
    y, end = [0.0] * n, [0.0] * n
    row = 0.0
    for i in range(n):
        if not has_child[i]:
            y[i], end[i], row = row, row + 1.0, row + 1.0
    for i in range(n - 1, -1, -1):  # children come after their parents: fold upwards
        if has_child[i]:
            y[i], end[i] = float("inf"), float("-inf")
    for i in range(n - 1, -1, -1):
        p = state.parent[i]
        if p >= 0:
            y[p], end[p] = min(y[p], y[i]), max(end[p], end[i])
    return y, [e - s for s, e in zip(y, end, strict=True)]


_INTS = {"node_id": (0, 2**62), "parent": (-1, MAX_NODES), "start": (0, MAX_TREE_TOKENS),
         "n_tokens": (1, MAX_TREE_TOKENS), "lock_ref": (0, 2**31 - 1),
         "evictable": (0, 1), "hit_count": (0, 2**62), "first_slot": (0, 2**62)}


def radix_state_from_dict(d, where: str) -> RadixTreeState:
    """A tree read back; ValueError naming the field: columns of one length, parents that
    come before their children."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object")
    cols = {}
    for key, (low, high) in _INTS.items():
        if key not in d:
            raise ValueError(f"{where}: missing field {key!r}")
        cols[key] = read_int_array(d[key], f"{where}.{key}", low, high, MAX_NODES).tolist()
    n = len(cols["node_id"])
    for key, col in cols.items():
        if len(col) != n:
            raise ValueError(f"{where}.{key}: expected {n} integers, one per node")
    for i, p in enumerate(cols["parent"]):
        if p >= i:
            raise ValueError(f"{where}.parent[{i}]: {p} is not an earlier node")
    raw = d.get("tokens")
    if not isinstance(raw, list) or len(raw) != n:
        raise ValueError(f"{where}.tokens: expected {n} lists of token ids, one per node")
    tokens = tuple(tuple(read_int_array(t, f"{where}.tokens[{i}]", 0, 2**31 - 1,
                                        MAX_TREE_TOKENS).tolist()) for i, t in enumerate(raw))
    for i, t in enumerate(tokens):
        if len(t) != cols["n_tokens"][i]:
            raise ValueError(f"{where}.tokens[{i}]: {len(t)} ids, n_tokens says "
                             f"{cols['n_tokens'][i]}")
    return RadixTreeState(
        node_id=tuple(cols["node_id"]), parent=tuple(cols["parent"]),
        start=tuple(cols["start"]), n_tokens=tuple(cols["n_tokens"]),
        lock_ref=tuple(cols["lock_ref"]), evictable=tuple(bool(e) for e in cols["evictable"]),
        hit_count=tuple(cols["hit_count"]), first_slot=tuple(cols["first_slot"]),
        tokens=tokens)
