"""`SeqBlocks`: one sequence's block table and tokens, the record the block manager's parts
share (the bookkeeping in `block_manager`, the prefix cache's strategy in `prefix_cache` /
`radix_prefix_cache`, the forward's tensors in `forward_tensors`, the views' figures in
`block_stats`)."""

from __future__ import annotations

from inferlab.engines.kv.block_hashes import ROOT_CONTENT_ID, ROOT_HASH
from inferlab.engines.kv.free_queue import Block


class SeqBlocks:
    """A sequence's table and tokens; `chain_*` name the prefix through its first
    `n_registered` blocks (those registered in, or found in, the prefix cache)."""

    __slots__ = ("blocks", "token_ids", "n_cached_tokens", "chain_hash", "chain_id",
                 "n_registered", "n_prompt", "n_computed", "n_inserted", "radix_node",
                 "radix_pos", "table_version", "prompt_chain")

    def __init__(self, blocks: list[Block], token_ids: list[int], n_cached_tokens: int,
                 n_prompt: int | None = None) -> None:
        self.blocks = blocks
        self.token_ids = token_ids
        self.n_cached_tokens = n_cached_tokens
        self.chain_hash = ROOT_HASH
        self.chain_id = ROOT_CONTENT_ID
        self.n_registered = 0
        # radix caching: the prompt's length, the tokens marked computed, how many leading
        # tokens the tree holds, and the tree node this sequence locks
        self.n_prompt = len(token_ids) if n_prompt is None else n_prompt
        self.n_computed = n_cached_tokens
        self.n_inserted = n_cached_tokens
        self.radix_node = None
        self.radix_pos = 0  # the length of radix_node's path
        # bumped when an entry of `blocks` is replaced or removed (appends leave it): what a
        # persistent copy of the table (engines/kv/input_batch) checks before reusing it
        self.table_version = 0
        # the hash strategy: the prompt's (block hashes, block keys) when its token ids
        # carried them (TokenIds.block_chain), valid for its leading full blocks
        self.prompt_chain: tuple[tuple[int, ...], tuple[tuple[int, ...], ...]] | None = None

    def cut_prompt_chain(self, n_blocks: int) -> None:
        """Only the first `n_blocks` blocks still hold the prompt's tokens (a truncation, a
        replacement): the carried chain stops there."""
        chain = self.prompt_chain
        if chain is not None and len(chain[0]) > n_blocks:
            self.prompt_chain = (chain[0][:n_blocks], chain[1][:n_blocks])

    def copy(self) -> SeqBlocks:
        """A fork's record: the same blocks, tokens and prefix-cache state in new lists (the
        table's version starts again: it is a new table)."""
        child = SeqBlocks(list(self.blocks), list(self.token_ids), self.n_cached_tokens,
                          self.n_prompt)
        child.chain_hash, child.chain_id = self.chain_hash, self.chain_id
        child.n_registered, child.n_computed = self.n_registered, self.n_computed
        child.n_inserted, child.radix_node = self.n_inserted, self.radix_node
        child.radix_pos = self.radix_pos
        child.prompt_chain = self.prompt_chain
        return child
