"""SGLang-style prefix caching: a radix tree over token ids whose nodes hold KV slots.

Each edge is a run of token ids with the cache slot of every token's K/V (`value`, same
length as `key`); a path from the root spells a prefix some request computed. Lookups walk
the tree and split a node where a prompt leaves it part way, so the matched prefix always
ends on a node. Matching and inserting work in pages of `page_size` tokens: page 1 is token
granularity, page = the KV block size finds what block hashing finds.

    match = tree.match_prefix(tokens)     # the longest cached prefix: its slots, its last node
    tree.lock(match.node)                 # a running request pins that path (lock_ref + 1 on
    ...                                   # the node and every ancestor)
    tree.unlock(match.node)
    tree.insert(tokens, slots)            # cache what a request computed; returns how many
                                          # leading tokens were cached already, and its node
    tree.evict(until)                     # drop unlocked leaves, policy order, until until()

Eviction takes leaves only, never a locked node, so a prefix outlives its extensions. Orders
("lru", "lfu", "fifo"; SGLang's three basic ones): least recently used, least hit (then least
recent), oldest inserted. A node's access time and hit count change when a match passes it.

The tree knows tokens and slots, not blocks: `on_hold(node)` runs when a node comes to hold its
value and `on_drop(node)` when it lets go (a split holds both halves, then drops the whole), and
`on_lock(node, +1 | -1)` when a node becomes locked or unlocked, so an owner can count
references to whatever the slots live in.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from inferlab.engines.sequences import common_prefix_len

EVICTION_POLICIES = ("lru", "lfu", "fifo")


class RadixNode:
    """One edge of the tree: `key` tokens whose K/V sit in `value` slots."""

    __slots__ = ("key", "value", "children", "parent", "lock_ref", "last_access",
                 "hit_count", "created", "node_id", "payload")

    def __init__(self, key: tuple[int, ...], value: tuple[int, ...],
                 parent: RadixNode | None, node_id: int, now: int) -> None:
        self.key = key
        self.value = value
        self.children: dict[tuple[int, ...], RadixNode] = {}
        self.parent = parent
        self.lock_ref = 0
        self.last_access = now
        self.hit_count = 0
        self.created = now
        self.node_id = node_id
        self.payload: object = None
        """The owner's per-node data (the block manager keeps the node's blocks here)."""

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def __repr__(self) -> str:
        return (f"RadixNode({self.node_id}, {len(self.key)} tokens, lock={self.lock_ref}, "
                f"children={len(self.children)})")


@dataclass(frozen=True)
class PrefixMatch:
    """The longest cached prefix of a prompt: its slots, in order, and the node it ends on
    (the root when nothing matched)."""

    slots: tuple[int, ...]
    node: RadixNode

    @property
    def n_tokens(self) -> int:
        return len(self.slots)


class RadixCache:
    """The tree, its lock counts and its counters. Sizes are in tokens."""

    def __init__(self, page_size: int = 1, eviction_policy: str = "lru",
                 on_hold: Callable[[RadixNode], None] | None = None,
                 on_drop: Callable[[RadixNode], None] | None = None,
                 on_lock: Callable[[RadixNode, int], None] | None = None) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive integer, got {page_size!r}")
        if eviction_policy not in EVICTION_POLICIES:
            raise ValueError(f"eviction policy must be one of {', '.join(EVICTION_POLICIES)}, "
                             f"got {eviction_policy!r}")
        self.page_size = page_size
        self.eviction_policy = eviction_policy
        self._on_hold = on_hold or (lambda node: None)
        self._on_drop = on_drop or (lambda node: None)
        self._on_lock = on_lock or (lambda node, delta: None)
        self._ids = itertools.count(1)
        self._clock = 0
        self.root = RadixNode((), (), None, 0, 0)
        self.root.lock_ref = 1  # never evicted
        self.n_cached_tokens = 0
        """Tokens the tree holds."""
        self.n_protected_tokens = 0
        """Tokens of locked nodes (a running request's prefix): not evictable."""
        self.n_nodes = 0
        self.query_tokens = 0
        """Tokens looked up by match_prefix, ever."""
        self.hit_tokens = 0
        """Tokens match_prefix found cached, ever."""
        self.inserted_tokens = 0
        """Tokens insert added (not counting those already cached), ever."""
        self.evicted_tokens = 0
        self.evicted_nodes = 0

    # ---- queries -------------------------------------------------------------------------

    @property
    def n_evictable_tokens(self) -> int:
        return self.n_cached_tokens - self.n_protected_tokens

    def nodes(self) -> Iterator[RadixNode]:
        """Every node but the root, parents before children."""
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def peek(self, tokens: Sequence[int]) -> tuple[int, ...]:
        """The slots of the longest cached prefix, changing nothing (no split, no access time,
        no counter): what a scheduler ranks by and an admission check sizes by."""
        tokens = self._paged(tokens)
        node, pos, slots = self.root, 0, []
        while pos < len(tokens):
            child, n = self._step(node, tokens, pos)
            if child is None:
                break
            slots.extend(child.value[:n])
            pos += n
            if n < len(child.key):
                break
            node = child
        return tuple(slots)

    def match_len(self, tokens: Sequence[int]) -> int:
        """How many leading tokens `peek` finds cached."""
        return len(self.peek(tokens))

    # ---- the four operations ---------------------------------------------------------------

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        """The longest cached prefix of `tokens` in whole pages; splits the node it ends inside
        so that the match ends on a node, and marks the path accessed and hit."""
        tokens = self._paged(tokens)
        self._clock += 1
        self.query_tokens += len(tokens)
        node, pos, slots = self.root, 0, []
        while pos < len(tokens):
            child, n = self._step(node, tokens, pos)
            if child is None:
                break
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access = self._clock
            child.hit_count += 1
            slots.extend(child.value)
            pos += n
            node = child
        self.hit_tokens += pos
        return PrefixMatch(tuple(slots), node)

    def insert(self, tokens: Sequence[int], slots: Sequence[int],
               start: tuple[RadixNode, int] | None = None, n: int | None = None
               ) -> tuple[int, RadixNode]:
        """Cache `tokens` (whole pages of them) with their K/V `slots`; return how many leading
        tokens were cached already (those keep the slots they had: the caller still owns its
        own copies of them) and the node the inserted prefix ends on.

        `start` = (node, pos): the caller knows that node's path spells tokens[:pos] (a node it
        keeps locked, so it is still in the tree), and the walk begins there. `n`: only the
        first n tokens (default all). Tokens and slots are read from `pos` on only (a long
        shared prefix is not copied again; RadixBlocks' slots are made on demand)."""
        n = len(tokens) if n is None else n
        if len(slots) < n or len(tokens) < n:
            raise ValueError(f"{n} tokens to cache but {len(tokens)} tokens and {len(slots)} "
                             "slots")
        n = self._page_floor(n)
        self._clock += 1
        node, pos = start if start is not None else (self.root, 0)
        up = node
        while up is not self.root:  # the path walked over counts as accessed
            up.last_access = self._clock
            up = up.parent
        while pos < n:
            child, m = self._step(node, tokens, pos, n)
            if child is None:
                break
            if m < len(child.key):
                child = self._split(child, m)
            child.last_access = self._clock
            pos += m
            node = child
        if pos < n:
            leaf = RadixNode(tuple(tokens[pos:n]), tuple(slots[pos:n]), node, next(self._ids),
                             self._clock)
            node.children[leaf.key[: self.page_size]] = leaf
            self.n_nodes += 1
            self.n_cached_tokens += n - pos
            self.inserted_tokens += n - pos
            self._on_hold(leaf)
            node = leaf
        return pos, node

    def lock(self, node: RadixNode) -> None:
        """Pin `node` and its ancestors: none of them is evicted until `unlock(node)`."""
        while node is not self.root:
            node.lock_ref += 1
            if node.lock_ref == 1:
                self.n_protected_tokens += len(node.key)
                self._on_lock(node, 1)
            node = node.parent
            assert node is not None

    def unlock(self, node: RadixNode) -> None:
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError(f"{node!r} unlocked more often than it was locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.n_protected_tokens -= len(node.key)
                self._on_lock(node, -1)
            node = node.parent
            assert node is not None

    def evict(self, until: Callable[[], bool]) -> int:
        """Remove unlocked leaves in policy order until `until()` is true or none is left;
        return how many tokens went. A parent left childless and unlocked joins the queue."""
        order = self._order_key
        heap = [(order(n), n.node_id, n) for n in self.nodes()
                if n.is_leaf and n.lock_ref == 0]
        heapq.heapify(heap)
        evicted = 0
        while heap and not until():
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            self._remove(leaf)
            evicted += len(leaf.key)
            if parent is not self.root and parent.is_leaf and parent.lock_ref == 0:
                heapq.heappush(heap, (order(parent), parent.node_id, parent))
        return evicted

    def reset(self) -> int:
        """Drop every unlocked node; return the tokens dropped."""
        return self.evict(lambda: False)

    # ---- inside ----------------------------------------------------------------------------

    def _step(self, node: RadixNode, tokens: Sequence[int], pos: int, end: int | None = None
              ) -> tuple[RadixNode | None, int]:
        """The child of `node` that tokens[pos:end] enter, and how many of its key's tokens
        they match in whole pages (None, 0: none does)."""
        end = len(tokens) if end is None else end
        child = node.children.get(tuple(tokens[pos : pos + self.page_size]))
        if child is None:
            return None, 0
        ahead = tuple(tokens[pos : min(end, pos + len(child.key))])
        return child, self._page_floor(common_prefix_len(child.key, ahead))

    def _order_key(self, node: RadixNode) -> tuple[int, ...]:
        if self.eviction_policy == "lfu":
            return (node.hit_count, node.last_access)
        if self.eviction_policy == "fifo":
            return (node.created,)
        return (node.last_access,)

    def _paged(self, tokens: Sequence[int]) -> tuple[int, ...]:
        tokens = tuple(tokens)
        return tokens[: self._page_floor(len(tokens))]

    def _page_floor(self, n: int) -> int:
        return n - n % self.page_size

    def _split(self, node: RadixNode, n: int) -> RadixNode:
        """Cut `node` after its first `n` tokens; return the new upper half (node keeps the
        rest, below it). Locks and access carry over: every path through one passes both."""
        parent = node.parent
        assert parent is not None and 0 < n < len(node.key)
        upper = RadixNode(node.key[:n], node.value[:n], parent, next(self._ids), node.created)
        upper.lock_ref, upper.last_access, upper.hit_count = (
            node.lock_ref, node.last_access, node.hit_count)
        whole = RadixNode(node.key, node.value, None, node.node_id, node.created)
        whole.payload, whole.lock_ref = node.payload, node.lock_ref
        node.key, node.value, node.parent = node.key[n:], node.value[n:], upper
        upper.children[node.key[: self.page_size]] = node
        parent.children[upper.key[: self.page_size]] = upper
        self.n_nodes += 1
        self._on_hold(upper)
        self._on_hold(node)
        self._on_drop(whole)
        return upper

    def _remove(self, leaf: RadixNode) -> None:
        parent = leaf.parent
        assert parent is not None and leaf.is_leaf and leaf.lock_ref == 0
        del parent.children[leaf.key[: self.page_size]]
        self.n_nodes -= 1
        self.n_cached_tokens -= len(leaf.key)
        self.evicted_tokens += len(leaf.key)
        self.evicted_nodes += 1
        self._on_drop(leaf)
