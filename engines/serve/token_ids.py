"""`TokenIds`: a prompt's token ids, checked once, so that nothing downstream checks them again.

A prompt of a published trace holds thousands of ids; a Request, a WorkloadRequest and the
engine's prompt builder each used to walk every id to check it. A TokenIds is an immutable
sequence of plain Python ints in 0..MAX_TOKEN_ID whose largest id is kept (`max_id`):
whoever holds one may skip the walk (a vocabulary check is `max_id < vocab_size`).

    TokenIds(iterable)                 checks every id (the generic path: pickling, copies)
    TokenIds.from_array(a)             a 1-D integer numpy array, checked with numpy
    TokenIds.join(parts, n)            the first n ids of TokenIds parts laid end to end:
                                       nothing to check (each part was), nothing copied

A TokenIds is a sequence (len, index, slice, iteration; equal to a tuple of the same ids),
not a tuple: its ids live in plain tuples (a part's own, or its parts'), which the garbage
collector stops scanning once it has seen they hold only ints, whereas a tuple subclass
would be scanned id by id at every full collection (tens of millions for a trace).

A joined prompt keeps its parts: a prompt made of a trace's blocks hands the hash prefix
cache each block's key and chained hash without slicing or hashing a token
(`block_chain`, memoised per part; see engines/kv/prefix_cache.py).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from inferlab.engines.kv.block_hashes import chain_hashes

MAX_TOKEN_ID = 2**31 - 1
"""A token id is an int32 everywhere it is used."""


class TokenIds(Sequence):
    """Checked, immutable token ids (module doc): `max_id` is the largest (-1 if empty),
    `parts` the TokenIds it was joined from (empty for a leaf, which holds its own)."""

    __slots__ = ("_ids", "parts", "_starts", "_n", "max_id", "_chains")

    def __init__(self, ids: Iterable[int] = ()) -> None:
        ids = tuple(ids)
        for i, t in enumerate(ids):
            if type(t) is not int or not 0 <= t <= MAX_TOKEN_ID:
                raise ValueError(f"token id {i} must be an int in 0..{MAX_TOKEN_ID:,}, "
                                 f"got {t!r}")
        self._leaf(ids, max(ids, default=-1))

    def _leaf(self, ids: tuple[int, ...], max_id: int) -> None:
        self._ids, self.parts, self._starts = ids, (), (0,)
        self._n, self.max_id, self._chains = len(ids), max_id, None

    @classmethod
    def trusted(cls, ids: tuple[int, ...], max_id: int) -> TokenIds:
        """A leaf over `ids`, a plain tuple of ints in range whose largest is `max_id`, as
        its maker knows (a block drawn below a vocabulary size): nothing is checked."""
        self = cls.__new__(cls)
        self._leaf(ids, max_id)
        return self

    @classmethod
    def from_array(cls, array: np.ndarray) -> TokenIds:
        """The ids of a 1-D integer array (ValueError naming the first bad one)."""
        a = np.asarray(array)
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"token ids must be a 1-D integer array, got shape {a.shape} "
                             f"and dtype {a.dtype}")
        if not len(a):
            return cls.trusted((), -1)
        bad = np.flatnonzero((a < 0) | (a > MAX_TOKEN_ID))
        if len(bad):
            raise ValueError(f"token id {bad[0]} must be in 0..{MAX_TOKEN_ID:,}, "
                             f"got {a[bad[0]]}")
        return cls.trusted(tuple(a.tolist()), int(a.max()))

    @classmethod
    def join(cls, parts: Iterable[TokenIds], n_tokens: int | None = None) -> TokenIds:
        """The first `n_tokens` ids (all when None) of `parts` laid end to end; `parts` keeps
        the leaves it uses (the last maybe cut), `max_id` is theirs."""
        leaves: list[TokenIds] = []
        for p in parts:
            if type(p) is not cls:
                raise TypeError(f"join takes TokenIds parts, got {type(p).__name__}")
            if not p._n:
                continue
            if p._ids is not None:
                leaves.append(p)
            elif p._n == p._starts[-1] + p.parts[-1]._n:  # joined, its last leaf whole
                leaves.extend(p.parts)
            else:  # joined and cut: its ids as one leaf
                leaves.append(cls.trusted(tuple(p), p.max_id))
        total = sum(p._n for p in leaves)
        n = total if n_tokens is None else min(n_tokens, total)
        used, starts, at, top = [], [], 0, -1
        for p in leaves:
            if at >= n:
                break
            used.append(p)
            starts.append(at)
            # a part cut short may have lost its largest id
            top = max(top, p.max_id if at + p._n <= n else max(p._ids[: n - at]))
            at += p._n
        self = cls.__new__(cls)
        self._ids, self.parts, self._starts = None, tuple(used), tuple(starts)
        self._n, self.max_id, self._chains = n, top, None
        return self

    # ---- the sequence ----------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        if self._ids is not None:
            return iter(self._ids)
        ids = itertools.chain.from_iterable(p._ids for p in self.parts)
        return itertools.islice(ids, self._n)

    def __getitem__(self, i):
        if self._ids is not None:
            return self._ids[i]
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                return tuple(self)[i]
            if stop <= start:
                return ()
            parts, starts = self.parts, self._starts
            k = bisect.bisect_right(starts, start) - 1  # the part holding `start`
            ids = parts[k]._ids[start - starts[k] : stop - starts[k]]
            for j in range(k + 1, len(parts)):  # the parts' own tuples, sliced and added
                if starts[j] >= stop:
                    break
                ids += parts[j]._ids[: stop - starts[j]]
            return ids
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("token index out of range")
        k = bisect.bisect_right(self._starts, i) - 1
        return self.parts[k]._ids[i - self._starts[k]]

    def __eq__(self, other) -> bool:
        if isinstance(other, TokenIds):
            return self._n == other._n and tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return self._n == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        head = ", ".join(map(str, itertools.islice(self, 8)))
        return f"TokenIds([{head}{', ...' if self._n > 8 else ''}], n={self._n})"

    def __reduce__(self):
        return (TokenIds, (tuple(self),))

    # ---- the prefix cache's chain ------------------------------------------------------------

    def block_chain(self, block_size: int, hash_fn: Callable[[int, tuple], int],
                    root_hash: int) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """The chained hashes and token keys of this prompt's leading full blocks of
        `block_size` ids, as a hash prefix cache computes them from root_hash:

            key_i = tuple(ids[i·bs : (i+1)·bs]),  h_i = hash_fn(h_{i-1}, key_i),  h_-1 = root

        Whole parts whose length is a multiple of block_size are chained part by part and
        memoised on the part (under its parent hash): prompts that share leading parts
        share the work. From the first part that is not, the rest is hashed here. The
        result is memoised on the prompt too; the lists are shared: read them only."""
        memo = self._chains
        if memo is None:
            memo = self._chains = {}
        found = memo.get((block_size, hash_fn, root_hash, "prompt"))
        if found is not None:  # a scheduler looks a waiting prompt up again and again
            return found
        hashes: list[int] = []
        keys: list[tuple[int, ...]] = []
        parent, start = root_hash, 0
        for p in self.parts:
            if p._n % block_size or start + p._n > self._n:
                break
            h, k = p._chain(block_size, hash_fn, parent)
            hashes += h
            keys += k
            parent, start = (h[-1] if h else parent), start + p._n
        if self._n - start >= block_size:  # the rest, sliced once
            tail = self[start : self._n]
            more = [tail[a : a + block_size] for a in range(0, len(tail) - block_size + 1,
                                                            block_size)]
            hashes += chain_hashes(hash_fn, parent, more)
            keys += more
        # tuples, not lists: the collector stops scanning a tuple of untracked items
        found = memo[(block_size, hash_fn, root_hash, "prompt")] = (tuple(hashes), tuple(keys))
        return found

    def _chain(self, block_size: int, hash_fn, parent: int
               ) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """A leaf's block_chain after `parent` (its length a multiple of block_size),
        memoised on it."""
        memo = self._chains
        if memo is None:
            memo = self._chains = {}
        found = memo.get((block_size, hash_fn, parent))
        if found is None:
            keys = memo.get((block_size, None))
            if keys is None:
                ids = self._ids
                keys = memo[(block_size, None)] = tuple(
                    [ids[a : a + block_size] for a in range(0, self._n, block_size)])
            found = memo[(block_size, hash_fn, parent)] = (chain_hashes(hash_fn, parent, keys),
                                                           keys)
        return found
