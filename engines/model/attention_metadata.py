"""`AttentionMetadata`: how a flat batch of tokens maps onto sequences and the paged KV cache.

A model step runs the new tokens of several sequences in ONE flat batch: sequence i owns
tokens query_start[i]..query_start[i+1]-1, which sit at positions
context_lens[i]-query_lens[i] .. context_lens[i]-1 of that sequence. A prefill has
query_len == context_len (or less, after a prefix-cache hit or in a chunked prefill); a decode
has query_len 1. Each new token's K/V goes to flat cache slot

    slot = block_table[pos // block_size] * block_size + pos % block_size

and attention for sequence i reads keys 0..context_lens[i]-1 through its block table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class AttentionMetadata:
    """One step's attention layout. Host tuples drive Python branching; tensors go to kernels.

    query_start: int64 [n_seqs + 1], cumulative query lengths (0 first).
    block_tables: int32 [n_seqs, max_blocks], rows padded with 0 (never read past context).
    context_lens_tensor: int32 [n_seqs]. slot_mapping: int64 [n_tokens].
    """

    query_lens: tuple[int, ...]
    context_lens: tuple[int, ...]
    block_size: int
    query_start: torch.Tensor
    block_tables: torch.Tensor
    context_lens_tensor: torch.Tensor
    slot_mapping: torch.Tensor

    @property
    def n_seqs(self) -> int:
        return len(self.query_lens)

    @property
    def n_tokens(self) -> int:
        return sum(self.query_lens)

    @property
    def is_decode(self) -> bool:
        """Every sequence adds exactly one token (the decode fast path)."""
        return all(n == 1 for n in self.query_lens)

    @property
    def max_context_len(self) -> int:
        return max(self.context_lens, default=0)

    @property
    def max_query_len(self) -> int:
        return max(self.query_lens, default=0)

    def positions(self) -> torch.Tensor:
        """int64 [n_tokens]: each new token's position in its own sequence."""
        parts = [torch.arange(c - q, c)
                 for q, c in zip(self.query_lens, self.context_lens, strict=True)]
        out = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)
        return out.to(self.slot_mapping.device)

    def last_token_index(self) -> torch.Tensor:
        """int64 [n_seqs]: the flat index of each sequence's last new token."""
        return self.query_start[1:] - 1

    @classmethod
    def build(
        cls,
        query_lens: Sequence[int],
        context_lens: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> AttentionMetadata:
        """Metadata for sequences that add `query_lens[i]` tokens ending at `context_lens[i]`.

        `block_tables[i]` lists sequence i's physical blocks; it must cover context_lens[i].
        """
        query_lens = tuple(int(n) for n in query_lens)
        context_lens = tuple(int(n) for n in context_lens)
        if not (len(query_lens) == len(context_lens) == len(block_tables)):
            raise ValueError("query_lens, context_lens and block_tables differ in length")
        width = 0
        slots: list[int] = []
        rows = zip(query_lens, context_lens, block_tables, strict=True)
        for i, (q, c, table) in enumerate(rows):
            if q < 1 or c < q:
                raise ValueError(f"sequence {i}: need 1 <= query_len <= context_len, got {q}, {c}")
            if len(table) * block_size < c:
                raise ValueError(
                    f"sequence {i}: {len(table)} blocks of {block_size} cannot hold {c} tokens"
                )
            width = max(width, len(table))
            slots.extend(table[p // block_size] * block_size + p % block_size
                         for p in range(c - q, c))
        tables = torch.zeros((len(block_tables), width), dtype=torch.int32)
        for i, table in enumerate(block_tables):
            tables[i, : len(table)] = torch.as_tensor(list(table), dtype=torch.int32)
        start = torch.zeros(len(query_lens) + 1, dtype=torch.int64)
        start[1:] = torch.cumsum(torch.as_tensor(query_lens, dtype=torch.int64), 0)
        return cls(
            query_lens=query_lens,
            context_lens=context_lens,
            block_size=block_size,
            query_start=start.to(device),
            block_tables=tables.to(device),
            context_lens_tensor=torch.as_tensor(context_lens, dtype=torch.int32).to(device),
            slot_mapping=torch.as_tensor(slots, dtype=torch.int64).to(device),
        )
