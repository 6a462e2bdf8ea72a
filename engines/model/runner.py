"""`ModelRunner`: steps a model over many sequences through the paged KV cache.

The runner owns a `PagedKVCache` (the tensors) and a `BlockManager` (engines/kv: which
physical blocks each sequence owns). One `step` gathers every listed sequence's tokens whose
K/V is not yet in the cache (a whole prompt, the rest of a prompt after a prefix-cache hit,
or the one token just sampled) into ONE flat batch, builds the attention metadata from the
block tables, runs the model once and returns each sequence's next-token logits.

    runner.add("a", prompt_ids)      # reserve blocks; a prefix hit skips cached tokens
    logits = runner.step(["a"])      # prefill; its full blocks join the prefix cache
    runner.append("a", next_id)      # reserve the new token's slot (copy-on-write if shared)
    logits = runner.step(["a"])      # decode
    runner.free("a")

Chunked prefill reserves a prompt piece by piece and runs each piece when it is reserved:

    runner.reserve("b", prompt_ids[:64])   # the first chunk (a prefix hit skips cached tokens)
    logits = runner.step(["b"])
    runner.reserve("b", prompt_ids[64:])   # the rest
    logits = runner.step(["b"])            # these logits start decoding

A scheduler that owns the reservations (engines/serve: its Scheduler over `runner.blocks`)
calls `forward` with explicit (seq_id, start, n_tokens) chunks instead, and marks the
computed tokens itself.

Speculative decoding appends K drafts at once, scores every one of them in the same step and
rolls the rejected ones back:

    cows = runner.append_tokens("a", [last_id, *drafts])   # copy-on-write pairs, already copied
    logits = runner.step(["a"], logits=[len(drafts) + 1])  # [K+1, vocab]: p after each token
    runner.truncate("a", n_kept)   # blocks past the cut back to the pool, stale cache entries gone

Token trees (several candidate continuations) are verified in one forward with a tree mask,
then only the accepted path is kept, moved to the slots it ends up in:

    runner.append_tokens("a", [last_id, *tree_tokens])         # the nodes in index order
    logits = runner.forward_masked("a", start, positions, mask, logits=n_nodes + 1)
    runner.compact("a", base, [base + node for node in path])  # the rest truncated

`logits` picks the rows a step or forward returns: "last" (one per sequence), "all" (every
query token, in flat batch order) or a count per sequence (its last n query tokens).

A model with sliding-window layers keeps one block table per layer group (engines/kv:
`KVCacheCoordinator` as `blocks`, the same methods as a BlockManager): the full-attention
layers hold every token, each window's layers only the blocks a query can still read, the
rest dropped back to their pool as the sequences advance. The store is still the model's one
cache (`store`); with several groups `cache` is a `GroupedKVCache` over it (copies by
group-qualified block id) and each step's metadata a `GroupedMetadata`. `free_window_blocks=
False`, or the radix prefix cache, keeps every block of every layer in one table instead.
Token trees (`forward_masked`) run on a model with one group only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inferlab.engines.kv.attention_metadata import AttentionMetadata, GroupedMetadata
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.group_coordinator import KVCacheCoordinator
from inferlab.engines.kv.input_batch import GroupedInputBatch, InputBatch
from inferlab.engines.kv.kv_groups import GroupedKVCache, layer_groups
from inferlab.engines.kv.paged_attention import MaskedAttention
from inferlab.engines.model.llama import Llama


class ModelRunner:
    """A model, its paged KV cache and the allocator over it.

    `n_blocks` defaults to enough blocks for `max_tokens` tokens (default: the model's context).
    `prefix_cache` ("hash", "radix" or "none"; see BlockManager) overrides
    `enable_prefix_caching` (True = "hash"); `eviction_policy` ("lru", "lfu" or "fifo")
    orders the radix tree's evictions. A model with sliding-window layers gets one table per
    layer group (`KVCacheCoordinator`; every group `n_blocks` blocks) unless
    `free_window_blocks` is False or the prefix cache is the radix tree.
    """

    def __init__(self, model: Llama, n_blocks: int | None = None, block_size: int = 16,
                 max_tokens: int | None = None, enable_prefix_caching: bool = True,
                 prefix_cache: str | None = None, eviction_policy: str = "lru",
                 free_window_blocks: bool = True) -> None:
        if n_blocks is None:
            max_tokens = max_tokens or model.config.max_position
            n_blocks = -(-max_tokens // block_size)
        self.model = model
        self.store = self.cache = model.new_cache(n_blocks, block_size)
        """`store`: the K/V tensors, every layer (what the model reads and writes); `cache`:
        the same, or with several layer groups a `GroupedKVCache` over it (block copies)."""
        windows = [lw.window for lw in model.layers]
        if free_window_blocks and any(windows) and prefix_cache != "radix":
            groups = layer_groups(windows)
            self.blocks = KVCacheCoordinator(groups, n_blocks, block_size,
                                             enable_prefix_caching,
                                             bytes_per_slot=self.store.bytes_per_slot,
                                             prefix_cache=prefix_cache)
            if len(groups) > 1:
                self.cache = GroupedKVCache(self.store, groups)
            self.input_batch = GroupedInputBatch(self.blocks, model.device)
        else:
            self.blocks = BlockManager(n_blocks, block_size, enable_prefix_caching,
                                       bytes_per_slot=self.cache.bytes_per_slot,
                                       prefix_cache=prefix_cache,
                                       eviction_policy=eviction_policy)
            self.input_batch = InputBatch(self.blocks, model.device)
            """The block tables kept as one tensor across steps (each step's metadata)."""
        self.block_size = block_size
        self._n_computed: dict[object, int] = {}
        self.last_metadata: AttentionMetadata | GroupedMetadata | None = None
        """The metadata of the latest step (for views of the batch and its block tables)."""
        self.keep_hidden = False
        """True: each `forward` keeps the last layer's residual stream in `last_hidden`."""
        self.last_hidden: torch.Tensor | None = None
        """With `keep_hidden`, the latest forward's residual stream after the last layer,
        fp32 [every token run, d_model] in flat batch order (before the final norm): the
        features a trained draft head reads (engines.speculative.heads)."""

    def add(self, seq_id: object, prompt_ids: Sequence[int]) -> int:
        """Reserve KV blocks for a prompt; return how many of its tokens the prefix cache held."""
        n_cached = self.blocks.allocate(seq_id, prompt_ids)
        copies = self.blocks.take_copies()  # a radix hit ending inside a block
        if copies:
            self.cache.copy_blocks(copies)
        self._n_computed[seq_id] = n_cached
        return n_cached

    def reserve(self, seq_id: object, token_ids: Sequence[int]) -> int:
        """Reserve the next chunk of a prompt (the first call allocates the sequence); return
        how many of its tokens the prefix cache held (0 after the first chunk)."""
        if seq_id not in self._n_computed:
            return self.add(seq_id, token_ids)
        cows = self.blocks.append_tokens(seq_id, [int(t) for t in token_ids])
        if cows:
            self.cache.copy_blocks(cows)
        return 0

    def append(self, seq_id: object, token_id: int) -> tuple[int, int] | None:
        """Reserve the slot of one more token (copying a shared last block first); return the
        copy-on-write pair (src, dst) it made, or None (with layer groups one per group is
        made and copied; the first is returned)."""
        cows = self.blocks.append_each((seq_id,), (int(token_id),), partial=False)[1]
        if not cows:
            return None
        self.cache.copy_blocks([cow[1:] for cow in cows])
        return cows[0][1:]

    def append_tokens(self, seq_id: object, token_ids: Sequence[int]) -> list[tuple[int, int]]:
        """Reserve the slots of several tokens at once (the K drafts): all or nothing. A shared
        last block is copied first; the copy-on-write pairs (src, dst) made are returned."""
        cows = self.blocks.append_tokens(seq_id, [int(t) for t in token_ids])
        if cows:
            self.cache.copy_blocks(cows)
        return cows

    def truncate(self, seq_id: object, n_tokens: int) -> list[int]:
        """Roll `seq_id` back to its first `n_tokens` tokens: the computed count, the block
        table and the blocks past the cut (returned, as the pool got them back). Cache entries
        of blocks that held cut tokens are dropped (`BlockManager.truncate`)."""
        released = self.blocks.truncate(seq_id, n_tokens)
        self._n_computed[seq_id] = min(self._n_computed[seq_id], n_tokens)
        return released

    def forward_masked(self, seq_id: object, start: int, positions: torch.Tensor,
                       mask: torch.Tensor, logits: str | int = "all") -> torch.Tensor:
        """ONE forward over `seq_id`'s reserved tokens [start, start + n) at RoPE `positions`
        [n], query t attending the keys mask[t] allows (`mask` [n, start + n], bool, over the
        sequence's reserved positions; `engines.kv.MaskedAttention`). The K/V before `start`
        must be in the cache; the forward writes these tokens' K/V at their slots and marks
        nothing computed (`compact` does, once the tokens to keep are known).

        Returns fp32 logits: "all" (every query) or a count (the last `logits` queries).
        """
        n_res = self.blocks.num_tokens(seq_id)
        n = n_res - start
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < n_res:
            raise ValueError(f"sequence {seq_id!r} has {n_res} reserved tokens; cannot run "
                             f"them from position {start!r}")
        if tuple(positions.shape) != (n,) or tuple(mask.shape) != (n, n_res):
            raise ValueError(f"running {n} tokens needs positions [{n}] and a mask [{n}, "
                             f"{n_res}], got {tuple(positions.shape)} and "
                             f"{tuple(mask.shape)}")
        if isinstance(self.cache, GroupedKVCache):
            raise ValueError("a token tree's forward reads one block table; this model keeps "
                             "its K/V in several layer groups")
        index = _logits_index([n], [logits] if not isinstance(logits, str) else logits)
        device = self.model.device
        ids = torch.tensor(self.blocks.token_ids(seq_id)[start:], dtype=torch.int64,
                           device=device)
        slots = self.blocks.slot_mapping(seq_id, range(start, n_res)).to(device)
        table = self.blocks.block_table_tensor([seq_id], device=device)[0]
        if bool((table < 0).any()):
            raise ValueError(f"sequence {seq_id!r}: a sliding window dropped some of its "
                             "blocks; a token tree's mask reads every key")
        attention = MaskedAttention(self.cache, table, mask)
        cache, scale = self.cache, self.model.scale

        def attend(q: torch.Tensor, layer: int) -> torch.Tensor:
            return attention(q, layer, scale)

        def write(layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
            cache.write(layer, slots, k, v)

        hidden: list | None = [] if self.keep_hidden else None
        out = self.model.forward_with(ids, positions, attend, write,
                                      "all" if index is None else index, hidden_out=hidden)
        if hidden:
            self.last_hidden = hidden[0]
        return out

    def compact(self, seq_id: object, start: int, kept: Sequence[int]) -> list[int]:
        """Keep, of `seq_id`'s tokens from `start` on, only those at reserved positions `kept`
        (increasing, each >= start), as positions start, start + 1, ...: a token tree's
        accepted path after its verify forward. Their K/V is copied into those slots where it
        is not there already (`PagedKVCache.copy_slots`), their ids follow, every token after
        them is truncated (blocks back to the pool, stale prefix-cache entries dropped) and the
        first start + len(kept) tokens are marked computed. Every token before `start` and
        every kept one must have had its K/V written (`forward_masked`). Returns the blocks
        released, as `truncate`."""
        kept = [int(p) for p in kept]
        n_res = self.blocks.num_tokens(seq_id)
        if any(b <= a for a, b in zip(kept, kept[1:], strict=False)) or \
                (kept and not start <= kept[0] <= kept[-1] < n_res):
            raise ValueError(f"kept positions must increase within [{start}, {n_res}), got "
                             f"{kept}")
        n_keep = start + len(kept)
        moves = [(p, start + j) for j, p in enumerate(kept) if p != start + j]
        if moves:
            src = self.blocks.slot_mapping(seq_id, [p for p, _ in moves])
            dst = self.blocks.slot_mapping(seq_id, [p for _, p in moves])
            self.cache.copy_slots(src, dst)
        tokens = self.blocks.token_ids(seq_id)
        released = self.blocks.truncate(seq_id, n_keep)
        self.blocks.replace_tokens(seq_id, start, [tokens[p] for p in kept])
        self._n_computed[seq_id] = n_keep
        self.blocks.mark_computed(seq_id, n_keep)
        return released

    def fork(self, parent_id: object, child_id: object) -> None:
        """`child_id` shares all of the parent's blocks (parallel sampling)."""
        self.blocks.fork(parent_id, child_id)
        self._n_computed[child_id] = self._n_computed[parent_id]

    def free(self, seq_id: object) -> None:
        self.blocks.free(seq_id)
        self.input_batch.release(seq_id)
        del self._n_computed[seq_id]

    def pending(self, seq_id: object) -> int:
        """Tokens of `seq_id` with a reserved slot whose K/V is not computed yet."""
        return self.blocks.num_tokens(seq_id) - self._n_computed[seq_id]

    def token_ids(self, seq_id: object) -> list[int]:
        return self.blocks.token_ids(seq_id)

    def step(self, seq_ids: Sequence[object], max_tokens: Sequence[int] | None = None,
             logits: str | Sequence[int] = "last") -> torch.Tensor:
        """Run each sequence's pending tokens (at most `max_tokens[i]`: chunked prefill).

        Returns fp32 logits [rows, vocab]: by default each sequence's last token run; other
        `logits` choices as in `forward`.
        """
        if not seq_ids:
            raise ValueError("step needs at least one sequence")
        chunks = []
        for i, sid in enumerate(seq_ids):
            done, total = self._n_computed[sid], self.blocks.num_tokens(sid)
            n = total - done if max_tokens is None else min(total - done, int(max_tokens[i]))
            if n < 1:
                raise ValueError(f"sequence {sid!r} has no pending token to run")
            chunks.append((sid, done, n))
        out = self.forward(chunks, logits)
        for sid, start, n in chunks:
            self._n_computed[sid] = start + n
            self.blocks.mark_computed(sid, start + n)  # now prefix-cache hits
        return out

    def forward(self, chunks: Sequence[tuple[object, int, int]],
                logits: str | Sequence[int] = "last") -> torch.Tensor:
        """ONE flat forward over reserved tokens [start, start + n) of each (seq_id, start, n).

        Their K/V before `start` must be in the cache. Writes the chunks' K/V; does not mark
        them computed (`step` does; a scheduler does it in its update). Returns fp32 logits
        [rows, vocab] in chunk order: "last" each chunk's last token (rows = len(chunks)),
        "all" every token run, or a count per chunk (1 <= count <= n: its last count tokens).
        """
        if not chunks:
            raise ValueError("forward needs at least one chunk")
        seq_ids = [sid for sid, _, _ in chunks]
        starts = [int(start) for _, start, _ in chunks]
        query_lens = [int(n) for _, _, n in chunks]
        tokens = []
        for sid, start, n in zip(seq_ids, starts, query_lens, strict=True):
            tokens.extend(self.blocks.token_ids(sid)[start: start + n])
        device = self.model.device
        meta = self.input_batch.metadata(seq_ids, query_lens, query_starts=starts)
        index = _logits_index(query_lens, logits)
        ids = torch.tensor(tokens, dtype=torch.int64, device=device)
        if self.keep_hidden:  # only then: other models' forwards need not take hidden_out
            hidden: list = []
            out = self.model.forward(ids, meta, self.store, logits_index=index,
                                     hidden_out=hidden)
            self.last_hidden = hidden[0]
        else:
            out = self.model.forward(ids, meta, self.store, logits_index=index)
        self.last_metadata = meta
        return out


def _logits_index(query_lens: list[int], logits: str | Sequence[int]) -> torch.Tensor | str | None:
    """The model's `logits_index` for a runner's `logits` choice (checked before any work)."""
    if isinstance(logits, str):
        if logits == "last":
            return None
        if logits == "all":
            return "all"
        raise ValueError(f"logits must be 'last', 'all' or a count per chunk, got {logits!r}")
    counts = list(logits)
    if len(counts) != len(query_lens):
        raise ValueError(f"logits needs one count per chunk ({len(query_lens)}), got "
                         f"{len(counts)}")
    rows: list[int] = []
    end = 0
    for i, (n, count) in enumerate(zip(query_lens, counts, strict=True)):
        end += n
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= n:
            raise ValueError(f"logits count {count!r} of chunk {i} must be in [1, {n}]")
        rows.extend(range(end - count, end))
    return torch.tensor(rows, dtype=torch.int64)
